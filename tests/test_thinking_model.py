"""`solver/thinking` (issue 32, item 6): an offline thinking model for the paper's five tasks.
Its reasoning reads like a thinking model's (a plan, the working, "Wait," and a check; a slip
now and then that it corrects or misses), and it streams through litellm as an
OpenAI-compatible thinking server does: reasoning_content first, then the answer."""

from __future__ import annotations

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.llm import loader
from bbm_tui.core.llm.offline import thinking
from bbm_tui.core.prompts.thinking import thinking_messages, thinking_prompt
from bbm_tui.core.tasks import TASK_NAMES, arithmetic, get_task, is_correct


def reply_for(task: str, question_input: str) -> thinking.ThinkingReply:
    return thinking.respond(thinking.MODEL, thinking_messages(task, question_input))


@pytest.mark.parametrize("task", TASK_NAMES)
def test_reasoning_has_a_plan_the_working_a_check_and_an_answer(task: str) -> None:
    row = bundled_rows(task)[0]
    reply = reply_for(task, row.input)
    paragraphs = reply.reasoning.strip().split("\n\n")
    assert paragraphs[0] == thinking.PLANS[task]
    assert paragraphs[-1].startswith("Wait, let me check")
    assert len(paragraphs) >= 4
    # The working is the recorded trace's steps, verbatim.
    working = "\n\n".join(paragraphs[1:-1])
    assert all(step in working for step in row.steps if step.strip())
    answer = get_task(task).extract_answer(reply.content)
    assert answer is not None
    assert reply.content == f"So the answer is {answer}"


def test_slips_are_caught_for_some_questions_and_missed_for_others() -> None:
    caught = missed = right = 0
    for row in bundled_rows("multistep_arithmetic"):
        reply = reply_for("multistep_arithmetic", row.input)
        answer = get_task("multistep_arithmetic").extract_answer(reply.content)
        if row.answer == row.target:
            right += 1
            assert answer == row.answer and "Everything holds" in reply.reasoning
        elif is_correct(answer, row.target):
            caught += 1
            assert "that is not right" in reply.reasoning
        else:
            missed += 1
            assert answer == row.answer
    assert right and caught and missed
    # The same question is answered the same every time.
    row = bundled_rows("multistep_arithmetic")[7]
    assert reply_for("multistep_arithmetic", row.input) == reply_for(
        "multistep_arithmetic", row.input
    )


def test_a_question_of_ones_own_is_worked_by_the_solver() -> None:
    question = "((1 + 2) * 3 - (4 - 6 * 2)) ="
    reply = reply_for("multistep_arithmetic", question)
    value = arithmetic.evaluate(arithmetic.parse(arithmetic.question_expression(question)))
    assert reply.content == f"So the answer is {arithmetic.show(value)}"
    assert reply.reasoning.startswith(thinking.PLANS["multistep_arithmetic"])


def test_what_it_does_not_answer_gets_a_sentence() -> None:
    with pytest.raises(thinking.ThinkingModelError, match="neither"):
        reply_for("logical_deduction", "Which of these is first? Options: (A) x (B) y")
    with pytest.raises(thinking.ThinkingModelError, match="--mode thinking"):
        thinking.respond(thinking.MODEL, [{"role": "user", "content": "Thought 1:"}])
    with pytest.raises(thinking.ThinkingModelError, match="no such model"):
        thinking.respond("solver/other", thinking_messages("dyck_languages", "( ("))


async def test_it_streams_reasoning_then_content_through_litellm(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
    row = bundled_rows("tracking_shuffled_objects")[2]
    litellm = loader.litellm_module()
    stream = await litellm.acompletion(
        model=thinking.MODEL,
        messages=[{"role": "user", "content": thinking_prompt(
            "tracking_shuffled_objects", row.input)}],
        stream=True,
        stream_options={"include_usage": True},
    )
    order: list[str] = []
    reasoning = content = ""
    reasoning_tokens = None
    async for chunk in stream:
        if chunk.choices:
            delta = chunk.choices[0].delta
            if getattr(delta, "reasoning_content", None):
                reasoning += delta.reasoning_content
                order.append("reasoning")
            if delta.content:
                content += delta.content
                order.append("content")
        usage = getattr(chunk, "usage", None)
        if usage is not None and usage.completion_tokens_details is not None:
            reasoning_tokens = usage.completion_tokens_details.reasoning_tokens
    expected = reply_for("tracking_shuffled_objects", row.input)
    assert reasoning == expected.reasoning and content == expected.content
    assert order == sorted(order, key=lambda kind: kind != "reasoning")  # reasoning first
    assert reasoning_tokens is not None and reasoning_tokens > 50


async def test_it_streams_at_the_replay_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "1000")
    litellm = loader.litellm_module()
    row = bundled_rows("word_sorting")[1]
    stream = await litellm.acompletion(
        model=thinking.MODEL, messages=thinking_messages("word_sorting", row.input), stream=True
    )
    pieces = [chunk async for chunk in stream]
    assert len(pieces) > 40  # token by token, not all at once
