"""A local server speaking Anthropic's Messages API (`POST /v1/messages`), written from its
public reference, for litellm's `anthropic/…` adapter pointed at it with `--api-base`
(`FakeAnthropic.base_url`; litellm adds `/v1/messages`).

- Streamed (`"stream": true`): server-sent events with their `event:` names, in the order
  the API sends them: `message_start` (the message with its input usage: `input_tokens`,
  the uncached part of the prompt, and `cache_read_input_tokens` /
  `cache_creation_input_tokens`), `content_block_start`, `ping`, one `content_block_delta`
  (`text_delta`) per piece of text, `content_block_stop`, `message_delta` (`stop_reason`:
  `end_turn`, `max_tokens` or `stop_sequence` with the `stop_sequence` met, and the output
  tokens), `message_stop`.
- Whole: one `message` object with `content: [{"type": "text", ...}]` and its usage.
- Stop sequences (`stop_sequences`) are honoured; one that is whitespace only is refused as
  the API refuses it (400 `invalid_request_error`, "stop_sequences: each stop sequence must
  contain non-whitespace"), before anything is written.
- Extended thinking (`"thinking": {"type": "enabled", "budget_tokens": N}`): the reply's
  `reasoning` streams first in a `thinking` block (`thinking_delta` events, then one
  `signature_delta` just before its `content_block_stop`), after any `redacted_thinking`
  blocks (`Reply.redacted`: their opaque `data` in `content_block_start`), then the text
  block; `output_tokens` counts the thinking too (Anthropic bills it and does not count it
  apart). Without `thinking` in the request the reply's reasoning is not sent. What the API
  refuses with thinking on is refused as it refuses it (400 `invalid_request_error`): a
  temperature other than 1, top_p under 0.95, top_k, a budget under 1,024 or not under
  `max_tokens`.
- Errors have Anthropic's body, `{"type": "error", "error": {"type": ..., "message": ...}}`:
  a wrong `x-api-key` (when `api_key` is set) is 401 `authentication_error`; scripted
  statuses get their type (429 `rate_limit_error`, with `retry-after` when the reply sets
  the header; 529 `overloaded_error`, "Overloaded").
- With `prompt_cache` set (`PromptCache(explicit=True)`), the prompt is cached as
  Anthropic's prompt-caching documentation says: each block marked `cache_control` (at
  most four) writes the prefix up to and including it; a later request reads the longest
  prefix written before that ends at one of its block boundaries, at most 20 blocks before
  one of its marks; nothing shorter than the model's documented minimum is cached
  (tests/fake_server.py's PromptCache). Reads and writes are reported as the API reports
  them (`cache_read_input_tokens`, `cache_creation_input_tokens`, and `input_tokens` the
  rest).
"""

from __future__ import annotations

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
    segments_of,
    sse,
)

# The error types of Anthropic's API, by status.
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

WHITESPACE_STOP = "stop_sequences: each stop sequence must contain non-whitespace"


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    if status == 529 and message.startswith("scripted status"):
        message = "Overloaded"
    return {"type": "error",
            "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


class FakeAnthropic(FakeServer):
    thread_name = "fake-anthropic"

    @property
    def base_url(self) -> str:
        return self.root_url

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self._messages)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return anthropic_error(status, message)

    def asked(self, body: dict[str, Any], request: web.Request) -> Asked:
        return Asked(prompt=prompt_of(body), stops=tuple(body.get("stop_sequences") or ()),
                     max_tokens=body.get("max_tokens"), stream=bool(body.get("stream")),
                     segments=segments_of(body), model=str(body.get("model") or ""))

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        record, body = await self._record(request)
        if self.api_key is not None and request.headers.get("x-api-key") != self.api_key:
            return web.json_response(anthropic_error(401, "invalid x-api-key"), status=401)
        stops = body.get("stop_sequences") or []
        if any(not str(stop).strip() for stop in stops):
            return web.json_response(anthropic_error(400, WHITESPACE_STOP), status=400)
        if not body.get("max_tokens"):
            return web.json_response(anthropic_error(400, "max_tokens: Field required"),
                                     status=400)
        refused = thinking_refused(body)
        if refused is not None:
            return web.json_response(anthropic_error(400, refused), status=400)
        answer = await self._answer(request, record, body)
        if not isinstance(answer, Answer):
            return answer
        reply, asked, text = answer.reply, answer.asked, answer.text
        stop_reason, stop_sequence = _stop_reason(answer)
        thinking_on = _thinking_on(body)
        thought = reasoning_pieces(reply) if thinking_on else []
        redacted = reply.redacted if thinking_on else ()
        pieces = pieces_of(text, reply.chunk_chars)
        if asked.stream:
            framing = _Framing(self, reply, body, asked, stop_reason, stop_sequence,
                               len(thought), redacted)
            return await self._stream(request, record, reply, thought + pieces, framing)
        await self.writing_time(reply, len(thought) + len(pieces))
        usage = self.usage_of(reply, asked, len(thought) + len(pieces))
        blocks: list[dict[str, Any]] = [{"type": "redacted_thinking", "data": data}
                                        for data in redacted]
        if thought:
            blocks.append({"type": "thinking", "thinking": reply.reasoning,
                           "signature": reply.signature})
        return web.json_response({
            "id": "msg_test_1", "type": "message", "role": "assistant",
            "model": body.get("model", "test"),
            "content": [*blocks, {"type": "text", "text": text}],
            "stop_reason": stop_reason, "stop_sequence": stop_sequence,
            "usage": reply.usage_values if reply.usage_values is not None else _usage(usage),
        }, headers=reply.headers)


def _thinking_on(body: dict[str, Any]) -> bool:
    thinking = body.get("thinking")
    return isinstance(thinking, dict) and thinking.get("type") == "enabled"


def thinking_refused(body: dict[str, Any]) -> str | None:
    """What the API refuses with extended thinking on, in its words (None: nothing)."""
    if not _thinking_on(body):
        return None
    budget = body["thinking"].get("budget_tokens")
    if not isinstance(budget, int) or budget < 1024:
        return "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
    if budget >= int(body.get("max_tokens") or 0):
        return "`max_tokens` must be greater than `thinking.budget_tokens`"
    temperature = body.get("temperature")
    if temperature is not None and temperature != 1:
        return ("`temperature` may only be set to 1 when thinking is enabled. Please consult "
                "our documentation at https://docs.claude.com/en/docs/build-with-claude/"
                "extended-thinking#important-considerations-when-using-extended-thinking")
    top_p = body.get("top_p")
    if top_p is not None and top_p < 0.95:
        return "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled"
    if "top_k" in body:
        return "`top_k` must be unset when thinking is enabled"
    return None


def _stop_reason(answer: Answer) -> tuple[str, str | None]:
    """Anthropic's stop reason, and the stop sequence met (the first in the text)."""
    if answer.ended == "stop":
        rest = answer.reply.text[len(answer.text):]
        met = next((stop for stop in answer.asked.stops if stop and rest.startswith(stop)),
                   None)
        return "stop_sequence", met
    return answer.finish("end_turn", "max_tokens"), None


def _usage(usage: Usage, output_tokens: int | None = None) -> dict[str, Any]:
    """Anthropic's usage: `input_tokens` is the prompt's part that was neither read from
    the cache nor written to it."""
    return {"input_tokens": usage.uncached,
            "cache_creation_input_tokens": usage.cache_write,
            "cache_read_input_tokens": usage.cached,
            "output_tokens": usage.completion if output_tokens is None else output_tokens}


class _Framing:
    content_type = "text/event-stream"

    def __init__(self, server: FakeAnthropic, reply: Reply, body: dict[str, Any],
                 asked: Asked, stop_reason: str, stop_sequence: str | None,
                 thinking: int = 0, redacted: tuple[str, ...] = ()) -> None:
        self.reply, self.body = reply, body
        self.stop_reason, self.stop_sequence = stop_reason, stop_sequence
        # The input usage is known before the first token: it goes out in message_start.
        self.usage = server.usage_of(reply, asked, 0)
        # The first `thinking` pieces are the thinking block's, after the redacted blocks;
        # the blocks are numbered in order, the text's last.
        self.thinking, self.redacted = thinking, redacted
        self.thinking_index = len(redacted)
        self.text_index = len(redacted) + (1 if thinking else 0)

    def opening(self) -> list[bytes]:
        usage = (self.reply.usage_values if self.reply.usage_values is not None
                 else _usage(self.usage, output_tokens=1))
        message = {"id": "msg_test_1", "type": "message", "role": "assistant", "content": [],
                   "model": self.body.get("model", "test"), "stop_reason": None,
                   "stop_sequence": None, "usage": usage}
        events = [sse({"type": "message_start", "message": message}, "message_start")]
        for index, data in enumerate(self.redacted):
            events += [_block_start(index, {"type": "redacted_thinking", "data": data}),
                       _block_stop(index)]
        if self.thinking:
            events.append(_block_start(self.thinking_index,
                                       {"type": "thinking", "thinking": ""}))
        else:
            events.append(_block_start(self.text_index, {"type": "text", "text": ""}))
        return [*events, sse({"type": "ping"}, "ping")]

    def piece(self, text: str, index: int, last: bool) -> bytes:
        if index < self.thinking:
            return sse({"type": "content_block_delta", "index": self.thinking_index,
                        "delta": {"type": "thinking_delta", "thinking": text}},
                       "content_block_delta")
        head = b""
        if self.thinking and index == self.thinking:  # the thinking ends, the text begins
            head = (self._thinking_end()
                    + _block_start(self.text_index, {"type": "text", "text": ""}))
        return head + sse({"type": "content_block_delta", "index": self.text_index,
                           "delta": {"type": "text_delta", "text": text}},
                          "content_block_delta")

    def _thinking_end(self) -> bytes:
        return (sse({"type": "content_block_delta", "index": self.thinking_index,
                     "delta": {"type": "signature_delta", "signature": self.reply.signature}},
                    "content_block_delta")
                + _block_stop(self.thinking_index))

    def malformed(self) -> bytes:
        return (b'event: content_block_delta\ndata: {"type": "content_block_delta", '
                b'"index": 0, "delta": {"type": "text_delta", "text": "x"\n\n')

    def closing(self, sent: int) -> list[bytes]:
        if self.thinking and sent <= self.thinking:  # thinking, and no text after it
            ending = [self._thinking_end()]
        else:
            ending = [_block_stop(self.text_index)]
        return [*ending,
                sse({"type": "message_delta",
                     "delta": {"stop_reason": self.stop_reason,
                               "stop_sequence": self.stop_sequence},
                     "usage": {"output_tokens": sent}}, "message_delta"),
                sse({"type": "message_stop"}, "message_stop")]


def _block_start(index: int, block: dict[str, Any]) -> bytes:
    return sse({"type": "content_block_start", "index": index, "content_block": block},
               "content_block_start")


def _block_stop(index: int) -> bytes:
    return sse({"type": "content_block_stop", "index": index}, "content_block_stop")


def error_event(kind: str, message: str) -> bytes:
    """An error in the middle of a stream, as the API sends one (e.g. overloaded)."""
    return sse({"type": "error", "error": {"type": kind, "message": message}}, "error")


__all__ = ["FakeAnthropic", "Reply", "anthropic_error", "error_event"]
