"""Every judge described once (core/judging/judges.py): the paper's finders and the task
verifier run through the same description, and what `find`, the recorded runs and the app
offer comes from it."""

from __future__ import annotations

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.judging.finders import FindFinished, final_result
from bbm_tui.core.judging.judges import JUDGE_NAMES, JUDGES, check_judge, judges_for
from bbm_tui.core.prompts.finding import MethodError
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.core.trace.recording import record_find

REPLAY = llm.ModelSpec("replay/bbm")


def test_what_each_task_is_offered() -> None:
    assert JUDGE_NAMES == ("direct-trace", "direct-step", "cot-step", "cot-trace",
                           "direct-trace-zero-shot", "direct-step-zero-shot", "critic", "verify")
    for task in TASK_NAMES:
        names = [judge.name for judge in judges_for(task)]
        # The zero-shot forms are for tasks without few-shot finding prompts; the critic
        # is offered for the paper's five too.
        expected = ["direct-trace", "direct-step", "cot-step", "critic", "verify"]
        if task == "word_sorting":
            expected.insert(3, "cot-trace")
        assert names == expected
    with pytest.raises(MethodError, match="word sorting only"):
        check_judge("dyck_languages", "cot-trace")
    with pytest.raises(MethodError, match=r"known methods: direct-trace, .*, verify"):
        check_judge("word_sorting", "cot")
    with pytest.raises(MethodError, match="zero-shot methods are for tasks without few-shot"):
        check_judge("word_sorting", "direct-step-zero-shot")


def test_only_the_verifier_needs_no_model() -> None:
    assert [judge.name for judge in JUDGES.values() if not judge.needs_model] == ["verify"]
    verifier = JUDGES["verify"]
    assert verifier.spec(REPLAY) == llm.ModelSpec("verifier")
    assert JUDGES["direct-step"].spec(REPLAY) is REPLAY
    # Only a judge that stops at the first "No" has anything to judge past it.
    assert [judge.name for judge in JUDGES.values() if judge.stops_early] == [
        "direct-step", "cot-step", "direct-step-zero-shot"]


@pytest.mark.parametrize("name", [judge.name for judge in judges_for("word_sorting")])
async def test_every_judge_runs_and_is_recorded_the_same_way(name: str) -> None:
    row = next(r for r in bundled_rows("word_sorting") if r.mistake_index == 1)
    judge = JUDGES[name]
    result = await final_result(judge.events("word_sorting", row.input, row.steps, REPLAY))
    assert (result.method, result.model) == (name, judge.spec(REPLAY).model)
    assert result.parsed and result.mistake_index == 1  # the oracle and the verifier agree
    with Store.open() as store:
        session = store.create_session(task="word_sorting", input=row.input,
                                       model="replay/bbm")
        events = [event async for event in record_find(store, session.id, "word_sorting",
                                                       name, row.input, row.steps, REPLAY)]
        assert isinstance(events[-1], FindFinished)
        [run] = store.finder_runs(session.id)
        assert (run.method, run.model, run.mistake_number) == (
            name, judge.spec(REPLAY).model, 2)
        verdicts = [v.step_number for v in run.verdicts]
        assert verdicts == ([None] if not judge.step_level
                            else list(range(1, len(verdicts) + 1)))
        assert (store.totals(session.id).calls == 0) == (not judge.needs_model)


async def test_a_trace_with_no_thoughts_is_refused_by_every_judge() -> None:
    for judge in judges_for("word_sorting"):
        with pytest.raises(ValueError, match="no thoughts"):
            await final_result(judge.events("word_sorting", "b a", [], REPLAY))


@pytest.mark.parametrize("long_trace", [False, True], ids=["inline", "in-a-thread"])
async def test_the_verifier_gives_the_same_events_on_the_loop_and_in_a_thread(
        long_trace: bool) -> None:
    from bbm_tui.core.judging.finders import StepJudged
    from bbm_tui.core.judging.verifier import INLINE_STEPS, verdict_line, verify

    row = next(r for r in bundled_rows("dyck_languages")
               if (len(r.steps) > INLINE_STEPS) == long_trace and r.mistake_index is not None)
    events = [event async for event in JUDGES["verify"].events(
        "dyck_languages", row.input, row.steps, REPLAY)]
    result, verdicts = verify("dyck_languages", row.input, row.steps)
    judged = [event for event in events if isinstance(event, StepJudged)]
    assert [(event.number, event.raw) for event in judged] == [
        (verdict.index + 1, verdict_line(verdict)) for verdict in verdicts]
    assert events[-1] == FindFinished(result)
