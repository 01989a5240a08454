"""A real OpenAI-compatible HTTP server on 127.0.0.1 for the tests and benchmarks.

It serves `/v1/chat/completions` and `/v1/completions`, streamed (SSE) or not, from a script
of `Reply`s (first in, first out) and, when the script is empty, from a `responder` function.
Faults are scripted too: HTTP errors with headers (429 + Retry-After), a connection dropped
mid-stream, a malformed chunk, a stall, a server that ignores `stop` or `max_tokens`; whole
(non-streamed) answers can be cut off, malformed or stalled half-way through their body.
Hostile replies with status 200 too (see `Reply`): an HTML page, an event stream whose body is
HTML, `[DONE]` first, a gzip bomb, invalid UTF-8, absurd usage, a stream ended with no finish
reason, any line break, a slow drip (`chunk_chars=1, chunk_delay_s=N`); and a server that
serves one request at a time by cutting the running stream short (`one_request_at_a_time`,
as llama-cpp-python's does). Its usage is OpenAI's, `prompt_tokens_details.cached_tokens`
included (in the last chunk of a stream asked for with `stream_options.include_usage`).

llama.cpp's `llama-server` is copied where it differs (`withhold_token_before_stop`): a whole
(non-streamed) answer that ended at a stop sequence has a token list that leaves out the last
token before the stop (measured: it drops as many tokens from the end as its tokenizer makes
of the stop string, and the Llama vocabulary makes two of "\n", so " alphabet." comes with
the tokens of " alphabet"). A streamed answer sends every token.

The machinery (start on a free port, scripting, recording, the streaming loop) is
tests/fake_server.py's, shared with the other providers' servers.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from aiohttp import web

from tests.fake_server import (
    Answer,
    Asked,
    FakeServer,
    RecordedRequest,
    Reply,
    Responder,
    Usage,
    choice_logprob,
    choice_texts,
    dataset_responder,
    limited_text,
    pieces_of,
    prompt_of,
    reasoning_count,
    reasoning_pieces,
    token_logprob,
)

__all__ = ["FakeOpenAI", "RecordedRequest", "Reply", "Responder", "dataset_responder"]

# The name the tests have long imported: a model's text in streamed pieces.
_pieces = pieces_of


class FakeOpenAI(FakeServer):
    thread_name = "fake-openai"

    def __init__(self, latency_s: float = 0.0) -> None:
        super().__init__(latency_s)
        # llama-cpp-python's server: any request that arrives (GET /v1/models too) stops the
        # generation running, whose stream then ends with [DONE] and no finish reason.
        self.one_request_at_a_time = False
        self._arrivals = 0
        # llama-server: a whole answer stopped at a stop sequence leaves the token before the
        # stop out of its token list.
        self.withhold_token_before_stop = False

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._text)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_post("/completions", self._text)
        app.router.add_get("/v1/models", self._models)
        # A gateway that takes a key in the path (`/ok/sk-.../v1`), as some proxies do.
        app.router.add_post("/{prefix:.+}/v1/chat/completions", self._chat)
        app.router.add_post("/{prefix:.+}/v1/completions", self._text)

    def reset(self) -> None:
        super().reset()
        self.one_request_at_a_time = False
        self.withhold_token_before_stop = False

    def asked(self, body: dict[str, Any], request: web.Request) -> Asked:
        stops = body.get("stop") or []
        if isinstance(stops, str):
            stops = [stops]
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        return Asked(prompt=_prompt_text(body), stops=tuple(stops),
                     max_tokens=int(max_tokens) if max_tokens else None,
                     stream=bool(body.get("stream")))

    # -- handlers

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=True)

    async def _text(self, request: web.Request) -> web.StreamResponse:
        return await self._handle(request, chat=False)

    async def _models(self, request: web.Request) -> web.StreamResponse:
        self._arrivals += 1
        return web.json_response({"object": "list", "data": [
            {"id": "test-model", "object": "model", "owned_by": "test"}]})

    async def _handle(self, request: web.Request, chat: bool) -> web.StreamResponse:
        self._arrivals += 1
        record, body = await self._record(request)
        record.arrival = self._arrivals
        answer = await self._answer(request, record, body)
        if not isinstance(answer, Answer):
            return answer
        reply, asked, text = answer.reply, answer.asked, answer.text
        if asked.stream:
            if reply.raw_text is not None:
                return await self._raw_text(request, reply, body, chat, asked)
            thinking = _thinking_pieces(reply)
            pieces = pieces_of(_content(reply, text), reply.chunk_chars)
            framing = _Framing(reply, body, chat, asked, self, len(thinking))
            return await self._stream(request, record, reply, thinking + pieces, framing)
        await self.writing_time(reply, len(pieces_of(text, reply.chunk_chars)))
        whole = self._whole(reply, text, chat, body, asked)
        if reply.drop_after_chunks is not None or reply.malformed_after_chunks is not None or (
            reply.stall_s
        ):
            return await self._faulty_whole(request, reply, whole)
        return web.json_response(whole, headers=reply.headers)

    def _interrupted(self, record: RecordedRequest) -> bool:
        if self.one_request_at_a_time and self._arrivals != record.arrival:
            record.interrupted = True
        return record.interrupted

    async def _end_interrupted(self, response: web.StreamResponse, framing: Any) -> None:
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()

    async def _faulty_whole(
        self, request: web.Request, reply: Reply, payload: dict
    ) -> web.StreamResponse:
        data = json.dumps(payload).encode()
        if reply.malformed_after_chunks is not None:
            data = data[: len(data) // 2]  # a body cut in the middle of the JSON
        response = web.StreamResponse(
            headers={"Content-Type": "application/json", **reply.headers}
        )
        response.content_length = len(data)
        await response.prepare(request)
        half = len(data) // 2
        await response.write(data[:half])
        if reply.drop_after_chunks is not None:
            request.transport.abort() if request.transport else None
            return response
        if reply.stall_s:
            await asyncio.sleep(reply.stall_s)
        await response.write(data[half:])
        await response.write_eof()
        return response

    def _whole(self, reply: Reply, text: str, chat: bool, body: dict[str, Any],
               asked: Asked) -> dict:
        texts = choice_texts(reply, text, int(body.get("n") or 1), asked)
        counted = texts[:1] if reply.usage_one_choice else texts
        thought = len(_thinking_pieces(reply))
        usage = openai_usage(self.usage_of(reply, asked, thought + _unshown(reply, thought) + sum(
            len(pieces_of(t, None)) for t in counted), reasoning_count(reply, thought)))
        if reply.usage_values is not None:
            usage = dict(reply.usage_values)
        choices = []
        for index, choice_text in enumerate(texts):
            logprobs = self._whole_logprobs(reply, choice_text, index, chat, body, asked)
            if chat:
                message = {"role": "assistant", "content": _content(reply, choice_text)}
                if reply.reasoning and reply.reasoning_wire not in ("think_tags",
                                                                     "think_closed"):
                    message[reply.reasoning_wire] = reply.reasoning
                choice = {"index": index, "message": message,
                          "finish_reason": reply.finish_reason, "logprobs": logprobs}
            else:
                choice = {"index": index, "text": choice_text,
                          "finish_reason": reply.finish_reason, "logprobs": logprobs}
            choices.append(choice)
        return {
            "id": "test-1",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": choices,
            "usage": usage if reply.usage else None,
        }

    def _whole_logprobs(self, reply: Reply, text: str, index: int, chat: bool,
                        body: dict[str, Any], asked: Asked) -> dict | None:
        if not body.get("logprobs"):
            return None
        value = choice_logprob(reply, index)
        if value is None and reply.logprob_values is None:
            return None
        pieces = self._logprob_pieces(reply, text, index, asked)
        values = [token_logprob(reply, place, value) for place in range(len(pieces))]
        if chat or reply.logprob_form == "chat":
            return {"content": [_chat_logprob(piece, value, reply, body)
                                for piece, value in zip(pieces, values, strict=True)]}
        top = [dict(_alternatives(piece, value, reply, body))
               for piece, value in zip(pieces, values, strict=True)]
        return {"tokens": pieces, "token_logprobs": values,
                "top_logprobs": top if reply.alternatives else None, "text_offset": None}

    def _logprob_pieces(self, reply: Reply, text: str, index: int, asked: Asked) -> list[str]:
        """The tokens whose log-probabilities are sent: every one of the text, except on a
        llama-server whose answer stopped at a stop sequence: the last one is left out."""
        pieces = pieces_of(text, None)
        if self.withhold_token_before_stop and pieces and _stopped_at_stop(reply, index, asked):
            return pieces[:-1]
        return pieces

    async def _raw_text(self, request: web.Request, reply: Reply, body: dict,
                        chat: bool, asked: Asked) -> web.StreamResponse:
        """Stream `raw_text` as bytes, cut anywhere (mid-character too): each piece is a JSON
        string built from the raw bytes, so invalid UTF-8 reaches the client as sent."""
        assert reply.raw_text is not None
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                     **reply.headers})
        await response.prepare(request)
        for event in reply.raw_events or []:
            await response.write(b"data: " + event + b"\n\n")
        size = reply.chunk_chars or 3
        pieces = [reply.raw_text[i:i + size] for i in range(0, len(reply.raw_text), size)]
        framing = _Framing(reply, body, chat, asked, self)
        for piece in pieces:
            payload = json.dumps(framing.chunk("@@PIECE@@", None)).encode()
            await response.write(
                b"data: " + payload.replace(b"@@PIECE@@", _json_string_bytes(piece)) + b"\n\n"
            )
        for event in framing.closing(len(pieces)):
            await response.write(event)
        await response.write_eof()
        return response


class _Framing:
    """OpenAI's stream: a chunk per piece, a chunk with the finish reason, the usage chunk
    (when asked for), `[DONE]`."""

    content_type = "text/event-stream"

    def __init__(self, reply: Reply, body: dict[str, Any], chat: bool, asked: Asked,
                 server: FakeOpenAI, thinking: int = 0) -> None:
        self.server, self.reply, self.body, self.chat = server, reply, body, chat
        self.asked = asked
        # The first `thinking` pieces are the reasoning, in the reply's reasoning field.
        self.thinking = thinking

    def opening(self) -> list[bytes]:
        return [b"data: " + event + b"\n\n" for event in self.reply.raw_events or []]

    def piece(self, text: str, index: int, last: bool) -> bytes:
        if index < self.thinking:
            return _sse(self.chunk(text, None, field=self.reply.reasoning_wire))
        return _sse(self.chunk(text, None, place=index - self.thinking))

    def malformed(self) -> bytes:
        return b'data: {"choices": [{"delta": {"content": "x"\n\ndata: [DONE]\n\n'

    def closing(self, sent: int) -> list[bytes]:
        events = []
        reply = self.reply
        if reply.finish_reason is not None:
            events.append(_sse(self.chunk("", reply.finish_reason)))
        options = self.body.get("stream_options") or {}
        if reply.usage and options.get("include_usage"):
            thought = min(sent, self.thinking)
            usage = openai_usage(self.server.usage_of(
                reply, self.asked, sent + _unshown(reply, self.thinking),
                reasoning_count(reply, thought)))
            events.append(_sse({
                "id": "test-1", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": self.body.get("model", "test"),
                "choices": [],
                "usage": reply.usage_values if reply.usage_values is not None else usage,
            }))
        events.append(b"data: [DONE]\n\n")
        return events

    def chunk(self, piece: str, finish: str | None, place: int = 0,
              field: str = "content") -> dict:
        reply, body = self.reply, self.body
        if self.chat:
            choice: dict[str, Any] = {
                "index": 0,
                "delta": {field: piece} if piece else {},
                "finish_reason": finish,
            }
            value = token_logprob(reply, place, reply.logprob_per_token)
            if value is not None and piece and field == "content":
                choice["logprobs"] = {"content": [_chat_logprob(piece, value, reply, body)]}
            kind = "chat.completion.chunk"
        else:
            choice = {"index": 0, "text": piece, "finish_reason": finish, "logprobs": None}
            kind = "text_completion"
        return {
            "id": "test-1",
            "object": kind,
            "created": int(time.time()),
            "model": body.get("model", "test"),
            "choices": [choice],
        }


def openai_usage(usage: Usage) -> dict[str, Any]:
    """OpenAI's usage object: the cached part of the prompt in `prompt_tokens_details`, the
    reasoning's part of the completion (a thinking model's) in `completion_tokens_details`."""
    found: dict[str, Any] = {"prompt_tokens": usage.prompt,
                             "completion_tokens": usage.completion,
                             "total_tokens": usage.prompt + usage.completion,
                             "prompt_tokens_details": {"cached_tokens": usage.cached}}
    if usage.reasoning:
        found["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning}
    return found


def _thinking_pieces(reply: Reply) -> list[str]:
    """The reasoning's pieces, streamed in its own field before the content (none where the
    server leaves it in the content between `<think>` tags)."""
    return [] if reply.reasoning_wire in ("think_tags", "think_closed") else (
        reasoning_pieces(reply))


def _unshown(reply: Reply, shown: int) -> int:
    """Reasoning tokens written but not sent as text (OpenAI's o-series): part of the
    completion's count all the same."""
    return (reply.reasoning_tokens or 0) if not shown else 0


def _content(reply: Reply, text: str) -> str:
    """The content the server sends: the text, after `<think>…</think>` where the server
    leaves the reasoning in it (`think_tags`), or after `…</think>` alone where the chat
    template opened the reasoning in the prompt (`think_closed`: DeepSeek-R1's)."""
    if reply.reasoning and reply.reasoning_wire == "think_tags":
        return f"<think>{reply.reasoning}</think>{text}"
    if reply.reasoning and reply.reasoning_wire == "think_closed":
        return f"{reply.reasoning}</think>{text}"
    return text


def _stopped_at_stop(reply: Reply, index: int, asked: Asked) -> bool:
    """Whether choice `index` ended at one of the request's stop sequences."""
    text = reply.choices[index % len(reply.choices)] if reply.choices else reply.text
    return limited_text(reply, text, asked.stops, asked.max_tokens)[1] == "stop"


def _prompt_text(body: dict[str, Any]) -> str:
    """The prompt as OpenAI counts it: the messages' contents joined (or the raw prompt)."""
    if "messages" in body:
        return " ".join(str(message.get("content", "")) for message in body["messages"])
    return prompt_of(body)


def _json_string_bytes(raw: bytes) -> bytes:
    """The inside of a JSON string holding `raw` byte for byte: quotes, backslashes and
    control bytes escaped, everything else (invalid UTF-8 included) left as it is."""
    out = bytearray()
    for byte in raw:
        if byte in (0x22, 0x5C):
            out += b"\\" + bytes([byte])
        elif byte < 0x20:
            out += f"\\u{byte:04x}".encode()
        else:
            out.append(byte)
    return bytes(out)


def _asked_alternatives(body: dict[str, Any]) -> int:
    """How many alternatives the request asked for: chat's `top_logprobs`, or the number
    `logprobs` of a text completion (`true` there, as chat sends it, asks for none)."""
    asked = body.get("top_logprobs")
    if asked is None and not isinstance(body.get("logprobs"), bool):
        asked = body.get("logprobs")
    return int(asked or 0)


def _alternatives(piece: str, value: float, reply: Reply,
                  body: dict[str, Any]) -> list[tuple[str, float]]:
    if reply.alternatives is None:
        return []
    found = reply.alternatives(piece, value)
    return found if reply.every_alternative else found[:_asked_alternatives(body)]


def _chat_logprob(piece: str, value: float, reply: Reply, body: dict[str, Any]) -> dict:
    """One token in the chat form (llama-server sends it on /v1/completions too)."""
    return {"token": piece, "logprob": value, "bytes": list(piece.encode()),
            "top_logprobs": [{"token": text, "logprob": logprob, "bytes": list(text.encode())}
                             for text, logprob in _alternatives(piece, value, reply, body)]}


def _sse(payload: dict) -> bytes:
    return f"data: {json.dumps(payload)}\n\n".encode()

