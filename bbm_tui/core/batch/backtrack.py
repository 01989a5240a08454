"""`bbm-tui backtrack`: the paper's backtracking (section 4, Table 6) over dataset-format
files, on the shared batch runner (resumable OUT, a worker pool, progress).

Each trace is backtracked from one location: the gold label's (`gold`), a seeded random step
(`random`), a finder's prediction from a PREDS file (`finder:PREDS.jsonl`), or a simulated
reward model right with probability X (`rm:X`, as the paper's Figure 2). A trace with no
location (no mistake, by the gold label or the finder) is kept as it is and still counts in
Table 6, as in the paper. Each trace is a session in the store (source "backtrack") holding
the original as one branch and the backtracked trace as another, so a killed batch resumes
with nothing sampled twice.

An OUT line is the input row plus `location` (0-based or null), `new_steps`, `new_answer`,
`new_correct` and `samples` (each: `text`, `logprob` or null, `dropped`, `chosen`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.batch import runner
from bbm_tui.core.batch.find import trace_key
from bbm_tui.core.batch.runner import Batch, BatchStop, ProgressDelta, StepsProgress
from bbm_tui.core.batch.shard import Shard
from bbm_tui.core.batch.workers import Workers, WorkerSetup, worker_processes
from bbm_tui.core.dataset import (
    DatasetError,
    TraceRow,
    iter_jsonl,
    limited_per_task,
    read_input_rows,
    row_from_json,
    rows_with_tasks,
)
from bbm_tui.core.errors import InvalidValue
from bbm_tui.core.generation.backtrack import backtracking_model, choose
from bbm_tui.core.generation.stepper import OneCallEnded, StepFailed, StepFinished, StepperSettings
from bbm_tui.core.judging.metrics import BacktrackDeltas, BacktrackOutcome, backtrack_deltas
from bbm_tui.core.records import SessionSource
from bbm_tui.core.store import (
    SessionBusy,
    SessionDeleted,
    Step,
    Store,
    StoredCandidate,
    StoreError,
)
from bbm_tui.core.tasks import get_task
from bbm_tui.core.trace.session import (
    BranchMade,
    NewTrace,
    SamplesReady,
    TraceSession,
    digest_of,
    greedy,
    on_the_loop,
)
from bbm_tui.core.types import StepOrigin

OUT_KEYS = ("location", "new_steps", "new_answer", "new_correct", "samples")


@dataclass(frozen=True)
class Locations:
    """Where each trace is backtracked from: `kind` is gold, random, finder or rm."""

    kind: str
    seed: int = 0
    predictions: dict[tuple[str, tuple[str, ...]], int | None] | None = None
    accuracy: float = 0.0

    @property
    def paper_key(self) -> str | None:
        """The paper's Table 6 has figures for the gold and random locations."""
        return {"gold": "mistake_location", "random": "random_location"}.get(self.kind)


def parse_locations(text: str, seed: int = 0) -> Locations:
    """gold | random | finder:PREDS.jsonl | rm:X (0 <= X <= 1). Raises InvalidValue or
    DatasetError (a PREDS file that cannot be read)."""
    if text in ("gold", "random"):
        return Locations(text, seed)
    kind, _, value = text.partition(":")
    if kind == "finder" and value:
        return Locations("finder", seed, read_predictions(Path(value)))
    if kind == "rm" and value:
        try:
            accuracy = float(value)
        except ValueError:
            accuracy = -1.0
        if not 0.0 <= accuracy <= 1.0:
            raise InvalidValue(f"--locations rm:X needs X from 0 to 1 (got {value!r})")
        return Locations("rm", seed, accuracy=accuracy)
    raise InvalidValue(f"--locations must be gold, random, finder:PREDS.jsonl or rm:X (got "
                     f"{text!r})")


def read_predictions(path: Path) -> dict[tuple[str, tuple[str, ...]], int | None]:
    """Each trace's predicted first mistake in a PREDS file of `bbm-tui find` (None: no
    mistake, or an answer the finder could not parse). Raises DatasetError, naming the file
    and line, for a prediction that is not an index of its trace: a boolean (`true` is not
    Thought 2), a string, a float, or a number outside its steps."""
    predictions = {}
    for line, obj in iter_jsonl(path):
        row = row_from_json(obj, path, line)
        if "predicted_mistake_index" not in row.extra:
            raise DatasetError(path, "not a PREDS file of `bbm-tui find` (no "
                               "predicted_mistake_index)", line)
        index = row.extra["predicted_mistake_index"]
        if index is not None and (isinstance(index, bool) or not isinstance(index, int)):
            raise DatasetError(path, f"predicted_mistake_index {_shown(index)} is not an "
                               "index (a whole number, or null for no mistake)", line)
        if index is not None and not 0 <= index < len(row.steps):
            raise DatasetError(path, f"predicted_mistake_index {index} is outside the trace's "
                               f"{len(row.steps)} steps (0-based; no mistake is null)", line)
        predictions[trace_key(row)] = index if row.extra.get("parsed") is True else None
    return predictions


def _shown(value: object) -> str:
    """A value as the file wrote it (JSON), or as Python shows it where JSON has no word."""
    try:
        return json.dumps(value, allow_nan=False)
    except ValueError:
        return repr(value)


def location_of(locations: Locations, task: str, row: TraceRow) -> int | None:
    """The 0-based step to backtrack from, None: keep the trace as it is."""
    if not row.steps:
        return None
    if locations.kind == "gold":
        return row.mistake_index if row.labelled else None
    if locations.kind == "random":
        seed = "\x1f".join([str(locations.seed), task, row.input, *row.steps])
        rng = random.Random(hashlib.sha256(seed.encode("utf-8")).digest())
        return rng.randrange(len(row.steps))
    if locations.kind == "finder":
        assert locations.predictions is not None
        found = locations.predictions.get(trace_key(row))
        return found if isinstance(found, int) and 0 <= found < len(row.steps) else None
    from bbm_tui.core.llm.offline.replay import simulated_location

    return simulated_location(locations.accuracy, task, row)


@dataclass(frozen=True)
class BacktrackJob:
    task: str
    row: TraceRow
    location: int | None

    @property
    def key(self) -> tuple[str, tuple[str, ...]]:
        return trace_key(self.row)


@dataclass
class BacktrackProgress(StepsProgress):
    unlabelled: int = 0  # gold locations asked of rows nobody labelled: kept as they are


class FatalBacktrackError(BatchStop):
    """An error that stops the whole batch (a missing key, a model that does not exist)."""


@dataclass
class BacktrackResult:
    progress: BacktrackProgress
    # Table 6 per task, in the order the tasks came.
    tables: dict[str, BacktrackDeltas]


def jobs_from_files(paths: Sequence[Path], task: str | None, locations: Locations,
                    limit: int | None = None, fmt: str | None = None) -> list[BacktrackJob]:
    """The traces of dataset files (BBM or any of the field's formats: `fmt`, else told by
    their first row), at most `limit` per task."""
    jobs: list[BacktrackJob] = []
    for path in paths:
        rows = rows_with_tasks(path, task, read_input_rows(path, fmt))
        for row_task, row in limited_per_task(rows, limit):
            jobs.append(BacktrackJob(row_task, row, location_of(locations, row_task, row)))
    return jobs


def out_validator(value: object, path: Path, line: int) -> TraceRow:
    row = row_from_json(value, path, line)
    missing = [key for key in OUT_KEYS if key not in row.extra]
    if missing:
        raise DatasetError(path, f"not a line of `bbm-tui backtrack` (no "
                           f"{', '.join(missing)}); is --out right?", line)
    return row


async def backtrack_batch(
    jobs: Sequence[BacktrackJob],
    spec: llm.ModelSpec,
    store: Store,
    out_path: Path,
    *,
    concurrency: int = 4,
    settings: StepperSettings | None = None,
    on_progress: Callable[[BacktrackProgress], None] | None = None,
    inputs: Sequence[Path] = (),
    processes: int = 1,
    workers: Workers | None = None,
    shard: Shard | None = None,
) -> BacktrackResult:
    """Backtrack every job OUT does not hold yet, `concurrency` at once: in this process, or
    shared out to `processes` child processes (core/batch/workers.py; `workers`: children the
    caller started, with the same store, model and settings)."""
    settings = settings or StepperSettings()
    written: dict[tuple[str, tuple[str, ...]], dict[str, Any]] = {}
    # This machine's jobs (with --shard, its share).
    ours = [job for job in runner.unique(jobs, _key) if shard is None or shard.takes(_key(job))]
    setup = WorkerSetup(store.path, spec, settings, backtrack_in_child)
    async with worker_processes(processes, setup, workers) as children:

        async def work(job: BacktrackJob, progress: BacktrackProgress,
                       notify: Callable[[BacktrackProgress], None]) -> str | None:
            if children is None:
                extra = await backtrack_one(job, spec, store, settings, progress, notify)
            else:
                extra = await children.work(job, progress, notify)
            if extra is None:
                return None
            written[job.key] = extra
            return TraceRow(job.row.input, job.row.steps, job.row.answer, job.row.target,
                            job.row.mistake_index, {**job.row.extra, **extra},
                            job.row.key_order, job.row.labelled).to_line()

        progress = BacktrackProgress()
        progress.unlabelled = sum(1 for job in ours
                                  if not job.row.labelled and job.location is None)
        batch = Batch(jobs=jobs, key=_key, key_of_row=trace_key, validate=out_validator,
                      what="rows written by `bbm-tui backtrack`", work=work,
                      progress=progress, ordered=True, shard=shard)
        progress, rows = await runner.run_batch(batch, out_path, concurrency=concurrency,
                                                store_path=store.path, inputs=inputs,
                                                on_progress=on_progress)
    done = {trace_key(row): row.extra for row in rows} | written
    return BacktrackResult(progress, tables(ours, done))


async def backtrack_in_child(job: BacktrackJob, store: Store | None,
                             setup: WorkerSetup) -> tuple[dict[str, Any] | None, ProgressDelta]:
    """One trace backtracked in a worker process (core/batch/workers.py): its OUT keys (None:
    it failed, the delta says why) and what it added to the progress."""
    assert store is not None  # its setup names the batch's store
    progress = BacktrackProgress()
    extra = await backtrack_one(job, setup.spec, store, setup.settings, progress,
                                lambda _progress: None)
    return extra, ProgressDelta.of(progress)


def _key(job: BacktrackJob) -> tuple[str, tuple[str, ...]]:
    return job.key


def tables(jobs: Sequence[BacktrackJob],
           done: dict[tuple[str, tuple[str, ...]], dict[str, Any]]) -> dict[str, BacktrackDeltas]:
    outcomes: dict[str, list[BacktrackOutcome]] = {}
    for job in jobs:
        extra = done.get(job.key)
        if extra is None:
            continue
        outcomes.setdefault(job.task, []).append(BacktrackOutcome(
            was_correct=get_task(job.task).is_correct(job.row.answer, job.row.target),
            now_correct=bool(extra["new_correct"]),
        ))
    return {task: backtrack_deltas(items) for task, items in outcomes.items()}


async def backtrack_one(
    job: BacktrackJob,
    spec: llm.ModelSpec,
    store: Store,
    settings: StepperSettings,
    progress: BacktrackProgress,
    notify: Callable[[BacktrackProgress], None],
) -> dict[str, Any] | None:
    row = job.row
    if job.location is None:
        return _extra(job.task, None, row.steps, row.answer, row.target, [])
    spec = backtracking_model(spec, job.task)  # replay/bbm cannot write a new step
    try:
        # On the loop as the trace's other store work is: the session is made in the
        # child's first write of it, which must not wait for another process's lock there.
        trace, made = await on_the_loop(_open_session, store, job, spec)
        try:
            return await _continue(job, trace, made, settings, progress, notify)
        except BaseException:  # refused or stopped: a session made for nothing goes
            if made:
                with contextlib.suppress(StoreError):
                    store.delete_session_if_empty(trace.id, recorded=True)
            raise
    except (SessionDeleted, SessionBusy) as error:  # deleted, or being generated elsewhere
        progress.fail(job.task, str(error))
        return None
    except StoreError as error:
        raise FatalBacktrackError(str(error)) from None
    except llm.LLMError as error:
        if error.kind in llm.STOPS_A_BATCH:
            raise FatalBacktrackError(error.message) from None
        progress.fail(job.task, error.message)
        return None


async def _continue(job: BacktrackJob, trace: TraceSession, made: bool,
                    settings: StepperSettings, progress: BacktrackProgress,
                    notify: Callable[[BacktrackProgress], None]) -> dict[str, Any] | None:
    """Backtrack the trace, or finish what a killed batch began (its samples are stored).
    A session `made` just now holds no samples and shows the original: nothing to look up
    (each read costs the batch's one busy core, bench/README.md)."""
    assert job.location is not None
    number = job.location + 1
    # A session made just now is the original, its head the original's last step: walking
    # the branch down from its first thought (a read a step) would find what was loaded.
    original = [] if made else _original_path(trace)
    stored = [] if made else _stored_samples(trace, number, original)
    chosen_index: int | None = None
    if stored:
        taken = next((c.step_id for c in stored if c.step_id is not None), None)
        if taken is not None:  # killed while continuing: go on from there
            trace.switch_to(taken)
            events = trace.generate(settings=greedy(settings))
        else:
            # Samples stored and none taken: killed between storing them and taking one, or
            # left in the app (esc). The rule decides now, as it would have then.
            chosen_index, _ = choose(stored, [c.dropped for c in stored])
            if chosen_index is None:  # no sample differed: the trace stays as it was
                return _extra(job.task, job.location, job.row.steps, job.row.answer, job.row.target,
                              _samples_json(stored))
            events = trace.continue_with(stored[chosen_index], settings=settings)
    else:
        if original and trace.head_id != original[-1].id:
            trace.switch_to(original[-1].id)
        events = trace.backtrack(number, settings=settings)
    # One claim from the samples to the continuation's end: the sampling and the going on
    # would otherwise each take and drop their own (four of a trace's ten commits, each a turn
    # at the store's write lock that --processes' children queue for), and leave the
    # session unclaimed between them.
    async with trace.claimed():
        async for event in events:
            if isinstance(event, SamplesReady):
                # What the store now holds; the chosen one gets its step below.
                stored, chosen_index = list(event.stored), event.resample.chosen
                for note in (event.resample.without_logprobs, event.resample.partly_scored):
                    if note:
                        progress.note(note)
                progress.impossible_logprobs += sum(
                    candidate.impossible_logprobs
                    for candidate in event.resample.samples.candidates)
                for call in event.resample.samples.calls:
                    progress.add_call(call, settings.call)
                notify(progress)
            elif isinstance(event, BranchMade) and chosen_index is not None:
                stored[chosen_index] = replace(stored[chosen_index], step_id=event.step.id)
            elif isinstance(event, StepFinished):
                progress.steps += 1
                progress.add_call(event.call, settings.call)
                notify(progress)
            elif isinstance(event, OneCallEnded) and event.unkept is not None:
                # A request's cost past its steps.
                progress.add_call(event.unkept, settings.call)
                notify(progress)
            elif isinstance(event, StepFailed):
                raise event.error
    if not any(c.step_id is not None for c in stored):
        return _extra(job.task, job.location, job.row.steps, job.row.answer, job.row.target,
                      _samples_json(stored))
    return _extra(job.task, job.location, trace.texts, trace.answer, job.row.target,
                  _samples_json(stored))


def _stored_samples(trace: TraceSession, number: int,
                    original: list[Step]) -> list[StoredCandidate]:
    parent = original[number - 2].id if number > 1 else None
    return trace.store.candidates(trace.id, parent, number)


def _open_session(store: Store, job: BacktrackJob,
                  spec: llm.ModelSpec) -> tuple[TraceSession, bool]:
    """The batch's session of this trace and model, the original as its first branch, and
    whether it was made just now (not found from an earlier run). Only reads before its one
    write (`on_the_loop` may begin it again)."""
    digest = digest_of(job.task)
    for session in store.sessions_of_question(task=job.task, input=job.row.input,
                                              model=spec.model):
        if session.source == SessionSource.BACKTRACK and session.task_digest == digest:
            trace = TraceSession(store, session, spec, store_work=on_the_loop)
            if [step.text for step in _original_path(trace)] == list(job.row.steps):
                return trace, False
    # The row's gold label is kept, as `import` keeps it: the session shows it, and a
    # backtracked version of the flagged thought that reached the target is a DPO pair.
    gold = job.row.mistake_index if job.row.labelled else None
    # Made whole or not at all, and claimed for the backtracking to come (`_continue`), in
    # one commit (four before: each a turn at the store's write lock, which --processes'
    # children queue for).
    with store.transaction():
        trace = TraceSession.create(
            store, NewTrace(job.task, job.row.input, job.row.target or None,
                            gold_mistake_index=gold),
            spec, source=SessionSource.BACKTRACK, store_work=on_the_loop)
        trace.load_recorded(list(job.row.steps), job.row.answer)
        if job.row.labelled and gold is not None and 0 <= gold < len(job.row.steps):
            trace.flag_mistake(gold + 1)
        elif job.row.labelled and job.row.steps:
            trace.mark_no_mistake()
        trace.claim.take_now()
    return trace, True


def _original_path(trace: TraceSession) -> list[Step]:
    """The recorded trace: the first branch, the steps loaded from the row."""
    path: list[Step] = []
    children = trace.tree.children(None)
    while children and children[0].origin == StepOrigin.DATASET:
        path.append(children[0])
        children = trace.tree.children(children[0].id)
    return path


def _extra(task: str, location: int | None, steps: Sequence[str], answer: str | None,
           target: str, samples: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "location": location,
        "new_steps": list(steps),
        "new_answer": answer,
        "new_correct": get_task(task).is_correct(answer, target),
        "samples": samples,
    }


def _samples_json(stored: list[StoredCandidate]) -> list[dict[str, Any]]:
    return [{"text": c.text, "logprob": c.logprob, "dropped": c.dropped,
             "chosen": c.step_id is not None} for c in stored]


def paper_table_6(kind: str | None) -> dict[str, dict[str, float]]:
    """The paper's Table 6 figures for a location kind ({} where it has none)."""
    if kind is None:
        return {}
    from bbm_tui.core.batch.find import paper_tables

    return paper_tables()["table_6_backtracking_delta_accuracy"].get(kind, {})


def to_json(result: BacktrackResult, locations: Locations) -> dict[str, Any]:
    return {"tasks": {task: deltas.to_json() for task, deltas in result.tables.items()},
            "locations": locations.kind,
            **({"paper": paper_table_6(locations.paper_key)} if locations.paper_key else {}),
            **({"notes": list(result.progress.notes)} if result.progress.notes else {}),
            "usage": result.progress.usage_json()}

