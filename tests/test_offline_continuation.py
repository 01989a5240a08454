"""`solver/thinking` going on from a prefix of its reasoning (issue 35, with no key;
core/llm/offline/continuation.py): greedily it writes what it wrote anyway, from a prefix cut
by any rule; sampled, a step is the original, a hesitation, the slip put right or the other
check, and the answer follows the steps kept. Through the Prefixer, as a server's would."""

from __future__ import annotations

import asyncio
import random

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import TraceRow, bundled_rows
from bbm_tui.core.generation.backtrack import choose
from bbm_tui.core.generation.resample_thinking import (
    ThinkingResample,
    answer_settings,
    go_on_to_answer,
    resample_thinking_step,
)
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.llm.offline import thinking
from bbm_tui.core.llm.offline.continuation import (
    HESITATIONS,
    ContinuationError,
    continue_reasoning,
)
from bbm_tui.core.llm.prefix import Prefixer, PrefixSettings, prefix_refusal
from bbm_tui.core.prompts.thinking import thinking_messages
from bbm_tui.core.tasks import TASK_NAMES, get_task
from bbm_tui.core.types import SplitRule

MODEL = thinking.MODEL


def slipping_row(task: str) -> TraceRow:
    """A recorded trace that goes wrong at a labelled step."""
    return next(row for row in bundled_rows(task)
                if row.labelled and row.mistake_index is not None and row.answer != row.target)


@pytest.mark.parametrize("task", TASK_NAMES)
@pytest.mark.parametrize("rule", list(SplitRule))
def test_greedy_goes_on_as_it_wrote_from_every_prefix(task: str, rule: SplitRule) -> None:
    row = slipping_row(task)
    messages = thinking_messages(task, row.input)
    reply = thinking.respond(MODEL, messages)
    raw = split_text(reply.reasoning, rule)
    for k in range(len(raw) + 1):
        kept = "".join(raw[:k])
        written = continue_reasoning(MODEL, messages, kept, temperature=0.0)
        assert written.text == reply.reasoning[len(kept):] + "</think>\n\n" + reply.content
        assert written.finish_reason == "stop"
        assert "".join(token.text for token in written.tokens) == written.text


def test_samples_at_the_slip_hold_the_original_a_hesitation_and_the_right_step() -> None:
    task = "multistep_arithmetic"
    row = slipping_row(task)
    assert row.mistake_index is not None
    messages = thinking_messages(task, row.input)
    raw = split_text(thinking.respond(MODEL, messages).reasoning, SplitRule.PARAGRAPH)
    slip = 1 + row.mistake_index  # the plan is paragraph 0
    kept = "".join(raw[:slip])
    rng = random.Random(7)
    firsts = set()
    for _ in range(40):
        written = continue_reasoning(MODEL, messages, kept, temperature=1.0, rng=rng)
        firsts.add(split_text(written.text, SplitRule.PARAGRAPH)[0].strip())
    original = raw[slip].strip()
    assert original in firsts
    assert any(first.startswith(HESITATIONS) and first.endswith(original) for first in firsts)
    right = [first for first in firsts if first != original and not first.startswith(HESITATIONS)]
    assert len(right) == 1 and right[0] != original


def test_the_paper_choice_is_the_right_step_and_the_answer_follows_it() -> None:
    """Through the Prefixer, as `b` and `backtrack --mode thinking` call it: 8 samples of the
    slip at temperature 1, the originals dropped, the right step starred (its tokens the
    likeliest), and going on from it greedily reaches the target, where the original trace
    reached another answer."""
    task = "multistep_arithmetic"
    row = next(row for row in bundled_rows(task)
               if row.labelled and row.mistake_index is not None and row.answer != row.target
               and not thinking._catches(task, row.input))  # its check misses the slip
    assert row.mistake_index is not None
    messages = thinking_messages(task, row.input)
    reply = thinking.respond(MODEL, messages)
    assert get_task(task).extract_answer(reply.content) == row.answer
    raw = split_text(reply.reasoning, SplitRule.PARAGRAPH)
    number = 2 + row.mistake_index  # 1-based, after the plan
    prefixer = Prefixer(llm.ModelSpec(MODEL), messages)

    async def sample(seed: int) -> ThinkingResample:
        # A seed a call (one sample each): one seed for all would draw one sample 8 times.
        return await resample_thinking_step(prefixer, raw, number, SplitRule.PARAGRAPH,
                                            PrefixSettings(seed=seed), n=1)

    drawn = [asyncio.run(sample(seed)) for seed in range(12)]
    samples = [one.samples[0] for one in drawn]
    dropped = [one.dropped[0] for one in drawn]
    assert all(sample.logprob is not None for sample in samples)
    assert samples[0].call.model == MODEL and samples[0].call.cost == 0.0
    assert any(dropped) and not all(dropped)
    chosen, chosen_by = choose(samples, dropped)
    assert chosen is not None and chosen_by == "logprob"
    best = samples[chosen]
    assert not best.text.startswith(HESITATIONS) and best.text != raw[number - 1].strip()
    kept = "".join(raw[: number - 1]) + best.raw
    ending = asyncio.run(go_on_to_answer(prefixer, get_task(task), kept,
                                         answer_settings(PrefixSettings(), temperature=0.0)))
    assert ending.answer == row.target
    assert ending.reasoning_rest.rstrip().split("\n\n")[-1].startswith("Wait, let me check")


def test_the_other_check_changes_the_answer() -> None:
    task = "multistep_arithmetic"
    row = next(row for row in bundled_rows(task)
               if row.answer != row.target and thinking._catches(task, row.input))
    messages = thinking_messages(task, row.input)
    reply = thinking.respond(MODEL, messages)
    assert reply.content.endswith(row.target)  # its check catches the slip
    raw = split_text(reply.reasoning, SplitRule.PARAGRAPH)
    kept = "".join(raw[:-1])
    rng = random.Random(1)
    answers = set()
    for _ in range(30):
        written = continue_reasoning(MODEL, messages, kept, temperature=1.0, rng=rng)
        answers.add(written.text.rpartition("So the answer is ")[2])
    assert answers == {row.target, row.answer}


def test_a_question_of_ones_own_goes_on_and_max_tokens_cut_it() -> None:
    messages = thinking_messages("multistep_arithmetic", "((2 + 3) * 4 - 1) =")
    reply = thinking.respond(MODEL, messages)
    written = continue_reasoning(MODEL, messages, "", temperature=0.0)
    assert reply.content == "So the answer is 19"
    assert written.text == reply.reasoning + "</think>\n\n" + reply.content
    cut = continue_reasoning(MODEL, messages, "", temperature=0.0, max_tokens=5)
    assert cut.finish_reason == "length" and len(cut.tokens) == 5
    assert written.text.startswith(cut.text)


def test_what_the_thinking_model_refuses_it_refuses_here() -> None:
    with pytest.raises(ContinuationError, match="thinking prompt"):
        continue_reasoning(MODEL, [{"role": "user", "content": "hello"}], "")
    prefixer = Prefixer(llm.ModelSpec(MODEL), [{"role": "user", "content": "hello"}])
    with pytest.raises(llm.LLMError, match="thinking prompt"):
        asyncio.run(prefixer.go_on("", PrefixSettings()))


def test_only_solver_thinking_of_the_offline_models_goes_on() -> None:
    assert prefix_refusal(llm.ModelSpec(MODEL)) is None
    refusal = prefix_refusal(llm.ModelSpec("replay/bbm"))
    assert refusal is not None and "solver/thinking" in refusal
