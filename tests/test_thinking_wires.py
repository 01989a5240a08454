"""A thinking call on each provider's own wire, through litellm's adapter, against the local
server that speaks it (tests/*_server.py): the reasoning and the answer come back as one
stream of events (core/llm/thinking.py), labelled raw, summary or none; refused parameters
are refused before any request; usage counts the reasoning's tokens."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bbm_tui.core import llm
from bbm_tui.core.llm import (
    AnswerDelta,
    CallSettings,
    LLMError,
    ModelSpec,
    ReasoningDelta,
    RetryPolicy,
    ThinkingDone,
    ThinkingSettings,
)
from bbm_tui.core.types import ReasoningKind
from tests.fake_server import Reply, pieces_of
from tests.openai_server import FakeOpenAI

QUESTION = [{"role": "user", "content": "Is 17 prime? End with 'So the answer is ...'."}]
REASONING = ("First, 17 is odd, so 2 does not divide it.\n\n"
             "Wait, check 3: 1 + 7 = 8, not a multiple of 3.\n\n"
             "And 4 squared is 16 < 17 < 25, so only 2 and 3 matter.")
ANSWER = "17 has no divisor but 1 and itself. So the answer is Yes."
# Short limits: a failing test fails in seconds, not minutes.
QUICK = CallSettings(timeout_s=20, idle_timeout_s=10, retry=RetryPolicy(attempts=2,
                                                                      base_delay_s=0.01))


async def think(spec: ModelSpec, settings: ThinkingSettings | None = None,
                call: CallSettings = QUICK) -> list[Any]:
    return [event async for event in llm.stream_thinking(spec, QUESTION, call,
                                                         settings or ThinkingSettings())]


def reasoning_of(events: list[Any]) -> str:
    return "".join(event.text for event in events if isinstance(event, ReasoningDelta))


def answer_of(events: list[Any]) -> str:
    return "".join(event.text for event in events if isinstance(event, AnswerDelta))


def done_of(events: list[Any]) -> ThinkingDone:
    assert isinstance(events[-1], ThinkingDone)
    assert not any(isinstance(event, ThinkingDone) for event in events[:-1])
    return events[-1]


def in_order(events: list[Any]) -> bool:
    """Every piece of reasoning comes before every piece of the answer."""
    kinds = [isinstance(event, AnswerDelta) for event in events
             if isinstance(event, ReasoningDelta | AnswerDelta)]
    return kinds == sorted(kinds)


def openai_spec(server: FakeOpenAI, model: str = "openai/qwen3-8b") -> ModelSpec:
    return ModelSpec(model, api_base=server.base_url)


# -- OpenAI-compatible servers (llama-server, vLLM, DeepSeek's wire)


async def test_reasoning_content_then_the_answer(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    events = await think(openai_spec(openai_server))
    assert reasoning_of(events) == REASONING
    assert answer_of(events) == ANSWER
    assert in_order(events)
    # Streamed: the reasoning came in many pieces, not in one at the end.
    assert sum(isinstance(event, ReasoningDelta) for event in events) > 10
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.RAW
    # The server counts a token a streamed piece: the reasoning's are part of the output.
    reasoning_words = len(pieces_of(REASONING, None))
    assert done.reasoning_tokens == reasoning_words
    assert done.call.completion_tokens == reasoning_words + len(pieces_of(ANSWER, None))
    assert done.call.finish_reason == "stop"
    assert done.opaque == []
    [request] = openai_server.requests
    assert request.body["stream"] is True
    assert "reasoning_effort" not in request.body  # nothing asked: the server's default


async def test_vllm_newer_reasoning_field(openai_server: FakeOpenAI) -> None:
    """vLLM renamed `reasoning_content` to `reasoning` (PR #27752): both are reasoning."""
    for model in ("openai/qwen3-8b", "hosted_vllm/qwen3-8b"):
        openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, reasoning_wire="reasoning"))
        events = await think(openai_spec(openai_server, model))
        assert reasoning_of(events) == REASONING, model
        assert answer_of(events) == ANSWER, model
        assert done_of(events).reasoning_kind == ReasoningKind.RAW


@pytest.mark.parametrize("chunk_chars", [None, 1, 3, 5])
async def test_think_tags_left_in_the_content_are_cut_out(openai_server: FakeOpenAI,
                                                          chunk_chars: int | None) -> None:
    """llama-server with `--reasoning-format none` and older vLLM send `<think>…</think>`
    in the content: the consumer never sees a tag, however the chunks cut it."""
    openai_server.enqueue(Reply(text="\n\n" + ANSWER, reasoning="\n" + REASONING + "\n",
                                reasoning_wire="think_tags", chunk_chars=chunk_chars))
    events = await think(openai_spec(openai_server))
    assert reasoning_of(events) == "\n" + REASONING + "\n"
    assert answer_of(events) == "\n\n" + ANSWER
    assert in_order(events)
    assert not any("think>" in event.text for event in events
                   if isinstance(event, ReasoningDelta | AnswerDelta))
    assert done_of(events).reasoning_kind == ReasoningKind.RAW


async def test_content_without_think_tags_is_all_answer(openai_server: FakeOpenAI) -> None:
    """A thinking model that did not think (or a plain one): no reasoning, kind none."""
    openai_server.enqueue(Reply(text="<thinking is overrated> " + ANSWER, chunk_chars=2))
    events = await think(openai_spec(openai_server))
    assert reasoning_of(events) == ""
    assert answer_of(events) == "<thinking is overrated> " + ANSWER
    assert done_of(events).reasoning_kind == ReasoningKind.NONE


async def test_a_stream_cut_mid_reasoning_fails_after_what_came(
        openai_server: FakeOpenAI) -> None:
    """The connection drops half-way through the reasoning: the pieces that came are
    delivered first, then an LLMError; no retry (the consumer kept those steps)."""
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, drop_after_chunks=8))
    events: list[Any] = []
    with pytest.raises(LLMError) as caught:
        async for event in llm.stream_thinking(openai_spec(openai_server), QUESTION, QUICK,
                                               ThinkingSettings()):
            events.append(event)
    assert reasoning_of(events) == "".join(pieces_of(REASONING, None)[:8])
    assert not any(isinstance(event, AnswerDelta | ThinkingDone) for event in events)
    assert caught.value.retryable
    assert len(openai_server.requests) == 1


async def test_a_stream_that_ends_without_a_finish_reason_is_cut(
        openai_server: FakeOpenAI) -> None:
    """`[DONE]` mid-reasoning with no finish reason (llama-cpp-python interrupted): an error
    after the reasoning delivered, not a finished trace."""
    openai_server.enqueue(Reply(text="", reasoning=REASONING, finish_reason=None))
    events: list[Any] = []
    with pytest.raises(LLMError, match="mid-reasoning"):
        async for event in llm.stream_thinking(openai_spec(openai_server), QUESTION, QUICK,
                                               ThinkingSettings()):
            events.append(event)
    assert reasoning_of(events) == REASONING


async def test_a_failure_before_any_text_is_retried(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(status=503), Reply(text=ANSWER, reasoning=REASONING))
    events = await think(openai_spec(openai_server))
    assert reasoning_of(events) == REASONING
    assert done_of(events).call.attempts == 2
    assert len(openai_server.requests) == 2


async def test_closing_the_generator_closes_the_stream(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING * 20, chunk_delay_s=0.02))
    stream = llm.stream_thinking(openai_spec(openai_server), QUESTION, QUICK,
                                 ThinkingSettings())
    first = await anext(stream)
    assert isinstance(first, ReasoningDelta)
    await stream.aclose()
    for _ in range(200):
        if openai_server.requests[0].client_closed_early:
            break
        await asyncio.sleep(0.05)
    assert openai_server.requests[0].client_closed_early
    assert openai_server.requests[0].chunks_sent < len(pieces_of(REASONING * 20, None))


async def test_effort_is_sent_where_given(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    await think(openai_spec(openai_server), ThinkingSettings(effort="high", max_tokens=900,
                                                            temperature=0.6))
    body = openai_server.requests[0].body
    assert body["reasoning_effort"] == "high"
    assert body["temperature"] == 0.6
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 900


async def test_n_is_refused_before_any_request(openai_server: FakeOpenAI) -> None:
    with pytest.raises(LLMError, match="n=3") as caught:
        await think(openai_spec(openai_server), ThinkingSettings(n=3))
    assert caught.value.kind == "bad_request"
    assert openai_server.requests == []


async def test_a_budget_is_refused_where_the_provider_takes_none(
        openai_server: FakeOpenAI) -> None:
    with pytest.raises(LLMError, match="--thinking-budget"):
        await think(openai_spec(openai_server), ThinkingSettings(budget_tokens=2000))
    assert openai_server.requests == []
