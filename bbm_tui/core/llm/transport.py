"""One step, streamed and cut on the client; one whole answer (docs/DESIGN.md §3).

A generation step is always streamed and cut at its first line break (after any leading
whitespace), then the stream is closed so that the provider stops generating; native
`stop=["\\n"]` is sent only where the provider accepts it. A stream that ends without the
provider's own finish reason is a fault, not a step; a step also ends at its token and
wall-clock limits, kept and marked truncated.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from bbm_tui.core.llm.caching import finder_messages, step_messages
from bbm_tui.core.llm.capabilities import (
    TOP_ALTERNATIVES,
    accepts_native_stop,
    accepts_temperature,
    asks_logprobs,
    auth_kwargs,
    logprob_kwargs,
    sent_params,
    speaks_openai_wire,
)
from bbm_tui.core.llm.errors import (
    ErrorKind,
    LLMError,
    StreamInterrupted,
    classify_error,
    with_retries,
)
from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.llm.records import (
    CHARS_PER_TOKEN_CAP,
    Completion,
    Restart,
    StepText,
    TextDelta,
    UsageCounts,
    UsageWatch,
    usage_watch,
)
from bbm_tui.core.llm.router import (
    DeploymentPin,
    closes_at_the_last_chunk,
    deployment_spec,
    served_by,
    start_call,
    unwrapped,
)
from bbm_tui.core.llm.usage import cost_of, counts_from_litellm
from bbm_tui.core.prompts.thoughts import LINE_BREAK, EchoStripper, asked_number, step_span
from bbm_tui.core.records import Alternative, CallRecord, TokenLogprob
from bbm_tui.core.types import (
    DEFAULT_STEP_MAX_TOKENS,
    CallSettings,
    Mode,
    ModelSpec,
    sane_logprob,
    sane_tokens,
)

T = TypeVar("T")


@dataclass
class _StreamState:
    pieces: list[str] = field(default_factory=list)
    # Everything the stream sent, before any cut (to place the stored step in it), and the
    # tokens it sent with their log-probabilities, where asked for.
    raw: list[str] = field(default_factory=list)
    tokens: list[TokenLogprob] = field(default_factory=list)
    chunks: int = 0
    chars: int = 0
    started: bool = False
    cut: bool = False
    truncated: bool = False
    finish_reason: str | None = None
    usage: Any = None
    leading_newline: bool = False
    usage_lost: bool = False  # the usage chunk after the answer could not be read
    time_cut: bool = False  # cut at the step's wall-clock limit
    # A token came with a log-probability no model could give: the step has none.
    impossible_logprobs: bool = False
    # Text completion: litellm's chat stream wrapper under the text one (False: none found).
    inner_stream: Any = None
    # Whose end says the provider is done (`_provider_done`): a router's chat stream is
    # judged by the provider's wrapper under it where its Router counts nothing at the end
    # (router.closes_at_the_last_chunk); None: the stream itself.
    done_by: Any = None


async def stream_step(
    spec: ModelSpec, prompt: str, settings: CallSettings | None = None,
    pin: DeploymentPin | None = None, *, parts: Sequence[str] = (),
) -> AsyncIterator[TextDelta | Restart | StepText]:
    """Stream one step: yields TextDelta as text arrives (after echo stripping), Restart when a
    retry discards shown text, and finally one StepText. `parts`, where given, are the
    prompt's pieces (prompts/generation.py), which a provider that caches only marked text
    gets as marked blocks (caching.py). Behind a router, `pin` keeps the trace's calls on
    the deployment that served its last one. Raises LLMError."""
    settings = settings or CallSettings()

    def attempt_once(attempt: int, queue: asyncio.Queue) -> Awaitable[StepText]:
        return _stream_step_once(spec, prompt, parts, settings, attempt, queue, pin)

    async for item in _retried_events(spec, settings, attempt_once):
        yield item


@dataclass
class _Finished:
    value: Any


async def _retried_events(
    spec: ModelSpec, settings: CallSettings,
    attempt_once: Callable[[int, asyncio.Queue], Awaitable[Any]],
) -> AsyncIterator[Any]:
    """`attempt_once(attempt, queue)` made with our retries, in a task of its own: yields
    what it puts on the queue and a Restart before each retry, as they come, then what it
    returned, last. Raises LLMError."""
    queue: asyncio.Queue[Any] = asyncio.Queue()

    async def on_retry(attempt: int, error: LLMError, delay: float) -> None:
        await queue.put(Restart(attempt, error.message, delay, error.kind))

    async def run() -> None:
        try:
            result = await with_retries(
                spec, settings.retry, lambda attempt: attempt_once(attempt, queue), on_retry)
            await queue.put(_Finished(result))
        except BaseException as error:  # handed to the consumer, cancellation included
            await queue.put(error)

    task = asyncio.ensure_future(run())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            if isinstance(item, _Finished):
                yield item.value
                return
            yield item
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def native_stop_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """`stop=["\\n"]`, where the provider takes it (the cut on the client is what counts)."""
    return {"stop": ["\n"]} if accepts_native_stop(spec) else {}


def call_kwargs(spec: ModelSpec, settings: CallSettings) -> dict[str, Any]:
    """What every call sends: our own retries only (litellm's off), the timeout, the key
    placeholder for local servers, and the settings the model accepts."""
    kwargs: dict[str, Any] = {
        "model": spec.model,
        "timeout": settings.timeout_s,
        "max_retries": 0,
        **auth_kwargs(spec),
    }
    if accepts_temperature(spec, settings.temperature):
        kwargs["temperature"] = settings.temperature
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    if settings.max_tokens is not None:
        kwargs["max_tokens"] = settings.max_tokens
    return kwargs


async def _stream_step_once(
    spec: ModelSpec,
    prompt: str,
    parts: Sequence[str],
    settings: CallSettings,
    attempt: int,
    queue: asyncio.Queue,
    pin: DeploymentPin | None = None,
) -> StepText:
    watch = UsageWatch()
    token = usage_watch.set(watch)
    try:
        return await _stream_step_watched(spec, prompt, parts, settings, attempt, queue,
                                          watch, pin)
    except Exception:
        if pin is not None:
            pin.forget()  # the next attempt goes through the Router again
        raise
    finally:
        usage_watch.reset(token)


async def _stream_step_watched(
    spec: ModelSpec,
    prompt: str,
    parts: Sequence[str],
    settings: CallSettings,
    attempt: int,
    queue: asyncio.Queue,
    watch: UsageWatch,
    pin: DeploymentPin | None = None,
) -> StepText:
    native_stop = accepts_native_stop(spec)
    kwargs = call_kwargs(spec, settings)
    kwargs["stream"] = True
    if native_stop:
        kwargs["stop"] = ["\n"]
    if asks_logprobs(spec, settings):
        kwargs |= logprob_kwargs(spec)
    if spec.mode != "completion" or not speaks_openai_wire(spec):
        # The provider's own usage, in a last chunk (OpenAI's wire) or mapped from its own
        # fields (Ollama's counts, Gemini's usageMetadata): without this litellm passes none
        # on from a stream, text completions included. On OpenAI's wire the option goes to
        # the server, and not every text-completion server takes it.
        kwargs["stream_options"] = {"include_usage": True}
    started_at = time.perf_counter()
    if spec.mode != "completion":
        kwargs["messages"] = step_messages(spec, settings, prompt, parts)
    else:
        kwargs["prompt"] = prompt
    stream = await start_call(spec, kwargs, chat=spec.mode != "completion", pin=pin)
    deployment = served_by(stream) if spec.router else None
    state = _StreamState()
    if spec.router:
        stream, state.inner_stream = unwrapped(stream)
        if closes_at_the_last_chunk(spec):
            state.done_by = state.inner_stream
    stripper = EchoStripper()
    number = asked_number(prompt)
    char_cap = (settings.max_tokens or DEFAULT_STEP_MAX_TOKENS) * CHARS_PER_TOKEN_CAP
    loop = asyncio.get_running_loop()
    step_deadline = loop.time() + settings.step_timeout_s
    try:
        await _read_step(stream, state, stripper, number, char_cap, settings, spec.mode,
                         queue, step_deadline)
    except TimeoutError:
        if not (state.pieces and loop.time() >= step_deadline - 0.01):
            raise
        # The step's wall-clock limit: keep what came, cut like a token-limit cut.
        state.truncated = state.time_cut = True
    finally:
        await close_stream(stream)
    tail = stripper.finish()
    if tail:
        state.pieces.append(tail)
        await queue.put(TextDelta(tail))
    latency = time.perf_counter() - started_at
    if state.finish_reason == "length" and not state.cut:
        state.truncated = True
    text = "".join(state.pieces).strip()
    if not (state.cut or state.truncated):
        _check_the_stream_ended_well(stream, state, text, spec)
    call = _call_record(spec, settings, prompt, state, latency, attempt, native_stop, text,
                        number, watch)
    call.deployment = deployment
    if call.prompt_tokens is None and state.chunks and watch.replies > 0:
        # The stream was closed before the provider's count came (Ollama's is in its last
        # chunk; a server that ignores `stop` never gets there): the prompt is counted by
        # litellm, in a thread (the first count loads the tokenizer), marked an estimate.
        await _estimate_prompt(call, spec, kwargs)
    return StepText(text=text, call=call, truncated=state.truncated)


async def _estimate_prompt(call: CallRecord, spec: ModelSpec, kwargs: dict[str, Any]) -> None:
    counted = await asyncio.to_thread(estimated_prompt_tokens, spec, kwargs)
    if counted is None:
        return
    call.prompt_tokens = counted
    call.prompt_estimated = call.usage_estimated = True
    call.cost = cost_of(spec, UsageCounts(prompt=counted, completion=call.completion_tokens,
                                          cached=call.cached_tokens,
                                          cache_write=call.cache_write_tokens))


def estimated_prompt_tokens(spec: ModelSpec, kwargs: dict[str, Any]) -> int | None:
    """litellm's count of the prompt a call sends, with the model's tokenizer where litellm
    has it (else tiktoken's); None when it cannot count it."""
    model = deployment_spec(spec).model
    try:
        counter = litellm_module().token_counter
        if "messages" in kwargs:
            return sane_tokens(counter(model=model, messages=kwargs["messages"]))
        return sane_tokens(counter(model=model, text=kwargs["prompt"]))
    except Exception:  # a tokenizer litellm cannot load, content it cannot read
        return None


async def _read_step(
    stream: Any,
    state: _StreamState,
    stripper: EchoStripper,
    number: int | None,
    char_cap: int,
    settings: CallSettings,
    mode: Mode,
    queue: asyncio.Queue,
    step_deadline: float,
) -> None:
    """Read chunks until the step's first line break, its token limit, or the stream's end.
    Raises TimeoutError for a silence (idle) or the step's wall-clock limit."""
    loop = asyncio.get_running_loop()
    iterator = stream.__aiter__()
    # One idle deadline pushed on after every chunk, rather than `asyncio.wait_for` per
    # chunk: that wraps each chunk in a task (two more turns of the event loop, each
    # polling the socket), which made a step ~10% slower than litellm alone
    # (bench/step_overhead.py). The only suspension point in this block is `__anext__`.
    # Until the first text arrives the wait is the call's timeout, not the idle one: a
    # model may think a long while before it writes (reasoning models send nothing then).
    wait_s = max(settings.timeout_s, settings.idle_timeout_s)
    async with asyncio.timeout(wait_s) as idle:
        while True:
            idle.reschedule(min(loop.time() + wait_s, step_deadline))
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except Exception:
                if state.finish_reason is None:
                    raise
                # The provider had finished the answer; what failed after it (a usage chunk
                # litellm could not parse: 1e23 tokens, NaN, a string) costs the accounting
                # only, not the step.
                state.usage_lost = True
                return
            if mode == "completion" and state.inner_stream is None:
                # The chat stream wrapper under a text-completion one is reachable only while
                # the generators run; it knows whether the provider sent a finish reason.
                state.inner_stream = next(
                    (wrapper for wrapper in text_completion_closables(stream)
                     if hasattr(wrapper, "received_finish_reason")), False)
            text = _absorb_chunk(chunk, state, mode)
            if text is None:
                if _provider_done(state.done_by or stream):
                    return
                continue
            wait_s = settings.idle_timeout_s
            if settings.max_tokens is not None and state.chars > char_cap:
                # One huge chunk: keep no more than the cap, as many small ones would.
                text = text[: max(0, len(text) - (state.chars - char_cap))]
                state.chars = char_cap
            released = stripper.feed(text)
            if state.leading_newline and stripper.label not in (None, number):
                # An empty line, then the next thought's label: this thought is empty (the
                # provider ignored or was not sent `stop`), and what follows is not ours.
                state.cut = True
                return
            if released:
                state.pieces.append(released)
                await queue.put(TextDelta(released))
            if state.cut:
                return
            if settings.max_tokens is not None and (
                state.chunks >= settings.max_tokens or state.chars >= char_cap
            ):
                state.truncated = True
                return
            if _provider_done(state.done_by or stream):
                return


def _check_the_stream_ended_well(stream: Any, state: _StreamState, text: str,
                                 spec: ModelSpec, *, part: str = "step") -> None:
    """A stream that ended with no line break (a step), or any whole answer, must have been
    ended by the provider (its own finish reason), so that half an answer is never taken
    for one. Without one it is a provider fault, retried: no choice and no text at all (an
    HTML page, an event stream that is not one, `[DONE]` first) is not a model's answer;
    text with no end is a stream cut short (llama-cpp-python ends an interrupted generation
    with `[DONE]` and no finish reason, and litellm then reports "stop")."""
    if provider_finish_reason(stream, state.inner_stream, state.finish_reason) is not None:
        return
    where = f" at {spec.api_base}" if spec.api_base else ""
    if not text and not state.chunks:
        raise StreamInterrupted(f"the reply from {spec.model}{where} was not a model's answer "
                                "(no choice, no text and no finish reason)")
    raise StreamInterrupted(f"the stream from {spec.model}{where} ended mid-{part} without "
                            "a finish reason (interrupted)")


def not_an_answer(spec: ModelSpec, what: str, kind: ErrorKind = "server") -> LLMError:
    """A reply with status 200 that is not a model's answer: a provider fault, retried."""
    where = f" at {spec.api_base}" if spec.api_base else ""
    return LLMError(kind, f"the reply from {spec.model}{where} was not a model's answer ({what})")


def provider_finish_reason(stream: Any, inner_stream: Any, finish_reason: str | None
                           ) -> str | None:
    """The finish reason the provider itself sent. litellm's stream wrapper makes up "stop"
    for a stream that ended without one, so a chunk's finish reason alone proves nothing;
    what the provider sent the wrapper keeps in `received_finish_reason` (OpenAI-style
    streams) or, when a chunk carried it without ending the stream there (Gemini's last
    chunk: text and `finishReason` together), in `intermittent_finish_reason` (litellm
    1.103.7; tests/test_hostile_server.py fails if either changes). Text-completion streams
    wrap a chat stream wrapper (`inner_stream`), and so does a router's stream; without
    either, the finish reason a chunk carried (`finish_reason`) is all there is."""
    wrappers = [wrapper for wrapper in (stream, inner_stream)
                if wrapper and hasattr(wrapper, "received_finish_reason")]
    if not wrappers:
        return finish_reason
    for wrapper in wrappers:
        found = (wrapper.received_finish_reason
                 or getattr(wrapper, "intermittent_finish_reason", None))
        if found:
            return found
    return None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_text(text: str) -> str:
    """Model text as valid Unicode: a lone UTF-16 surrogate (a JSON "\\ud800" with no
    partner) becomes U+FFFD, as an invalid UTF-8 byte already does on its way in, so that the
    step can be saved, shown and exported like any other."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def _absorb_chunk(chunk: Any, state: _StreamState, mode: Mode) -> str | None:
    """Take what a chunk carries into the state; return the text to keep (cut at the first
    newline after leading whitespace), or None when there is none."""
    choice = _chunk_choice(chunk, state)
    if choice is None:
        return None
    if mode != "completion":
        delta = getattr(choice, "delta", None)
        text = getattr(delta, "content", None) if delta is not None else None
        _absorb_logprobs(getattr(choice, "logprobs", None), state)
    else:
        text = getattr(choice, "text", None)
    if not text:
        return None
    text = unicode_text(text)
    state.raw.append(text)
    state.chunks += 1
    if not state.started:
        stripped = text.lstrip()
        if LINE_BREAK.search(text[: len(text) - len(stripped)]):
            state.leading_newline = True
        text = stripped
        if not text:
            return None
        state.started = True
    line_break = LINE_BREAK.search(text)
    if line_break:
        text = text[: line_break.start()]
        state.cut = True
    state.chars += len(text)
    return text


def _chunk_choice(chunk: Any, state: _StreamState) -> Any:
    """Take a chunk's usage and finish reason into the state; return its first choice, or
    None when it has none."""
    usage = getattr(chunk, "usage", None)
    if usage is not None and getattr(usage, "total_tokens", None):
        state.usage = usage
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return None
    choice = choices[0]
    if getattr(choice, "finish_reason", None):
        state.finish_reason = choice.finish_reason
    return choice


def _absorb_logprobs(logprobs: Any, state: _StreamState) -> None:
    if logprobs is None or state.cut or state.impossible_logprobs:
        return
    try:
        state.tokens.extend(token_logprobs(logprobs))
    except ImpossibleLogprobs:
        state.impossible_logprobs = True
        state.tokens.clear()


class ImpossibleLogprobs(ValueError):
    """A token's log-probability is one no model could give (positive, NaN, infinite, 1e308,
    a boolean): the step or sample has no log-probabilities at all, since any sum or choice
    made with it would mean nothing."""


def token_logprobs(logprobs: Any) -> list[TokenLogprob]:
    """The tokens of a choice's `logprobs` with their log-probabilities and top alternatives,
    in either form providers send: the chat form `content[i].token/logprob/top_logprobs`
    (llama-server sends it on /v1/completions too) or the legacy completion form `tokens` +
    `token_logprobs` + `top_logprobs` (one {token: log-probability} per place). A token sent
    without a value is left out (the tokens then no longer spell the text, and the step has
    none); raises ImpossibleLogprobs for a value no model could give. An alternative with
    such a value is left out of its token's."""
    content = _field(logprobs, "content")
    if content:
        found = []
        for token in content:
            text, value = _field(token, "token"), _field(token, "logprob")
            if isinstance(text, str) and value is not None:
                found.append(TokenLogprob(unicode_text(text), _logprob(value),
                                          _chat_alternatives(_field(token, "top_logprobs"))))
        return found
    texts, values = _field(logprobs, "tokens"), _field(logprobs, "token_logprobs")
    if isinstance(texts, list) and isinstance(values, list) and len(texts) == len(values):
        tops = _field(logprobs, "top_logprobs")
        tops = tops if isinstance(tops, list) and len(tops) == len(texts) else [None] * len(texts)
        return [TokenLogprob(unicode_text(str(text)), _logprob(value), _legacy_alternatives(top))
                for text, value, top in zip(texts, values, tops, strict=True)
                if value is not None]
    return []


def _logprob(value: Any) -> float:
    sane = sane_logprob(value)
    if sane is None:
        raise ImpossibleLogprobs(f"a token's log-probability was {value!r}")
    return sane


def _chat_alternatives(entries: Any) -> tuple[Alternative, ...]:
    """`top_logprobs` of the chat form: [{token, logprob, bytes}, ...], the most likely first."""
    if not isinstance(entries, list):
        return ()
    found = []
    for entry in entries:
        text, value = _field(entry, "token"), sane_logprob(_field(entry, "logprob"))
        if isinstance(text, str) and value is not None:
            found.append((unicode_text(text), value))
    return _ranked(found)


def _legacy_alternatives(entry: Any) -> tuple[Alternative, ...]:
    """One place of the legacy `top_logprobs`: {token: log-probability}."""
    if not isinstance(entry, dict):
        return ()
    found = []
    for text, value in entry.items():
        sane = sane_logprob(value)
        if sane is not None:
            found.append((unicode_text(str(text)), sane))
    return _ranked(found)


def _ranked(alternatives: list[Alternative]) -> tuple[Alternative, ...]:
    # Servers send them most likely first; a legacy dict carries no order to trust.
    return tuple(sorted(alternatives, key=lambda pair: -pair[1])[:TOP_ALTERNATIVES])


def _field(thing: Any, name: str) -> Any:
    value = getattr(thing, name, None)
    if value is None and isinstance(thing, dict):
        value = thing.get(name)
    return value


def aligned_tokens(raw: str, tokens: Sequence[TokenLogprob], start: int,
                   end: int) -> list[TokenLogprob] | None:
    """The tokens of exactly raw[start:end] (the stored step): those of an echoed label, of
    leading whitespace and past the line break are left out, and a token that straddles an
    edge keeps only its part inside, so the texts join to exactly the step and the sum of
    their log-probabilities belongs to it. None when the tokens do not spell the raw text (a
    provider's byte-level tokens, say) or do not reach the step's end."""
    if not tokens or start >= end:
        return None
    joined = "".join(token.text for token in tokens)
    if len(joined) < end or joined[:len(raw)] != raw[:len(joined)]:
        return None
    kept: list[TokenLogprob] = []
    offset = 0
    for token in tokens:
        token_start, offset = offset, offset + len(token.text)
        if offset <= start or token_start >= end:
            continue
        piece = token.text[max(start, token_start) - token_start: min(end, offset) - token_start]
        kept.append(TokenLogprob(piece, token.logprob, token.alternatives))
    return kept


# The most text at the end of a whole answer stopped by its stop sequence that may come
# without log-probabilities: llama-server drops as many tokens from the end of the list as its
# tokenizer makes of the stop string, and the Llama vocabulary makes two of "\n" (a leading
# space and the line break), so the token before the stop goes too (docs/NOTES.md).
WITHHELD_MAX_CHARS = 32


def aligned_tokens_short_of_stop(raw: str, tokens: Sequence[TokenLogprob], start: int,
                                 end: int) -> tuple[list[TokenLogprob] | None, str]:
    """The tokens of raw[start:end] as `aligned_tokens` finds them, for a whole answer the
    provider ended at a native stop sequence; where its tokens spell the text but stop short
    of the step's end by a little (what llama-server withheld), the tokens of the part they
    cover, and the text left without log-probabilities (else "")."""
    aligned = aligned_tokens(raw, tokens, start, end)
    if aligned is not None or not tokens:
        return aligned, ""
    covered = len("".join(token.text for token in tokens))
    withheld = raw[covered:end]
    # One token's worth: short, and no space or line break inside it.
    if not start < covered < end or len(withheld) > WITHHELD_MAX_CHARS or (
        len(withheld.strip().split()) != 1 or LINE_BREAK.search(withheld)
    ):
        return None, ""
    aligned = aligned_tokens(raw, tokens, start, covered)  # None: they do not spell it
    return (aligned, withheld) if aligned is not None else (None, "")


async def close_stream(stream: Any) -> None:
    # The step is already decided; a failure to close the connection changes nothing.
    close = getattr(stream, "aclose", None)
    closables = [stream] if close is not None else text_completion_closables(stream)
    for closable in closables:
        with contextlib.suppress(Exception):
            await closable.aclose()


def text_completion_closables(stream: Any) -> list[Any]:
    """litellm's TextCompletionStreamWrapper (1.103.7) has no aclose (NOTES): under it is a
    chain of async generators that ends in the CustomStreamWrapper holding the HTTP response.
    Walk the chain through the generators' frames; return what to close, innermost first.
    On another litellm, where the chain differs, this finds less and closes what it found."""
    found: list[Any] = []
    current = getattr(stream, "completion_stream", None)
    while current is not None and hasattr(current, "aclose") and len(found) < 8:
        found.append(current)
        frame = getattr(current, "ag_frame", None)
        if frame is None:
            break
        names = frame.f_locals
        current = next(
            (names[name] for name in ("streamwrapper", "response")
             if hasattr(names.get(name), "aclose")),
            None,
        )
    return found[::-1]


def _call_record(
    spec: ModelSpec,
    settings: CallSettings,
    prompt: str,
    state: _StreamState,
    latency: float,
    attempt: int,
    native_stop: bool,
    text: str,
    number: int | None,
    watch: UsageWatch,
) -> CallRecord:
    raw = "".join(state.raw)
    start, _ = step_span(raw, number)
    tokens = None
    if raw[start:start + len(text)] == text:  # else the step is not where the rules put it
        tokens = aligned_tokens(raw, state.tokens, start, start + len(text))
    # The provider's own counts as its events gave them (also from a stream closed early),
    # else litellm's (a stream read to its end, an in-process provider).
    counts = watch.usage.or_else(counts_from_litellm(state.usage))
    # A server that sent no usage over HTTP (llama.cpp's, some proxies) gets litellm's own
    # tiktoken count in its place (970 where llama-server counted 1090): an estimate.
    estimated = watch.replies > 0 and not watch.provider_usage
    prompt_estimated = estimated and counts.prompt is not None
    if counts.completion is None and state.chunks and not state.usage_lost:
        # A stream closed early without a count of its output (Anthropic's comes at its
        # end): one chunk is one token on OpenAI-style servers.
        counts.completion = state.chunks
        estimated = True
    finish_reason = state.finish_reason or ("newline" if state.cut else None)
    if state.time_cut:
        finish_reason = "time_limit"
    return CallRecord(
        model=spec.model,
        params=sent_params(spec, settings),
        latency_s=latency,
        prompt_tokens=counts.prompt,
        completion_tokens=counts.completion,
        cost=cost_of(spec, counts),
        logprobs=[token.logprob for token in tokens] if tokens else None,
        impossible_logprobs=state.impossible_logprobs,
        finish_reason=finish_reason,
        attempts=attempt,
        native_stop=native_stop,
        tokens=tokens,
        usage_estimated=estimated and (counts.prompt, counts.completion) != (None, None),
        prompt_estimated=prompt_estimated,
        cached_tokens=counts.cached,
        cache_write_tokens=counts.cache_write,
    )


# How far past our own limits the HTTP client's read timeout is set for a whole answer.
_TRANSPORT_SLACK_S = 5.0


async def _watching_usage(call: Callable[[UsageWatch], Awaitable[T]]) -> T:
    """One attempt of a call, with the usage watch the reply guard reports into set around
    it (records.usage_watch)."""
    watch = UsageWatch()
    token = usage_watch.set(watch)
    try:
        return await call(watch)
    finally:
        usage_watch.reset(token)


async def complete(
    spec: ModelSpec,
    messages: Sequence[dict[str, str]],
    settings: CallSettings | None = None,
    *,
    streamed: bool = True,
) -> Completion:
    """One whole answer (no stop), e.g. for the mistake finders: `complete_events` without
    the retries' events. `streamed=False` asks for it in one reply, for an answer of a few
    tokens ("test connection"). Raises LLMError."""
    if not streamed:
        settings = settings or CallSettings(max_tokens=None)
        return await with_retries(spec, settings.retry, lambda attempt: _complete_unstreamed(
            spec, list(messages), settings, attempt))
    async for item in complete_events(spec, messages, settings):
        if isinstance(item, Completion):
            return item
    raise AssertionError("a whole answer's call ended without one")


async def complete_events(
    spec: ModelSpec,
    messages: Sequence[dict[str, str]],
    settings: CallSettings | None = None,
) -> AsyncIterator[Restart | Completion]:
    """One whole answer (no stop), streamed and read to its end: yields a Restart before each
    retry (nothing of a failed attempt is kept: a stream cut short is asked for again, whole),
    then the Completion. Until its first text the call's timeout applies, then the idle
    timeout between chunks (or the call's, where shorter: it bounds each read), and
    `answer_timeout_s` the whole: an answer still being written then is kept as far as it
    came (finish reason "time_limit"). Raises LLMError."""
    settings = settings or CallSettings(max_tokens=None)

    def attempt_once(attempt: int, _queue: asyncio.Queue) -> Awaitable[Completion]:
        return _watching_usage(lambda watch: _complete_once(spec, list(messages), settings,
                                                            attempt, watch))

    async for item in _retried_events(spec, settings, attempt_once):
        yield item


async def _complete_once(
    spec: ModelSpec, messages: list[dict[str, str]], settings: CallSettings, attempt: int,
    watch: UsageWatch,
) -> Completion:
    kwargs = call_kwargs(spec, settings)
    # Our own limits below (the first text, each silence) are the ones that count; the HTTP
    # client's, per read, is set past them so that it never fires first and a wait for
    # the first text is not reported as a silence mid-answer.
    kwargs["timeout"] = settings.timeout_s + _TRANSPORT_SLACK_S
    kwargs["stream"] = True
    if spec.mode != "completion" or not speaks_openai_wire(spec):
        # As for a step (stream_step): the provider's usage, in a last chunk or mapped.
        kwargs["stream_options"] = {"include_usage": True}
    loop = asyncio.get_running_loop()
    started_at = time.perf_counter()
    deadline = loop.time() + settings.answer_timeout_s
    state = _StreamState()
    stream: Any = None
    deployment: str | None = None
    try:
        async with asyncio.timeout_at(min(loop.time() + settings.timeout_s, deadline)) as limit:
            if spec.mode != "completion":
                kwargs["messages"] = finder_messages(spec, settings, messages)
            else:
                kwargs["prompt"] = "\n\n".join(message["content"] for message in messages)
            stream = await start_call(spec, kwargs, chat=spec.mode != "completion")
            deployment = served_by(stream) if spec.router else None
            if spec.router:
                stream, state.inner_stream = unwrapped(stream)
                if closes_at_the_last_chunk(spec):
                    state.done_by = state.inner_stream
            await _read_answer(stream, state, settings, spec, limit, deadline)
    except TimeoutError:
        if not (state.pieces and loop.time() >= deadline - 0.01):
            raise _silence(spec, settings, state) from None
        state.time_cut = True  # the answer's wall-clock limit: kept as far as it came
    finally:
        if stream is not None:
            await close_stream(stream)
    text = "".join(state.pieces)
    if not state.time_cut:
        _check_the_stream_ended_well(stream, state, text, spec, part="answer")
    counts = _answer_counts(state, watch)
    call = CallRecord(
        model=spec.model,
        params=sent_params(spec, settings),
        latency_s=time.perf_counter() - started_at,
        prompt_tokens=counts.prompt,
        completion_tokens=counts.completion,
        cost=cost_of(spec, counts),
        finish_reason="time_limit" if state.time_cut else state.finish_reason,
        attempts=attempt,
        cached_tokens=counts.cached,
        cache_write_tokens=counts.cache_write,
        deployment=deployment,
    )
    return Completion(text=text, call=call)


def _answer_counts(state: _StreamState, watch: UsageWatch) -> UsageCounts:
    """A whole answer's usage: the provider's own counts, as its events gave them (the reply
    guard reads every wire's, usage_events.py); unknown where it sent none, or not all sane:
    never litellm's own estimate, which a stream gets in their place. An in-process
    provider (no HTTP reply) counts its own: the offline models tell the watch, any other's
    litellm hands on."""
    if not watch.replies and not watch.provider_usage:
        return counts_from_litellm(state.usage)
    counts = watch.usage
    if counts.prompt is None or counts.completion is None:
        # A count missing or absurd (2**64, NaN): the usage as a whole is unknown, as the
        # reply guard makes it for a whole answer sent in one piece.
        return UsageCounts()
    return counts


async def _read_answer(stream: Any, state: _StreamState, settings: CallSettings,
                       spec: ModelSpec, limit: asyncio.Timeout, deadline: float) -> None:
    """Read a whole answer's chunks to the stream's end. `limit` (the call's timeout until
    the first text) is pushed on after each text by the idle timeout, or the call's own
    where that is shorter (it is the wait "per read"), never past `deadline`; it raises
    TimeoutError when either passes."""
    loop = asyncio.get_running_loop()
    silence_s = longest_silence(settings)
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except Exception as error:
            if state.finish_reason is None:
                raise classify_error(error, spec, whole_answer=True) from error
            state.usage_lost = True  # as for a step: the answer was whole before it failed
            return
        if spec.mode == "completion" and state.inner_stream is None:
            state.inner_stream = next(
                (wrapper for wrapper in text_completion_closables(stream)
                 if hasattr(wrapper, "received_finish_reason")), False)
        choice = _chunk_choice(chunk, state)
        if choice is not None:
            if spec.mode != "completion":
                delta = getattr(choice, "delta", None)
                text = getattr(delta, "content", None) if delta is not None else None
            else:
                text = getattr(choice, "text", None)
            if text:
                state.pieces.append(unicode_text(text))
                state.chunks += 1
                state.started = True
                limit.reschedule(min(loop.time() + silence_s, deadline))
        if _provider_done(state.done_by or stream):
            return


def _provider_done(stream: Any) -> bool:
    """Whether litellm's stream wrapper has handed on all the provider sent: its stream ended
    (the wrapper's last chunk is out) and, unless the provider's own counts came over HTTP
    (the reply guard's, records.usage_watch), litellm's usage chunk is out too (an in-process
    provider's counts, or litellm's estimate for a server that sent none). What litellm
    does past that point (the answer assembled again in a thread, twice; its logging; its
    price of the call) is for callbacks we do not register, and cost 2-3 ms of CPU a call
    (bench/finder_stream.py): the stream is closed instead. Only a chat stream read directly
    (litellm 1.103.7's CustomStreamWrapper: `sent_last_chunk`, `sent_stream_usage`,
    `send_stream_usage`); a router's stream likewise by the provider's wrapper under it
    (`_StreamState.done_by`), unless its Router counts something in those callbacks (a
    `tpm`/`rpm` limit, a strategy by usage or latency): then it is read to its end."""
    if getattr(stream, "sent_last_chunk", False) is not True:
        return False
    watch = usage_watch.get()
    if watch is not None and watch.provider_usage:
        return True
    return (getattr(stream, "sent_stream_usage", True) is True
            or getattr(stream, "send_stream_usage", False) is not True)


def longest_silence(settings: CallSettings) -> float:
    """The longest a whole answer's stream may be silent once it has begun to write."""
    return min(settings.timeout_s, settings.idle_timeout_s)


def _silence(spec: ModelSpec, settings: CallSettings, state: _StreamState) -> LLMError:
    return answer_silence(spec, settings, started=state.started,
                          first_text_s=settings.timeout_s)


def answer_silence(spec: ModelSpec, settings: CallSettings, *, started: bool,
                   first_text_s: float) -> LLMError:
    """A whole answer's timeout (a finder's, a thinking call's), saying which: no text in
    `first_text_s`, or a silence mid-answer longer than the longest allowed."""
    where = f" at {spec.api_base}" if spec.api_base else ""
    if not started:
        return LLMError("timeout", f"{spec.model}{where} did not answer in time (no text "
                        f"in {first_text_s:g} s)")
    return LLMError("timeout", f"{spec.model}{where} did not answer in time (silent for "
                    f"{longest_silence(settings):g} s mid-answer)")


async def _complete_unstreamed(
    spec: ModelSpec, messages: list[dict[str, str]], settings: CallSettings, attempt: int
) -> Completion:
    """One whole answer asked for in one reply (not streamed): a few tokens' probe."""
    kwargs = call_kwargs(spec, settings)
    started_at = time.perf_counter()
    if spec.mode != "completion":
        kwargs["messages"] = finder_messages(spec, settings, messages)
    else:
        kwargs["prompt"] = "\n\n".join(message["content"] for message in messages)
    response = await asyncio.wait_for(start_call(spec, kwargs, chat=spec.mode != "completion"),
                                      settings.timeout_s + 5)
    choices = getattr(response, "choices", None) or []
    if not choices:
        raise not_an_answer(spec, "no choice")
    choice = choices[0]
    if spec.mode != "completion":
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
    else:
        text = getattr(choice, "text", None) or ""
    if not text and getattr(choice, "finish_reason", None) is None:
        raise not_an_answer(spec, "no text and no finish reason")
    text = unicode_text(text)
    latency = time.perf_counter() - started_at
    counts = counts_from_litellm(getattr(response, "usage", None))
    call = CallRecord(
        model=spec.model,
        params=sent_params(spec, settings),
        latency_s=latency,
        prompt_tokens=counts.prompt,
        completion_tokens=counts.completion,
        cost=cost_of(spec, counts),
        finish_reason=getattr(choice, "finish_reason", None),
        attempts=attempt,
        cached_tokens=counts.cached,
        cache_write_tokens=counts.cache_write,
        deployment=served_by(response) if spec.router else None,
    )
    return Completion(text=text, call=call)


def call_to_json(call: CallRecord) -> str:
    return json.dumps(call.__dict__, allow_nan=False)
