"""Running a method on one trace: the offline finders (replay/bbm's gold-label oracle and the
simulated reward model), the live events, and recording runs in the store."""

from __future__ import annotations

from collections import Counter

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import all_bundled, bundled_rows
from bbm_tui.core.judging.finders import (
    FindFinished,
    StepJudged,
    TraceJudged,
    find_mistake,
    run_method,
)
from bbm_tui.core.judging.parsing import parse_step_answer, parse_trace_answer
from bbm_tui.core.llm.offline.replay import ReplayError, engine, location_counts, simulated_location
from bbm_tui.core.prompts.finding import MethodError, build_messages, methods_for
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.core.trace.recording import record_find

REPLAY = llm.ModelSpec("replay/bbm")


def located(answer, n_steps: int) -> int | None:
    parsed = parse_trace_answer(answer, n_steps)
    assert parsed.parsed, answer
    return None if parsed.mistake_number is None else parsed.mistake_number - 1


def test_the_oracle_answers_every_finder_prompt_of_every_row_from_the_gold_label() -> None:
    """The engine alone (no litellm): all 2,186 traces, every method, every thought."""
    oracle = engine()
    prompts = 0
    for task, rows in all_bundled():
        for method in methods_for(task):
            for row in rows:
                if method.endswith("-trace"):
                    answer = oracle.respond("replay/bbm", build_messages(
                        task, method, row.input, row.steps), {})
                    assert located(answer, len(row.steps)) == row.mistake_index
                    prompts += 1
                    continue
                for k in range(1, len(row.steps) + 1):
                    answer = oracle.respond("replay/bbm", build_messages(
                        task, method, row.input, row.steps, k), {})
                    gold = row.mistake_index
                    expected = gold is None or k - 1 < gold
                    assert parse_step_answer(answer, cot=method == "cot-step") is expected
                    prompts += 1
    assert prompts == 2186 + 300 + 2 * 33306  # direct-trace, cot-trace, two step-level


def test_the_oracle_answers_in_the_papers_format() -> None:
    row = bundled_rows("word_sorting")[0]
    assert row.mistake_index == 1
    ask = engine().respond

    def answer(method: str, k: int | None = None) -> str:
        return ask("replay/bbm", build_messages("word_sorting", method, row.input, row.steps,
                                                 k), {})

    assert answer("direct-trace") == "2"
    assert answer("direct-step", 1) == "Yes"
    assert answer("direct-step", 2) == "No"
    assert answer("cot-step", 1).endswith("correct. Yes")
    assert answer("cot-step", 2).endswith("incorrect. No")
    assert answer("cot-trace").endswith("So the answer is 2")
    clean = next(r for r in bundled_rows("word_sorting") if r.mistake_index is None)
    assert ask("replay/bbm", build_messages("word_sorting", "direct-trace", clean.input,
                                            clean.steps), {}) == "No"


def test_the_oracle_refuses_traces_it_does_not_know() -> None:
    row = bundled_rows("word_sorting")[0]
    edited = [*row.steps[:-1], "I made this up."]
    messages = build_messages("word_sorting", "direct-trace", row.input, edited)
    with pytest.raises(ReplayError, match="does not know this trace"):
        engine().respond("replay/bbm", messages, {})
    with pytest.raises(ReplayError, match="generation and mistake-finding prompts"):
        engine().respond("replay/bbm", [{"role": "user", "content": "hello"}], {})


def test_simulated_reward_model_is_reproducible_and_drawn_from_the_locations() -> None:
    for task, rows in all_bundled():
        counts = location_counts(task)
        for row in rows[:60]:
            first = simulated_location(0.5, task, row)
            assert simulated_location(0.5, task, row) == first
            assert first is None or 0 <= first < len(row.steps)
            assert simulated_location(1.0, task, row) == row.mistake_index
            wrong = simulated_location(0.0, task, row)
            assert wrong != row.mistake_index
            assert wrong is None or 0 <= wrong < len(row.steps)
            assert wrong in counts or wrong is None or len(row.steps) <= max(
                k for k in counts if k is not None)


def test_simulated_accuracy_over_all_traces_is_near_x() -> None:
    hits = Counter()
    for task, rows in all_bundled():
        for row in rows:
            hits[simulated_location(0.65, task, row) == row.mistake_index] += 1
    accuracy = 100 * hits[True] / 2186
    assert 62 <= accuracy <= 68


def test_simulated_wrong_answers_follow_the_task_distribution() -> None:
    """rm-0.0 on Dyck: the wrong locations are most often "no mistake", the commonest one."""
    rows = bundled_rows("dyck_languages")
    wrong = Counter(simulated_location(0.0, "dyck_languages", row) for row in rows)
    most = wrong.most_common(1)[0][0]
    assert most is None


@pytest.mark.parametrize("name", ["rm-2", "rm-", "rm-x", "oracle", "rm--0.5"])
def test_simulated_names(name: str) -> None:
    row = bundled_rows("word_sorting")[0]
    messages = build_messages("word_sorting", "direct-trace", row.input, row.steps)
    with pytest.raises(ReplayError, match=f"simulated/{name}: no such model"):
        engine().respond(f"simulated/{name}", messages, {})


def test_simulated_refuses_generation_prompts() -> None:
    with pytest.raises(ReplayError, match="only the mistake-finding prompts"):
        engine().respond("simulated/rm-0.5", [{"role": "user", "content": "Q: hi"}], {})


# --------------------------------------------------------------------------- through litellm


@pytest.mark.parametrize("task", TASK_NAMES)
async def test_every_method_through_litellm_on_a_few_rows(task: str) -> None:
    rows = bundled_rows(task)
    sample = [*rows[:3], next(r for r in rows if r.mistake_index is None)]
    for method in methods_for(task):
        for row in sample:
            result = await run_method(task, method, row.input, row.steps, REPLAY)
            assert result.parsed
            assert result.mistake_index == row.mistake_index
            assert result.cost == 0.0
            assert result.model == "replay/bbm"
            assert result.method == method


async def test_step_level_events_stop_at_the_first_no_unless_asked() -> None:
    row = next(r for r in bundled_rows("word_sorting") if r.mistake_index == 3)
    events = [e async for e in find_mistake("word_sorting", "direct-step", row.input, row.steps,
                                            REPLAY)]
    assert [type(e) for e in events] == [StepJudged] * 4 + [FindFinished]
    assert [e.verdict for e in events[:4]] == ["Yes", "Yes", "Yes", "No"]
    assert [e.number for e in events[:4]] == [1, 2, 3, 4]
    result = events[-1].result
    assert result.mistake_index == 3 and result.mistake_number == 4
    assert result.raw == ["Yes", "Yes", "Yes", "No"]
    everything = [e async for e in find_mistake("word_sorting", "cot-step", row.input,
                                                row.steps, REPLAY, judge_all=True)]
    judged = [e for e in everything if isinstance(e, StepJudged)]
    assert len(judged) == len(row.steps)
    assert everything[-1].result.mistake_index == 3
    assert len(everything[-1].result.raw) == len(row.steps)


async def test_trace_level_events() -> None:
    row = bundled_rows("dyck_languages")[0]
    events = [e async for e in find_mistake("dyck_languages", "direct-trace", row.input,
                                            row.steps, REPLAY)]
    assert isinstance(events[0], TraceJudged)
    assert isinstance(events[1], FindFinished)
    assert events[1].result.raw == [events[0].raw]


async def test_method_errors_come_before_any_call() -> None:
    row = bundled_rows("dyck_languages")[0]
    with pytest.raises(MethodError):
        await run_method("dyck_languages", "cot-trace", row.input, row.steps, REPLAY)
    with pytest.raises(ValueError, match="no thoughts"):
        await run_method("dyck_languages", "direct-trace", row.input, [], REPLAY)


async def test_unknown_trace_is_a_clear_error() -> None:
    with pytest.raises(llm.LLMError) as caught:
        await run_method("word_sorting", "direct-trace", "zebra apple", ["made up"], REPLAY)
    assert caught.value.kind == "replay"
    assert caught.value.message.startswith("replay/bbm does not know this trace")


async def test_simulated_through_litellm() -> None:
    row = bundled_rows("word_sorting")[5]
    spec = llm.ModelSpec("simulated/rm-0.65")
    first = await run_method("word_sorting", "direct-trace", row.input, row.steps, spec)
    again = await run_method("word_sorting", "direct-step", row.input, row.steps, spec)
    assert first.parsed and again.parsed
    # The same simulated belief, whatever the method.
    assert first.mistake_index == again.mistake_index
    assert first.mistake_index == simulated_location(0.65, "word_sorting", row)
    assert first.cost == 0.0


async def test_record_find_commits_the_run_and_each_verdict() -> None:
    store = Store.open()
    row = next(r for r in bundled_rows("tracking_shuffled_objects") if r.mistake_index == 2)
    session = store.create_session(task="tracking_shuffled_objects", input=row.input,
                                   model="replay/bbm")
    seen = []
    async for event in record_find(store, session.id, "tracking_shuffled_objects", "cot-step",
                                   row.input, row.steps, REPLAY):
        if isinstance(event, StepJudged):
            # Saved before it was handed on.
            run = store.finder_runs(session.id)[-1]
            assert run.verdicts[-1].raw == event.raw
            seen.append(event)
    runs = store.finder_runs(session.id)
    assert len(runs) == 1
    run = runs[0]
    assert (run.method, run.model, run.mistake_number, run.parsed) == (
        "cot-step", "replay/bbm", 3, True)
    assert run.finished and run.params["temperature"] == 0.0
    assert [v.step_number for v in run.verdicts] == [1, 2, 3]
    assert [v.verdict for v in run.verdicts] == ["Yes", "Yes", "No"]
    assert [v.raw for v in run.verdicts] == [e.raw for e in seen]
    assert all(v.call is not None and v.call.model == "replay/bbm" for v in run.verdicts)
    assert store.totals(session.id).calls == 3
    store.delete_session(session.id)
    assert store.finder_runs(session.id) == []
    store.close()


async def test_record_find_trace_level_and_reopen() -> None:
    store = Store.open()
    row = bundled_rows("multistep_arithmetic")[0]
    session = store.create_session(task="multistep_arithmetic", input=row.input,
                                   model="replay/bbm")
    async for _ in record_find(store, session.id, "multistep_arithmetic", "direct-trace",
                               row.input, row.steps, REPLAY):
        pass
    path = store.path
    store.close()
    with Store.open(path) as reopened:
        run = reopened.finder_runs(session.id)[0]
        assert [v.step_number for v in run.verdicts] == [None]
        expected = None if row.mistake_index is None else row.mistake_index + 1
        assert run.mistake_number == expected
        assert run.verdicts[0].verdict == ("No" if expected is None else str(expected))
