"""One streamed call for many steps (one-call mode: opt-in, never the default).

The paper's protocol makes one call a step, each stopped at its newline. Here one call is
made with no stop, and the model goes on through the following thoughts: its first line is
the step the prompt asks for (read by the rules of a step: leading whitespace skipped, an
echoed `Thought N:` stripped, cut at the line break), and each following line is taken as the
next step only if it begins with that step's label, `Thought k:` (stripped as an echo is). At
the first line that does not (an empty line, another text, another number), at a step longer
than a step's token limit, at a stream cut, a silence or the step's time limit, the call
gives no more steps and is closed: the caller goes on with one call a step from the last
whole step. The consumer closes it too once it has what it wants (the answer, the step
limit). A step is never empty and never truncated here: those cases are left to the per-step
call, which has its rules for them.

Each step comes as a `StepText` whose call record is its share of the call: its own tokens
(and their log-probabilities), its latency from the call's start, and `one_call` (the call's
id, the same for every step it gave) with its place among them. The stream is closed early,
so the provider's usage rarely arrives: token counts are one a chunk, marked estimated, as
for a per-step stream closed at its newline.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from typing import Any

from bbm_tui.core.llm.caching import step_messages
from bbm_tui.core.llm.capabilities import asks_logprobs, logprob_kwargs, sent_params
from bbm_tui.core.llm.errors import classify_error, key_check
from bbm_tui.core.llm.records import CHARS_PER_TOKEN_CAP, StepText, TextDelta, UsageCounts
from bbm_tui.core.llm.router import (
    DeploymentPin,
    served_by,
    start_call,
    unwrapped,
)
from bbm_tui.core.llm.transport import (
    ImpossibleLogprobs,
    aligned_tokens,
    call_kwargs,
    close_stream,
    estimated_prompt_tokens,
    provider_finish_reason,
    text_completion_closables,
    token_logprobs,
    unicode_text,
)
from bbm_tui.core.llm.turns import call_turn
from bbm_tui.core.llm.usage import cost_of
from bbm_tui.core.prompts.thoughts import LINE_BREAK, leading_label
from bbm_tui.core.records import CallRecord, TokenLogprob
from bbm_tui.core.types import DEFAULT_STEP_MAX_TOKENS, CallSettings, ModelSpec


@dataclass
class LineStarted:
    """The next line began with its label: Thought `number` is streaming."""

    number: int


@dataclass
class CallStopped:
    """The call gives no more steps: why, and whether text of a step that will not be kept
    had been streamed (`voided`: the number of that step)."""

    reason: str
    voided: int | None = None


OneCallEvent = TextDelta | LineStarted | StepText | CallStopped


async def stream_steps(
    spec: ModelSpec,
    prompt: str,
    first_number: int,
    settings: CallSettings | None = None,
    pin: DeploymentPin | None = None,
    *,
    parts: Sequence[str] = (),
    unkept: list[CallRecord] | None = None,
) -> AsyncGenerator[OneCallEvent, None]:
    """The steps of one call, from Thought `first_number` on (see the module's docstring):
    TextDelta as a step's text arrives, LineStarted when a following line begins with its
    label, a StepText for each whole step, and a last CallStopped. Never raises an LLMError:
    a failure is a CallStopped, and the per-step call after it reports it if it lasts.

    Once the generator is over (read to its end, or closed), `unkept` holds the record of
    what the request cost beyond the steps it gave, if anything: the whole request when it
    gave no step (its prompt too), else the text streamed past its last whole step (a
    step begun and voided, or what came after the step a stop rule ended on). Every request
    made is then a call with its tokens and cost."""
    settings = settings or CallSettings()
    queue: asyncio.Queue[OneCallEvent] = asyncio.Queue()
    call = _Call()
    reader = asyncio.ensure_future(_read_call(spec, prompt, parts, first_number, settings, pin,
                                              queue, call))
    try:
        while True:
            item = await queue.get()
            yield item
            if isinstance(item, CallStopped):
                return
    finally:
        if not reader.done():
            reader.cancel()
        with contextlib.suppress(BaseException):
            await reader
        if unkept is not None:
            record = _unkept_record(call, spec, settings)
            if record is not None:
                unkept.append(record)


@dataclass
class _Lines:
    """The call's text cut into steps as it arrives (the rules of the module's docstring)."""

    number: int
    first: int
    char_cap: int
    chunk_cap: int | None
    raw: str = ""
    line_start: int = 0  # where the current step's line begins in `raw`
    decided: bool = False  # the line's start is read (label or not)
    text_from: int = 0  # where its step text begins (after whitespace and the label)
    released_to: int = 0  # how far its text has been streamed out
    line_chunks: int = 0
    after_cr: bool = False  # the last line ended with "\r": a "\n" right after is the same break
    shown: bool = False  # text of the current line was streamed out

    def feed(self, text: str) -> list[TextDelta | LineStarted | tuple[int, int, int] | str]:
        """Take a chunk's text; return what it made: deltas, LineStarted, a whole step as
        (number, start, end) in `raw`, or a reason to stop (a str, last)."""
        self.raw += text
        self.line_chunks += 1
        out: list[TextDelta | LineStarted | tuple[int, int, int] | str] = []
        while True:
            if not self.decided:
                stop = self._decide(out)
                if stop is not None:
                    out.append(stop)
                    return out
                if not self.decided:
                    return out
            found = LINE_BREAK.search(self.raw, self.released_to)
            upto = found.start() if found else len(self.raw)
            if upto > self.released_to:
                out.append(TextDelta(self.raw[self.released_to:upto]))
                self.released_to = upto
                self.shown = True
            if upto - self.text_from > self.char_cap or (
                self.chunk_cap is not None and self.line_chunks > self.chunk_cap
            ):
                out.append("a step longer than its token limit")
                return out
            if found is None:
                return out
            step = self._whole_step(found.start())
            if step is None:
                out.append("an empty step")
                return out
            out.append(step)
            self._next_line(found.end(), self.raw[found.start()] == "\r")

    def finish(self) -> tuple[int, int, int] | None:
        """The line the stream ended in, as a whole step (the provider finished it)."""
        if not self.decided:
            return None
        return self._whole_step(len(self.raw))

    def _decide(self, out: list) -> str | None:
        """Read the start of the current line once there is enough of it: set `decided`,
        or return why the call stops here."""
        if self.after_cr:
            if len(self.raw) == self.line_start:
                return None  # the "\n" of a "\r\n" may come in the next chunk: wait for it
            if self.raw.startswith("\n", self.line_start):
                self.line_start += 1
        self.after_cr = False
        region = self.raw[self.line_start:]
        if self.number == self.first:
            body = region.lstrip()
            leading = len(region) - len(body)
            if LINE_BREAK.search(region, 0, leading):
                return "a line break before the first step"
            if not body:
                return None
            decided, _label, end = leading_label(region)
            if not decided:
                return None
            self.text_from = self.line_start + (end or leading)
        else:
            if not region:
                return None
            if LINE_BREAK.match(region):
                return "an empty line"
            decided, label, end = leading_label(region)
            if not decided:
                return None
            if label != self.number:
                return f"a line without the label Thought {self.number}:"
            self.text_from = self.line_start + end
            out.append(LineStarted(self.number))
        self.decided = True
        self.released_to = self.text_from
        return None

    def _whole_step(self, line_end: int) -> tuple[int, int, int] | None:
        piece = self.raw[self.text_from:line_end]
        start = self.text_from + len(piece) - len(piece.lstrip())
        end = start + len(piece.strip())
        return (self.number, start, end) if end > start else None

    def _next_line(self, start: int, after_cr: bool) -> None:
        self.number += 1
        self.line_start = start
        self.decided = False
        self.shown = False
        self.line_chunks = 0
        self.after_cr = after_cr


@dataclass
class _Call:
    """What the call has sent so far, beyond its text."""

    id: str = field(default_factory=lambda: uuid.uuid4().hex)
    tokens: list[TokenLogprob] = field(default_factory=list)
    impossible_logprobs: bool = False
    finish_reason: str | None = None
    chunks_since_step: int = 0
    shares: int = 0
    inner_stream: Any = None
    # litellm's count of the call's prompt (None: it could not count it): the provider's
    # comes at the stream's end, which a call closed at a step never reaches.
    prompt_tokens: int | None = None
    # The request was sent (`started_at` its time), and who served it behind a router.
    started_at: float | None = None
    deployment: str | None = None


async def _read_call(spec: ModelSpec, prompt: str, parts: Sequence[str], first_number: int,
                     settings: CallSettings, pin: DeploymentPin | None,
                     queue: asyncio.Queue, call: _Call) -> None:
    """Make the call and put its events on `queue`, a CallStopped last."""
    missing = key_check(spec)
    if missing is not None:
        await queue.put(CallStopped(missing.message))
        return
    max_tokens = settings.max_tokens or DEFAULT_STEP_MAX_TOKENS
    lines = _Lines(first_number, first_number, max_tokens * CHARS_PER_TOKEN_CAP,
                   settings.max_tokens)
    kwargs = call_kwargs(spec, settings)
    # No stop, and no token limit for the call as a whole: each step keeps its own (cut on
    # the client, above), and a limit on the call would only end it mid-step.
    kwargs.pop("max_tokens", None)
    kwargs["stream"] = True
    if asks_logprobs(spec, settings):
        kwargs |= logprob_kwargs(spec)
    if spec.mode != "completion":
        kwargs["messages"] = step_messages(spec, settings, prompt, parts)
    else:
        kwargs["prompt"] = prompt
    # In a thread: the first count loads the tokenizer (the app's loop must not wait).
    call.prompt_tokens = await asyncio.to_thread(estimated_prompt_tokens, spec, kwargs)
    started_at = time.perf_counter()
    stream: Any = None
    reason = "the call ended"
    try:
        async with call_turn(spec):
            call.started_at = started_at
            stream = await start_call(spec, kwargs, chat=spec.mode != "completion", pin=pin)
            deployment = call.deployment = served_by(stream) if spec.router else None
            if spec.router:
                stream, call.inner_stream = unwrapped(stream)
            reason = await _read_lines(stream, lines, call, spec, settings, prompt, started_at,
                                       deployment, queue)
    except TimeoutError:
        reason = "a silence longer than the timeout, or a step past its time limit"
        if pin is not None:
            pin.forget()
    except asyncio.CancelledError:
        raise
    except Exception as error:
        reason = classify_error(error, spec).message
        if pin is not None:
            pin.forget()
    finally:
        if stream is not None:
            await close_stream(stream)
    await queue.put(CallStopped(reason, lines.number if lines.shown else None))


async def _read_lines(stream: Any, lines: _Lines, call: _Call, spec: ModelSpec,
                      settings: CallSettings, prompt: str, started_at: float,
                      deployment: str | None, queue: asyncio.Queue) -> str:
    """Read the stream into steps until a reason to stop; return it."""
    loop = asyncio.get_running_loop()
    iterator = stream.__aiter__()
    wait_s = max(settings.timeout_s, settings.idle_timeout_s)
    line_deadline = loop.time() + settings.step_timeout_s
    async with asyncio.timeout(wait_s) as idle:
        while True:
            idle.reschedule(min(loop.time() + wait_s, line_deadline))
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                break
            if spec.mode == "completion" and call.inner_stream is None:
                call.inner_stream = next(
                    (wrapper for wrapper in text_completion_closables(stream)
                     if hasattr(wrapper, "received_finish_reason")), False)
            text = _absorb(chunk, call, spec)
            if not text:
                continue
            wait_s = settings.idle_timeout_s
            call.chunks_since_step += 1
            for item in lines.feed(text):
                if isinstance(item, str):
                    return item
                if isinstance(item, tuple):
                    await queue.put(_step_text(item, lines, call, spec, settings, started_at,
                                               deployment))
                    line_deadline = loop.time() + settings.step_timeout_s
                else:
                    await queue.put(item)
    finished = provider_finish_reason(stream, call.inner_stream, call.finish_reason)
    if finished is None:
        return "the stream ended mid-step without a finish reason"
    if finished == "length":
        return "the call reached its token limit"
    last = lines.finish()
    if last is None:
        return "the model finished"
    await queue.put(_step_text(last, lines, call, spec, settings, started_at, deployment))
    lines.shown = False  # that text is a whole step now
    return "the model finished"


def _absorb(chunk: Any, call: _Call, spec: ModelSpec) -> str:
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return ""
    choice = choices[0]
    if getattr(choice, "finish_reason", None):
        call.finish_reason = choice.finish_reason
    if spec.mode != "completion":
        delta = getattr(choice, "delta", None)
        text = getattr(delta, "content", None) if delta is not None else None
        logprobs = getattr(choice, "logprobs", None)
        if logprobs is not None and not call.impossible_logprobs:
            try:
                call.tokens.extend(token_logprobs(logprobs))
            except ImpossibleLogprobs:
                call.impossible_logprobs = True
                call.tokens.clear()
    else:
        text = getattr(choice, "text", None)
    return unicode_text(text) if text else ""


def _unkept_record(call: _Call, spec: ModelSpec, settings: CallSettings) -> CallRecord | None:
    """What the request cost beyond the steps it gave (see `stream_steps`); None: nothing
    (no request was sent, or every chunk went into a step)."""
    if call.started_at is None or (call.shares and not call.chunks_since_step):
        return None
    completion_tokens = call.chunks_since_step or None
    prompt_tokens = call.prompt_tokens if call.shares == 0 else None
    priced_prompt = prompt_tokens if call.shares == 0 else (
        0 if call.prompt_tokens is not None else None)
    return CallRecord(
        model=spec.model,
        params=_params(spec, settings),
        latency_s=time.perf_counter() - call.started_at,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=cost_of(spec, UsageCounts(prompt=priced_prompt,
                                       completion=completion_tokens or 0)),
        finish_reason=call.finish_reason,
        native_stop=False,
        usage_estimated=True,
        prompt_estimated=prompt_tokens is not None,
        one_call=call.id,
        one_call_share=call.shares,
        deployment=call.deployment,
    )


def _params(spec: ModelSpec, settings: CallSettings) -> dict[str, Any]:
    """The parameters the call was sent (no token limit), and that it gave several steps."""
    params = sent_params(spec, settings)
    params.pop("max_tokens", None)
    return params | {"one_call": True}


def _step_text(step: tuple[int, int, int], lines: _Lines, call: _Call, spec: ModelSpec,
               settings: CallSettings, started_at: float, deployment: str | None) -> StepText:
    """A whole step with its share of the call."""
    _number, start, end = step
    tokens = aligned_tokens(lines.raw, call.tokens, start, end) if call.tokens else None
    completion_tokens = call.chunks_since_step or None
    call.chunks_since_step = 0
    # The call's prompt is the first share's (estimated); the others' cost is their output's.
    prompt_tokens = call.prompt_tokens if call.shares == 0 else None
    priced_prompt = prompt_tokens if call.shares == 0 else (
        0 if call.prompt_tokens is not None else None)
    record = CallRecord(
        model=spec.model,
        params=_params(spec, settings),
        latency_s=time.perf_counter() - started_at,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=cost_of(spec, UsageCounts(prompt=priced_prompt, completion=completion_tokens)),
        logprobs=[token.logprob for token in tokens] if tokens else None,
        impossible_logprobs=call.impossible_logprobs,
        finish_reason="newline" if end < len(lines.raw) else call.finish_reason,
        native_stop=False,
        tokens=tokens,
        usage_estimated=completion_tokens is not None,
        prompt_estimated=prompt_tokens is not None,
        one_call=call.id,
        one_call_share=call.shares,
        deployment=deployment,
    )
    call.shares += 1
    return StepText(text=lines.raw[start:end], call=record)
