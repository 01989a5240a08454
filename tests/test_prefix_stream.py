"""Going on from a prefix, streamed (issue 35; core/llm/prefix_stream.py): the new branch after
backtracking a thinking step shows its thoughts as they come. Over HTTP against the suite's
llama-server (whose stream reproduces llama.cpp's: docs/NOTES.md), an OpenAI-compatible
server's /v1/completions and Ollama's /api/generate; solver/thinking at the replay's pace."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.llm.prefix import Continuation, Prefixer, PrefixSettings
from bbm_tui.core.llm.prefix_stream import stream_continuation
from tests.fake_server import Reply
from tests.llama_server import FakeLlamaServer, Fault, qwen3_template
from tests.ollama_server import FakeOllama
from tests.openai_server import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Sort: b a"}]
KEPT = "First, the words.  \n\n"
TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def streamed(prefixer: Prefixer, settings: PrefixSettings) -> tuple[list[str], Continuation]:
    async def run() -> tuple[list[str], Continuation]:
        pieces: list[str] = []
        try:
            async for item in stream_continuation(prefixer, KEPT, settings):
                if isinstance(item, Continuation):
                    return pieces, item
                pieces.append(item)
        finally:
            await prefixer.aclose()
        raise AssertionError("the stream ended with no continuation")

    return asyncio.run(run())


def test_llama_server_streams_a_token_an_event_with_its_log_probability(
        llama: FakeLlamaServer) -> None:
    llama.continuation = lambda prompt, body: "Then a b.\n\n</think>\n\nSo the answer is a b"
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    pieces, whole = streamed(prefixer, PrefixSettings())
    request = llama.requests[-1]
    assert request.path == "/completion" and request.body["stream"] is True
    assert request.body["prompt"] == qwen3_template(MESSAGES) + "<think>\n" + KEPT
    assert len(pieces) > 5 and "".join(pieces) == whole.text
    assert whole.text == "Then a b.\n\n</think>\n\nSo the answer is a b"
    assert whole.tokens is not None and [t.text for t in whole.tokens] == pieces
    assert whole.finish_reason == "stop"
    assert whole.call.completion_tokens == len(pieces)
    assert whole.call.prompt_tokens is not None


def test_llama_servers_token_limit_is_a_length_finish(llama: FakeLlamaServer) -> None:
    llama.continuation = lambda prompt, body: "one two three four"
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    pieces, whole = streamed(prefixer, PrefixSettings(max_tokens=2, logprobs=False))
    assert pieces == ["one", " two"] and whole.tokens is None
    assert whole.finish_reason == "length"


def test_completions_stream_with_the_users_template(openai_server: FakeOpenAI,
                                                    tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    openai_server.enqueue(Reply(text="Then a b.</think>\n\nSo the answer is a b"))
    spec = llm.ModelSpec("hosted_vllm/r1", api_base=openai_server.base_url)
    pieces, whole = streamed(Prefixer(spec, MESSAGES, template), PrefixSettings(logprobs=False))
    (request,) = openai_server.requests
    assert request.path == "/v1/completions" and request.body["stream"] is True
    assert request.body["stream_options"] == {"include_usage": True}
    assert request.body["prompt"] == "<|user|>Sort: b a\n<|assistant|><think>\n" + KEPT
    assert len(pieces) > 1 and whole.text == "Then a b.</think>\n\nSo the answer is a b"
    assert whole.finish_reason == "stop"
    assert whole.call.completion_tokens is not None


def test_ollama_streams_its_raw_generate(ollama_server: FakeOllama, tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    ollama_server.enqueue(Reply(text="Then a b.</think>\n\nSo the answer is a b"))
    spec = llm.ModelSpec("ollama/qwen3", api_base=ollama_server.base_url)
    pieces, whole = streamed(Prefixer(spec, MESSAGES, template), PrefixSettings())
    (request,) = ollama_server.requests
    assert request.path == "/api/generate"
    assert request.body["raw"] is True and request.body["stream"] is True
    assert len(pieces) > 1 and whole.text == "Then a b.</think>\n\nSo the answer is a b"
    assert whole.tokens is None and whole.finish_reason == "stop"


def test_an_error_status_is_an_llm_error(openai_server: FakeOpenAI, tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    openai_server.enqueue(Reply(status=400, error_message="prompt too long"))
    spec = llm.ModelSpec("hosted_vllm/r1", api_base=openai_server.base_url)
    with pytest.raises(llm.LLMError, match="400") as raised:
        streamed(Prefixer(spec, MESSAGES, template), PrefixSettings())
    assert raised.value.kind == "bad_request"


@pytest.mark.parametrize("fault", [Fault(), Fault(503, {"Retry-After": "1"}),
                                   Fault(429, {"Retry-After": "1"}), Fault(500)],
                         ids=["reset-before-a-byte", "503-retry-after", "429-retry-after",
                              "500"])
def test_a_transient_failure_before_the_first_text_is_retried(
        llama: FakeLlamaServer, fault: Fault) -> None:
    """A connection reset before a byte of the reply, a 503 or 429 with Retry-After, a 500:
    retried as every call is (errors.with_retries), waiting what Retry-After asks; the
    continuation is the second request's, whole."""
    import time

    llama.continuation = lambda prompt, body: "Then a b.\n\n</think>\n\nSo the answer is a b"
    llama.faults.append(fault)
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    started = time.monotonic()
    pieces, whole = streamed(prefixer, PrefixSettings())
    waited = time.monotonic() - started
    completions = [record for record in llama.requests if record.path == "/completion"]
    assert len(completions) == 2
    assert completions[0].body == completions[1].body
    assert "".join(pieces) == whole.text == "Then a b.\n\n</think>\n\nSo the answer is a b"
    assert whole.finish_reason == "stop"
    if "Retry-After" in fault.headers:
        assert waited >= 1.0  # the server's wait honoured (not the 0.5 s backoff)


def test_a_failure_after_text_has_come_is_not_retried(llama: FakeLlamaServer) -> None:
    """The connection reset after three tokens: the three are delivered, then the error; no
    second request (it would write another text after what is on screen)."""
    llama.continuation = lambda prompt, body: "Then a b.\n\n</think>\n\nSo the answer is a b"
    llama.faults.append(Fault(after_tokens=3))
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    pieces: list[str] = []

    async def run() -> None:
        try:
            async for item in stream_continuation(prefixer, KEPT, PrefixSettings()):
                assert isinstance(item, str), "the stream ended whole"
                pieces.append(item)
        finally:
            await prefixer.aclose()

    with pytest.raises(llm.LLMError) as raised:
        asyncio.run(run())
    assert raised.value.kind == "connection" and raised.value.attempts == 1
    assert pieces == ["Then", " a", " b."]
    assert len([record for record in llama.requests if record.path == "/completion"]) == 1


def test_a_refusal_is_not_retried(llama: FakeLlamaServer) -> None:
    llama.faults.append(Fault(400))
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    with pytest.raises(llm.LLMError, match="400") as raised:
        streamed(prefixer, PrefixSettings())
    assert raised.value.kind == "bad_request"
    assert len([record for record in llama.requests if record.path == "/completion"]) == 1


def test_solver_thinking_streams_at_the_replay_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.prompts.thinking import thinking_messages

    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "2000")
    row = bundled_rows("multistep_arithmetic")[0]
    prefixer = Prefixer(llm.ModelSpec("solver/thinking"),
                        thinking_messages("multistep_arithmetic", row.input))
    pieces, whole = streamed(prefixer, PrefixSettings(temperature=0.0))
    assert len(pieces) > 10 and "".join(pieces) == whole.text
    assert "</think>" in whole.text and whole.call.cost == 0.0
