"""The one resumable JSONL worker pool every batch command runs on (`run`, `find`, and the
commands that come after them): read what OUT already holds, skip it, work the rest at the
given concurrency, write each finished trace's line at once, report progress, and stop the
whole batch only on a fault no other trace would escape (a missing key, a model that does not
exist, a full disk).

A command supplies its jobs (each with a key that identifies it in OUT), how a line of OUT is
checked, and the work of one job: that returns the line to write, or None when this trace
failed (the work says why in the progress), or raises BatchStop.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from bbm_tui.core import llm
from bbm_tui.core.batch.shard import Shard, ShardError, batch_digest, check_unsharded
from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.dataset.outfile import open_appended
from bbm_tui.core.errors import UserError
from bbm_tui.core.llm import one_at_a_time_endpoints

J = TypeVar("J")
K = TypeVar("K", bound=Hashable)


class BatchStop(UserError):
    """A fault that stops the whole batch; the message says why."""

    title = "The batch stopped"


@dataclass
class Progress:
    """What every batch reports. Commands add their own counts in a subclass."""

    total: int = 0
    skipped: int = 0
    done: int = 0
    failed: int = 0
    calls: int = 0
    cost: float = 0.0
    # Calls whose price litellm does not know: the running cost is then a lower bound.
    unpriced_calls: int = 0
    # Their models, in the order first met.
    unpriced_models: list[str] = field(default_factory=list)
    # Behind a router file: the calls each deployment served.
    deployments: dict[str, int] = field(default_factory=dict)
    # Tokens as the providers counted them: every prompt token, the part read from the
    # prompt cache, the part written to it, and the answers'; calls whose counts are estimates.
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    estimated_calls: int = 0  # their output's count; of those, their prompt's too:
    prompt_estimated_calls: int = 0
    errors: list[str] = field(default_factory=list)
    duplicates: int = 0  # jobs the inputs listed more than once (done once)
    mended: str | None = None  # the repair made to OUT, if any
    notes: list[str] = field(default_factory=list)  # what the command says about its inputs

    @property
    def finished(self) -> int:
        return self.skipped + self.done + self.failed

    def fail(self, task: str, message: str) -> None:
        self.failed += 1
        self.errors.append(f"{task}: {message}")

    def add_call(self, call: llm.CallRecord, settings: llm.CallSettings) -> None:
        """Count one call: its tokens, its price (an unknown one names its model), and the
        note, said once, when its prompt was too short for the provider's prompt cache. The
        steps one streamed call gave (one-call mode) are its shares: the call counts once."""
        first_share = call.one_call_share == 0
        self.calls += first_share
        if call.deployment is not None and first_share:
            self.deployments[call.deployment] = self.deployments.get(call.deployment, 0) + 1
        self.prompt_tokens += call.prompt_tokens or 0
        self.cached_tokens += call.cached_tokens or 0
        self.cache_write_tokens += call.cache_write_tokens or 0
        self.completion_tokens += call.completion_tokens or 0
        self.estimated_calls += call.usage_estimated
        self.prompt_estimated_calls += call.prompt_estimated
        if call.cost is None:
            self.unpriced_calls += first_share
            if call.model not in self.unpriced_models:
                self.unpriced_models.append(call.model)
        else:
            self.cost += call.cost
        note = llm.below_caching_minimum(call, settings)
        if note is not None:
            self.note(note)

    def note(self, note: str) -> None:
        """Say `note` once in the summary, however many traces gave it."""
        if note not in self.notes:
            self.notes.append(note)

    def usage_json(self) -> dict[str, Any]:
        """The calls' tokens and cost, for a command's --json (cost None: unknown)."""
        known = not (self.calls and self.unpriced_calls >= self.calls)
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "cached_tokens": self.cached_tokens,
                "cache_write_tokens": self.cache_write_tokens,
                "completion_tokens": self.completion_tokens,
                "estimated_calls": self.estimated_calls,
                "prompt_estimated_calls": self.prompt_estimated_calls,
                "cost": round(self.cost, 8) if known else None,
                "unpriced_calls": self.unpriced_calls,
                "cost_unknown_for": list(self.unpriced_models),
                "calls_by_deployment": dict(self.deployments)}


@dataclass
class StepsProgress(Progress):
    """The progress of a batch that writes steps (run, backtrack)."""

    steps: int = 0
    # Steps (run) or samples (backtrack) whose provider sent log-probabilities no model could
    # give: kept without them.
    impossible_logprobs: int = 0
    # Traces taken from sessions earlier runs made (run --reuse-sessions): the day each was
    # made, one a trace.
    taken_from: list[str] = field(default_factory=list)
    # One-call mode's calls that gave way to one call a step: why, one a trace.
    one_call_fell_back: list[str] = field(default_factory=list)


@dataclass
class ProgressDelta:
    """What one trace worked in a child process (core/batch/workers.py) added to the progress,
    sent back with its result; the parent adds it to the batch's."""

    calls: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0
    steps: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    one_at_a_time: list[str] = field(default_factory=list)
    unpriced_models: list[str] = field(default_factory=list)
    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    completion_tokens: int = 0
    estimated_calls: int = 0
    prompt_estimated_calls: int = 0
    impossible_logprobs: int = 0
    notes: list[str] = field(default_factory=list)
    deployments: dict[str, int] = field(default_factory=dict)
    taken_from: list[str] = field(default_factory=list)
    one_call_fell_back: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, progress: Progress) -> ProgressDelta:
        """A trace's own progress (counted from zero) and the child's one-at-a-time servers.
        A batch that writes no steps (find) has none of the steps' counts."""
        steps = progress if isinstance(progress, StepsProgress) else StepsProgress()
        return cls(progress.calls, progress.cost, progress.unpriced_calls, steps.steps,
                   progress.failed, progress.errors, one_at_a_time_endpoints(),
                   progress.unpriced_models, progress.prompt_tokens, progress.cached_tokens,
                   progress.cache_write_tokens, progress.completion_tokens,
                   progress.estimated_calls, progress.prompt_estimated_calls,
                   steps.impossible_logprobs, progress.notes, progress.deployments,
                   steps.taken_from, steps.one_call_fell_back)

    def add_to(self, progress: Progress) -> None:
        if isinstance(progress, StepsProgress):
            progress.steps += self.steps
            progress.impossible_logprobs += self.impossible_logprobs
            progress.taken_from.extend(self.taken_from)
            progress.one_call_fell_back.extend(self.one_call_fell_back)
        progress.calls += self.calls
        progress.cost += self.cost
        progress.unpriced_calls += self.unpriced_calls
        progress.failed += self.failed
        progress.errors.extend(self.errors)
        progress.prompt_tokens += self.prompt_tokens
        progress.cached_tokens += self.cached_tokens
        progress.cache_write_tokens += self.cache_write_tokens
        progress.completion_tokens += self.completion_tokens
        progress.estimated_calls += self.estimated_calls
        progress.prompt_estimated_calls += self.prompt_estimated_calls
        for model in self.unpriced_models:
            if model not in progress.unpriced_models:
                progress.unpriced_models.append(model)
        for deployment, calls in self.deployments.items():
            progress.deployments[deployment] = progress.deployments.get(deployment, 0) + calls
        for endpoint in self.one_at_a_time:
            progress.note(one_at_a_time_note(endpoint, processes=True))
        for note in self.notes:
            progress.note(note)


def one_at_a_time_note(endpoint: str, *, processes: bool = False) -> str:
    """What the batch says of a server found to serve one request at a time."""
    said = (f"{endpoint} cut a running answer short when another request arrived (as "
            "llama-cpp-python's server does): ")
    if processes:
        return said + ("each process made its calls one at a time from then on, but the "
                       "processes' calls still met; --processes 1 --concurrency 1 avoids the "
                       "retries")
    return said + "its calls went one at a time from then on; --concurrency 1 avoids the retries"


P = TypeVar("P", bound=Progress)


@dataclass
class Batch(Generic[J, K, P]):
    jobs: Sequence[J]
    key: Callable[[J], K]
    # The key of a line OUT already holds (checked by `validate` first).
    key_of_row: Callable[[TraceRow], K]
    validate: Callable[[object, Path, int], TraceRow]
    # What OUT holds, for the one message that refuses a file of something else.
    what: str
    # The work of one job: the line to write, or None (this trace failed; it said why in the
    # progress). It may report progress as it goes, through the callback it is given.
    work: Callable[[J, P, Callable[[P], None]], Awaitable[str | None]]
    progress: P
    # Write the lines in the jobs' order (a finished line waits for the ones before it);
    # a kill then loses only lines whose work is saved elsewhere (run's sessions).
    ordered: bool = False
    # This machine's share of the jobs (core/batch/shard.py); None: all of them.
    shard: Shard | None = None
    # What a shard's rows say they are a share of besides the input (its task definitions'
    # digest, its models), so that `merge` refuses shares of different batches.
    shard_context: Mapping[str, Any] = field(default_factory=dict)
    # A command's own check of the rows OUT already holds (raises BatchStop to refuse it).
    check_out: Callable[[Path, Sequence[TraceRow]], None] | None = None
    # Start OUT over (`--new-out`): a file already there is moved aside, never overwritten;
    # `moved_aside(out, aside)` is told where it went (run hands the old file's sessions on).
    start_over: bool = False
    moved_aside: Callable[[Path, Path], None] | None = None


def unique(jobs: Sequence[J], key: Callable[[J], K]) -> list[J]:
    """Each job once (an input may list one several times), in first-seen order."""
    seen: set[K] = set()
    kept = []
    for job in jobs:
        if key(job) not in seen:
            seen.add(key(job))
            kept.append(job)
    return kept


async def run_batch(
    batch: Batch[J, K, P],
    out_path: Path,
    *,
    concurrency: int,
    store_path: Path | None,
    inputs: Sequence[Path] = (),
    on_progress: Callable[[P], None] | None = None,
) -> tuple[P, list[TraceRow]]:
    """Work every job OUT does not hold yet; returns the progress and every row OUT holds at
    the end (the old ones first)."""
    out = open_appended(out_path, batch.validate, what=batch.what, store_path=store_path,
                        inputs=inputs, start_over=batch.start_over)
    try:
        if out.moved_to is not None and batch.moved_aside is not None:
            batch.moved_aside(out_path, out.moved_to)
        rows = list(out.rows)
        shard = batch.shard
        jobs = unique(batch.jobs, batch.key)
        share_of = {"input": batch_digest([batch.key(job) for job in jobs]),
                    **batch.shard_context}
        try:
            if shard is not None:
                shard.check_rows(out_path, rows, share_of)
            else:
                check_unsharded(out_path, rows)
        except ShardError as error:
            raise BatchStop(str(error)) from None
        if batch.check_out is not None:
            batch.check_out(out_path, rows)
        done = {batch.key_of_row(row) for row in rows}
        # Each job's place among all of them: what one machine writes, in order.
        placed = [(place, job) for place, job in enumerate(jobs)
                  if shard is None or shard.takes(batch.key(job))]
        pending = [(place, job) for place, job in placed if batch.key(job) not in done]
        progress = batch.progress
        progress.total, progress.skipped = len(placed), len(placed) - len(pending)
        progress.duplicates, progress.mended = len(batch.jobs) - len(jobs), out.mended
        notify = on_progress or (lambda _progress: None)
        notify(progress)
        queue: asyncio.Queue[tuple[int, int, J]] = asyncio.Queue()
        for position, (place, job) in enumerate(pending):
            queue.put_nowait((position, place, job))
        writer = _InOrder(out.write_line) if batch.ordered else None

        async def worker() -> None:
            while not queue.empty():
                position, place, job = queue.get_nowait()
                line = await batch.work(job, progress, notify)
                if shard is not None and line is not None:
                    line = shard.tag(line, place, share_of)
                if writer is not None:
                    progress.done += writer.finished(position, line)
                elif line is not None:
                    # One write per line: a kill leaves whole lines and at most one cut off.
                    out.write_line(line)
                    progress.done += 1
                notify(progress)

        with young_objects_collected_less_often():
            await _all(worker, concurrency)
        for endpoint in one_at_a_time_endpoints():
            progress.note(one_at_a_time_note(endpoint))
        return progress, rows
    finally:
        out.close()


class _InOrder:
    """Writes lines in their jobs' order: each waits for every line before it (a failed job
    leaves a gap that is passed over)."""

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.next = 0
        self.waiting: dict[int, str | None] = {}

    def finished(self, position: int, line: str | None) -> int:
        """Take a job's line (None: it failed); returns how many lines were written."""
        self.waiting[position] = line
        written = 0
        while self.next in self.waiting:
            ready = self.waiting.pop(self.next)
            if ready is not None:
                self.write(ready)
                written += 1
            self.next += 1
        return written


# Objects allocated (less those freed) between two collections of the youngest generation
# while a batch runs; Python's default is 700.
BATCH_GC_THRESHOLD = 20_000


@contextmanager
def young_objects_collected_less_often() -> Iterator[None]:
    """A batch is CPU-bound on one core (bench/README.md), and litellm builds hundreds of
    short-lived pydantic objects a call (every streamed chunk is several): at the default
    threshold the collector walked the youngest generation every call or two, some 6% of a
    backtrack batch's CPU. Nearly all of them die young, freed by reference counting, so
    collecting less often finds as much garbage for less work. Put back when the batch ends.
    A worker process of `--processes` (core/batch/workers.py) runs its traces under it too."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], BATCH_GC_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


async def _all(worker: Callable[[], Awaitable[None]], concurrency: int) -> None:
    workers = [asyncio.ensure_future(worker()) for _ in range(max(1, concurrency))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
