"""Each provider on its own wire, through litellm's own adapter (`anthropic/…`, `gemini/…`,
`ollama/…`, `ollama_chat/…`, `openai/…`) pointed with an api base at the local server that
speaks it (tests/*_server.py): a step is one line, its stream ends at the stop or is closed
early by the client, usage is the provider's own, and each provider's errors read as what they
are. The commands and the app over the same wires are in tests/test_providers_cli.py."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import pytest

from bbm_tui.core import llm
from bbm_tui.core.llm import CallSettings, LLMError, ModelSpec, RetryPolicy, StepText, TextDelta
from tests.fake_server import FakeServer, Reply
from tests.gemini_server import rate_limited

LINE = "Sort the words by their first letter."
# A model that writes on past the line break, as models do when nothing stops them.
WRITES_ON = LINE + "\nThought 3: " + " ".join(f"word{i}" for i in range(120))
PROMPT = "Q: sort these\nThought 1: Look at the words.\nThought 2:"
KEY = "test-key-123"


@dataclass(frozen=True)
class Wire:
    """One provider as a user reaches it: the model, the fixture of its local server, the
    key's variable (None: no key), and whether the provider takes `stop=["\\n"]`."""

    name: str
    model: str
    server: str
    key_variable: str | None
    native_stop: bool


WIRES = [
    Wire("anthropic", "anthropic/claude-3-5-haiku-20241022", "anthropic_server",
         "ANTHROPIC_API_KEY", native_stop=False),
    Wire("gemini", "gemini/gemini-2.0-flash", "gemini_server", "GEMINI_API_KEY",
         native_stop=True),
    Wire("ollama", "ollama/llama3", "ollama_server", None, native_stop=True),
    Wire("ollama_chat", "ollama_chat/llama3", "ollama_server", None, native_stop=True),
    Wire("openai", "openai/gpt-4o-mini", "openai_server", None, native_stop=True),
]
BY_NAME = {wire.name: wire for wire in WIRES}


def connect(request: pytest.FixtureRequest, wire: Wire,
            monkeypatch: pytest.MonkeyPatch) -> tuple[FakeServer, ModelSpec]:
    server = request.getfixturevalue(wire.server)
    if wire.key_variable:
        monkeypatch.setenv(wire.key_variable, KEY)
        server.api_key = KEY
    return server, ModelSpec(wire.model, api_base=server.base_url)


async def step(spec: ModelSpec, settings: CallSettings | None = None
               ) -> tuple[StepText, list[object]]:
    events: list[object] = []
    async for item in llm.stream_step(spec, PROMPT, settings or CallSettings()):
        events.append(item)
    assert isinstance(events[-1], StepText)
    return events[-1], events


def stop_sent(wire: Wire, body: dict) -> list[str] | None:
    """The stop sequences a request carried, in its provider's own field."""
    if wire.name == "anthropic":
        return body.get("stop_sequences")
    if wire.name == "gemini":
        return (body.get("generationConfig") or {}).get("stop_sequences")
    if wire.name.startswith("ollama"):
        return (body.get("options") or {}).get("stop")
    return body.get("stop")


@pytest.mark.parametrize("mode", ["chat", "completion"])
@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
async def test_a_step_is_one_line_ended_at_the_stop_where_the_provider_takes_one(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire, mode: str,
) -> None:
    """Both wire modes: chat (the prompt as one user message) and text completion (litellm's
    text_completion, which each of these adapters sends on its own endpoint)."""
    server, spec = connect(request, wire, monkeypatch)
    spec = ModelSpec(spec.model, spec.api_base, mode)
    server.responder = lambda path, body: Reply(text=WRITES_ON, chunk_delay_s=0.005)
    result, events = await step(spec)
    assert result.text == LINE
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == LINE
    [record] = server.requests
    assert stop_sent(wire, record.body) == (["\n"] if wire.native_stop else None)
    assert result.call.native_stop is wire.native_stop
    assert result.call.attempts == 1
    if wire.native_stop:  # the provider stopped at the line break and ended the stream
        # The client closes the stream once the provider's last chunk is in, which can be
        # before the server's thread has marked its reply finished.
        await wait_until(lambda: record.finished, limit_s=30.0)
        assert record.finished and record.chunks_sent == len(LINE.split())
    else:  # the client cut the line and closed the stream: the provider stopped writing
        await wait_until(lambda: record.client_closed_early)
        assert not record.finished and record.chunks_sent < len(WRITES_ON.split())


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
async def test_the_stream_is_closed_early_when_the_model_writes_on(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
) -> None:
    """A provider that does not stop at the line break (no stop sent, or one ignored): the
    step is still the first line, shown as it streams, and the client closes the stream,
    so that the provider stops writing (and billing) at once."""
    server, spec = connect(request, wire, monkeypatch)
    server.responder = lambda path, body: Reply(text=WRITES_ON, chunk_delay_s=0.01,
                                                honor_stop=False)
    result, events = await step(spec)
    assert result.text == LINE
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert len(deltas) > 1  # live, piece by piece
    [record] = server.requests
    await wait_until(lambda: record.client_closed_early)
    assert not record.finished
    assert record.chunks_sent < len(WRITES_ON.split()) // 2


async def wait_until(condition, limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition() and time.monotonic() < deadline:
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("mode", ["chat", "completion"])
@pytest.mark.parametrize("wire", [BY_NAME["ollama"], BY_NAME["ollama_chat"]],
                         ids=lambda wire: wire.name)
async def test_ollama_usage_is_its_own_count(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire, mode: str,
) -> None:
    """Ollama counts the tokens itself (`prompt_eval_count`, `eval_count` on its last
    line): stored as counted, not as an estimate, in either mode (`ollama/` in completion
    mode is how a base model is run)."""
    server, spec = connect(request, wire, monkeypatch)
    spec = ModelSpec(spec.model, spec.api_base, mode)
    server.responder = lambda path, body: Reply(text=LINE + "\n", prompt_tokens=321)
    result, _ = await step(spec)
    assert (result.call.prompt_tokens, result.call.completion_tokens) == (
        321, len(LINE.split()))
    assert result.call.usage_estimated is False


async def test_gemini_usage_is_its_own_count(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["gemini"], monkeypatch)
    server.responder = lambda path, body: Reply(text=WRITES_ON, prompt_tokens=250)
    result, _ = await step(spec)
    assert (result.call.prompt_tokens, result.call.completion_tokens) == (
        250, len(LINE.split()))
    assert result.call.usage_estimated is False


# -- errors, each provider's own


FAST = CallSettings(retry=RetryPolicy(attempts=3, base_delay_s=0.01))


@pytest.mark.parametrize("wire", [BY_NAME["anthropic"], BY_NAME["gemini"]],
                         ids=lambda wire: wire.name)
async def test_a_missing_key_is_named_before_any_request(
    request: pytest.FixtureRequest, wire: Wire,
) -> None:
    server = request.getfixturevalue(wire.server)
    server.responder = lambda path, body: Reply(text=LINE + "\n")
    spec = ModelSpec(wire.model, api_base=server.base_url)
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    assert raised.value.kind == "auth"
    assert raised.value.message == (
        f"{wire.model} at {server.base_url} needs an API key: set {wire.key_variable}")
    assert raised.value.attempts == 1
    assert server.requests == []


async def test_a_missing_openai_key_is_named_before_any_request() -> None:
    """Without an api base litellm would send the request to api.openai.com and report the
    missing key as a server error (500, "Missing credentials"), retried; it never goes out."""
    spec = ModelSpec("openai/gpt-4o-mini")
    started = time.monotonic()
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    assert raised.value.kind == "auth"
    assert raised.value.message == "openai/gpt-4o-mini needs an API key: set OPENAI_API_KEY"
    assert raised.value.attempts == 1
    assert time.monotonic() - started < 2


async def test_openai_missing_credentials_is_an_auth_error(openai_server) -> None:
    """What litellm raises when the OpenAI client has no key at all (status 500, "Missing
    credentials"): an auth error, never retried."""
    litellm = llm.litellm_module()
    spec = ModelSpec("openai/gpt-4o-mini", api_base=openai_server.base_url)
    with pytest.raises(Exception) as raised:
        await litellm.acompletion(model=spec.model, api_base=spec.api_base, max_retries=0,
                                  messages=[{"role": "user", "content": "hi"}])
    assert "Missing credentials" in str(raised.value)
    error = llm.classify_error(raised.value, spec)
    assert error.kind == "auth" and not error.retryable
    assert error.message == (
        f"openai/gpt-4o-mini at {openai_server.base_url} needs an API key: set OPENAI_API_KEY")
    assert openai_server.requests == []


async def test_gemini_invalid_key_is_an_auth_error_never_retried(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["gemini"], monkeypatch)
    server.api_key = "another-key"  # the server refuses ours: 400 API_KEY_INVALID
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    assert raised.value.kind == "auth"
    assert raised.value.message == (
        f"{spec.model} at {server.base_url} rejected the API key in GEMINI_API_KEY")
    assert len(server.requests) == 1


async def test_anthropic_invalid_key_is_an_auth_error_never_retried(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["anthropic"], monkeypatch)
    server.api_key = "another-key"
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    assert raised.value.kind == "auth"
    assert "rejected the API key in ANTHROPIC_API_KEY" in raised.value.message
    assert len(server.requests) == 1


async def test_gemini_retry_delay_is_honoured(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["gemini"], monkeypatch)
    server.enqueue(rate_limited("0.3s"), Reply(text=LINE + "\n"))
    result, events = await step(spec, FAST)
    assert result.text == LINE and result.call.attempts == 2
    [restart] = [e for e in events if isinstance(e, llm.Restart)]
    assert restart.delay_s == pytest.approx(0.3)
    assert "rate-limiting" in restart.reason


async def test_anthropic_retry_after_is_honoured(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["anthropic"], monkeypatch)
    server.enqueue(Reply(status=429, headers={"retry-after": "0.4"}), Reply(text=WRITES_ON))
    result, events = await step(spec, FAST)
    assert result.text == LINE and result.call.attempts == 2
    [restart] = [e for e in events if isinstance(e, llm.Restart)]
    assert restart.delay_s == pytest.approx(0.4)


async def test_anthropic_overloaded_is_reported_as_such_with_its_status(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["anthropic"], monkeypatch)
    server.responder = lambda path, body: Reply(status=529)
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    error = raised.value
    assert error.kind == "server" and error.attempts == 3  # overloaded is worth a retry
    assert error.message == (f"{spec.model} at {server.base_url} is overloaded (529): "
                             "Overloaded (after 3 attempts)")


@pytest.mark.parametrize("wire", [BY_NAME["anthropic"], BY_NAME["gemini"],
                                  BY_NAME["ollama"]], ids=lambda wire: wire.name)
async def test_every_error_message_is_text_with_the_real_status(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
) -> None:
    server, spec = connect(request, wire, monkeypatch)
    server.responder = lambda path, body: Reply(status=503,
                                                error_message="the model is warming up")
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    message = raised.value.message
    assert "(503)" in message and "the model is warming up" in message
    assert "b'" not in message and "b\"" not in message and "{" not in message


async def test_a_bad_request_reads_as_the_providers_own_words(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    server, spec = connect(request, BY_NAME["anthropic"], monkeypatch)
    server.responder = lambda path, body: Reply(status=400,
                                                error_message="prompt is too long: 300000")
    with pytest.raises(LLMError) as raised:
        await step(spec, FAST)
    assert raised.value.kind in ("bad_request", "context_window")
    assert raised.value.message.endswith("prompt is too long: 300000")
    assert len(server.requests) == 1


def test_whitespace_stop_is_never_sent_to_anthropic() -> None:
    spec = ModelSpec("anthropic/claude-3-5-haiku-20241022", api_base="http://127.0.0.1:9")
    assert llm.accepts_native_stop(spec) is False




async def test_ollamas_stream_is_still_bounded(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streamed as it comes now, Ollama's NDJSON is still read to the reply guard's bound: a
    compressed bomb is stopped at 32 MiB."""
    from tests.test_hostile_server import gzip_bomb

    server, spec = connect(request, BY_NAME["ollama_chat"], monkeypatch)
    server.responder = lambda path, body: Reply(raw_chunks=gzip_bomb, headers={
        "Content-Type": "application/x-ndjson", "Content-Encoding": "gzip"})
    with pytest.raises(LLMError) as raised:
        await step(spec, CallSettings(retry=RetryPolicy(attempts=1)))
    assert "passed 32 MiB and was not read further" in raised.value.message


def test_only_one_json_document_is_held_whole() -> None:
    from bbm_tui.core.llm.http_guard import is_whole_json

    assert is_whole_json("application/json; charset=utf-8")
    assert not is_whole_json("application/x-ndjson")
    assert not is_whole_json("application/jsonl")
    assert not is_whole_json("application/json-seq")
    assert not is_whole_json("text/event-stream")
