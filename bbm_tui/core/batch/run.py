"""`bbm-tui run`: generate traces headless, many at once, into a dataset-format JSONL file.

Each trace is a session in the store (source "run"), so every finished step is committed as
it happens: a killed run resumes mid-trace, with nothing generated twice. A trace's row is
appended to OUT, in one write, when the trace and every one before it are over, so OUT keeps
the inputs' order; rows already in OUT are skipped.

An input row needs only `input` (and `target` if known). OUT rows are unlabelled (no
`mistake_index` key: nobody has looked at them yet) and say where they came from:
`dataset_index` when the question is one of the bundled dataset's (its session then shows the
gold label), `source_index` (0-based row of its input file) otherwise, and their `task` (so
OUT reads back whatever its name, and one run may hold several tasks), with the `model` that
wrote them and what their calls took and cost (`latency_s`, `usage`).

Several models (`run --model A --model B`): every question runs on each, a row per model, in
the inputs' order and the models' for each question; a row is known by its task, question and
model, so a resumed run skips each model's finished traces and does the others.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.batch import runner
from bbm_tui.core.batch.runner import Batch, BatchStop, ProgressDelta, StepsProgress
from bbm_tui.core.batch.shard import Shard
from bbm_tui.core.batch.workers import Workers, WorkerSetup, worker_processes
from bbm_tui.core.dataset import DatasetError, TraceRow, row_from_json
from bbm_tui.core.generation.stepper import StepFailed, StepFinished, StepperSettings, TraceFinished
from bbm_tui.core.store import SessionBusy, SessionDeleted, Store, StoreError, calls_latency
from bbm_tui.core.trace.session import NewTrace, TraceSession, digest_of, on_the_loop
from bbm_tui.core.trace.side_by_side import BranchFigures
from bbm_tui.core.types import SessionSource


@dataclass(frozen=True)
class RunJob:
    task: str
    row: TraceRow  # the question: input, target ("" when unknown), where it came from
    dataset_index: int | None = None  # the bundled dataset's row of this question
    spec: llm.ModelSpec | None = None  # the model that answers it (None: the batch's)


def for_models(jobs: Sequence[RunJob], specs: Sequence[llm.ModelSpec]) -> list[RunJob]:
    """Each question once for each model, the models' order within each question's."""
    return [replace(job, spec=spec) for job in jobs for spec in specs]


@dataclass
class RunProgress(StepsProgress):
    """A run's progress: the shared counts and the steps written."""


class FatalRunError(BatchStop):
    """An error that stops the whole run (a missing key, a model that does not exist)."""


RUN_ROWS = "rows written by `bbm-tui run`"


def run_row(value: object, path: Path, line: int) -> TraceRow:
    """A line of OUT: a dataset row plus the `model` that `run` writes beside it."""
    row = row_from_json(value, path, line)
    if "model" not in row.extra:
        raise DatasetError(path, "a dataset row without the `model` key run writes", line)
    return row


def job_key(job: RunJob) -> tuple[str, str, str]:
    """What tells a row of OUT apart: the task, the question and the model."""
    return job.task, job.row.input, job.spec.model if job.spec is not None else ""


async def run_batch(
    jobs: Sequence[RunJob],
    spec: llm.ModelSpec,
    store: Store,
    out_path: Path,
    *,
    concurrency: int = 4,
    settings: StepperSettings | None = None,
    on_progress: Callable[[RunProgress], None] | None = None,
    inputs: Sequence[Path] = (),
    notes: Sequence[str] = (),
    processes: int = 1,
    workers: Workers | None = None,
    shard: Shard | None = None,
) -> RunProgress:
    """Generate every question OUT does not hold yet (one row per finished trace), in this
    process or shared out to `processes` child processes (core/batch/workers.py; `workers`:
    children the caller started, with the same store, model and settings)."""
    setup = WorkerSetup(store.path, spec, settings or StepperSettings(), run_in_child)
    jobs = [job if job.spec is not None else replace(job, spec=spec) for job in jobs]
    tasks = {job.task for job in jobs}
    only_task = next(iter(tasks)) if len(tasks) == 1 else ""

    def key_of_row(row: TraceRow) -> tuple[str, str, str]:
        return row.task or only_task, row.input, str(row.extra["model"])

    async with worker_processes(processes, setup, workers) as children:

        async def work(job: RunJob, progress: RunProgress,
                       notify: Callable[[RunProgress], None]) -> str | None:
            if children is not None:
                return await children.work(job, progress, notify)
            row = await _run_one(job, job.spec or spec, store, settings, progress, notify)
            return row.to_line() if row is not None else None

        batch = Batch(jobs=jobs, key=job_key, key_of_row=key_of_row, validate=run_row,
                      what=RUN_ROWS, work=work, progress=RunProgress(notes=list(notes)),
                      ordered=True, shard=shard)
        progress, _ = await runner.run_batch(batch, out_path, concurrency=concurrency,
                                             store_path=store.path, inputs=inputs,
                                             on_progress=on_progress)
    return progress


async def run_in_child(job: RunJob, store: Store,
                       setup: WorkerSetup) -> tuple[str | None, ProgressDelta]:
    """One question run in a worker process (core/batch/workers.py): its OUT line (None: it
    failed, the delta says why) and what it added to the progress."""
    progress = RunProgress()
    row = await _run_one(job, job.spec or setup.spec, store, setup.settings, progress,
                         lambda _progress: None)
    return (row.to_line() if row is not None else None), ProgressDelta.of(progress)


async def _run_one(
    job: RunJob,
    spec: llm.ModelSpec,
    store: Store,
    settings: StepperSettings | None,
    progress: RunProgress,
    notify: Callable[[RunProgress], None],
) -> TraceRow | None:
    try:
        trace = _open_session(store, job, spec)
        return await _generate_row(job, trace, spec, store, settings, progress, notify)
    except (SessionDeleted, SessionBusy) as error:
        # Another process deleted this trace's session, or is generating it (the app, on
        # the same session): this trace fails, the next run does it; the batch goes on.
        progress.fail(job.task, str(error))
        notify(progress)
        return None
    except StoreError as error:  # the disk is full, the store read-only: nothing will work
        raise FatalRunError(str(error)) from None


async def _generate_row(
    job: RunJob,
    trace: TraceSession,
    spec: llm.ModelSpec,
    store: Store,
    settings: StepperSettings | None,
    progress: RunProgress,
    notify: Callable[[RunProgress], None],
) -> TraceRow | None:
    started = time.perf_counter()
    async for event in trace.generate(settings=settings):
        if isinstance(event, StepFailed):
            if event.error.kind in llm.STOPS_A_BATCH:
                raise FatalRunError(event.error.message)
            progress.fail(job.task, event.error.message)
            notify(progress)
            return None
        if isinstance(event, TraceFinished):
            break
        if isinstance(event, StepFinished):
            progress.steps += 1
            progress.impossible_logprobs += event.call.impossible_logprobs
            progress.add_call(event.call, (settings or StepperSettings()).call)
            notify(progress)
    elapsed = time.perf_counter() - started
    latency = _total_latency(store, trace, elapsed)
    return TraceRow(
        input=job.row.input,
        steps=trace.texts,
        answer=trace.answer,
        target=job.row.target,
        mistake_index=None,
        extra={**job.row.extra, **_row_extra(spec, trace, latency, settings)},
        key_order=job.row.key_order,
        labelled=False,
    )


def _open_session(store: Store, job: RunJob, spec: llm.ModelSpec) -> TraceSession:
    # A session made with another version of a task of one's own is not this run's: the
    # trace is made again with the task as it is now.
    found = store.find_session(task=job.task, input=job.row.input, model=spec.model,
                               source=SessionSource.RUN, task_digest=digest_of(job.task))
    if found is not None:
        # The command line's settings win over the stored ones (a corrected --api-base or
        # --mode), and the session records them.
        return TraceSession(store, found, spec, store_work=on_the_loop)
    gold = None
    if job.dataset_index is not None:
        from bbm_tui.core.dataset import bundled_rows

        gold = bundled_rows(job.task)[job.dataset_index].mistake_index
    return TraceSession.create(
        store,
        NewTrace(job.task, job.row.input, job.row.target or None,
                 dataset_index=job.dataset_index, gold_mistake_index=gold),
        spec,
        source=SessionSource.RUN,
        store_work=on_the_loop,
    )


def _row_extra(
    spec: llm.ModelSpec, trace: TraceSession, latency: float, settings: StepperSettings | None
) -> dict[str, Any]:
    """What `run` writes beside the dataset's keys: the model, the seconds its calls took,
    their tokens and cost (`usage`: `cost` sums the calls whose price is known, null when none
    is; `unpriced_calls` are not); each step's log-probability when asked."""
    figures = BranchFigures.of(trace.steps)
    extra: dict[str, Any] = {
        "model": spec.model, "latency_s": round(latency, 4),
        "usage": {"calls": figures.calls, "prompt_tokens": figures.prompt_tokens,
                  "cached_tokens": figures.cached_tokens,
                  "completion_tokens": figures.completion_tokens,
                  "cost": figures.known_cost, "unpriced_calls": figures.unpriced_calls}}
    if settings is not None and llm.asks_logprobs(spec, settings.call):
        extra["step_logprobs"] = [step.logprob for step in trace.steps]
    reasoning = trace.reasoning()
    if spec.mode == "thinking" and reasoning is not None:
        # A thinking trace (docs/DESIGN.md §16): the reasoning the steps were cut from, whole
        # and raw, what kind it is (a summary is said so), and the rule that cut it.
        extra |= {"mode": "thinking", "split": str(trace.split_rule()),
                  "is_correct": trace.correct, "reasoning": reasoning.text,
                  "reasoning_kind": reasoning.kind, "answer_text": reasoning.answer_text}
    return extra


def _total_latency(store: Store, trace: TraceSession, fallback: float) -> float:
    """The trace's calls' time, each call once (one call for many steps too)."""
    if not any(step.latency_s is not None for step in trace.steps):
        return fallback
    return calls_latency(trace.steps)


@dataclass
class RunInputs:
    jobs: list[RunJob]
    # Input files whose rows held steps, answer or mistake_index (run ignores them), with
    # how many rows did.
    ignored: dict[Path, int]

    def notes(self) -> list[str]:
        return [
            f"{path}: {count} {'row holds' if count == 1 else 'rows hold'} steps, answer or "
            "mistake_index; run uses only their input and target, and writes its own"
            for path, count in self.ignored.items()
        ]


def jobs_from_files(
    paths: Sequence[Path], task: str | None, limit: int | None = None
) -> RunInputs:
    """The questions of JSONL files, in order: each row's own `task`, else --task, else the
    file's name. A question of the bundled dataset is recognised by its text."""
    from bbm_tui.core.dataset import read_questions, rows_with_tasks

    jobs: list[RunJob] = []
    ignored: dict[Path, int] = {}
    for path in paths:
        questions = read_questions(path)
        if questions.ignored:
            ignored[path] = questions.ignored
        for index, (row_task, row) in enumerate(rows_with_tasks(path, task, questions.rows)):
            dataset_index = _dataset_index(row_task, row.input)
            where = ({"dataset_index": dataset_index} if dataset_index is not None
                     else {"source_index": index})
            question = replace(row, extra={**row.extra, **where})
            jobs.append(RunJob(row_task, question, dataset_index))
    return RunInputs(_with_task_keys(jobs[:limit]), ignored)


def jobs_from_bundled(task: str, limit: int | None) -> list[RunJob]:
    from bbm_tui.core.dataset import bundled_rows

    rows = bundled_rows(task)
    if limit is not None:
        rows = rows[:limit]
    order = tuple(key for key in rows[0].key_order if key != "mistake_index") if rows else ()
    return _with_task_keys([
        RunJob(task, TraceRow(row.input, [], None, row.target, None, {"dataset_index": index},
                              order, labelled=False), index)
        for index, row in enumerate(rows)
    ])


def _dataset_index(task: str, question: str) -> int | None:
    """The paper's dataset row of this question (None: not one of them; a task of one's own
    has no bundled dataset)."""
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.tasks import get_task

    if not get_task(task).is_paper:
        return None
    return _bundled_questions(task, len(bundled_rows(task))).get(question)


@cache
def _bundled_questions(task: str, _count: int) -> dict[str, int]:
    from bbm_tui.core.dataset import bundled_rows

    found: dict[str, int] = {}
    for index, row in enumerate(bundled_rows(task)):
        found.setdefault(row.input, index)
    return found


def _with_task_keys(jobs: list[RunJob]) -> list[RunJob]:
    """Each OUT row says its task, so OUT reads back whatever its name (and one run may
    hold several tasks)."""
    return [replace(job, row=replace(job.row, extra={"task": job.task, **job.row.extra}))
            for job in jobs]
