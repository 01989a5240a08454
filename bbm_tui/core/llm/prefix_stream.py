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

The replies are read through the same guard as every reply (core/llm/http_guard.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from bbm_tui.core.llm.errors import LLMError
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
    error_kind,
)
from bbm_tui.core.types import TokenLogprob

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
    import httpx

    prompt = await prefixer.prompt(kept)
    path, body = _request(prefixer, prompt, settings)
    url = _root(prefixer.spec) + path
    reader = _Reader(prefixer.wire, url)
    started = time.monotonic()
    try:
        async with prefixer.http_client().stream("POST", url, json=body,
                                                 timeout=settings.timeout_s) as response:
            if response.status_code >= 400:
                text = (await response.aread()).decode("utf-8", "replace")
                raise LLMError(error_kind(response.status_code),
                               f"{url} answered {response.status_code}: {text[:300]}")
            async for line in response.aiter_lines():
                piece = reader.line(line)
                if piece:
                    yield piece
                if reader.done:
                    break
    except httpx.TimeoutException:
        raise LLMError("timeout", f"{url} went silent for {settings.timeout_s:g} s") from None
    except httpx.HTTPError as error:
        raise LLMError("connection", f"{url}: {error}") from None
    yield reader.continuation(prefixer, body, time.monotonic() - started)


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
