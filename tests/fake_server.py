"""What every local provider server of the tests shares: a real HTTP server on 127.0.0.1 (a
free port), run by aiohttp on its own event loop in a thread, so the code under test talks to
it over real sockets from any loop; replies scripted first in, first out (`Reply`), else
made by a `responder` function; every request recorded (`RecordedRequest`), with whether the
client went away before the stream was over and how many pieces of text it was sent.

Each provider's own wire is a subclass: `tests/openai_server.py` (OpenAI's chat and text
completions, and the servers that copy them), `tests/anthropic_server.py` (Messages),
`tests/gemini_server.py` (generateContent) and `tests/ollama_server.py` (/api/generate and
/api/chat). A subclass says where its routes are, what a request asks for (`Asked`: the
prompt, the stop sequences, the token limit), how an error body looks, and how a stream is
framed (`Framing`); the model behind them all is the same: it writes the scripted text piece
by piece (word by word unless told), at `chunk_delay_s` a piece, and honours a stop sequence
where the provider does (it never includes the stop itself), so a client that cuts the step
and closes the stream early shows it in the record.

Usage is counted the same way everywhere (a token is a whitespace-separated word of the
prompt, a streamed piece of the answer), unless a reply scripts it: `prompt_tokens`,
`cached_tokens` (read from the provider's prompt cache) and `cache_write_tokens` (written to
it), which each wire reports in its own fields. A server can also keep a prompt cache of its
own (`PromptCache`), so that a client that marks or repeats a prefix sees reads and writes
as the provider would report them.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from aiohttp import web


@dataclass
class Reply:
    text: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # An error's body as the provider sends it (None: the wire's own body for `status`,
    # saying `error_message`).
    error_body: dict[str, Any] | None = None
    error_message: str | None = None
    # Stream `text` in pieces of this many characters (None: word by word).
    chunk_chars: int | None = None
    honor_stop: bool = True
    honor_max_tokens: bool = True
    delay_s: float = 0.0  # before the response starts
    # Hold the response until a test sets this (or `hold_s` passes): a call that is still out
    # when the test says so, whatever the machine's speed.
    hold: threading.Event | None = None
    hold_s: float = 10.0
    # Between streamed pieces: a model writing slowly (a whole answer waits for them all).
    chunk_delay_s: float = 0.0
    # The first this many pieces go at once, the rest `chunk_delay_s` apart: a long stream
    # already far along when a benchmark starts measuring (bench/thinking_stream.py).
    fast_chunks: int = 0
    # After the stream's headers, before its first chunk: a model thinking before it writes.
    first_chunk_delay_s: float = 0.0
    # Close the socket abruptly after N chunks; a whole (non-streamed) answer is cut off
    # half-way through its body instead.
    drop_after_chunks: int | None = None
    # Send a chunk that is not JSON after N chunks; a whole answer's body is not JSON.
    malformed_after_chunks: int | None = None
    # Go silent for this long after the first chunk (a whole answer: after half its body),
    # then carry on; streamed, after chunk `stall_after` instead of the first.
    stall_s: float = 0.0
    stall_after: int = 0
    logprob_per_token: float | None = None
    # Each token's log-probability in turn, sent as is (streamed or whole), in place of
    # `logprob_per_token`: values no model could give (NaN, 3999.9, true) among good ones.
    logprob_values: list[Any] | None = None
    usage: bool = True
    # The provider's finish reason in its own words (None: the wire's usual one, "stop",
    # "end_turn", "STOP"...). On the OpenAI wire, None ends the stream ([DONE]) with no
    # finish reason, as an interrupted llama-cpp-python stream does.
    finish_reason: str | None = "stop"
    # Usage sent verbatim instead of counted (absurd values: 2**64, 1e23, -5, NaN, "lots").
    usage_values: dict[str, Any] | None = None
    # Usage as the provider counts it, where a test wants given numbers: the prompt's tokens
    # (all of them, cached or not; None: counted), those read from the provider's prompt
    # cache and those written to it (Anthropic reports writes; None: the server's own
    # `PromptCache` decides, or none).
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
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
    # A thinking model: the reasoning it writes before `text`, streamed in pieces as the text
    # is (`reasoning_pieces`), each wire carrying it in its own field (tests/*_server.py).
    # On OpenAI's wire `reasoning_wire` says which: `reasoning_content` (DeepSeek,
    # llama-server), vLLM's newer `reasoning`, `think_tags` (`<think>…</think>` left in
    # the content, as llama-server with `--reasoning-format none` and older vLLM send it), or
    # `think_closed` (only `…</think>` in the content: a chat template, DeepSeek-R1's, opened
    # the reasoning in the prompt).
    reasoning: str = ""
    reasoning_wire: str = "reasoning_content"
    # Reasoning tokens the usage reports (None: one a reasoning piece). OpenAI's o-series
    # send no reasoning text at all, only this count. `reasoning_counted=False`: the usage
    # says nothing of them (llama-server counts them in `completion_tokens` only).
    reasoning_tokens: int | None = None
    reasoning_counted: bool = True
    # Anthropic: the thinking block's signature (sent just before the block ends), and the
    # opaque data of `redacted_thinking` blocks sent before it.
    signature: str = "c2lnbmF0dXJlLW9mLXRoZS10aGlua2luZw=="
    redacted: tuple[str, ...] = ()


@dataclass
class RecordedRequest:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    client_closed_early: bool = False
    # Pieces of text sent (streamed), before the stream ended or the client went away.
    chunks_sent: int = 0
    # Cut short by a later request (`FakeOpenAI.one_request_at_a_time`).
    interrupted: bool = False
    # A held reply (`Reply.hold`): let go by the test's event (not by the time limit).
    released: bool = False
    # The stream ran to its end (the text, or a stop, or the token limit): the client read
    # it all.
    finished: bool = False
    # The query string (Gemini's `alt=sse`, `key=`).
    query: dict[str, str] = field(default_factory=dict)
    # How many requests had arrived before this one (`FakeOpenAI.one_request_at_a_time`).
    arrival: int = 0


@dataclass(frozen=True)
class Asked:
    """What a request asks of the model, whatever the wire: the prompt's text (what usage
    is counted from), the stop sequences, the token limit, and whether to stream."""

    prompt: str
    stops: tuple[str, ...] = ()
    max_tokens: int | None = None
    stream: bool = False
    # The prompt as the provider's cache sees it: (text, marked for caching) segments in
    # order (Anthropic's `cache_control`); one unmarked segment elsewhere.
    segments: tuple[tuple[str, bool], ...] = ()
    # The model the request names (its cache's minimum can depend on it).
    model: str = ""


@dataclass(frozen=True)
class Answer:
    """What the model writes for one request: the scripted reply, what the request asked,
    the text (cut at a stop sequence or the token limit) and why it ended there ("stop",
    "length", or None: the text ran out)."""

    reply: Reply
    asked: Asked
    text: str
    ended: str | None

    def finish(self, stop: str, length: str) -> str:
        """The finish reason in the wire's words: `length` at the token limit, else the
        reply's own (as scripted), else `stop`."""
        if self.ended == "length":
            return length
        reason = self.reply.finish_reason
        return reason if reason not in (None, "stop") else stop


@dataclass(frozen=True)
class Usage:
    """One answer's usage, counted by the server: `prompt` is every prompt token, `cached`
    and `cache_write` are the part read from and written to the prompt cache."""

    prompt: int
    completion: int
    cached: int = 0
    cache_write: int = 0
    # Of `completion`: the tokens of the reasoning (a thinking model's).
    reasoning: int = 0

    @property
    def uncached(self) -> int:
        return self.prompt - self.cached - self.cache_write


Responder = Callable[[str, dict[str, Any]], Reply]


def pieces_of(text: str, chunk_chars: int | None) -> list[str]:
    """The text as a model streams it: word by word (each word with the space or line break
    after it), or in pieces of `chunk_chars` characters."""
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


# How a server splits text into tokens: words, unless a test or a benchmark gives a real
# tokenizer (e.g. litellm's Claude one, for bench/prompt_cache.py).
Tokenizer = Callable[[str], Sequence[object]]


def reasoning_pieces(reply: Reply) -> list[str]:
    """A thinking model's reasoning as it streams it, before the answer: as the text is
    (word by word, or `chunk_chars` at a time)."""
    return pieces_of(reply.reasoning, reply.chunk_chars)


def reasoning_count(reply: Reply, sent: int) -> int:
    """The reasoning tokens the usage reports, of `sent` reasoning pieces (0: none)."""
    if not reply.reasoning_counted:
        return 0
    return reply.reasoning_tokens if reply.reasoning_tokens is not None else sent


def limited_text(reply: Reply, text: str, stops: Iterable[str], max_tokens: int | None
                 ) -> tuple[str, str | None]:
    """The text the model writes: up to the first stop sequence it meets (left out), and at
    most `max_tokens` words; and why it ended: "stop" (a stop sequence), "length" (the
    limit) or None (the text ran out)."""
    ended: str | None = None
    if reply.honor_stop:
        first = min(((text.index(stop), stop) for stop in stops if stop and stop in text),
                    default=None)
        if first is not None:
            text, ended = text[: first[0]], "stop"
    if reply.honor_max_tokens and max_tokens:
        words = pieces_of(text, None)
        if len(words) > int(max_tokens):
            text, ended = "".join(words[: int(max_tokens)]), "length"
    return text, ended


def choice_texts(reply: Reply, text: str, asked_n: int, asked: Asked) -> list[str]:
    """The texts of the choices of a whole answer, as many as asked (`n`, Gemini's
    `candidateCount`), unless the server ignores or caps that: the reply's `choices` in
    turn, each cut like the text, else the text every time."""
    wanted = 1 if reply.ignore_n else max(1, asked_n)
    if reply.max_n is not None:
        wanted = min(wanted, reply.max_n)
    pool = [limited_text(reply, t, asked.stops, asked.max_tokens)[0]
            for t in reply.choices] if reply.choices else [text]
    return [pool[i % len(pool)] for i in range(wanted)]


def choice_logprob(reply: Reply, index: int) -> float | None:
    """The log-probability of each token of choice `index` (None: the reply gives none)."""
    if reply.choice_logprobs is not None:
        return reply.choice_logprobs[index % len(reply.choice_logprobs)]
    return reply.logprob_per_token


def token_logprob(reply: Reply, place: int, otherwise: Any) -> Any:
    """The log-probability the server sends for the token at `place` of a choice."""
    if reply.logprob_values is not None:
        return reply.logprob_values[place % len(reply.logprob_values)]
    return otherwise


# Anthropic's minimum cacheable prompt length by model, as its prompt-caching documentation
# lists it ("Cache limitations", as of late 2025: 4,096 tokens for Claude Opus 4.6, Opus 4.5
# and Haiku 4.5; 2,048 for Claude Haiku 3.5 and Haiku 3; 1,024 for Claude Sonnet 4.6,
# Sonnet 4.5, Opus 4.1, Opus 4, Sonnet 4 and Sonnet 3.7), by the start of the model's id.
ANTHROPIC_MINIMUM_TOKENS = (
    ("claude-opus-4-6", 4096), ("claude-opus-4-5", 4096), ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048), ("claude-3-haiku", 2048),
)
ANTHROPIC_DEFAULT_MINIMUM = 1024
# OpenAI's automatic caching starts at 1,024 prompt tokens, in steps of 128.
AUTOMATIC_MINIMUM = 1024


def anthropic_minimum(model: str) -> int:
    """The fewest tokens Anthropic caches for `model` (an id as the API takes it)."""
    return next((minimum for start, minimum in ANTHROPIC_MINIMUM_TOKENS
                 if model.startswith(start)), ANTHROPIC_DEFAULT_MINIMUM)


class PromptCache:
    """A provider's prompt cache, as the tests need it: a prefix is cached once a request
    has carried it, and read by any later request that starts with it.

    `explicit` (Anthropic, as its prompt-caching documentation describes it): a request's
    `cache_control` marks are its breakpoints, at most `max_marks` of them (four). Each mark
    writes the prefix up to and including its block. A lookup checks, from each mark back to
    at most `lookback_blocks` (20) block boundaries before it, whether the prefix that ends
    at that boundary was written before: a hit only at a block boundary, and only within
    that window (a prefix that ends mid-block, or further back, is not found). The request
    reads the longest hit and writes the rest, up to its last mark (reported as read,
    0.1x the input price, and written, 1.25x). A prefix one model wrote is not read by
    another (a cache is the model's own work on the prefix). A prefix shorter than the
    model's minimum (`minimum_tokens`, else Anthropic's documented one for the request's
    model) is never cached, and nothing says so. Otherwise (OpenAI, Gemini): any prompt is cached
    automatically, and a later prompt reads the longest cached prefix it shares, in whole
    blocks of `block_tokens`, from the minimum on, as with the real providers."""

    def __init__(self, explicit: bool, minimum_tokens: int | None = None,
                 block_tokens: int = 128, lookback_blocks: int = 20, max_marks: int = 4,
                 tokenize: Tokenizer = str.split) -> None:
        self.explicit = explicit
        self.tokenize = tokenize
        self.minimum_tokens = minimum_tokens
        self.block_tokens = block_tokens
        self.lookback_blocks = lookback_blocks
        self.max_marks = max_marks
        self.prefixes: set[tuple[object, ...]] = set()
        self._lock = threading.Lock()

    def clear(self) -> None:
        with self._lock:
            self.prefixes.clear()

    def minimum(self, model: str = "") -> int:
        """The fewest tokens a cached prefix has, for a request naming `model`."""
        if self.minimum_tokens is not None:
            return self.minimum_tokens
        return anthropic_minimum(model) if self.explicit else AUTOMATIC_MINIMUM

    def usage(self, segments: Iterable[tuple[str, bool]], model: str = "") -> tuple[int, int]:
        """(read, written) tokens for a prompt made of these segments, caching it."""
        words: list[object] = []  # tokens: words, unless told otherwise
        ends: list[int] = []  # each segment's end, in tokens
        marks: list[int] = []  # the indexes of the marked segments
        for text, marked in segments:
            words.extend(self.tokenize(text))
            ends.append(len(words))
            if marked:
                marks.append(len(ends) - 1)
        if len(marks) > self.max_marks:
            raise ValueError(f"at most {self.max_marks} blocks can be marked for caching")
        with self._lock:
            if self.explicit:
                return self._explicit(words, ends, marks, model)
            return self._automatic(words, self.minimum(model))

    def _explicit(self, words: list[object], ends: list[int], marks: list[int],
                  model: str) -> tuple[int, int]:
        # A cache holds one model's work on a prefix: keyed by the model too.
        def key(end: int) -> tuple[object, ...]:
            return (model, *words[:end])

        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - self.lookback_blocks - 1), -1):
                if ends[index] > read and key(ends[index]) in self.prefixes:
                    read = ends[index]
                    break
        cacheable = [ends[mark] for mark in marks if ends[mark] >= self.minimum(model)]
        for end in cacheable:
            self.prefixes.add(key(end))
        last = max(cacheable, default=0)
        return read, max(0, last - read)

    def _automatic(self, words: list[object], minimum: int) -> tuple[int, int]:
        if len(words) < minimum:
            return 0, 0
        read = 0
        for prefix in self.prefixes:
            shared = _shared_length(prefix, words)
            read = max(read, shared - shared % self.block_tokens)
        self.prefixes.add(tuple(words))
        return (read if read >= minimum else 0), 0


def _shared_length(a: tuple[object, ...], b: list[object]) -> int:
    length = 0
    for left, right in zip(a, b, strict=False):
        if left != right:
            break
        length += 1
    return length


class Framing(Protocol):
    """How one wire frames a streamed answer (the server calls these in order)."""

    content_type: str

    def opening(self) -> list[bytes]: ...

    def piece(self, text: str, index: int, last: bool) -> bytes: ...

    def malformed(self) -> bytes: ...

    def closing(self, sent: int) -> list[bytes]: ...


class FakeServer:
    """The machinery; a subclass adds its routes (`add_routes`), reads requests (`asked`),
    and frames answers and errors."""

    thread_name = "fake-server"

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
        self.streaming_now = 0
        self.most_streaming_at_once = 0
        # The key the server accepts (None: any key, or none).
        self.api_key: str | None = None
        self.prompt_cache: PromptCache | None = None
        self.tokenize: Tokenizer = str.split

    # -- lifecycle

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeServer:
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

        self._thread = threading.Thread(target=serve, name=self.thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the test server did not start")
        return self

    async def _start_site(self) -> None:
        app = web.Application()
        self.add_routes(app)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=256)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def add_routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        if self._loop is not None and not self._loop.is_closed():  # not stopped already
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.responder = None
            self.latency_s = 0.0
            self.most_streaming_at_once = 0
            self.api_key = None
            self.prompt_cache = None
            self.tokenize = str.split

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
            return Reply(status=500, error_body=self.error_body(500, "no reply scripted"))
        return responder(path, body)

    # -- what a subclass says about its wire

    def asked(self, body: dict[str, Any], request: web.Request) -> Asked:
        raise NotImplementedError

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": "test"}}

    # -- the shared steps of an answer

    async def _record(self, request: web.Request) -> tuple[RecordedRequest, dict[str, Any]]:
        """Read the request's JSON (whatever its content type: Ollama's clients send
        `application/octet-stream`) and record it."""
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        record = RecordedRequest(request.path, body, dict(request.headers),
                                 query=dict(request.query))
        with self._lock:
            self.requests.append(record)
        return record, body

    async def _before_answer(self, request: web.Request, record: RecordedRequest,
                             reply: Reply) -> web.StreamResponse | None:
        """The waits and faults that come before any answer: latency, a scripted delay or
        hold, an error status, a raw body. None: go on and answer."""
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.hold is not None:
            await self._hold(record, reply.hold, reply.hold_s)
        if reply.status != 200:
            error = reply.error_body or self.error_body(
                reply.status, reply.error_message or f"scripted status {reply.status}")
            return web.json_response(error, status=reply.status, headers=reply.headers)
        if reply.raw_body is not None or reply.raw_chunks is not None:
            return await self._raw(request, reply)
        return None

    async def _answer(self, request: web.Request, record: RecordedRequest,
                      body: dict[str, Any]) -> Answer | web.StreamResponse:
        """The next reply for this request, after its waits and faults: either a response to
        send as it is (an error, a raw body) or what the model writes."""
        reply = self._next_reply(request.path, body)
        early = await self._before_answer(request, record, reply)
        if early is not None:
            return early
        asked = self.asked(body, request)
        text, ended = limited_text(reply, reply.text, asked.stops, asked.max_tokens)
        return Answer(reply, asked, text, ended)

    async def writing_time(self, reply: Reply, pieces: int) -> None:
        """A whole (non-streamed) answer is sent once the model has written all of it: as
        long as its stream would take (`first_chunk_delay_s`, then `chunk_delay_s` a
        piece), all of it before the first byte, as a real server does."""
        wait_s = reply.first_chunk_delay_s + reply.chunk_delay_s * pieces
        if wait_s:
            await asyncio.sleep(wait_s)

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

    def usage_of(self, reply: Reply, asked: Asked, completion: int, reasoning: int = 0
                 ) -> Usage:
        """The answer's usage: as scripted, else counted (and the prompt cache asked).
        `completion` counts every token written, `reasoning` those of the reasoning."""
        prompt = reply.prompt_tokens
        if prompt is None:  # the prompt's tokens, block by block as the cache counts them
            prompt = sum(len(self.tokenize(text))
                         for text, _ in asked.segments or ((asked.prompt, False),))
        cached, written = 0, 0
        if self.prompt_cache is not None and reply.prompt_tokens is None:
            cached, written = self.prompt_cache.usage(
                asked.segments or ((asked.prompt, False),), asked.model)
        if reply.cached_tokens is not None:
            cached = reply.cached_tokens
        if reply.cache_write_tokens is not None:
            written = reply.cache_write_tokens
        return Usage(prompt=prompt, completion=completion, cached=cached, cache_write=written,
                     reasoning=reasoning)

    async def _stream(self, request: web.Request, record: RecordedRequest, reply: Reply,
                      pieces: list[str], framing: Framing) -> web.StreamResponse:
        """Stream the pieces as the wire frames them, slowly if the reply says so, noting
        whether the client went away before the end and how many pieces it was sent."""
        response = web.StreamResponse(
            headers={"Content-Type": framing.content_type, "Cache-Control": "no-cache",
                     **reply.headers})
        await response.prepare(request)
        self.streaming_now += 1
        self.most_streaming_at_once = max(self.most_streaming_at_once, self.streaming_now)
        try:
            for event in framing.opening():
                await response.write(event)
            if reply.first_chunk_delay_s:
                await asyncio.sleep(reply.first_chunk_delay_s)
            for index, piece in enumerate(pieces):
                if reply.drop_after_chunks is not None and index >= reply.drop_after_chunks:
                    request.transport.abort() if request.transport else None
                    return response
                if reply.malformed_after_chunks is not None and (
                    index >= reply.malformed_after_chunks
                ):
                    await response.write(framing.malformed())
                    return response
                if request.transport is None or request.transport.is_closing():
                    record.client_closed_early = True
                    return response
                if self._interrupted(record):
                    await self._end_interrupted(response, framing)
                    return response
                await response.write(framing.piece(piece, index, index == len(pieces) - 1))
                record.chunks_sent += 1
                if reply.stall_s and index == reply.stall_after:
                    await asyncio.sleep(reply.stall_s)
                if reply.chunk_delay_s and index >= reply.fast_chunks:
                    await asyncio.sleep(reply.chunk_delay_s)
            if request.transport is None or request.transport.is_closing():
                record.client_closed_early = True
                return response
            for event in framing.closing(len(pieces)):
                await response.write(event)
            await response.write_eof()
            record.finished = True
        except (ConnectionResetError, ConnectionError, asyncio.CancelledError):
            record.client_closed_early = True
            raise
        finally:
            self.streaming_now -= 1
        return response

    def _interrupted(self, record: RecordedRequest) -> bool:
        """Whether a later request cut this stream short (a server that serves one at a
        time); none here."""
        return False

    async def _end_interrupted(self, response: web.StreamResponse, framing: Framing) -> None:
        await response.write_eof()


def sse(payload: dict[str, Any], event: str | None = None) -> bytes:
    """One server-sent event (with its `event:` line, as Anthropic names its events)."""
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


def prompt_of(body: dict[str, Any]) -> str:
    """The prompt text of any wire's request: OpenAI's and Ollama's `messages` (string or
    content blocks), Anthropic's `system` + `messages`, Gemini's `contents` (and its
    `systemInstruction`), a raw `prompt`."""
    texts: list[str] = []
    for system in (body.get("system"), body.get("systemInstruction"),
                   body.get("system_instruction")):
        texts.extend(_texts(system))
    for message in body.get("messages") or []:
        texts.extend(_texts(message.get("content")))
    for content in body.get("contents") or []:
        texts.extend(_texts(content.get("parts")))
    if "prompt" in body:
        texts.append(str(body.get("prompt") or ""))
    return "\n\n".join(text for text in texts if text)


def segments_of(body: dict[str, Any]) -> tuple[tuple[str, bool], ...]:
    """The prompt as (text, marked with `cache_control`) segments, in order."""
    found: list[tuple[str, bool]] = []

    def add(content: Any) -> None:
        if isinstance(content, str):
            found.append((content, False))
        elif isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and "text" in block:
                    found.append((str(block["text"]), bool(block.get("cache_control"))))
        elif isinstance(content, dict):
            add([content])

    add(body.get("system"))
    for message in body.get("messages") or []:
        before = len(found)
        add(message.get("content"))
        if message.get("cache_control") and len(found) > before:
            text, _ = found[-1]
            found[-1] = (text, True)
    return tuple(found)


def _texts(content: Any) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, dict):
        return _texts(content.get("parts") or content.get("text"))
    if isinstance(content, list):
        found: list[str] = []
        for block in content:
            if isinstance(block, str):
                found.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                found.append(block["text"])
        return found
    return [str(content)]


def is_streamed(path: str, body: dict[str, Any]) -> bool:
    """Whether a request of any wire asks for a stream: `"stream": true` (OpenAI, Anthropic),
    Gemini's `:streamGenerateContent`, Ollama's default (streamed unless `"stream": false`)."""
    if ":streamGenerateContent" in path:
        return True
    return bool(body.get("stream", path.startswith("/api/")))


def dataset_responder(path: str, body: dict[str, Any]) -> Reply:
    """Answer generation prompts like a model that wrote the bundled dataset: the next
    recorded step, then the following thought, as a base model would run on."""
    from bbm_tui.core.llm.offline.replay import ReplayError, engine, parse_generation_prompt

    request = parse_generation_prompt(last_prompt(body))
    if request is None:
        return Reply(status=400, error_message="not a generation prompt")
    try:
        return Reply(text=engine().next_step_text(request))
    except ReplayError as error:
        return Reply(status=400, error_message=str(error))


def solver_responder(path: str, body: dict[str, Any]) -> Reply:
    """Answer generation prompts like a model that gets the four checkable tasks right: the
    next step solver/bbm writes at temperature 0 (core/tasks/solver.py)."""
    from bbm_tui.core.llm.offline.replay import parse_generation_prompt
    from bbm_tui.core.tasks import get_task
    from bbm_tui.core.tasks.solver import SolverError, next_step

    request = parse_generation_prompt(last_prompt(body))
    if request is None:
        return Reply(status=400, error_message="not a generation prompt")
    question = request.question.removeprefix(get_task(request.task).question_prefix)
    try:
        [step] = next_step(request.task, question, list(request.steps), 0.0, 0, 1)
    except SolverError as error:
        return Reply(status=400, error_message=str(error))
    return Reply(text=f" {step.text}\n")


def last_prompt(body: dict[str, Any]) -> str:
    """The text of the last user turn (or the raw prompt): where a generation prompt is."""
    if "prompt" in body:
        return str(body.get("prompt") or "")
    for key, inner in (("messages", "content"), ("contents", "parts")):
        turns = body.get(key) or []
        if turns:
            return "".join(_texts(turns[-1].get(inner)))
    return ""


def dataset_trace_responder(path: str, body: dict[str, Any]) -> Reply:
    """Answer generation prompts like a model that wrote the bundled dataset and goes on with
    the prompt's format: the next recorded step, then every following thought on its own line
    with its label, to the end of the trace (a stop sequence, where sent, ends it at the
    first line as always)."""
    from bbm_tui.core.llm.offline.replay import engine, parse_generation_prompt
    from bbm_tui.core.prompts.thoughts import thought_line

    request = parse_generation_prompt(last_prompt(body))
    if request is None:
        return Reply(status=400, error_message="not a generation prompt")
    written = list(request.steps)
    for row in engine().rows_for(request.task, request.question):
        if row.steps[:len(written)] == written and len(row.steps) > len(written):
            rest = row.steps[len(written):]
            return Reply(text=rest[0] + "".join(
                "\n" + thought_line(number, step)
                for number, step in enumerate(rest[1:], start=len(written) + 2)))
    return Reply(status=400, error_message="no recorded trace goes on from these steps")
