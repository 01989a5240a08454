"""The local provider servers themselves, over real HTTP (httpx, no litellm): each speaks its
provider's wire as the public API reference describes it, honours a stop where the provider
does, keeps writing past the line break otherwise, and records a client that went away."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.anthropic_server import WHITESPACE_STOP, FakeAnthropic
from tests.fake_server import PromptCache, Reply
from tests.gemini_server import FakeGemini, rate_limited
from tests.ollama_server import FakeOllama
from tests.openai_server import FakeOpenAI

STEP = "Step one is here.\nThought 2: and the model writes on and on"


def sse_events(body: str) -> list[tuple[str | None, dict]]:
    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        name, data = None, None
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                data = line[len("data: "):]
        if data is not None and data != "[DONE]":
            events.append((name, json.loads(data)))
    return events


def wait_for(condition, limit_s: float = 5.0) -> None:
    deadline = time.monotonic() + limit_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)


# -- Anthropic


def messages_body(**extra) -> dict:
    return {"model": "claude-test", "max_tokens": 100, "stream": True,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "a b c"}]}],
            **extra}


def test_anthropic_stream_has_the_messages_events_in_order(
    anthropic_server: FakeAnthropic,
) -> None:
    anthropic_server.enqueue(Reply(text=STEP, cached_tokens=2, cache_write_tokens=0))
    response = httpx.post(f"{anthropic_server.base_url}/v1/messages",
                          json=messages_body(stop_sequences=["Thought 2"]))
    assert response.headers["content-type"].startswith("text/event-stream")
    events = sse_events(response.text)
    names = [name for name, _ in events]
    assert names[:3] == ["message_start", "content_block_start", "ping"]
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert all(name == payload["type"] for name, payload in events)
    start = events[0][1]["message"]
    # Three words in the prompt, two of them read from the cache.
    assert start["usage"] == {"input_tokens": 1, "cache_creation_input_tokens": 0,
                              "cache_read_input_tokens": 2, "output_tokens": 1}
    text = "".join(p["delta"]["text"] for n, p in events if n == "content_block_delta")
    assert text == "Step one is here.\n"  # up to the stop sequence, left out
    delta = events[-2][1]
    assert delta["delta"] == {"stop_reason": "stop_sequence", "stop_sequence": "Thought 2"}
    assert delta["usage"] == {"output_tokens": 4}


def test_anthropic_refuses_a_whitespace_stop_and_names_errors_its_way(
    anthropic_server: FakeAnthropic,
) -> None:
    response = httpx.post(f"{anthropic_server.base_url}/v1/messages",
                          json=messages_body(stop_sequences=["\n"]))
    assert response.status_code == 400
    assert response.json() == {"type": "error", "error": {
        "type": "invalid_request_error", "message": WHITESPACE_STOP}}
    anthropic_server.enqueue(Reply(status=529), Reply(status=429, headers={"retry-after": "3"}))
    overloaded = httpx.post(f"{anthropic_server.base_url}/v1/messages", json=messages_body())
    assert overloaded.status_code == 529
    assert overloaded.json()["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    limited = httpx.post(f"{anthropic_server.base_url}/v1/messages", json=messages_body())
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "3")
    assert limited.json()["error"]["type"] == "rate_limit_error"
    anthropic_server.api_key = "right"
    refused = httpx.post(f"{anthropic_server.base_url}/v1/messages", json=messages_body(),
                         headers={"x-api-key": "wrong"})
    assert refused.status_code == 401
    assert refused.json()["error"]["type"] == "authentication_error"


def test_anthropic_whole_answer_and_its_token_limit(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.enqueue(Reply(text="one two three four five"))
    body = messages_body(stream=False, max_tokens=3)
    answer = httpx.post(f"{anthropic_server.base_url}/v1/messages", json=body).json()
    assert answer["content"] == [{"type": "text", "text": "one two three "}]
    assert (answer["stop_reason"], answer["usage"]["output_tokens"]) == ("max_tokens", 3)
    assert answer["usage"]["input_tokens"] == 3


def test_anthropic_prompt_cache_writes_once_then_reads(anthropic_server: FakeAnthropic) -> None:
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=4)
    anthropic_server.responder = lambda path, body: Reply(text="ok")
    prefix = {"type": "text", "text": "few shot prompt words here",
              "cache_control": {"type": "ephemeral"}}

    def usage(question: str) -> dict:
        body = messages_body(stream=False, messages=[{"role": "user", "content": [
            prefix, {"type": "text", "text": question}]}])
        return httpx.post(f"{anthropic_server.base_url}/v1/messages", json=body).json()["usage"]

    first, second = usage("q one"), usage("q two three")
    assert (first["cache_creation_input_tokens"], first["cache_read_input_tokens"]) == (5, 0)
    assert first["input_tokens"] == 2
    assert (second["cache_creation_input_tokens"], second["cache_read_input_tokens"]) == (0, 5)
    assert second["input_tokens"] == 3
    # Below the minimum nothing is cached, and nothing says so.
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=1024)
    assert usage("q")["cache_creation_input_tokens"] == 0


# -- Gemini


def test_gemini_stream_carries_usage_in_every_chunk_and_ends_at_the_stop(
    gemini_server: FakeGemini,
) -> None:
    gemini_server.enqueue(Reply(text=STEP, cached_tokens=2))
    body = {"contents": [{"role": "user", "parts": [{"text": "a b c"}]}],
            "generationConfig": {"stopSequences": ["\n"], "maxOutputTokens": 50}}
    response = httpx.post(
        f"{gemini_server.base_url}/models/gemini-test:streamGenerateContent?alt=sse", json=body)
    assert response.headers["content-type"].startswith("text/event-stream")
    chunks = [payload for _, payload in sse_events(response.text)]
    assert "".join(c["candidates"][0]["content"]["parts"][0]["text"] for c in chunks) == (
        "Step one is here.")
    assert [c["candidates"][0].get("finishReason") for c in chunks] == [None] * 3 + ["STOP"]
    assert [c["usageMetadata"]["candidatesTokenCount"] for c in chunks] == [1, 2, 3, 4]
    assert all(c["usageMetadata"]["promptTokenCount"] == 3 for c in chunks)
    assert all(c["usageMetadata"]["cachedContentTokenCount"] == 2 for c in chunks)


def test_gemini_errors_have_googles_body(gemini_server: FakeGemini) -> None:
    gemini_server.api_key = "right"
    url = f"{gemini_server.base_url}/models/gemini-test:generateContent"
    body = {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}
    refused = httpx.post(url, json=body, headers={"x-goog-api-key": "wrong"})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"][0]["reason"] == "API_KEY_INVALID"
    gemini_server.enqueue(rate_limited("7s"))
    limited = httpx.post(url, json=body, params={"key": "right"})
    assert limited.status_code == 429
    [retry] = [d for d in limited.json()["error"]["details"] if d["@type"].endswith("RetryInfo")]
    assert retry["retryDelay"] == "7s"
    gemini_server.enqueue(Reply(text="one two three"))
    whole = httpx.post(url, json=body, headers={"x-goog-api-key": "right"}).json()
    assert whole["candidates"][0]["finishReason"] == "STOP"
    assert whole["usageMetadata"]["totalTokenCount"] == 1 + 3


# -- Ollama


@pytest.mark.parametrize("path, field", [("/api/generate", "response"),
                                         ("/api/chat", "message")])
def test_ollama_streams_ndjson_with_its_own_counts(
    ollama_server: FakeOllama, path: str, field: str,
) -> None:
    ollama_server.enqueue(Reply(text=STEP))
    body = {"model": "llama3", "prompt": "a b c", "options": {"stop": ["\n"]}}
    if field == "message":
        body = {"model": "llama3", "messages": [{"role": "user", "content": "a b c"}],
                "options": {"stop": ["\n"]}}
    response = httpx.post(f"{ollama_server.base_url}{path}", json=body)
    assert response.headers["content-type"] == "application/x-ndjson"
    lines = [json.loads(line) for line in response.text.splitlines()]
    texts = [line[field] if field == "response" else line[field]["content"] for line in lines]
    assert "".join(texts) == "Step one is here."
    assert [line["done"] for line in lines] == [False] * 4 + [True]
    last = lines[-1]
    assert (last["done_reason"], last["prompt_eval_count"], last["eval_count"]) == (
        "stop", 3, 4)


# -- OpenAI


def test_openai_usage_chunk_has_cached_tokens(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="one two", cached_tokens=1))
    body = {"model": "gpt-test", "stream": True, "stream_options": {"include_usage": True},
            "messages": [{"role": "user", "content": "a b c"}]}
    response = httpx.post(f"{openai_server.base_url}/chat/completions", json=body)
    usage = [payload for _, payload in sse_events(response.text) if payload.get("usage")]
    assert usage[-1]["usage"] == {"prompt_tokens": 3, "completion_tokens": 2,
                                  "total_tokens": 5,
                                  "prompt_tokens_details": {"cached_tokens": 1}}


def test_automatic_prompt_cache_reads_a_shared_prefix_in_blocks() -> None:
    cache = PromptCache(explicit=False, minimum_tokens=4, block_tokens=2)
    assert cache.usage([("a b c d e", False)]) == (0, 0)
    # Five words shared: two whole blocks of two.
    assert cache.usage([("a b c d e f g", False)]) == (4, 0)
    assert cache.usage([("x y", False)]) == (0, 0)  # below the minimum


# -- every server: a client that goes away is seen


@pytest.mark.parametrize("which", ["openai", "anthropic", "gemini", "ollama"])
def test_each_server_records_a_client_that_went_away(request, which: str) -> None:
    server = request.getfixturevalue(f"{which}_server")
    server.enqueue(Reply(text=" ".join(["word"] * 200), chunk_delay_s=0.01))
    url, body = {
        "openai": ("/chat/completions", {"model": "m", "stream": True,
                                         "messages": [{"role": "user", "content": "hi"}]}),
        "anthropic": ("/v1/messages", messages_body()),
        "gemini": ("/models/m:streamGenerateContent?alt=sse",
                   {"contents": [{"role": "user", "parts": [{"text": "hi"}]}]}),
        "ollama": ("/api/generate", {"model": "m", "prompt": "hi"}),
    }[which]
    if which == "anthropic":
        body["max_tokens"] = 1000
    with httpx.Client() as client, client.stream("POST", server.base_url + url,
                                                 json=body) as response:
        for _ in response.iter_bytes():
            if server.requests[-1].chunks_sent:
                break
    wait_for(lambda: server.requests[-1].client_closed_early)
    record = server.requests[-1]
    assert record.client_closed_early and not record.finished
    assert 0 < record.chunks_sent < 200
