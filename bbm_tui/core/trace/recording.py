"""A judge's run on a session's trace, committed to the store as it happens: the run first,
then each verdict before its event is handed on, so whoever shows a verdict can rely on it
being saved (as TraceSession.generate does for steps)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from bbm_tui.core import llm
from bbm_tui.core.judging.finders import (
    FindEvent,
    OnRetry,
    StepJudged,
    TraceJudged,
    finder_settings,
)
from bbm_tui.core.judging.judges import check_judge
from bbm_tui.core.records import FinderEnd
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import Task

# An offline model refusing a trace it does not know (in process: nothing ran): the run it
# refused is not kept when nothing answered.
REFUSALS = frozenset({"replay"})


async def record_find(
    store: Store,
    session_id: int,
    task: Task | str,
    method: str,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    *,
    leaf_step_id: int | None = None,
    settings: llm.CallSettings | None = None,
    judge_all: bool = False,
    on_retry: OnRetry | None = None,
) -> AsyncIterator[FindEvent]:
    """The judge `method`'s run (core/judging/judges.py), committing the run to `store`
    first and each verdict before its event is handed on, so whoever shows a verdict can rely
    on it being saved. Store calls run in a thread, never on the event loop. A run that fails
    or is cancelled keeps the verdicts it got and has no result. `on_retry` is told of each
    retry of a model call as it is made."""
    settings = settings or finder_settings()
    judge = check_judge(task, method)
    spec = judge.spec(spec)
    if judge.needs_model:
        # Refused before any call (an offline model on a task it does not know, no key, no
        # such router group): nothing runs, so no run is stored (issue 34, item 9).
        refused = llm.offline_refusal(spec, task) or llm.key_check(spec)
        if refused is not None:
            raise refused
    run_id = await asyncio.to_thread(
        store.create_finder_run, session_id, method=method, model=spec.model,
        params=settings.params() | {"mode": spec.mode, "judge_all": judge_all},
        leaf_step_id=leaf_step_id,
    )
    try:
        async for event in judge.events(task, input_text, steps, spec, settings=settings,
                                        judge_all=judge_all, on_retry=on_retry):
            if isinstance(event, StepJudged):
                await asyncio.to_thread(store.add_finder_verdict, run_id,
                                        step_number=event.number, raw=event.raw,
                                        verdict=event.verdict, call=event.call)
            elif isinstance(event, TraceJudged):
                await asyncio.to_thread(store.add_finder_verdict, run_id, step_number=None,
                                        raw=event.raw, verdict=event.verdict, call=event.call)
            else:
                await asyncio.to_thread(store.finish_finder_run, run_id,
                                        mistake_number=event.result.mistake_number,
                                        parsed=event.result.parsed)
            yield event
    except llm.LLMError as error:
        # An offline model that refused before any answer: nothing ran, so no failed run is
        # left in the session's history (issue 34, item 9). A server that failed keeps its
        # run, with the reason.
        refused = error.kind in REFUSALS and await asyncio.to_thread(
            store.drop_unanswered_finder_run, run_id)
        if not refused:
            await asyncio.to_thread(store.end_finder_run, run_id, ended=FinderEnd.FAILED,
                                    error=error.message)
        raise
    except (asyncio.CancelledError, GeneratorExit):
        # No awaiting here: the task is being cancelled (or the caller let go of this
        # generator). One short write, in this thread, says the person stopped it.
        store.end_finder_run(run_id, ended=FinderEnd.STOPPED)
        raise
