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
- when it is one JSON document (a whole answer), sent on with `"usage": null` where its usage
  is absurd (1e23, NaN, a string: litellm's parser then failed the whole answer);
- when it is a stream (server-sent events, or Ollama's newline-delimited JSON,
  `application/x-ndjson`), passed on piece by piece as it comes, and watched for the
  provider's own counts (core/llm/usage_events.py), read here because litellm hands them on
  only in its last chunk, which a stream closed at the step's newline never reaches
  (Anthropic's input comes in its first event, Gemini's in every chunk): a server that sends
  none (llama.cpp's, some proxies) gets litellm's own tiktoken count in its place, which the
  caller records as an estimate (`UsageWatch`, set by the caller around its call).

It is installed once, from `llm.litellm_module()`, by wrapping litellm's
`AsyncHTTPHandler._create_async_transport` (both the OpenAI-SDK path and litellm's own HTTP
handler build their transports there). tests/test_hostile_server.py fails if a litellm
upgrade moves that: the gzip bomb and the invalid-UTF-8 stream go through litellm for real.
"""

from __future__ import annotations

import codecs
import json
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

    guarded._bbm_tui_guarded = True  # type: ignore[attr-defined]
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
        watch = usage_watch.get()
        if watch is not None:
            watch.replies += 1
        return httpx.Response(
            status_code=response.status_code,
            headers=headers,
            stream=GuardedStream(response.stream, encoding, whole_json, watch),
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
                 watch: UsageWatch | None = None) -> None:
        if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
            raise UnsupportedEncoding(
                f"the reply is compressed as {encoding!r}, which is not read"
            )
        self.inner = inner
        # 47: zlib or gzip, told apart by the header. A raw deflate stream (what some servers
        # send as "deflate") is retried with -15 on the first error.
        self.decompressor = None if encoding in ("", "identity") else zlib.decompressobj(47)
        self.raw_deflate_tried = encoding != "deflate"
        self.text = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.size = 0
        # A JSON document is held whole (at most MAX_REPLY_BYTES) to mend its usage.
        self.whole_json = whole_json
        self.usage = UsageReader(watch) if watch is not None and not whole_json else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        held = bytearray()
        async for raw in self.inner:
            for piece in self._decompressed(raw):
                text = self._checked(piece)
                checked = text.encode("utf-8")
                if self.whole_json:
                    held += checked
                else:
                    if self.usage is not None:
                        self.usage.feed(text)
                    yield checked
        tail = self.text.decode(b"", final=True)
        if self.whole_json:
            yield sane_usage_json(bytes(held) + tail.encode("utf-8"))
            return
        if self.usage is not None:
            self.usage.feed(tail)
            self.usage.finish()
        if tail:
            yield tail.encode("utf-8")

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
            except zlib.error:
                if self.raw_deflate_tried:
                    raise httpx.DecodingError("the reply is not valid compressed data") from None
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


def sane_usage_json(body: bytes) -> bytes:
    """A whole answer's JSON, with `"usage": null` where any of its token counts is not a
    sane whole number (the answer is kept, its usage unknown); else the body as it came."""
    try:
        document = json.loads(body)
    except ValueError:
        return body  # not JSON: litellm says so
    usage = document.get("usage") if isinstance(document, dict) else None
    if not isinstance(usage, dict) or _sane_counts(usage):
        return body
    document["usage"] = None
    # As it came otherwise: what the provider sent goes on to litellm, NaN included (the
    # model-call boundary sees it there and refuses it, core/llm/transport.py).
    return json.dumps(document, allow_nan=True).encode("utf-8")


def _sane_counts(usage: dict[str, Any]) -> bool:
    """Every `..._tokens` count in `usage` (its `..._details` too) absent or sane."""
    for key, value in usage.items():
        if isinstance(value, dict) and not _sane_counts(value):
            return False
        if key.endswith("_tokens") and value is not None and sane_tokens(value) is None:
            return False
    return True
