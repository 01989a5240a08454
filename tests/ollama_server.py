"""A local server speaking Ollama's own API, written from its public reference, for litellm's
`ollama/…` (`POST /api/generate`) and `ollama_chat/…` (`POST /api/chat`) adapters pointed at
it with `--api-base` (`FakeOllama.base_url`).

- Streamed (the default; `"stream": false` asks for one object): newline-delimited JSON,
  content type `application/x-ndjson`, one object a line: `response` (generate) or
  `message.content` (chat) holding the next piece of text, `"done": false`; the last line
  is `"done": true` with `done_reason` (`stop`, also at a stop sequence; `length` at
  `num_predict`) and the counts Ollama makes itself: `prompt_eval_count` (the prompt's
  tokens) and `eval_count` (the answer's), with their durations in nanoseconds.
- `options.stop` and `options.num_predict` are honoured.
- Thinking (a reply's `reasoning`), as Ollama 0.9 and later do it: with `"think": true` (or
  an effort, "low" / "medium" / "high", for gpt-oss) in the request, the reasoning streams
  first in its own field (`message.thinking` on /api/chat, `thinking` on /api/generate);
  with no `think` it is left in the content between `<think>` tags, as before; with
  `"think": false` the model does not think. Ollama counts no reasoning tokens apart.
- Errors are `{"error": "..."}` (Ollama has no keys: nothing to refuse).
"""

from __future__ import annotations

import json
import time
from typing import Any

from aiohttp import web

from tests.fake_server import (
    Answer,
    Asked,
    FakeServer,
    Reply,
    Usage,
    pieces_of,
    prompt_of,
    reasoning_pieces,
)

CONTENT_TYPE = "application/x-ndjson"


class FakeOllama(FakeServer):
    thread_name = "fake-ollama"

    @property
    def base_url(self) -> str:
        return self.root_url

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/api/generate", self._generate)
        app.router.add_post("/api/chat", self._chat)
        app.router.add_get("/api/tags", self._tags)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": message}

    def asked(self, body: dict[str, Any], request: web.Request) -> Asked:
        options = body.get("options") or {}
        stops = options.get("stop") or body.get("stop") or ()
        if isinstance(stops, str):
            stops = (stops,)
        limit = options.get("num_predict")
        return Asked(prompt=prompt_of(body), stops=tuple(stops),
                     max_tokens=int(limit) if limit and int(limit) > 0 else None,
                     stream=body.get("stream", True) is not False)

    async def _tags(self, request: web.Request) -> web.StreamResponse:
        return web.json_response({"models": [{"name": "test:latest", "model": "test:latest"}]})

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=False)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=True)

    async def _handle(self, request: web.Request, chat: bool) -> web.StreamResponse:
        record, body = await self._record(request)
        answer = await self._answer(request, record, body)
        if not isinstance(answer, Answer):
            return answer
        reply, asked, text = answer.reply, answer.asked, answer.text
        done_reason = answer.finish("stop", "length")
        think = body.get("think")
        if reply.reasoning and think is None:
            text = f"<think>{reply.reasoning}</think>{text}"
        thought = reasoning_pieces(reply) if think not in (None, False) else []
        pieces = pieces_of(text, reply.chunk_chars)
        framing = _Framing(self, reply, body, asked, chat, done_reason, len(thought))
        if asked.stream:
            return await self._stream(request, record, reply, thought + pieces, framing)
        await self.writing_time(reply, len(thought) + len(pieces))
        whole = framing.line(text, done=True, sent=len(thought) + len(pieces))
        if thought:
            framing.put_thinking(whole, reply.reasoning)
        return web.json_response(whole, headers=reply.headers)


class _Framing:
    content_type = CONTENT_TYPE

    def __init__(self, server: FakeOllama, reply: Reply, body: dict[str, Any], asked: Asked,
                 chat: bool, done_reason: str, thinking: int = 0) -> None:
        self.server, self.reply, self.body, self.asked = server, reply, body, asked
        self.chat, self.done_reason = chat, done_reason
        # The first `thinking` pieces are the reasoning, in its own field.
        self.thinking = thinking

    def put_thinking(self, line: dict[str, Any], text: str) -> None:
        if self.chat:
            line["message"]["thinking"] = text
        else:
            line["thinking"] = text

    def line(self, text: str, done: bool, sent: int = 0) -> dict[str, Any]:
        line: dict[str, Any] = {"model": self.body.get("model", "test"),
                                "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ")}
        if self.chat:
            line["message"] = {"role": "assistant", "content": text}
        else:
            line["response"] = text
        line["done"] = done
        if done:
            line["done_reason"] = self.done_reason
            if self.reply.usage:
                line |= _counts(self.server.usage_of(self.reply, self.asked, sent))
            if self.reply.usage_values is not None:
                line |= self.reply.usage_values
            if not self.chat:
                line["context"] = [1, 2, 3]
        return line

    def opening(self) -> list[bytes]:
        return []

    def piece(self, text: str, index: int, last: bool) -> bytes:
        if index < self.thinking:
            line = self.line("", done=False)
            self.put_thinking(line, text)
            return _ndjson(line)
        return _ndjson(self.line(text, done=False))

    def malformed(self) -> bytes:
        return b'{"model": "test", "response": "x"\n'

    def closing(self, sent: int) -> list[bytes]:
        return [_ndjson(self.line("", done=True, sent=sent))]


def _counts(usage: Usage) -> dict[str, int]:
    return {"total_duration": 5_000_000, "load_duration": 1_000_000,
            "prompt_eval_count": usage.prompt, "prompt_eval_duration": 2_000_000,
            "eval_count": usage.completion, "eval_duration": 2_000_000}


def _ndjson(payload: dict[str, Any]) -> bytes:
    return json.dumps(payload).encode() + b"\n"


__all__ = ["CONTENT_TYPE", "FakeOllama", "Reply"]
