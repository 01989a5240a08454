"""A thinking call on each provider's own wire, through litellm's adapter, against the local
server that speaks it (tests/*_server.py): the reasoning and the answer come back as one
stream of events (core/llm/thinking.py), labelled raw, summary or none; refused parameters
are refused before any request; usage counts the reasoning's tokens."""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bbm_tui.core import llm
from bbm_tui.core.llm import (
    AnswerDelta,
    CallSettings,
    LLMError,
    ModelSpec,
    ReasoningDelta,
    RedactedReasoning,
    RetryPolicy,
    ThinkingDone,
    ThinkingSettings,
)
from bbm_tui.core.llm.records import UsageCounts
from bbm_tui.core.llm.usage import cost_of
from bbm_tui.core.records import ReasoningKind
from tests.anthropic_server import FakeAnthropic
from tests.fake_server import Reply, pieces_of
from tests.gemini_server import FakeGemini
from tests.ollama_server import FakeOllama
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


@pytest.mark.parametrize("chunk_chars", [None, 1, 4])
async def test_a_reasoning_opened_in_the_prompt_is_cut_at_its_closing_tag(
        openai_server: FakeOpenAI, chunk_chars: int | None) -> None:
    """DeepSeek-R1's template opens `<think>` in the prompt: the content holds only
    `…</think>` then the answer. No tag reaches the consumer, and the reasoning is not
    taken for the answer."""
    openai_server.enqueue(Reply(text="\n\n" + ANSWER, reasoning=REASONING + "\n",
                                reasoning_wire="think_closed", chunk_chars=chunk_chars))
    events = await think(openai_spec(openai_server, "openai/deepseek-r1-distill-qwen-7b"))
    assert reasoning_of(events) == REASONING + "\n"
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


# -- Anthropic: thinking blocks, their signature, redacted blocks

ANTHROPIC_KEY = "test-key-123"


def anthropic_spec(server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch,
                   model: str = "anthropic/claude-sonnet-4-5") -> ModelSpec:
    monkeypatch.setenv("ANTHROPIC_API_KEY", ANTHROPIC_KEY)
    server.api_key = ANTHROPIC_KEY
    return ModelSpec(model, api_base=server.base_url)


async def test_anthropic_thinking_blocks_then_the_text(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """Claude 4: a summary of the thinking in `thinking_delta`s, its signature kept opaque;
    thinking switched on with the medium effort's budget and room for the answer after it;
    no temperature sent (Anthropic takes only 1 with thinking on)."""
    spec = anthropic_spec(anthropic_server, monkeypatch)
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, signature="c2lnLTE="))
    events = await think(spec)
    assert reasoning_of(events) == REASONING
    assert answer_of(events) == ANSWER
    assert in_order(events)
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.SUMMARY
    assert done.opaque == [{"type": "thinking", "signature": "c2lnLTE="}]
    [request] = anthropic_server.requests
    assert request.body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert request.body["max_tokens"] == 2048 + 4096
    assert "temperature" not in request.body
    # Anthropic bills the thinking and counts it in output_tokens, not apart.
    thought, written = len(pieces_of(REASONING, None)), len(pieces_of(ANSWER, None))
    assert done.call.completion_tokens == thought + written
    assert done.reasoning_tokens is None
    assert done.call.params["thinking_budget"] == 2048


async def test_anthropic_cost_includes_the_thinking(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = anthropic_spec(anthropic_server, monkeypatch)
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    done = done_of(await think(spec))
    assert done.call.prompt_tokens is not None and done.call.completion_tokens is not None
    answer_only = cost_of(spec, UsageCounts(done.call.prompt_tokens, len(ANSWER.split())))
    assert done.call.cost is not None and answer_only is not None
    assert done.call.cost == cost_of(spec, UsageCounts(done.call.prompt_tokens,
                                                       done.call.completion_tokens))
    assert done.call.cost > answer_only


async def test_anthropic_redacted_blocks_stay_opaque(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """`redacted_thinking`: a RedactedReasoning event (shown as "[redacted by the
    provider]"), its data kept verbatim with the call and never delivered as text."""
    spec = anthropic_spec(anthropic_server, monkeypatch)
    secret = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING,
                                   redacted=(secret, secret[::-1])))
    events = await think(spec)
    assert [type(event) for event in events[:2]] == [RedactedReasoning, RedactedReasoning]
    assert reasoning_of(events) == REASONING
    assert not any(secret in event.text or secret[::-1] in event.text for event in events
                   if isinstance(event, ReasoningDelta | AnswerDelta))
    done = done_of(events)
    assert {"type": "redacted_thinking", "data": secret} in done.opaque
    assert {"type": "redacted_thinking", "data": secret[::-1]} in done.opaque


async def test_claude_3_7_thinks_in_the_raw(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = anthropic_spec(anthropic_server, monkeypatch, "anthropic/claude-3-7-sonnet-20250219")
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    done = done_of(await think(spec))
    assert done.reasoning_kind == ReasoningKind.RAW


async def test_anthropic_budget_and_effort(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = anthropic_spec(anthropic_server, monkeypatch)
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING),
                             Reply(text=ANSWER, reasoning=REASONING))
    await think(spec, ThinkingSettings(budget_tokens=3000, max_tokens=8000))
    await think(spec, ThinkingSettings(effort="high", temperature=1, top_p=0.97))
    first, second = (request.body for request in anthropic_server.requests)
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 3000}
    assert first["max_tokens"] == 8000
    assert second["thinking"] == {"type": "enabled", "budget_tokens": 4096}
    assert (second["temperature"], second["top_p"]) == (1, 0.97)


@pytest.mark.parametrize(("settings", "said"), [
    (ThinkingSettings(temperature=0.0), "temperature 0: Anthropic takes only temperature 1"),
    (ThinkingSettings(top_p=0.9), "top_p 0.9: Anthropic takes top_p from 0.95"),
    (ThinkingSettings(budget_tokens=512), "at least 1024 tokens"),
    (ThinkingSettings(budget_tokens=4000, max_tokens=4000), "under max_tokens (4000)"),
    (ThinkingSettings(effort="high", max_tokens=4096), "under max_tokens (4096)"),
    (ThinkingSettings(n=2), "n=2"),
    (ThinkingSettings(logprobs=True), "log-probabilities"),
])
async def test_anthropic_refusals_before_any_request(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch,
        settings: ThinkingSettings, said: str) -> None:
    spec = anthropic_spec(anthropic_server, monkeypatch)
    assert said in (llm.thinking_refusal(spec, QUICK, settings) or "")
    with pytest.raises(LLMError) as caught:
        await think(spec, settings)
    assert said in caught.value.message
    assert caught.value.kind == "bad_request"
    assert anthropic_server.requests == []


async def test_the_anthropic_server_refuses_what_the_api_refuses(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's own refusal (so that the refusal above is the API's, not a guess): a
    temperature of 0 with thinking on, sent anyway, is a 400."""
    from bbm_tui.core.llm.loader import litellm_module

    spec = anthropic_spec(anthropic_server, monkeypatch)
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))

    with pytest.raises(Exception, match="temperature"):
        await litellm_module().acompletion(
            model=spec.model, api_base=spec.api_base, messages=QUESTION, temperature=0.0,
            max_tokens=5000, thinking={"type": "enabled", "budget_tokens": 2048},
            max_retries=0)


async def test_anthropic_stream_cut_mid_thinking(
        anthropic_server: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = anthropic_spec(anthropic_server, monkeypatch)
    anthropic_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, drop_after_chunks=6))
    events: list[Any] = []
    with pytest.raises(LLMError):
        async for event in llm.stream_thinking(spec, QUESTION, QUICK, ThinkingSettings()):
            events.append(event)
    assert reasoning_of(events) == "".join(pieces_of(REASONING, None)[:6])
    assert len(anthropic_server.requests) == 1


# -- Gemini: parts marked `thought: true`, summaries

GEMINI_KEY = "test-key-456"


def gemini_spec(server: FakeGemini, monkeypatch: pytest.MonkeyPatch,
                model: str = "gemini/gemini-2.5-flash") -> ModelSpec:
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    server.api_key = GEMINI_KEY
    return ModelSpec(model, api_base=server.base_url)


def thinking_config(request: Any) -> dict[str, Any]:
    return request.body["generationConfig"]["thinkingConfig"]


async def test_gemini_thought_parts_are_a_summary(
        gemini_server: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = gemini_spec(gemini_server, monkeypatch)
    gemini_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    events = await think(spec)
    assert reasoning_of(events) == REASONING
    assert answer_of(events) == ANSWER
    assert in_order(events)
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.SUMMARY
    thought, written = len(pieces_of(REASONING, None)), len(pieces_of(ANSWER, None))
    assert done.reasoning_tokens == thought
    assert done.call.completion_tokens == thought + written  # both billed
    assert done.call.prompt_tokens is not None
    assert done.call.cost == cost_of(spec, UsageCounts(done.call.prompt_tokens,
                                                       thought + written))
    answer_only = cost_of(spec, UsageCounts(done.call.prompt_tokens, written))
    assert done.call.cost is not None and answer_only is not None
    assert done.call.cost > answer_only
    [request] = gemini_server.requests
    # Thoughts asked for; no budget: the model's own.
    assert thinking_config(request) == {"includeThoughts": True}


async def test_gemini_that_shows_no_thoughts(
        gemini_server: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemini 3 sometimes sends no thought summary at all: no reasoning text, kind none, the
    thinking's tokens still counted and priced."""
    spec = gemini_spec(gemini_server, monkeypatch)
    gemini_server.enqueue(Reply(text=ANSWER, reasoning="", reasoning_tokens=300))
    events = await think(spec)
    assert reasoning_of(events) == ""
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.NONE
    assert done.reasoning_tokens == 300
    assert done.call.completion_tokens == 300 + len(pieces_of(ANSWER, None))


async def test_gemini_budget_and_effort(
        gemini_server: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = gemini_spec(gemini_server, monkeypatch)
    gemini_server.enqueue(Reply(text=ANSWER, reasoning=REASONING),
                          Reply(text=ANSWER, reasoning=REASONING))
    await think(spec, ThinkingSettings(budget_tokens=3000))
    await think(spec, ThinkingSettings(effort="low"))
    first, second = (thinking_config(request) for request in gemini_server.requests)
    assert first == {"includeThoughts": True, "thinkingBudget": 3000}
    assert second["includeThoughts"] is True
    assert second["thinkingBudget"] == 1024


async def test_gemini_stream_cut_mid_thought(
        gemini_server: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = gemini_spec(gemini_server, monkeypatch)
    gemini_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, drop_after_chunks=5))
    events: list[Any] = []
    with pytest.raises(LLMError):
        async for event in llm.stream_thinking(spec, QUESTION, QUICK, ThinkingSettings()):
            events.append(event)
    assert reasoning_of(events) == "".join(pieces_of(REASONING, None)[:5])
    assert len(gemini_server.requests) == 1


# -- Ollama: `think` in the request, `thinking` in the reply


@pytest.mark.parametrize("model", ["ollama_chat/qwen3:8b", "ollama/qwen3:8b"])
async def test_ollama_thinking_field(ollama_server: FakeOllama, model: str) -> None:
    """Every chunk's `thinking` is read (older litellm kept only the first two: issues
    #15463, #20737)."""
    spec = ModelSpec(model, api_base=ollama_server.base_url)
    ollama_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    events = await think(spec)
    assert reasoning_of(events) == REASONING
    assert answer_of(events) == ANSWER
    assert in_order(events)
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.RAW
    assert done.call.completion_tokens == (len(pieces_of(REASONING, None))
                                           + len(pieces_of(ANSWER, None)))
    assert done.reasoning_tokens is None  # Ollama does not count them apart
    [request] = ollama_server.requests
    assert request.body["think"] is True


async def test_ollama_gpt_oss_takes_an_effort(ollama_server: FakeOllama) -> None:
    spec = ModelSpec("ollama_chat/gpt-oss:20b", api_base=ollama_server.base_url)
    ollama_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    events = await think(spec, ThinkingSettings(effort="high"))
    assert reasoning_of(events) == REASONING
    assert ollama_server.requests[0].body["think"] == "high"


@pytest.mark.parametrize(("settings", "said"), [
    (ThinkingSettings(effort="low"), "--thinking-effort: Ollama's qwen3:8b thinks or not"),
    (ThinkingSettings(budget_tokens=2000), "--thinking-budget"),
    (ThinkingSettings(logprobs=True), "log-probabilities"),
])
async def test_ollama_refusals_before_any_request(ollama_server: FakeOllama,
                                                  settings: ThinkingSettings,
                                                  said: str) -> None:
    spec = ModelSpec("ollama_chat/qwen3:8b", api_base=ollama_server.base_url)
    with pytest.raises(LLMError, match="^" + re.escape(said)):
        await think(spec, settings)
    assert ollama_server.requests == []


async def test_ollama_stream_cut_mid_thinking(ollama_server: FakeOllama) -> None:
    spec = ModelSpec("ollama_chat/qwen3:8b", api_base=ollama_server.base_url)
    ollama_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, drop_after_chunks=7))
    events: list[Any] = []
    with pytest.raises(LLMError):
        async for event in llm.stream_thinking(spec, QUESTION, QUICK, ThinkingSettings()):
            events.append(event)
    assert reasoning_of(events) == "".join(pieces_of(REASONING, None)[:7])
    assert len(ollama_server.requests) == 1


# -- OpenAI's o-series through chat completions: no reasoning text, only its count


async def test_o_series_sends_no_reasoning_only_its_count(openai_server: FakeOpenAI) -> None:
    spec = openai_spec(openai_server, "openai/o4-mini")
    openai_server.enqueue(Reply(text=ANSWER, reasoning_tokens=500))
    events = await think(spec, ThinkingSettings(effort="low"))
    assert reasoning_of(events) == ""
    assert answer_of(events) == ANSWER
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.NONE
    assert done.reasoning_tokens == 500
    written = len(pieces_of(ANSWER, None))
    assert done.call.completion_tokens == 500 + written
    assert done.call.prompt_tokens is not None
    # Priced with the reasoning: far more than the answer alone.
    assert done.call.cost == cost_of(spec, UsageCounts(done.call.prompt_tokens, 500 + written))
    answer_only = cost_of(spec, UsageCounts(done.call.prompt_tokens, written))
    assert done.call.cost is not None and answer_only is not None
    assert done.call.cost > 5 * answer_only
    body = openai_server.requests[0].body
    assert body["reasoning_effort"] == "low"
    assert "temperature" not in body and "stop" not in body


@pytest.mark.parametrize(("settings", "said"), [
    (ThinkingSettings(stop=("\n\n",)), "stop: OpenAI's reasoning models (o4-mini) refuse"),
    (ThinkingSettings(temperature=0.2), "temperature 0.2"),
    (ThinkingSettings(logprobs=True), "log-probabilities"),
    (ThinkingSettings(budget_tokens=2048), "--thinking-budget"),
    (ThinkingSettings(n=4), "n=4"),
])
async def test_o_series_refusals_before_any_request(openai_server: FakeOpenAI,
                                                    settings: ThinkingSettings,
                                                    said: str) -> None:
    spec = openai_spec(openai_server, "openai/o4-mini")
    with pytest.raises(LLMError, match="^" + re.escape(said)):
        await think(spec, settings)
    assert openai_server.requests == []


# -- DeepSeek's reasoner: raw reasoning in `reasoning_content`


def deepseek_spec(server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> ModelSpec:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "test-key-789")
    return ModelSpec("deepseek/deepseek-reasoner", api_base=server.base_url)


async def test_deepseek_reasoner(openai_server: FakeOpenAI,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    spec = deepseek_spec(openai_server, monkeypatch)
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING))
    events = await think(spec)
    assert reasoning_of(events) == REASONING
    assert answer_of(events) == ANSWER
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.RAW
    assert done.reasoning_tokens == len(pieces_of(REASONING, None))
    assert done.call.cost is not None and done.call.cost > 0
    body = openai_server.requests[0].body
    assert "reasoning_effort" not in body and "thinking" not in body


@pytest.mark.parametrize(("settings", "said"), [
    (ThinkingSettings(logprobs=True), "log-probabilities: deepseek/deepseek-reasoner gives none"),
    (ThinkingSettings(effort="high"), "--thinking-effort"),
    (ThinkingSettings(budget_tokens=2048), "--thinking-budget"),
])
async def test_deepseek_refusals_before_any_request(openai_server: FakeOpenAI,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    settings: ThinkingSettings,
                                                    said: str) -> None:
    spec = deepseek_spec(openai_server, monkeypatch)
    with pytest.raises(LLMError, match="^" + re.escape(said)):
        await think(spec, settings)
    assert openai_server.requests == []


# -- The offline thinking model (solver/thinking), read as any OpenAI-compatible server


async def test_the_offline_thinking_model_reads_as_any_other() -> None:
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.llm.offline.thinking import MODEL, respond
    from bbm_tui.core.prompts.thinking import thinking_messages

    row = bundled_rows("word_sorting")[1]
    messages = thinking_messages("word_sorting", row.input)
    events = [event async for event in llm.stream_thinking(
        ModelSpec(MODEL), messages, QUICK, ThinkingSettings(effort="high", temperature=0.0))]
    expected = respond(MODEL, messages)
    assert reasoning_of(events) == expected.reasoning
    assert answer_of(events) == expected.content
    assert in_order(events)
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.RAW
    assert done.reasoning_tokens is not None and done.reasoning_tokens > 20
    assert done.call.cost == 0.0
    assert done.call.finish_reason == "stop"


# -- Waiting for the first text


async def test_o_series_may_think_silently_past_the_calls_timeout(
        openai_server: FakeOpenAI) -> None:
    """o-series send nothing while they think: the wait for the first text is the whole
    call's limit, not the call's timeout (which a model that streams its reasoning keeps)."""
    slow = CallSettings(timeout_s=1, idle_timeout_s=1, answer_timeout_s=30,
                        retry=RetryPolicy(attempts=1))
    openai_server.enqueue(Reply(text=ANSWER, reasoning_tokens=900, first_chunk_delay_s=3))
    events = await think(openai_spec(openai_server, "openai/o4-mini"), call=slow)
    assert answer_of(events) == ANSWER
    assert done_of(events).reasoning_tokens == 900
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, first_chunk_delay_s=3))
    with pytest.raises(LLMError, match=r"no text in 1 s") as caught:
        await think(openai_spec(openai_server), call=slow)
    assert caught.value.kind == "timeout"


async def test_a_silence_mid_reasoning_fails_after_what_came(openai_server: FakeOpenAI) -> None:
    slow = CallSettings(timeout_s=20, idle_timeout_s=1, retry=RetryPolicy(attempts=2))
    openai_server.enqueue(Reply(text=ANSWER, reasoning=REASONING, stall_s=4, stall_after=2))
    events: list[Any] = []
    with pytest.raises(LLMError, match="silent for 1 s mid-answer") as caught:
        async for event in llm.stream_thinking(openai_spec(openai_server), QUESTION, slow,
                                               ThinkingSettings()):
            events.append(event)
    assert caught.value.kind == "timeout"
    assert reasoning_of(events) == "".join(pieces_of(REASONING, None)[:3])
    assert len(openai_server.requests) == 1  # text was shown: no retry


# -- llama-server as a thinking model (measured with ../shared/realsrv/start-thinking)

# What llama-server sends first, before any text (OpenAI does too): the role, no content.
ROLE_CHUNK = (b'{"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "tiny", '
              b'"choices": [{"index": 0, "delta": {"role": "assistant", "content": null}, '
              b'"finish_reason": null}]}')


@pytest.mark.parametrize("reasoning_format", ["deepseek", "none"])
async def test_llama_server_as_a_thinking_model(openai_server: FakeOpenAI,
                                                reasoning_format: str) -> None:
    """As measured: a role chunk first; `--reasoning-format deepseek` sends the reasoning
    in `reasoning_content` (the newline after `<think>` and the blank line before the
    answer dropped), `none` leaves `<think>\\n…</think>\\n\\n` in the content, the tag cut
    across chunks ("<", "th", "in", "k>"); the usage counts the reasoning in
    `completion_tokens` only, so its own count is unknown."""
    reasoning = "on third part from order. each first part in. \n\nis need sort. \n\n"
    if reasoning_format == "deepseek":
        reply = Reply(text="So the answer is bz\n", reasoning=reasoning)
    else:
        reply = Reply(text="\n\nSo the answer is bz\n", reasoning="\n" + reasoning,
                      reasoning_wire="think_tags", chunk_chars=2)
    openai_server.enqueue(replace(reply, raw_events=[ROLE_CHUNK], reasoning_counted=False))
    events = await think(openai_spec(openai_server, "openai/tiny"))
    assert reasoning_of(events).strip() == reasoning.strip()
    assert answer_of(events).strip() == "So the answer is bz"
    done = done_of(events)
    assert done.reasoning_kind == ReasoningKind.RAW
    assert done.reasoning_tokens is None
    assert done.call.completion_tokens is not None and done.call.completion_tokens > 10


# -- ThinkTags alone: any cut of the content into pieces gives the same split


@given(cuts=st.lists(st.integers(min_value=0, max_value=80), max_size=12),
       text=st.sampled_from([
           "<think>\nplan.\n\nwork < 3.</think>\n\nSo the answer is 4.",
           "  <think>a</think>b",
           "plan </thi nk> then.</think>answer",
           "no tags at all, just an answer",
           "<thin>not a tag</thin> answer",
           "<think>never closed",
       ]))
def test_think_tags_do_not_depend_on_how_the_content_is_cut(cuts: list[int],
                                                            text: str) -> None:
    from bbm_tui.core.llm.thinking import ThinkTags

    def split_whole(pieces: list[str]) -> tuple[str, str]:
        tags = ThinkTags()
        found = [part for piece in pieces for part in tags.feed(piece)] + tags.close()
        return ("".join(part for is_reasoning, part in found if is_reasoning),
                "".join(part for is_reasoning, part in found if not is_reasoning))

    bounds = sorted({min(cut, len(text)) for cut in cuts})
    pieces = [text[start:end] for start, end in zip([0, *bounds], [*bounds, len(text)],
                                                    strict=True)]
    assert split_whole(pieces) == split_whole([text])
    reasoning, answer = split_whole([text])
    assert "think>" not in reasoning + answer or text.startswith("<thin>")


async def test_an_openai_reasoning_models_text_is_a_summary(openai_server: FakeOpenAI) -> None:
    """OpenAI never sends its reasoning models' own reasoning: text that comes (the Responses
    API's summaries, through a proxy that maps them to `reasoning_content`) is a summary."""
    openai_server.enqueue(Reply(text=ANSWER, reasoning="**Checking divisors**\n\nI check 2 "
                                "and 3 and find neither divides 17."))
    events = await think(openai_spec(openai_server, "openai/gpt-5-mini"))
    assert reasoning_of(events).startswith("**Checking divisors**")
    assert done_of(events).reasoning_kind == ReasoningKind.SUMMARY
