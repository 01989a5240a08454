"""A guard on every reply litellm reads (docs/DESIGN.md §7: untrusted input is bounded).

A provider's reply is untrusted bytes. Without this guard a 200 reply compressed as a gzip
bomb was decompressed whole (4.4 GB before the process died), and one invalid UTF-8 byte in a
stream made the OpenAI SDK's event decoder fail the whole step. The guard wraps the HTTP
transport that litellm builds for its async clients (the aiohttp one by default, or httpx's),
so that each reply body is

- decompressed here, incrementally and never past `MAX_REPLY_BYTES` (gzip and deflate; any
  other content encoding is refused), and handed on without its Content-Encoding header;
- made valid UTF-8, invalid bytes becoming U+FFFD, across chunk boundaries;
- cut off with `ReplyTooLarge` once it passes `MAX_REPLY_BYTES`;
- when it is one JSON document (a whole answer), cut down to the alternatives a token was
  asked for (`top_logprobs`: a server that sent 56,000 a choice, a 30 MB reply, cost litellm
  34 s and 1.48 GB for two traces) before anything parses it, and sent on with
  `"usage": null` where its usage is absurd (1e23, NaN, a string: litellm's parser then
  failed the whole answer), and refused as `NotAnAnswer` where a 200's choice is not one
  (null, a string, a null message, content that is not text), as is compressed data that is
  corrupt;
- when it is a stream (server-sent events, or Ollama's newline-delimited JSON,
  `application/x-ndjson`), passed on piece by piece as it comes (an event stream's
  alternatives cut to those asked for, event by event), and watched for the provider's own
  counts (core/llm/usage_events.py), read here because litellm hands them on only in its last
  chunk, which a stream closed at the step's newline never reaches (Anthropic's input comes
  in its first event, Gemini's in every chunk): a server that sends none (llama.cpp's, some
  proxies) gets litellm's own tiktoken count in its place, which the caller records as an
  estimate (`UsageWatch`, set by the caller around its call).

It is installed once, from `llm.litellm_module()`, by wrapping litellm's
`AsyncHTTPHandler._create_async_transport` (both the OpenAI-SDK path and litellm's own HTTP
handler build their transports there). tests/test_hostile_server.py fails if a litellm
upgrade moves that: the gzip bomb and the invalid-UTF-8 stream go through litellm for real.
"""

from __future__ import annotations

import codecs
import json
import re
import zlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx

from bbm_tui.core.llm.records import UsageWatch, usage_watch
from bbm_tui.core.llm.usage_events import UsageReader
from bbm_tui.core.types import sane_tokens

# A step is at most max_tokens * 8 characters and a finder's answer a few thousand tokens;
# 32 MiB of JSON is far beyond any answer, and small enough to hold.
MAX_REPLY_BYTES = 32 * 2**20
_PIECE_BYTES = 2**20



class ReplyTooLarge(httpx.ReadError):
    """The reply went past MAX_REPLY_BYTES once decompressed; the rest was not read."""


class UnsupportedEncoding(httpx.DecodingError):
    """A Content-Encoding the guard does not decode."""


class NotAnAnswer(httpx.DecodingError):
    """A reply with status 200 that is not a model's answer; the message says what was wrong
    (its compressed data is corrupt, a choice is null, its content is a list...). litellm
    reported these as a connection it could not make, a stream that broke off, or "Invalid
    response object"."""


def install(litellm: Any) -> None:
    """Wrap the transports litellm builds from now on (call once, right after the import;
    `litellm` is the module core/llm/loader.py imported, the one module that imports it)."""
    AsyncHTTPHandler = litellm.llms.custom_httpx.http_handler.AsyncHTTPHandler

    original = AsyncHTTPHandler._create_async_transport
    if getattr(original, "_bbm_tui_guarded", False):
        return

    def guarded(*args: Any, **kwargs: Any) -> GuardedTransport:
        inner = original(*args, **kwargs)
        return GuardedTransport(inner if inner is not None else httpx.AsyncHTTPTransport())

    guarded._bbm_tui_guarded = True
    AsyncHTTPHandler._create_async_transport = staticmethod(guarded)


class GuardedTransport(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        headers = [
            (name, value) for name, value in response.headers.raw
            if name.lower() not in (b"content-encoding", b"content-length")
        ]
        whole_json = is_whole_json(response.headers.get("content-type", ""))
        answer = response.status_code == 200
        # A 200's alternatives are cut to those asked for: in a whole answer, and event by
        # event in an event stream (never in another kind of stream: it is handed on as is).
        event_stream = "event-stream" in response.headers.get("content-type", "").lower()
        keep = asked_alternatives(request) if answer and (whole_json or event_stream) else None
        watch = usage_watch.get()
        if watch is not None:
            watch.replies += 1
        return httpx.Response(
            status_code=response.status_code,
            headers=headers,
            stream=GuardedStream(response.stream, encoding, whole_json, watch, answer, keep),
            extensions=response.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


# JSON content types that are streams of documents, not one: passed on as they come.
_STREAMED_JSON = ("ndjson", "jsonl", "json-seq", "jsonlines", "stream")


def is_whole_json(content_type: str) -> bool:
    """Whether a reply is one JSON document (held whole, to mend its usage), rather than a
    stream of them: Ollama streams `application/x-ndjson`, one object a line, and holding
    that back whole would show nothing until the answer's end and never let the client
    close it early."""
    lowered = content_type.lower()
    return "json" in lowered and not any(kind in lowered for kind in _STREAMED_JSON)


class GuardedStream(httpx.AsyncByteStream):
    def __init__(self, inner: Any, encoding: str, whole_json: bool = False,
                 watch: UsageWatch | None = None, answer: bool = False,
                 keep_alternatives: int | None = None) -> None:
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise UnsupportedEncoding(
                f"the reply is compressed as {encoding!r}, which is not read"
            )
        self.inner = inner
        # 47: zlib or gzip, told apart by the header. A raw deflate stream (what some servers
        # send as "deflate") is retried with -15 on the first error.
        self.decompressor = None if encoding in ("", "identity") else zlib.decompressobj(47)
        self.encoding = "gzip" if encoding == "x-gzip" else encoding
        self.raw_deflate_tried = encoding != "deflate"
        self.text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.size = 0
        # A JSON document is held whole (at most MAX_REPLY_BYTES) to mend its usage.
        self.whole_json = whole_json
        # A 200: its choices must be answers (an error's body is the provider's words).
        self.answer = answer
        # At most this many alternatives a token reach litellm (None: as they came).
        self.keep_alternatives = keep_alternatives
        self.usage = UsageReader(watch) if watch is not None and not whole_json else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held = bytearray()
        events = EventTrimmer(self.keep_alternatives) if (
            self.keep_alternatives is not None and not self.whole_json) else None
        async for raw in self.inner:
            for piece in self._decompressed(raw):
                text = self._checked(piece)
                checked = text.encode("utf-8")
                if self.whole_json:
                    held += checked
                    continue
                if events is not None:
                    checked = events.take(checked)
                    # Whole events, so cut between characters.
                    text = checked.decode("utf-8", "replace")
                if self.usage is not None:
                    self.usage.feed(text)
                if checked:
                    yield checked
        tail = self.text.decode(b"", final=True)
        if self.whole_json:
            held += tail.encode("utf-8")
            # Cut before anything parses it, and without a second copy of a big body.
            body = (trimmed_alternatives(held, self.keep_alternatives)
                    if self.keep_alternatives is not None else bytes(held))
            held.clear()
            yield sane_usage_json(body, check_choices=self.answer)
            return
        ending = tail.encode("utf-8")
        if events is not None:
            ending = events.take(ending) + events.rest()
        if self.usage is not None:
            self.usage.feed(ending.decode("utf-8", "replace"))
            self.usage.finish()
        if ending:
            yield ending

    def _decompressed(self, raw: bytes) -> Iterator[bytes]:
        """Pieces of at most 1 MiB, so that a bomb is stopped at the limit instead of
        expanding in one call."""
        if self.decompressor is None:
            if raw:
                yield raw
            return
        data = raw
        while data:
            try:
                piece = self.decompressor.decompress(data, _PIECE_BYTES)
            except zlib.error as error:
                if self.raw_deflate_tried:
                    raise NotAnAnswer(f"its compressed ({self.encoding}) data is corrupt "
                                      f"(zlib: {_zlib_reason(error)})") from None
                self.raw_deflate_tried = True
                self.decompressor = zlib.decompressobj(-15)
                continue
            data = self.decompressor.unconsumed_tail
            if piece:
                yield piece

    def _checked(self, piece: bytes) -> str:
        """The piece as text (invalid bytes made U+FFFD), counted against the limit."""
        self.size += len(piece)
        if self.size > MAX_REPLY_BYTES:
            raise ReplyTooLarge(
                f"the reply passed {MAX_REPLY_BYTES // 2**20} MiB and was not read further"
            )
        return self.text.decode(piece)

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


_ASKED_CHAT = re.compile(rb'"top_logprobs"\s*:\s*(\d+)')
_ASKED_COMPLETION = re.compile(rb'"logprobs"\s*:\s*(\d+)')


def asked_alternatives(request: httpx.Request) -> int:
    """How many alternatives a token the request asked for: chat's `top_logprobs`, a text
    completion's number `logprobs`; 0 where it asked for none."""
    try:
        body = request.content
    except httpx.RequestNotRead:  # a streamed request body: not ours, nothing to go by
        return 0
    if b'"top_logprobs"' not in body and b'"logprobs"' not in body:
        return 0
    found = _ASKED_CHAT.search(body) or _ASKED_COMPLETION.search(body)
    return int(found.group(1)) if found else 0


_ALTERNATIVES = re.compile(rb'"top_logprobs"\s*:\s*\[')
_SPACE = re.compile(r"\s*")


def _after_space(text: str, position: int) -> int:
    """Where the white space from `position` ends (`position` itself when there is none)."""
    found = _SPACE.match(text, position)
    return found.end() if found else position


def trimmed_alternatives(body: bytes | bytearray, keep: int) -> bytes:
    """A whole answer's JSON with at most `keep` alternatives a token: each `top_logprobs`
    list of the chat form cut to its first `keep` (the most likely first, as servers send
    them), each place of the legacy form (a {token: log-probability} object) to its `keep`
    most likely. The rest of the text is copied as it came; the alternatives are read one at
    a time, never all at once, and the body is read as text a list at a time (decoding a
    30 MB body whole held a second copy of it: bench/big_reply.py's peak). The body itself
    where there is nothing to cut, or where it is not such JSON (litellm says what it is)."""
    if b'"top_logprobs"' not in body:
        return bytes(body)
    decoder = json.JSONDecoder()
    view = memoryview(body)
    lists = [found.end() for found in _ALTERNATIVES.finditer(body)]
    pieces: list[bytes] = []
    copied = 0
    changed = False
    try:
        for index, start in enumerate(lists):
            if start < copied:
                continue  # inside a list already cut (a token text spelling the key)
            kept, end, cut = _cut_list_in(view, start, lists[index + 1:], decoder, keep)
            if cut:
                pieces += [bytes(view[copied:start]), kept]
                copied = end
                changed = True
    except (ValueError, RecursionError):
        return bytes(body)
    finally:
        view.release()
    if not changed:
        return bytes(body)
    pieces.append(bytes(body[copied:]))
    return b"".join(pieces)


def _cut_list_in(body: memoryview, start: int, later: list[int], decoder: json.JSONDecoder,
                 keep: int) -> tuple[bytes, int, bool]:
    """`_cut_list` on the list whose "[" ends at byte `start`, read as text from there to the
    next list's start (the list ends before it unless a token's text spells the key: then to
    the one after, and so on); the kept bytes, the byte where the list ended, whether it was
    cut. The body is valid UTF-8 (the guard made it so), and every cut falls on ASCII."""
    for stop in [*later, len(body)]:
        text = str(body[start:stop], "utf-8", "replace")
        try:
            kept, end, cut = _cut_list(text, 0, decoder, keep)
        except ValueError:
            if stop == len(body):
                raise
            continue  # the list goes on past the next key: read further
        read = end if text.isascii() else len(text[:end].encode("utf-8"))
        return kept.encode("utf-8"), start + read, cut
    raise ValueError("not a JSON list")  # unreachable: the last stop is the body's end


def _cut_list(text: str, start: int, decoder: json.JSONDecoder, keep: int
              ) -> tuple[str, int, bool]:
    """The elements of the JSON list whose "[" ends at `start`, cut to `keep`: the kept text
    with its closing "]", where the list ended, and whether anything was cut."""
    kept: list[str] = []
    cut = False
    position = _after_space(text, start)
    if text.startswith("]", position):
        return "]", position + 1, False
    while True:
        value, end = decoder.raw_decode(text, position)
        if isinstance(value, dict) and "token" not in value and len(value) > keep:
            # The legacy form: one place's {token: log-probability}.
            likely = sorted(value.items(), key=_likelihood, reverse=True)[:keep]
            kept.append(json.dumps(dict(likely), allow_nan=True))
            cut = True
        elif isinstance(value, dict) and "token" in value and len(kept) >= keep:
            cut = True
        else:
            kept.append(text[position:end])
        position = _after_space(text, end)
        if text.startswith("]", position):
            return ", ".join(kept) + "]", position + 1, cut
        if not text.startswith(",", position):
            raise ValueError("not a JSON list")
        position = _after_space(text, position + 1)


def _likelihood(pair: tuple[str, Any]) -> float:
    value = pair[1]
    return value if isinstance(value, int | float) and value == value else float("-inf")


class EventTrimmer:
    """A 200 event stream cut down to the alternatives asked for, event by event: an event
    is handed on once it is whole (what a reader could not parse before either), its lists of
    alternatives cut; one far larger than asked (11,200 alternatives a token, a 30 MB
    stream) cost litellm 13.5 s of CPU and 400 MB for one step before."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.pending = bytearray()

    def take(self, piece: bytes) -> bytes:
        """What can be handed on now: every whole event received so far, cut."""
        # Only the new bytes (and the 3 before them, for a blank line split between pieces)
        # can hold an event's end: what came before held none, or it was handed on.
        start = max(len(self.pending) - 3, 0)
        self.pending += piece
        end = _events_end(self.pending, start)
        if end == 0:
            return b""
        ready = bytes(self.pending[:end])
        del self.pending[:end]
        return trimmed_alternatives(ready, self.keep)

    def rest(self) -> bytes:
        """What the stream ended with after its last whole event, as it came."""
        rest = bytes(self.pending)
        self.pending.clear()
        return rest


def _events_end(buffer: bytearray, start: int) -> int:
    """Where the last whole event in `buffer` ends (after its blank line, found at `start`
    or later), 0 if none does."""
    ends = [buffer.rfind(blank, start) for blank in (b"\n\n", b"\r\n\r\n", b"\r\r")]
    return max((found + len(blank) for found, blank in zip(
        ends, (b"\n\n", b"\r\n\r\n", b"\r\r"), strict=True) if found >= 0), default=0)


def sane_usage_json(body: bytes, *, check_choices: bool = False) -> bytes:
    """A whole answer's JSON, with `"usage": null` where any of its token counts is not a
    sane whole number (the answer is kept, its usage unknown); else the body as it came.
    With `check_choices` (a 200), raises NotAnAnswer for a choice that is not an answer."""
    try:
        document = json.loads(body)
    except ValueError:
        return body  # not JSON: litellm says so
    except RecursionError:
        raise NotAnAnswer("its JSON is nested too deeply to read") from None
    if check_choices and isinstance(document, dict):
        problem = choices_problem(document.get("choices"))
        if problem is not None:
            raise NotAnAnswer(problem)
    usage = document.get("usage") if isinstance(document, dict) else None
    if not isinstance(usage, dict) or _sane_counts(usage):
        return body
    document["usage"] = None
    # As it came otherwise: what the provider sent goes on to litellm, NaN included (the
    # model-call boundary sees it there and refuses it, core/llm/transport.py).
    return json.dumps(document, allow_nan=True).encode("utf-8")


def choices_problem(choices: Any) -> str | None:
    """What makes a whole answer's `choices` not a model's answer, or None: each choice an
    object; a chat choice's message an object, its content text (or null); a completion's
    text, text. (No `choices` list at all is litellm's to report.)"""
    if not isinstance(choices, list):
        return None
    for index, choice in enumerate(choices):
        if not isinstance(choice, dict):
            return f"choice {index} is {_json_kind(choice)}, not an object"
        if "message" in choice:
            message = choice["message"]
            if not isinstance(message, dict):
                return f"choice {index}'s message is {_json_kind(message)}, not an object"
            content = message.get("content")
            if content is not None and not isinstance(content, str):
                return f"choice {index}'s content is {_json_kind(content)}, not text"
        elif "text" in choice and choice["text"] is not None and not isinstance(
                choice["text"], str):
            return f"choice {index}'s text is {_json_kind(choice['text'])}, not text"
    return None


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "a list" if isinstance(value, list) else "an object"


def _zlib_reason(error: zlib.error) -> str:
    # "Error -3 while decompressing data: invalid code -- missing end-of-block"
    return str(error).split(": ", 1)[-1]


def _sane_counts(usage: dict[str, Any]) -> bool:
    """Every `..._tokens` count in `usage` (its `..._details` too) absent or sane."""
    for key, value in usage.items():
        if isinstance(value, dict) and not _sane_counts(value):
            return False
        if key.endswith("_tokens") and value is not None and sane_tokens(value) is None:
            return False
    return True
