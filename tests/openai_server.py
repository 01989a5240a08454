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
as llama-cpp-python's does). It
records every request and whether the client hung up before the stream was over, so a test
can check that a stream was closed early.

It runs aiohttp (already a litellm dependency) on its own event loop in a thread, so the
code under test talks to it over real sockets from any loop.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from aiohttp import web


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    error_body: dict[str, Any] | None = None
    # Stream `text` in pieces of this many characters (None: word by word).
    chunk_chars: int | None = None
    honor_stop: bool = True
    honor_max_tokens: bool = True
    delay_s: float = 0.0  # before the response starts
    # Hold the response until a test sets this (or `hold_s` passes): a call that is still out
    # when the test says so, whatever the machine's speed.
    hold: threading.Event | None = None
    hold_s: float = 10.0
    chunk_delay_s: float = 0.0  # between streamed chunks
    # After the stream's headers, before its first chunk: a model thinking before it writes.
    first_chunk_delay_s: float = 0.0
    # Close the socket abruptly after N chunks; a whole (non-streamed) answer is cut off
    # half-way through its body instead.
    drop_after_chunks: int | None = None
    # Send a chunk that is not JSON after N chunks; a whole answer's body is not JSON.
    malformed_after_chunks: int | None = None
    # Go silent for this long after the first chunk (a whole answer: after half its body),
    # then carry on.
    stall_s: float = 0.0
    logprob_per_token: float | None = None
    # Each token's log-probability in turn, sent as is (streamed or whole), in place of
    # `logprob_per_token`: values no model could give (NaN, 3999.9, true) among good ones.
    logprob_values: list[Any] | None = None
    usage: bool = True
    # None: the stream ends ([DONE]) with no finish reason, as an interrupted llama-cpp-python
    # stream does.
    finish_reason: str | None = "stop"
    # Usage sent verbatim instead of counted (absurd values: 2**64, 1e23, -5, NaN, "lots").
    usage_values: dict[str, Any] | None = None
    # Hostile replies, all with status 200: `raw_body` is the whole body, sent as is (with
    # `headers`, e.g. an HTML page); `raw_chunks` yields the body piece by piece (a gzip bomb
    # too big to hold); `raw_events` are SSE payloads sent before the answer's own chunks
    # (`[DONE]` first; an HTML page as an event stream).
    raw_body: bytes | None = None
    raw_chunks: Callable[[], Iterable[bytes]] | None = None
    raw_events: list[bytes] | None = None
    # Stream the text as raw bytes in pieces this long, splitting multi-byte characters and
    # able to carry invalid UTF-8 (`raw_text`).
    raw_text: bytes | None = None
    # `n` (whole answers): the choices' texts, and each choice's log-probability per token
    # (None: `logprob_per_token` for all). Real servers differ: llama-cpp-python ignores `n`
    # (`ignore_n`), llama-server caps it at its slot count (`max_n`) and counts usage for one
    # choice only (`usage_one_choice`). `logprob_form` for text completions: "chat"
    # (llama-server's `content`) or "legacy" (OpenAI's `tokens` + `token_logprobs`).
    choices: list[str] | None = None
    choice_logprobs: list[float] | None = None
    ignore_n: bool = False
    max_n: int | None = None
    usage_one_choice: bool = False
    logprob_form: str = "chat"
    # Each token's top alternatives (`top_logprobs`), as real servers send them: the most
    # likely first, as many as the request asked for (`top_logprobs` in chat, the number
    # `logprobs` on /v1/completions) and no more. Given a token's text and log-probability,
    # the list to cut from (usually the token itself among them). None: `top_logprobs: []`.
    alternatives: Callable[[str, float], list[tuple[str, float]]] | None = None
    # Send every alternative `alternatives` gives, however many the request asked for (a
    # hostile or broken server: 56,000 a choice).
    every_alternative: bool = False


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    client_closed_early: bool = False
    chunks_sent: int = 0
    # Cut short by a later request (`FakeOpenAI.one_request_at_a_time`).
    interrupted: bool = False
    # A held reply (`Reply.hold`): let go by the test's event (not by the time limit).
    released: bool = False


Responder = Callable[[str, dict[str, Any]], Reply]


def _pieces(text: str, chunk_chars: int | None) -> list[str]:
    if not text:
        return []
    if chunk_chars:
        return [text[i : i + chunk_chars] for i in range(0, len(text), chunk_chars)]
    pieces, current = [], ""
    for character in text:
        current += character
        if character in " \n":
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces


class FakeOpenAI:
    def __init__(self, latency_s: float = 0.0) -> None:
        self.script: deque[Reply] = deque()
        self.responder: Responder | None = None
        self.requests: list[RecordedRequest] = []
        self.latency_s = latency_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.port = 0
        # llama-cpp-python's server: any request that arrives (GET /v1/models too) stops the
        # generation running, whose stream then ends with [DONE] and no finish reason.
        self.one_request_at_a_time = False
        self._arrivals = 0
        self.streaming_now = 0
        self.most_streaming_at_once = 0

    # -- lifecycle

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._start_site())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="fake-openai", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the test server did not start")
        return self

    async def _start_site(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/completions", self._text)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_post("/completions", self._text)
        app.router.add_get("/v1/models", self._models)
        # A gateway that takes a key in the path (`/ok/sk-.../v1`), as some proxies do.
        app.router.add_post("/{prefix:.+}/v1/chat/completions", self._chat)
        app.router.add_post("/{prefix:.+}/v1/completions", self._text)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=256)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.responder = None
            self.latency_s = 0.0
            self.one_request_at_a_time = False
            self.most_streaming_at_once = 0

    # -- scripting

    def enqueue(self, *replies: Reply) -> None:
        with self._lock:
            self.script.extend(replies)

    def _next_reply(self, path: str, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self.script:
                return self.script.popleft()
            responder = self.responder
        if responder is None:
            return Reply(status=500, error_body={"error": {"message": "no reply scripted"}})
        return responder(path, body)

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
        body = await request.json()
        record = RecordedRequest(request.path, body, dict(request.headers))
        with self._lock:
            self.requests.append(record)
        reply = self._next_reply(request.path, body)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.hold is not None:
            await self._hold(record, reply.hold, reply.hold_s)
        if reply.status != 200:
            error = reply.error_body or {
                "error": {"message": f"scripted status {reply.status}", "type": "test"}
            }
            return web.json_response(error, status=reply.status, headers=reply.headers)
        if reply.raw_body is not None or reply.raw_chunks is not None:
            return await self._raw(request, reply)
        text = self._apply_limits(reply, body)
        if body.get("stream"):
            return await self._stream(request, record, reply, text, chat, body)
        if reply.drop_after_chunks is not None or reply.malformed_after_chunks is not None or (
            reply.stall_s
        ):
            return await self._faulty_whole(request, reply, self._whole(reply, text, chat, body))
        return web.json_response(self._whole(reply, text, chat, body), headers=reply.headers)

    async def _hold(self, record: RecordedRequest, event: threading.Event, limit_s: float
                    ) -> None:
        deadline = time.monotonic() + limit_s
        try:
            while not event.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
        except asyncio.CancelledError:  # the client hung up while it was held
            record.client_closed_early = True
            raise
        record.released = event.is_set()

    async def _raw(self, request: web.Request, reply: Reply) -> web.StreamResponse:
        """A 200 whose body is not a model's answer, exactly as scripted."""
        response = web.StreamResponse(status=200, headers=reply.headers)
        await response.prepare(request)
        try:
            if reply.raw_body is not None:
                await response.write(reply.raw_body)
            else:
                assert reply.raw_chunks is not None
                for piece in reply.raw_chunks():
                    if request.transport is None or request.transport.is_closing():
                        return response
                    await response.write(piece)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        return response

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

    def _apply_limits(self, reply: Reply, body: dict[str, Any]) -> str:
        text = reply.text
        if reply.honor_stop:
            stops = body.get("stop") or []
            if isinstance(stops, str):
                stops = [stops]
            for stop in stops:
                if stop and stop in text:
                    text = text[: text.index(stop)]
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        if reply.honor_max_tokens and max_tokens:
            text = "".join(_pieces(text, None)[: int(max_tokens)])
        return text

    def _whole(self, reply: Reply, text: str, chat: bool, body: dict[str, Any]) -> dict:
        texts = self._choice_texts(reply, text, body)
        counted = texts[:1] if reply.usage_one_choice else texts
        usage: dict[str, Any] = {
            "prompt_tokens": _count_prompt_tokens(body),
            "completion_tokens": sum(len(_pieces(t, None)) for t in counted),
        }
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        if reply.usage_values is not None:
            usage = dict(reply.usage_values)
        choices = []
        for index, choice_text in enumerate(texts):
            logprobs = self._whole_logprobs(reply, choice_text, index, chat, body)
            if chat:
                choice = {"index": index,
                          "message": {"role": "assistant", "content": choice_text},
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

    def _choice_texts(self, reply: Reply, text: str, body: dict[str, Any]) -> list[str]:
        wanted = 1 if reply.ignore_n else int(body.get("n") or 1)
        if reply.max_n is not None:
            wanted = min(wanted, reply.max_n)
        pool = [self._apply_limits(replace(reply, text=t), body) for t in reply.choices] if (
            reply.choices) else [text]
        return [pool[i % len(pool)] for i in range(wanted)]

    def _whole_logprobs(self, reply: Reply, text: str, index: int, chat: bool,
                        body: dict[str, Any]) -> dict | None:
        if not body.get("logprobs"):
            return None
        if reply.choice_logprobs is not None:
            value = reply.choice_logprobs[index % len(reply.choice_logprobs)]
        elif reply.logprob_per_token is not None or reply.logprob_values is not None:
            value = reply.logprob_per_token
        else:
            return None
        pieces = _pieces(text, None)
        values = [_token_value(reply, place, value) for place in range(len(pieces))]
        if chat or reply.logprob_form == "chat":
            return {"content": [_chat_logprob(piece, value, reply, body)
                                for piece, value in zip(pieces, values, strict=True)]}
        top = [dict(_alternatives(piece, value, reply, body))
               for piece, value in zip(pieces, values, strict=True)]
        return {"tokens": pieces, "token_logprobs": values,
                "top_logprobs": top if reply.alternatives else None, "text_offset": None}

    async def _stream(
        self,
        request: web.Request,
        record: RecordedRequest,
        reply: Reply,
        text: str,
        chat: bool,
        body: dict[str, Any],
    ) -> web.StreamResponse:
        response = web.StreamResponse(
            headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                     **reply.headers}
        )
        await response.prepare(request)
        pieces = _pieces(text, reply.chunk_chars)
        arrived_as = self._arrivals
        self.streaming_now += 1
        self.most_streaming_at_once = max(self.most_streaming_at_once, self.streaming_now)
        try:
            for event in reply.raw_events or []:
                await response.write(b"data: " + event + b"\n\n")
            if reply.raw_text is not None:
                await self._raw_text(response, reply, body, chat)
                return response
            if reply.first_chunk_delay_s:
                await asyncio.sleep(reply.first_chunk_delay_s)
            for index, piece in enumerate(pieces):
                if reply.drop_after_chunks is not None and index >= reply.drop_after_chunks:
                    request.transport.abort() if request.transport else None
                    return response
                if reply.malformed_after_chunks is not None and (
                    index >= reply.malformed_after_chunks
                ):
                    await response.write(b'data: {"choices": [{"delta": {"content": "x"\n\n')
                    await response.write(b"data: [DONE]\n\n")
                    return response
                if request.transport is None or request.transport.is_closing():
                    record.client_closed_early = True
                    return response
                if self.one_request_at_a_time and self._arrivals != arrived_as:
                    record.interrupted = True
                    await response.write(b"data: [DONE]\n\n")
                    await response.write_eof()
                    return response
                await response.write(_sse(_chunk(body, piece, None, chat, reply, index)))
                record.chunks_sent += 1
                if reply.stall_s and index == 0:
                    await asyncio.sleep(reply.stall_s)
                if reply.chunk_delay_s:
                    await asyncio.sleep(reply.chunk_delay_s)
            await self._stream_end(response, reply, body, chat, len(pieces))
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            record.client_closed_early = True
            raise
        finally:
            self.streaming_now -= 1
        return response

    async def _stream_end(self, response: web.StreamResponse, reply: Reply, body: dict,
                          chat: bool, completion_tokens: int) -> None:
        if reply.finish_reason is not None:
            await response.write(_sse(_chunk(body, "", reply.finish_reason, chat, reply)))
        options = body.get("stream_options") or {}
        if reply.usage and options.get("include_usage"):
            prompt_tokens = _count_prompt_tokens(body)
            usage: dict[str, Any] = {"prompt_tokens": prompt_tokens,
                                     "completion_tokens": completion_tokens,
                                     "total_tokens": prompt_tokens + completion_tokens}
            await response.write(_sse({
                "id": "test-1", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": body.get("model", "test"),
                "choices": [],
                "usage": reply.usage_values if reply.usage_values is not None else usage,
            }))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()

    async def _raw_text(self, response: web.StreamResponse, reply: Reply, body: dict,
                        chat: bool) -> None:
        """Stream `raw_text` as bytes, cut anywhere (mid-character too): each piece is a JSON
        string built from the raw bytes, so invalid UTF-8 reaches the client as sent."""
        assert reply.raw_text is not None
        size = reply.chunk_chars or 3
        pieces = [reply.raw_text[i:i + size] for i in range(0, len(reply.raw_text), size)]
        for piece in pieces:
            payload = json.dumps(_chunk(body, "@@PIECE@@", None, chat, reply)).encode()
            await response.write(
                b"data: " + payload.replace(b"@@PIECE@@", _json_string_bytes(piece)) + b"\n\n"
            )
        await self._stream_end(response, reply, body, chat, len(pieces))


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


def _count_prompt_tokens(body: dict[str, Any]) -> int:
    if "messages" in body:
        text = " ".join(str(message.get("content", "")) for message in body["messages"])
    else:
        text = str(body.get("prompt", ""))
    return len(text.split())


def _chunk(body: dict, piece: str, finish: str | None, chat: bool, reply: Reply,
           index: int = 0) -> dict:
    if chat:
        choice: dict[str, Any] = {
            "index": 0,
            "delta": {"content": piece} if piece else {},
            "finish_reason": finish,
        }
        value = _token_value(reply, index, reply.logprob_per_token)
        if value is not None and piece:
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


def _token_value(reply: Reply, index: int, otherwise: Any) -> Any:
    """The log-probability the server sends for the `index`th token of a choice."""
    if reply.logprob_values is not None:
        return reply.logprob_values[index % len(reply.logprob_values)]
    return otherwise


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


def dataset_responder(path: str, body: dict[str, Any]) -> Reply:
    """Answer generation prompts like a model that wrote the bundled dataset: the next
    recorded step, then the following thought, as a base model would run on."""
    from bbm_tui.core.llm.offline.replay import ReplayError, engine, parse_generation_prompt

    prompt = body["messages"][-1]["content"] if "messages" in body else body.get("prompt", "")
    request = parse_generation_prompt(prompt)
    if request is None:
        return Reply(status=400, error_body={"error": {"message": "not a generation prompt"}})
    try:
        return Reply(text=engine().next_step_text(request))
    except ReplayError as error:
        return Reply(status=400, error_body={"error": {"message": str(error)}})
