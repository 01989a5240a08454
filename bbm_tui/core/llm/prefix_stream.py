"""Going on from a prefix, streamed (issue 35): the app's new branch after backtracking a
thinking step shows its thoughts as they come, as the thinking mode's do. The same three wires
as prefix.py, each asked to stream (measured against llama.cpp's llama-server, docs/NOTES.md
"Going on from a prefix of the reasoning"):

- `llama_server`: `POST /completion` with `stream: true` sends server-sent events, one
  `data: {...}` a token (`content`, `completion_probabilities` with `n_probs`) and a last one
  with `stop: true`, `stop_type` and the counts; no `[DONE]`;
- `completions`: `/v1/completions` with `stream: true` (and `stream_options.include_usage`)
  sends OpenAI's text-completion chunks (`choices[0].text`, `finish_reason`, `usage` on the
  last), then `data: [DONE]`;
- `ollama`: `/api/generate` streams newline-delimited JSON (`response`, and `done: true` with
  `done_reason` and the counts on the last).

The replies are read through the same guard as every reply (core/llm/http_guard.py). A call
is retried as every call is (errors.with_retries: a connection reset, a timeout, a 429 or 5xx,
waiting what Retry-After says) up to its first text; after text has come, a failure is raised
after it (the caller keeps what came and says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from bbm_tui.core.llm.errors import LLMError, with_retries
from bbm_tui.core.llm.prefix import (
    Continuation,
    Prefixer,
    PrefixSettings,
    _completion_tokens,
    _completions_body,
    _llama_body,
    _llama_tokens,
    _model_name,
    _ollama_body,
    _record,
    _root,
    status_error,
)
from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.types import RetryPolicy

_FINISH = {"limit": "length", "eos": "stop", "word": "stop", "length": "length",
           "stop": "stop"}


async def stream_continuation(prefixer: Prefixer, kept: str, settings: PrefixSettings
                              ) -> AsyncIterator[str | Continuation]:
    """One continuation after `kept` as it comes: its text in pieces, then the whole
    Continuation. A server streams it; solver/thinking writes at the replay's pace, a token a
    piece, as its thinking calls stream. Raises LLMError."""
    if prefixer.wire == "offline":
        async for item in _offline(prefixer, kept, settings):
            yield item
        return
    async for item in _served(prefixer, kept, settings):
        yield item


async def _offline(prefixer: Prefixer, kept: str, settings: PrefixSettings
                   ) -> AsyncIterator[str | Continuation]:
    from bbm_tui.core.llm.offline.replay import paced_pieces, seconds_per_token

    continuation = await prefixer.go_on(kept, settings)
    pace = seconds_per_token()
    for piece in paced_pieces(continuation.text, pace):
        await asyncio.sleep(pace)
        yield piece
    yield continuation


async def _served(prefixer: Prefixer, kept: str, settings: PrefixSettings
                  ) -> AsyncIterator[str | Continuation]:
    prompt = await prefixer.prompt(kept)
    path, body = _request(prefixer, prompt, settings)
    url = _root(prefixer.spec) + path
    started = time.monotonic()

    async def attempt(_attempt: int) -> _Opened:
        return await _open(prefixer, url, body, settings)

    # Retried only until its first text: then it is on screen and stored, and a new call
    # would write another text after it.
    opened: _Opened = await with_retries(prefixer.spec, RetryPolicy(), attempt)
    reader = opened.reader
    async with opened.stream:
        if opened.first:
            yield opened.first
        while not reader.done:
            piece = await _read(opened, url, settings)
            if piece is None:
                break
            if piece:
                yield piece
    yield reader.continuation(prefixer, body, time.monotonic() - started)


@dataclass
class _Opened:
    """A stream that has begun: its response held open (`stream` closes it), its lines, what
    it has sent so far and its first text ("": it ended before any)."""

    stream: contextlib.AsyncExitStack
    lines: AsyncIterator[str]
    reader: _Reader
    first: str = ""


async def _open(prefixer: Prefixer, url: str, body: dict[str, Any],
                settings: PrefixSettings) -> _Opened:
    """One attempt: the request sent and its stream read up to its first text (or its end).
    Raises LLMError (an error status, a connection reset, a timeout), the stream closed."""
    stream = contextlib.AsyncExitStack()
    try:
        try:
            response = await stream.enter_async_context(prefixer.http_client().stream(
                "POST", url, json=body, timeout=settings.timeout_s))
        except Exception as error:
            raise _http_error(error, url, settings) from None
        if response.status_code >= 400:
            try:
                text = (await response.aread()).decode("utf-8", "replace")
            except Exception as error:
                raise _http_error(error, url, settings) from None
            raise status_error(url, response.status_code, text, response.headers)
        opened = _Opened(stream, response.aiter_lines(), _Reader(prefixer.wire, url))
        while not opened.reader.done:
            piece = await _read(opened, url, settings)
            if piece is None:
                break
            if piece:
                opened.first = piece
                break
        return opened
    except BaseException:
        await stream.aclose()
        raise


async def _read(opened: _Opened, url: str, settings: PrefixSettings) -> str | None:
    """The text the stream's next line adds ("" for none); None: the stream ended. Raises
    LLMError."""
    try:
        line = await anext(opened.lines)
    except StopAsyncIteration:
        return None
    except Exception as error:
        raise _http_error(error, url, settings) from None
    return opened.reader.line(line)


def _http_error(error: Exception, url: str, settings: PrefixSettings) -> Exception:
    """httpx's failure as an LLMError (others as they are)."""
    import httpx

    if isinstance(error, httpx.TimeoutException):
        return LLMError("timeout", f"{url} went silent for {settings.timeout_s:g} s")
    if isinstance(error, httpx.HTTPError):
        return LLMError("connection", f"{url}: {error}")
    return error


def _request(prefixer: Prefixer, prompt: str, settings: PrefixSettings
             ) -> tuple[str, dict[str, Any]]:
    if prefixer.wire == "llama_server":
        return "/completion", {**_llama_body(prompt, settings), "stream": True}
    model = _model_name(prefixer.spec)
    if prefixer.wire == "ollama":
        return "/api/generate", {**_ollama_body(model, prompt, settings), "stream": True}
    return "/v1/completions", {**_completions_body(model, prompt, settings), "stream": True,
                               "stream_options": {"include_usage": True}}


@dataclass
class _Reader:
    """What a stream has sent so far, read a line at a time."""

    wire: str
    url: str
    text: list[str] = field(default_factory=list)
    tokens: list[TokenLogprob] = field(default_factory=list)
    scored: bool = True  # every piece came with its log-probabilities
    finish: str | None = None
    prompt_tokens: Any = None
    completion_tokens: Any = None
    done: bool = False

    def line(self, line: str) -> str:
        """The text one line of the stream adds ("" for none)."""
        line = line.strip()
        if not line or line.startswith(":"):
            return ""
        if self.wire != "ollama":
            if not line.startswith("data:"):
                return ""  # `event:`, `id:` and the like
            line = line[len("data:"):].strip()
            if line == "[DONE]":
                self.done = True
                return ""
        try:
            chunk = json.loads(line)
        except ValueError:
            raise LLMError("unknown", f"{self.url} streamed something that is not "
                           "JSON") from None
        if not isinstance(chunk, dict):
            raise LLMError("unknown", f"{self.url} streamed JSON that is not an object")
        piece = (self._llama(chunk) if self.wire == "llama_server" else
                 self._ollama(chunk) if self.wire == "ollama" else self._completions(chunk))
        self.text.append(piece)
        return piece

    def _llama(self, chunk: dict[str, Any]) -> str:
        if chunk.get("completion_probabilities") is not None:
            self._scored(_llama_tokens(chunk))
        if chunk.get("stop") is True:
            self.done = True
            self.finish = _FINISH.get(str(chunk.get("stop_type", "")))
            self.prompt_tokens = chunk.get("tokens_evaluated")
            self.completion_tokens = chunk.get("tokens_predicted")
        return _text(chunk.get("content"))

    def _completions(self, chunk: dict[str, Any]) -> str:
        usage = chunk.get("usage")
        if isinstance(usage, dict):
            self.prompt_tokens = usage.get("prompt_tokens")
            self.completion_tokens = usage.get("completion_tokens")
        choices = chunk.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return ""
        choice = choices[0]
        if choice.get("logprobs") is not None:
            self._scored(_completion_tokens(choice.get("logprobs")))
        if isinstance(choice.get("finish_reason"), str):
            self.finish = _FINISH.get(choice["finish_reason"], choice["finish_reason"])
        return _text(choice.get("text"))

    def _ollama(self, chunk: dict[str, Any]) -> str:
        if chunk.get("done") is True:
            self.done = True
            self.finish = _FINISH.get(str(chunk.get("done_reason", "")))
            self.prompt_tokens = chunk.get("prompt_eval_count")
            self.completion_tokens = chunk.get("eval_count")
        return _text(chunk.get("response"))

    def _scored(self, tokens: list[TokenLogprob] | None) -> None:
        if tokens is None:
            self.scored = False
        else:
            self.tokens.extend(tokens)

    def continuation(self, prefixer: Prefixer, body: dict[str, Any],
                     latency_s: float) -> Continuation:
        asked = "n_probs" in body or "logprobs" in body
        tokens = self.tokens if asked and self.scored and self.tokens else None
        call = _record(prefixer.spec, body, latency_s, self.prompt_tokens,
                       self.completion_tokens, self.finish, tokens)
        return Continuation("".join(self.text), tokens, self.finish, call)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
