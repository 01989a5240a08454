"""`bbm-tui anchors` (issue 35, item 3): each step's importance in thinking traces, from
rollouts that go on from prefixes of the raw reasoning (core/llm/prefix.py), on the shared
resumable batch runner.

For a trace of n steps and M rollouts, prefix j (0..n) keeps steps 0..j-1 as the reasoning had
them and goes on to the answer M times: (n+1)·M calls, each one OUT line (a rollout), written
as it finishes, so a kill loses only the rollouts under way and a second run does none twice.
The rollouts from prefix i resample step i; those from prefix i+1 keep it
(core/judging/anchors.py computes the per-step figures from them, old lines and new).
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.batch import runner
from bbm_tui.core.batch.backtrack_thinking import NotAThinkingTrace, raw_steps_of
from bbm_tui.core.batch.find import trace_key
from bbm_tui.core.batch.runner import Batch, BatchStop, StepsProgress
from bbm_tui.core.batch.shard import Shard
from bbm_tui.core.dataset import (
    DatasetError,
    TraceRow,
    limited_per_task,
    read_input_rows,
    replacing,
    row_from_json,
    rows_with_tasks,
)
from bbm_tui.core.dataset.outfile import open_appended
from bbm_tui.core.generation.resample_thinking import (
    answer_settings,
    first_step,
    go_on_to_answer,
)
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.judging.anchors import (
    Rollout,
    Similar,
    StepImportance,
    importances,
    similar_by_words,
)
from bbm_tui.core.llm.prefix import Prefixer, PrefixSettings
from bbm_tui.core.llm.records import UsageCounts
from bbm_tui.core.llm.usage import cost_of
from bbm_tui.core.prompts.thinking import thinking_messages
from bbm_tui.core.tasks import get_task
from bbm_tui.core.types import SplitRule

OUT_KEYS = ("prefix", "rollout", "first_step", "is_correct")
WHAT = "rows written by `bbm-tui anchors`"
# Runs above this many calls ask first (the command's --yes, the app's confirmation).
CONFIRM_ABOVE_CALLS = 200
TraceKey = tuple[str, tuple[str, ...]]
# Tokens a rollout's answer after the reasoning is guessed at, for the estimate.
ANSWER_TOKENS_GUESS = 30
CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class AnchorsSettings:
    prefix: PrefixSettings = field(default_factory=PrefixSettings)
    rollouts: int = 4
    chat_template: Path | None = None
    answer_max_tokens: int = 8192


@dataclass(frozen=True)
class RolloutJob:
    task: str
    row: TraceRow
    raw: tuple[str, ...]
    rule: SplitRule
    prefix: int
    rollout: int

    @property
    def key(self) -> tuple[TraceKey, int, int]:
        return trace_key(self.row), self.prefix, self.rollout


@dataclass
class Trace:
    task: str
    row: TraceRow
    raw: tuple[str, ...]
    rule: SplitRule


@dataclass
class AnchorsProgress(StepsProgress):
    pass


@dataclass
class TraceImportance:
    task: str
    row: TraceRow
    steps: list[StepImportance]


@dataclass
class AnchorsResult:
    progress: AnchorsProgress
    traces: list[TraceImportance]


class FatalAnchorsError(BatchStop):
    """An error that stops the whole batch (a missing key, a server that cannot continue)."""


def traces_from_files(paths: Sequence[Path], task: str | None, limit: int | None = None,
                      fmt: str | None = None) -> list[Trace]:
    """The thinking traces of the input files, at most `limit` per task. Raises DatasetError
    naming the file for a row with no raw reasoning to go on from."""
    traces: list[Trace] = []
    for path in paths:
        rows = rows_with_tasks(path, task, read_input_rows(path, fmt))
        for row_task, row in limited_per_task(rows, limit):
            try:
                raw, rule = raw_steps_of(row)
            except NotAThinkingTrace as error:
                raise DatasetError(path, f"a trace of {len(row.steps)} steps: {error}") from None
            traces.append(Trace(row_task, row, tuple(raw), rule))
    return traces


def jobs_of(traces: Sequence[Trace], rollouts: int) -> list[RolloutJob]:
    return [RolloutJob(trace.task, trace.row, trace.raw, trace.rule, prefix, rollout)
            for trace in traces for prefix in range(len(trace.raw) + 1)
            for rollout in range(rollouts)]


@dataclass(frozen=True)
class Plan:
    """What a run will cost before it starts: calls, and tokens estimated from the text's
    length (4 characters a token), the cost where the model's price is known."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None


def plan(jobs: Sequence[RolloutJob], spec: llm.ModelSpec, done: int = 0) -> Plan:
    prompt = completion = 0
    for job in jobs:
        kept = sum(len(step) for step in job.raw[: job.prefix])
        rest = sum(len(step) for step in job.raw[job.prefix:])
        prompt += (len(job.row.input) + kept) // CHARS_PER_TOKEN
        completion += rest // CHARS_PER_TOKEN + ANSWER_TOKENS_GUESS
    cost = cost_of(spec, UsageCounts(prompt=prompt, completion=completion))
    return Plan(len(jobs) - done, prompt, completion, cost)


def out_validator(value: object, path: Path, line: int) -> TraceRow:
    row = row_from_json(value, path, line)
    missing = [key for key in OUT_KEYS if key not in row.extra]
    if missing or not isinstance(row.extra.get("prefix"), int) or not isinstance(
            row.extra.get("rollout"), int):
        raise DatasetError(path, "not a line of `bbm-tui anchors` (no "
                           f"{', '.join(missing) or 'whole prefix and rollout'}); is --out "
                           "right?", line)
    return row


def _key_of_row(row: TraceRow) -> tuple[TraceKey, int, int]:
    return trace_key(row), row.extra["prefix"], row.extra["rollout"]


def _key(job: RolloutJob) -> tuple[TraceKey, int, int]:
    return job.key


async def anchors_batch(
    traces: Sequence[Trace],
    spec: llm.ModelSpec,
    out_path: Path,
    *,
    settings: AnchorsSettings,
    similar_for: Callable[[list[str]], Awaitable[Similar]],
    concurrency: int = 16,
    on_progress: Callable[[AnchorsProgress], None] | None = None,
    inputs: Sequence[Path] = (),
    shard: Shard | None = None,
    on_rollout: Callable[[TraceRow], None] | None = None,
) -> AnchorsResult:
    """Every rollout OUT does not hold yet, `concurrency` at once; then each step's
    importance from all the rollouts OUT holds (`similar_for`: given every step and
    resampled step, the test of whether two say the same). `on_rollout` hears of each new
    row as it is written (the app fills its bars in from them)."""
    jobs = jobs_of(traces, settings.rollouts)
    prefixers: dict[TraceKey, Prefixer] = {}
    go_on = answer_settings(settings.prefix, max_tokens=settings.answer_max_tokens)
    written: list[TraceRow] = []

    async def work(job: RolloutJob, progress: AnchorsProgress,
                   notify: Callable[[AnchorsProgress], None]) -> str | None:
        task = get_task(job.task)
        key = trace_key(job.row)
        try:
            if key not in prefixers:
                prefixers[key] = Prefixer(spec, thinking_messages(task, job.row.input),
                                          settings.chat_template)
            kept = "".join(job.raw[: job.prefix])
            ending = await go_on_to_answer(prefixers[key], task, kept,
                                           replace(go_on, seed=job.rollout))
        except llm.LLMError as error:
            if error.kind in llm.STOPS_A_BATCH:
                raise FatalAnchorsError(error.message) from None
            progress.fail(job.task, error.message)
            return None
        progress.add_call(ending.call, llm.CallSettings(caching=False))
        notify(progress)
        written_step, _ = first_step(ending.reasoning_rest + "</think>", job.rule, "stop")
        row = TraceRow(job.row.input, job.row.steps, ending.answer, job.row.target,
                       job.row.mistake_index,
                       {"task": job.task, "mode": "thinking", "split": str(job.rule),
                        "prefix": job.prefix, "rollout": job.rollout,
                        "first_step": written_step.strip(), "answer_text": ending.answer_text,
                        "is_correct": task.is_correct(ending.answer, job.row.target)},
                       labelled=job.row.labelled)
        written.append(row)
        if on_rollout is not None:
            # The runner writes the line as soon as this returns, with no await between.
            on_rollout(row)
        return row.to_line()

    progress = AnchorsProgress()
    batch = Batch(jobs=jobs, key=_key, key_of_row=_key_of_row, validate=out_validator,
                  what=WHAT, work=work, progress=progress,
                  shard=shard)
    try:
        progress, rows = await runner.run_batch(batch, out_path, concurrency=concurrency,
                                                store_path=None, inputs=inputs,
                                                on_progress=on_progress)
    finally:
        for prefixer in prefixers.values():
            await prefixer.aclose()
    rows = [*rows, *written]
    texts = [step for trace in traces for step in trace.row.steps]
    texts += [str(row.extra["first_step"]) for row in rows]
    similar = await similar_for(texts)
    return AnchorsResult(progress, importances_of(traces, rows, similar))


def rollouts_of(rows: Sequence[TraceRow]) -> dict[TraceKey, list[Rollout]]:
    found: dict[TraceKey, list[Rollout]] = {}
    for row in rows:
        found.setdefault(trace_key(row), []).append(Rollout(
            row.extra["prefix"], str(row.extra["first_step"]), row.answer,
            bool(row.extra["is_correct"])))
    return found


def importances_of(traces: Sequence[Trace], rows: Sequence[TraceRow],
                   similar: Similar) -> list[TraceImportance]:
    found = rollouts_of(rows)
    return [TraceImportance(trace.task, trace.row,
                            importances(trace.row.steps, found.get(trace_key(trace.row), []),
                                        similar))
            for trace in traces]


def steps_path(out: Path) -> Path:
    """Where the per-step rows go: beside OUT, `NAME.steps.jsonl`."""
    return out.with_name(out.name.removesuffix(".jsonl") + ".steps.jsonl")


def write_steps(path: Path, result: AnchorsResult, measure: str) -> None:
    """One row a step of each trace, written whole (never half a file)."""
    import json

    with replacing(path) as out:
        for trace in result.traces:
            for step in trace.steps:
                row: dict[str, Any] = {"task": trace.task, "input": trace.row.input,
                                       **step.to_json(), "meaning_by": measure}
                out.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")


# -- the app's importance view (`I` on a thinking trace): one session's trace, its rollouts
#    in a file of their own beside the store, the same rows as the command's OUT.

ROLLOUTS_FOLDER = "anchors"


def session_trace(task: str, question: str, target: str, answer: str | None,
                  reasoning: str, rule: SplitRule) -> Trace:
    """A session's thinking trace as `anchors` takes one: its steps the stored reasoning cut
    by the branch's rule (raw, and stripped as the trace shows them). Raises
    NotAThinkingTrace when the cut leaves no step."""
    raw = split_text(reasoning, rule)
    if not raw:
        raise NotAThinkingTrace("its reasoning is empty: no step to resample")
    row = TraceRow(question, [step.strip() for step in raw], answer, target, None,
                   {"task": task, "mode": "thinking", "split": str(rule),
                    "reasoning": reasoning}, labelled=False)
    return Trace(task, row, tuple(raw), rule)


def rollouts_path(store_path: Path, session_id: int, model: str) -> Path:
    """Where the app keeps a session's rollouts with one model: beside the store, one file a
    session and model (a second model's rollouts are not the first's, so never mixed)."""
    digest = hashlib.sha256(model.encode("utf-8")).hexdigest()[:12]
    return store_path.parent / ROLLOUTS_FOLDER / f"session-{session_id}-{digest}.jsonl"


def read_rollouts(path: Path) -> list[TraceRow]:
    """Blocking: the rollouts a file holds (none where there is no file yet). Raises
    DatasetError naming the file and line for one that is not a rollout, OutputFileError
    when another process is writing it."""
    if not path.exists():
        return []
    with open_appended(path, out_validator, what=WHAT, store_path=None) as out:
        return list(out.rows)


def prepare_folder(path: Path) -> None:
    """Blocking: the rollouts' folder, made 0700 where it is missing."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)


def rollouts_of_trace(trace: Trace, rows: Sequence[TraceRow]) -> list[TraceRow]:
    """The rows that are this trace's (a file may hold another cut's too)."""
    key = trace_key(trace.row)
    return [row for row in rows if trace_key(row) == key]


def done_jobs(trace: Trace, rows: Sequence[TraceRow], rollouts: int) -> int:
    """How many of the jobs for `rollouts` a step the rows already hold."""
    wanted = {job.key for job in jobs_of([trace], rollouts)}
    return len(wanted & {_key_of_row(row) for row in rows})


def live_importances(trace: Trace, rows: Sequence[TraceRow]) -> list[StepImportance]:
    """Each step's importance from the rollouts in so far, meaning judged by word overlap
    (the app names no embedding model)."""
    return importances_of([trace], rows, similar_by_words)[0].steps
