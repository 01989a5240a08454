"""`solver/bbm` as a model (issue 13, item 4), through litellm like any other: the stepper
writes whole traces to the target answer with it, typed questions too; `n` samples come with
token log-probabilities; what it does not do is one clear error; and the paper's demo —
a mistake, its flag, backtracking to the right answer — runs offline."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import StepFinished, TraceFinished, run_steps
from bbm_tui.core.judging.finders import run_method
from bbm_tui.core.prompts.generation import next_step_prompt
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import arithmetic, is_correct
from bbm_tui.core.trace.session import NewTrace, TraceSession

SOLVER = llm.ModelSpec("solver/bbm")
TASKS = ("word_sorting", "tracking_shuffled_objects", "multistep_arithmetic", "dyck_languages")


async def whole_trace(task: str, question: str) -> tuple[list[str], str | None]:
    steps: list[str] = []
    async for event in run_steps(task, question, SOLVER):
        if isinstance(event, StepFinished):
            steps.append(event.text)
        if isinstance(event, TraceFinished):
            return steps, event.answer
    raise AssertionError("no end")


@pytest.mark.parametrize("task", TASKS)
async def test_the_stepper_writes_right_traces_with_it(task: str) -> None:
    for row in bundled_rows(task)[:3]:
        steps, answer = await whole_trace(task, row.input)
        assert answer is not None and is_correct(answer, row.target), (task, steps)


async def test_a_typed_question() -> None:
    question = arithmetic.random_question(random.Random(5))
    steps, answer = await whole_trace("multistep_arithmetic", question)
    value = arithmetic.evaluate(arithmetic.parse(arithmetic.question_expression(question)))
    assert steps and answer == arithmetic.show(value)


async def test_n_samples_with_log_probabilities() -> None:
    row = bundled_rows("tracking_shuffled_objects")[0]
    prompt = next_step_prompt("tracking_shuffled_objects", row.input, [])
    samples = await llm.sample_steps(SOLVER, prompt, 8, llm.CallSettings(temperature=1.0,
                                                                           logprobs=True))
    assert samples.how == "n" and len(samples.candidates) == 8
    for candidate in samples.candidates:
        assert candidate.tokens and "".join(t.text for t in candidate.tokens) == candidate.text
    right = (await llm.sample_steps(SOLVER, prompt, 1, llm.CallSettings())).candidates[0]
    best = max(samples.candidates, key=lambda c: c.logprob or float("-inf"))
    assert best.text == right.text


async def test_what_it_does_not_do_is_one_clear_error() -> None:
    row = bundled_rows("logical_deduction")[0]
    with pytest.raises(llm.LLMError, match="does not write logical deduction"):
        await whole_trace_or_raise("logical_deduction", row.input)
    word = bundled_rows("word_sorting")[0]
    with pytest.raises(llm.LLMError, match="only writes the next step"):
        await run_method("word_sorting", "direct-trace", word.input, word.steps, SOLVER,
                         settings=llm.CallSettings(retry=llm.RetryPolicy(attempts=1)))


async def whole_trace_or_raise(task: str, question: str) -> None:
    async for event in run_steps(task, question, SOLVER):
        error = getattr(event, "error", None)
        if error is not None:
            raise error


async def test_the_papers_demo_offline(tmp_path: Path) -> None:
    """A recorded trace with a mistake and a wrong answer, flagged at its gold location:
    backtracking on solver/bbm (8 samples, the best by log-probability, then temperature 0)
    reaches the right answer on a new branch, the flagged original kept."""
    fixed = tried = 0
    for task in TASKS:
        rows = [row for row in bundled_rows(task)
                if row.mistake_index is not None and not is_correct(row.answer, row.target)]
        for row in rows[:5]:
            with Store.open(tmp_path / f"{task}-{tried}.sqlite3") as store:
                trace = TraceSession.create(store, NewTrace(task, row.input, row.target),
                                            SOLVER)
                trace.load_recorded(list(row.steps))
                trace.flag_mistake(row.mistake_index + 1)
                original = [step.id for step in trace.steps]
                async for _ in trace.backtrack(row.mistake_index + 1):
                    pass
                tried += 1
                fixed += bool(trace.correct)
                assert trace.tree.path(original[-1])[-1].id == original[-1]
    # The solver's sampled mistakes are ranked low, so the paper's choice is nearly always
    # the right step; what follows at temperature 0 is right.
    assert fixed >= 0.8 * tried, (fixed, tried)


def test_backtracking_from_replay_goes_on_with_the_solver() -> None:
    from bbm_tui.core.generation.backtrack import SOLVER_TASKS, backtracking_model
    from bbm_tui.core.tasks.solver import SOLVED

    assert set(SOLVER_TASKS) == set(SOLVED)
    replay = llm.ModelSpec("replay/bbm")
    assert backtracking_model(replay, "word_sorting").model == "solver/bbm"
    assert backtracking_model(replay, "logical_deduction") is replay
    other = llm.ModelSpec("openai/gpt-4o")
    assert backtracking_model(other, "word_sorting") is other
