"""`bbm-tui run`: generate traces headless, many at once, into a dataset-format JSONL file.

Each trace is a session in the store (source "run"), so every finished step is committed as
it happens: a killed run resumes mid-trace, with nothing generated twice. A trace's row is
appended to OUT, in one write, when the trace is over; rows already in OUT are skipped.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.batch import runner
from bbm_tui.core.batch.runner import Batch, BatchStop, Progress
from bbm_tui.core.dataset import DatasetError, TraceRow, row_from_json
from bbm_tui.core.generation.stepper import StepFailed, StepFinished, StepperSettings, TraceFinished
from bbm_tui.core.store import SessionDeleted, Store, StoreError
from bbm_tui.core.trace.session import NewTrace, TraceSession


@dataclass(frozen=True)
class RunJob:
    task: str
    row: TraceRow


@dataclass
class RunProgress(Progress):
    steps: int = 0


class FatalRunError(BatchStop):
    """An error that stops the whole run (a missing key, a model that does not exist)."""


RUN_ROWS = "rows written by `bbm-tui run`"


def run_row(value: object, path: Path, line: int) -> TraceRow:
    """A line of OUT: a dataset row plus the `model` that `run` writes beside it."""
    row = row_from_json(value, path, line)
    if "model" not in row.extra:
        raise DatasetError(path, "a dataset row without the `model` key run writes", line)
    return row


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
) -> RunProgress:
    """Generate every question OUT does not hold yet (one row per finished trace)."""

    async def work(job: RunJob, progress: RunProgress,
                   notify: Callable[[RunProgress], None]) -> str | None:
        row = await _run_one(job, spec, store, settings, progress, notify)
        return row.to_line() if row is not None else None

    batch = Batch(jobs=jobs, key=_question, key_of_row=lambda row: row.input,
                  validate=run_row, what=RUN_ROWS, work=work, progress=RunProgress())
    progress, _ = await runner.run_batch(batch, out_path, concurrency=concurrency,
                                         store_path=store.path, inputs=inputs,
                                         on_progress=on_progress)
    return progress


def _question(job: RunJob) -> str:
    return job.row.input


async def _run_one(
    job: RunJob,
    spec: llm.ModelSpec,
    store: Store,
    settings: StepperSettings | None,
    progress: RunProgress,
    notify: Callable[[RunProgress], None],
) -> TraceRow | None:
    try:
        trace = await asyncio.to_thread(_open_session, store, job, spec)
        return await _generate_row(job, trace, spec, store, settings, progress, notify)
    except SessionDeleted as error:
        # Another process deleted this trace's session: this trace fails, the batch goes on.
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
            progress.calls += 1
            progress.add_cost(event.call.cost)
            notify(progress)
    elapsed = time.perf_counter() - started
    latency = await asyncio.to_thread(_total_latency, store, trace, elapsed)
    return TraceRow(
        input=job.row.input,
        steps=trace.texts,
        answer=trace.answer,
        target=job.row.target,
        mistake_index=None,
        extra=_row_extra(spec, trace, latency, settings),
        key_order=job.row.key_order,
    )


def _open_session(store: Store, job: RunJob, spec: llm.ModelSpec) -> TraceSession:
    found = store.find_session(task=job.task, input=job.row.input, model=spec.model, source="run")
    if found is not None:
        # The command line's settings win over the stored ones (a corrected --api-base or
        # --mode), and the session records them.
        return TraceSession(store, found, spec)
    return TraceSession.create(
        store,
        NewTrace(job.task, job.row.input, job.row.target),
        spec,
        source="run",
    )


def _row_extra(
    spec: llm.ModelSpec, trace: TraceSession, latency: float, settings: StepperSettings | None
) -> dict[str, Any]:
    """What `run` writes beside the dataset's keys; each step's log-probability when asked."""
    extra: dict[str, Any] = {"model": spec.model, "latency_s": round(latency, 4)}
    if settings is not None and llm.asks_logprobs(spec, settings.call):
        extra["step_logprobs"] = [step.logprob for step in trace.steps]
    return extra


def _total_latency(store: Store, trace: TraceSession, fallback: float) -> float:
    latencies = [step.latency_s for step in trace.steps if step.latency_s is not None]
    return sum(latencies) if latencies else fallback


def jobs_from_files(
    paths: Sequence[Path], task: str | None, limit: int | None = None
) -> list[RunJob]:
    """The questions of dataset-format files; one task per run (OUT holds one task)."""
    from bbm_tui.core.dataset import read_input_rows, resolve_task

    jobs: list[RunJob] = []
    tasks: set[str] = set()
    for path in paths:
        file_task = resolve_task(path, task)
        tasks.add(file_task)
        jobs.extend(RunJob(file_task, row) for row in read_input_rows(path))
    if len(tasks) > 1:
        raise DatasetError(
            paths[0],
            f"these files hold different tasks ({', '.join(sorted(tasks))}); a run writes one "
            "task per OUT file, so run each task on its own",
        )
    return jobs[:limit]


def jobs_from_bundled(task: str, limit: int | None) -> list[RunJob]:
    from bbm_tui.core.dataset import bundled_rows

    rows = bundled_rows(task)
    if limit is not None:
        rows = rows[:limit]
    return [RunJob(task, row) for row in rows]

