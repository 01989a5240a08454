"""`bbm-tui find`: run a mistake-finding method over dataset-format files, many traces at once.

Each finished trace is appended to PREDS at once, in one write, as the input row plus
`method`, `model`, `predicted_mistake_index` (0-based or null), `parsed` and `raw` (the
model's answers, verbatim: one for a trace-level method, one per judged thought for a
step-level one). Traces already in PREDS are skipped, so a killed run resumes where it
stopped. The scores cover every trace of the inputs that PREDS holds, old and new.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.batch import runner
from bbm_tui.core.batch.runner import Batch, BatchStop, Progress, ProgressDelta
from bbm_tui.core.batch.shard import Shard
from bbm_tui.core.batch.workers import Workers, WorkerSetup, worker_processes
from bbm_tui.core.dataset import (
    DatasetError,
    TraceRow,
    read_input_rows,
    row_from_json,
    rows_with_tasks,
)
from bbm_tui.core.dataset.formats import origin_of
from bbm_tui.core.errors import InvalidValue
from bbm_tui.core.judging.finders import (
    CallRetried,
    FindEvent,
    FindResult,
    Pace,
    final_result,
)
from bbm_tui.core.judging.judges import Judge, check_judge, get_judge
from bbm_tui.core.judging.metrics import Judged, Report, report
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import get_task

PRED_KEYS = ("method", "model", "predicted_mistake_index", "parsed", "raw")


@dataclass(frozen=True)
class FindJob:
    task: str
    row: TraceRow
    # What the trace is scored with: its task, or for a ProcessBench row its task and its
    # subset (`processbench/gsm8k`): ProcessBench's "Average F1" is the mean of each
    # subset's F1, as the overall score is the mean of the tasks'.
    group: str = ""

    @property
    def key(self) -> Key:
        return trace_key(self.row)

    @property
    def scored_as(self) -> str:
        return self.group or self.task


def scoring_group(task: str, row: TraceRow, path: Path) -> str:
    """A ProcessBench row's subset: its `id`'s prefix (`gsm8k-0`: gsm8k), else its file's
    name (ProcessBench ships a file a subset); every other row, its task."""
    origin = origin_of(row)
    if origin is None or origin.get("format") != "processbench":
        return task
    identifier = (origin.get("fields") or {}).get("id")
    if isinstance(identifier, str) and "-" in identifier:
        return f"{task}/{identifier.rsplit('-', 1)[0]}"
    return f"{task}/{path.name.split('.')[0]}"


Key = tuple[str, tuple[str, ...]]


def trace_key(row: TraceRow) -> Key:
    """What identifies a trace across the inputs and PREDS: its question and its thoughts."""
    return row.input, tuple(row.steps)


@dataclass
class FindProgress(Progress):
    """A find batch's progress: the shared counts (calls, cost), and the traces whose call
    is being made again now, with what their progress line says of it ("retry 2 of 4
    (timed out)"), the latest last."""

    retrying: dict[Key, str] = field(default_factory=dict)

    def retry_note(self) -> str:
        """What the progress line says of the calls being retried ("" if none)."""
        if not self.retrying:
            return ""
        latest = list(self.retrying.values())[-1]
        others = len(self.retrying) - 1
        return latest + (f", {others} more trace{'s' if others > 1 else ''} retrying"
                         if others else "")


@dataclass
class FindOutcome:
    progress: FindProgress
    report: Report
    # Traces judged but left out of the scores: nobody has labelled them, so there is no
    # truth to score against (a row with no `mistake_index` key).
    unlabelled: int = 0


class FatalFindError(BatchStop):
    """An error that stops the whole run (a missing key, a model that does not exist)."""


# --------------------------------------------------------------------------- inputs


def jobs_from_files(
    paths: Sequence[Path], task: str | None, method: str, limit: int | None = None,
    fmt: str | None = None,
) -> list[FindJob]:
    """The traces of dataset files (BBM or any of the field's formats: `fmt`, else told by
    their first row), at most `limit` per task. The method must judge every task (the paper's
    CoT trace-level prompts are word sorting's only): checked before any call."""
    jobs: list[FindJob] = []
    per_task: dict[str, int] = {}
    for path in paths:
        checked: set[str] = set()
        for row_task, row in rows_with_tasks(path, task, read_input_rows(path, fmt)):
            if row_task not in checked:
                try:
                    check_judge(row_task, method)
                except ValueError as error:
                    raise DatasetError(path, str(error)) from None
                checked.add(row_task)
            if limit is not None and per_task.get(row_task, 0) >= limit:
                continue
            per_task[row_task] = per_task.get(row_task, 0) + 1
            jobs.append(FindJob(row_task, row, scoring_group(row_task, row, Path(path))))
    return jobs


# A trace's prediction: the 0-based index of the first mistake (None: no mistake), and
# whether the answer could be parsed at all.
Prediction = tuple[int | None, bool]


def pred_validator(method: str, model: str) -> Callable[[object, Path, int], TraceRow]:
    """Checks one PREDS line: a dataset row plus the finder's keys, of this method and model
    (one PREDS file holds one run)."""

    def validate(value: object, path: Path, number: int) -> TraceRow:
        row = row_from_json(value, path, number)
        missing = [key for key in PRED_KEYS if key not in row.extra]
        if missing:
            raise DatasetError(
                path, f"not a predictions line (no {', '.join(missing)}); is --out right?", number
            )
        if row.extra["method"] != method or row.extra["model"] != model:
            raise DatasetError(
                path,
                f"holds predictions of {row.extra['method']} by {row.extra['model']}, not "
                f"{method} by {model}: use another --out for this run",
                number,
            )
        return row

    return validate


def predictions(rows: Sequence[TraceRow]) -> dict[Key, Prediction]:
    return {
        trace_key(row): (row.extra["predicted_mistake_index"], bool(row.extra["parsed"]))
        for row in rows
    }


def pred_line(job: FindJob, result: FindResult) -> str:
    """One PREDS line: the input row, then the finder's keys."""
    values: dict[str, Any] = job.row.to_json()
    values.update(
        method=result.method,
        model=result.model,
        predicted_mistake_index=result.mistake_index if result.parsed else None,
        parsed=result.parsed,
        raw=list(result.raw),
    )
    return json.dumps(values, allow_nan=False)


# --------------------------------------------------------------------------- running


class RateLimiter:
    """Start at most `per_minute` calls a minute, evenly spaced, across all workers."""

    def __init__(self, per_minute: float) -> None:
        if per_minute <= 0:
            raise InvalidValue("--rpm must be more than 0")
        self.interval = 60.0 / per_minute
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self._lock:
            now = time.monotonic()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            await asyncio.sleep(start - now)


@dataclass(frozen=True)
class FinderSettings:
    """What a worker process needs to judge a trace as this process would (`--processes`)."""

    method: str
    call: llm.CallSettings | None
    judge_all: bool
    # The calls a minute this process may start (the batch's --rpm shared out), or None.
    rpm: float | None


async def find_batch(
    jobs: Sequence[FindJob],
    method: str,
    spec: llm.ModelSpec,
    out_path: Path,
    *,
    concurrency: int = 4,
    rpm: float | None = None,
    judge_all: bool = False,
    settings: llm.CallSettings | None = None,
    on_progress: Callable[[FindProgress], None] | None = None,
    store_path: Path | None = None,
    inputs: Sequence[Path] = (),
    shard: Shard | None = None,
    processes: int = 1,
    workers: Workers | None = None,
) -> FindOutcome:
    """Run `method` on every job not already in PREDS, writing each line when it is done
    (with `shard`, this machine's share of them, and scored over that share): in this
    process, or shared out to `processes` child processes (core/batch/workers.py, each
    pacing its calls at its share of `rpm`; `workers`: children the caller started)."""
    judged: dict[Key, Prediction] = {}
    finder = FinderSettings(method, settings, judge_all, rpm)
    # Each child paces its own calls: the batch's --rpm is shared out between them.
    shared_rpm = rpm / (workers.count if workers else processes) if rpm else None
    setup = WorkerSetup(None, spec, dataclasses.replace(finder, rpm=shared_rpm),
                        find_in_child)
    async with worker_processes(processes, setup, workers) as children:
        if children is None:
            work = _judged_here(judged, spec, finder)
        else:
            work = _judged_in(judged, children)
        batch = Batch(jobs=jobs, key=_key, key_of_row=trace_key,
                      validate=pred_validator(method, spec.model),
                      what=f"{method} predictions by {spec.model}", work=work,
                      progress=FindProgress(), shard=shard)
        progress, rows = await runner.run_batch(batch, out_path, concurrency=concurrency,
                                                store_path=store_path, inputs=inputs,
                                                on_progress=on_progress)
    done = predictions(rows) | judged
    kept = [job for job in runner.unique(jobs, _key)
            if shard is None or shard.takes(_key(job))]
    unlabelled = sum(not job.row.labelled and job.key in done for job in kept)
    return FindOutcome(progress, score_jobs(kept, done), unlabelled)


# A batch's work on one trace: its PREDS line, or None when it failed (the progress says why).
FindWork = Callable[[FindJob, FindProgress, Callable[[FindProgress], None]],
                    Awaitable[str | None]]


def _judged_here(judged: dict[Key, Prediction], spec: llm.ModelSpec,
                 finder: FinderSettings) -> FindWork:
    """Each trace judged in this process, its prediction kept in `judged`."""
    judge = get_judge(finder.method)
    pace = RateLimiter(finder.rpm).wait if finder.rpm else None

    async def work(job: FindJob, progress: FindProgress,
                   notify: Callable[[FindProgress], None]) -> str | None:
        result = await _find_one(job, judge, spec, finder.call, finder.judge_all, pace,
                                 progress, notify)
        if result is None:
            return None
        judged[job.key] = (result.mistake_index, result.parsed)
        return pred_line(job, result)

    return work


def _judged_in(judged: dict[Key, Prediction], children: Workers) -> FindWork:
    """Each trace judged in a worker process (find_in_child), its prediction kept in
    `judged`. A call being retried there is not shown in this process's progress line."""

    async def work(job: FindJob, progress: FindProgress,
                   notify: Callable[[FindProgress], None]) -> str | None:
        found = await children.work(job, progress, notify)
        if found is None:
            return None
        line, prediction = found
        judged[job.key] = prediction
        return line

    return work


async def find_in_child(job: FindJob, store: object, setup: WorkerSetup
                        ) -> tuple[tuple[str, Prediction] | None, ProgressDelta]:
    """One trace judged in a worker process (core/batch/workers.py): its PREDS line and
    prediction (None: it failed, the delta says why) and what it added to the progress."""
    finder: FinderSettings = setup.settings
    pace = _child_pace(finder.rpm).wait if finder.rpm else None
    progress = FindProgress()
    result = await _find_one(job, get_judge(finder.method), setup.spec, finder.call,
                             finder.judge_all, pace, progress, lambda _progress: None)
    found = None
    if result is not None:
        found = pred_line(job, result), (result.mistake_index, result.parsed)
    return found, ProgressDelta.of(progress)


@cache
def _child_pace(per_minute: float) -> RateLimiter:
    """A worker process's one pace for all its traces."""
    return RateLimiter(per_minute)


def _key(job: FindJob) -> Key:
    return job.key


async def _find_one(
    job: FindJob,
    judge: Judge,
    spec: llm.ModelSpec,
    settings: llm.CallSettings | None,
    judge_all: bool,
    pace: Pace | None,
    progress: FindProgress,
    notify: Callable[[FindProgress], None],
) -> FindResult | None:
    def retried(retry: CallRetried) -> None:
        progress.retrying.pop(job.key, None)  # the latest goes last
        progress.retrying[job.key] = retry.words()
        notify(progress)

    events = judge.events(job.task, job.row.input, job.row.steps, spec, settings=settings,
                          judge_all=judge_all, pace=pace, on_retry=retried)
    try:
        result = await final_result(_retries_ended(events, job.key, progress, notify))
    except llm.LLMError as error:
        if error.kind in llm.STOPS_A_BATCH:
            raise FatalFindError(error.message) from None
        progress.fail(job.task, error.message)
        return None
    except ValueError as error:  # a trace with no thoughts
        progress.fail(job.task, str(error))
        return None
    for call in result.calls:
        progress.add_call(call, settings or llm.CallSettings())
    return result


async def _retries_ended(events: AsyncIterator[FindEvent], key: Key, progress: FindProgress,
                         notify: Callable[[FindProgress], None]) -> AsyncIterator[FindEvent]:
    """A trace's events; a retry noted in the progress is taken off it once its call has
    answered, or the trace has ended."""
    try:
        async for event in events:
            if progress.retrying.pop(key, None) is not None:
                notify(progress)
            yield event
    finally:
        progress.retrying.pop(key, None)


def score_jobs(jobs: Sequence[FindJob], preds: dict[Key, Prediction]) -> Report:
    """Scores per task (a ProcessBench file's: per subset) in the order they came, over the
    labelled jobs that have a prediction: an unlabelled trace has no truth to score
    against."""
    judged: dict[str, list[Judged]] = {}
    for job in jobs:
        judged.setdefault(job.scored_as, [])
        if job.key not in preds or not job.row.labelled:
            continue
        predicted, parsed = preds[job.key]
        judged[job.scored_as].append(Judged(
            gold=job.row.mistake_index,
            predicted=predicted,
            parsed=parsed,
            answer_correct=get_task(job.task).is_correct(job.row.answer, job.row.target),
        ))
    return report({task: items for task, items in judged.items() if items})


# --------------------------------------------------------------------------- the paper

PAPER_TABLES = {
    "accuracy": "table_4_location_accuracy",
    "accuracy_with_mistake": "table_9b_accuracy_with_mistake",
    "accuracy_without_mistake": "table_9a_accuracy_without_mistake",
    "answer_weighted_f1": "table_5_answer_correctness_weighted_f1",
}


@cache
def paper_tables() -> dict[str, Any]:
    """The paper's published figures (prompts/paper_tables.json)."""
    return json.loads((prompts_dir() / "paper_tables.json").read_bytes().decode("utf-8"))


def paper_models() -> tuple[str, ...]:
    return tuple(paper_tables()["table_4_location_accuracy"])


def paper_figures(model: str, method: str) -> dict[str, dict[str, float]]:
    """{task or "overall": {metric: the paper's figure}} for one model and method; empty
    where the paper has none (e.g. CoT trace-level, which it reports in prose only)."""
    if model not in paper_models():
        raise InvalidValue(
            f"the paper has no figures for {model!r}; it has: {', '.join(paper_models())}"
        )
    figures: dict[str, dict[str, float]] = {}
    for metric, table in PAPER_TABLES.items():
        for task, methods in paper_tables()[table].get(model, {}).items():
            if method in methods:
                figures.setdefault(task, {})[metric] = methods[method]
    return figures


def paper_overall_tasks(figures: dict[str, dict[str, float]],
                        tasks: Iterable[str]) -> list[str]:
    """The tasks the paper's overall beside a run over `tasks` is the mean over: its five,
    or the run's where the run has fewer of them (so the overalls compare like with like)."""
    ran = [task for task in tasks if task in figures and task != "overall"]
    paper_tasks = [task for task in figures if task != "overall"]
    return ran if ran and set(ran) != set(paper_tasks) else paper_tasks


def paper_figures_for_tasks(figures: dict[str, dict[str, float]],
                            tasks: Iterable[str]) -> dict[str, dict[str, float]]:
    """The paper's figures beside a run over `tasks`. Its "overall" is the mean over its
    five tasks; beside a run over fewer of them, the overall shown is the mean of the paper's
    own figures for those tasks (`paper_overall_tasks`); the per-task figures all stay."""
    over = paper_overall_tasks(figures, tasks)
    if set(over) == {task for task in figures if task != "overall"}:
        return figures
    overall: dict[str, float] = {}
    for metric in {metric for task in over for metric in figures[task]}:
        values = [figures[task][metric] for task in over if metric in figures[task]]
        if len(values) == len(over):
            overall[metric] = sum(values) / len(values)
    return {**figures, "overall": overall}
