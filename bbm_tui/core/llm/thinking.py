"""One thinking call, streamed and read back as ONE stream of events (docs/DESIGN.md §16).

A thinking model writes its reasoning, then its answer, in one call. Each provider says it on
its own wire (docs/NOTES.md, "Thinking models"); litellm's adapters bring most of them to
`delta.reasoning_content`, and what is left of the differences is taken care of here:

- what switches thinking on (`thinking_kwargs`): OpenAI's `reasoning_effort`, Anthropic's
  `thinking` budget, Gemini's `thinkingConfig` with `includeThoughts` (litellm makes it of
  `thinking` or `reasoning_effort`), Ollama's `think`;
- which parameters a thinking call refuses (`thinking_refusal`), said before any request;
- where the reasoning comes: `reasoning_content` (and vLLM's newer `reasoning`), Anthropic's
  thinking blocks with their signature and its `redacted_thinking` blocks (kept opaque, shown
  as `RedactedReasoning`, never as text), or `<think>…</think>` left in the content by the
  server (`ThinkTags` cuts it out, a tag cut across chunks too);
- what kind of text it is (raw, a summary, none at all) and how many tokens it took.

The consumer (the thinking generator) sees `ReasoningDelta`s, `AnswerDelta`s and
`RedactedReasoning`s in order, then one `ThinkingDone`. Our retries happen only before the
first event: once reasoning was shown, a failure is raised (an LLMError) after it, and the
consumer keeps the steps it finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, Literal

from bbm_tui.core.llm.capabilities import (
    auth_kwargs,
    is_offline,
    reasoning_is_summary,
    takes_ollama_effort,
    takes_thinking_budget,
    takes_thinking_effort,
    thinking_wire,
)
from bbm_tui.core.llm.errors import (
    LLMError,
    StreamInterrupted,
    classify_error,
    key_check,
)
from bbm_tui.core.llm.records import UsageCounts, UsageWatch, usage_watch
from bbm_tui.core.llm.router import start_call
from bbm_tui.core.llm.transport import (
    answer_silence,
    close_stream,
    longest_silence,
    provider_finish_reason,
    unicode_text,
)
from bbm_tui.core.llm.turns import call_turn
from bbm_tui.core.llm.usage import cost_of, counts_from_litellm
from bbm_tui.core.records import CallRecord, ReasoningKind
from bbm_tui.core.types import CallSettings, ModelSpec

Effort = Literal["low", "medium", "high"]
EFFORTS: tuple[Effort, ...] = ("low", "medium", "high")

# Anthropic's limits on a thinking budget: at least 1,024 tokens, and under `max_tokens`.
MIN_THINKING_BUDGET = 1024
# The thinking budget an effort stands for where a budget must be sent (Anthropic): litellm's
# own mapping of `reasoning_effort` (1.103.7's defaults), so that both spellings agree.
EFFORT_BUDGETS: dict[Effort, int] = {"low": 1024, "medium": 2048, "high": 4096}
DEFAULT_EFFORT: Effort = "medium"
# Room for the answer after the thinking budget, where the provider needs a `max_tokens` that
# holds both (Anthropic) and none was given.
ANSWER_TOKENS_AFTER_BUDGET = 4096


@dataclass(frozen=True)
class ThinkingSettings:
    """How a thinking call thinks and samples. Sampling lives here rather than in
    CallSettings because a thinking call's defaults differ: None leaves a parameter out (the
    provider's default), which is the only value some providers take with thinking on
    (Anthropic's temperature 1, o-series' fixed sampling). From CallSettings a thinking call
    takes only its timeouts and retries."""

    effort: Effort | None = None  # --thinking-effort
    budget_tokens: int | None = None  # --thinking-budget
    # Every token the call may write, the reasoning's included (None: the provider's default;
    # Anthropic needs one: the budget plus ANSWER_TOKENS_AFTER_BUDGET).
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stop: tuple[str, ...] = ()
    n: int = 1
    logprobs: bool = False


@dataclass
class ReasoningDelta:
    """A piece of reasoning text (the model's own, or the provider's summary of it), in order."""

    text: str


@dataclass
class AnswerDelta:
    """A piece of the final answer's text (the content after the reasoning)."""

    text: str


@dataclass
class RedactedReasoning:
    """A block of reasoning the provider sent encrypted (Anthropic's `redacted_thinking`):
    shown as "[redacted by the provider]"; its data is in ThinkingDone.opaque."""


@dataclass
class ThinkingDone:
    """The last event of a call that ended well."""

    call: CallRecord  # usage (reasoning tokens included), cost (them included), latency
    reasoning_kind: ReasoningKind  # raw / summary / none, by provider, model and what came
    reasoning_tokens: int | None  # None: the provider did not count them apart
    # Signatures and redacted data, verbatim: kept with the call, never shown.
    opaque: list[dict[str, Any]] = field(default_factory=list)


ThinkingEvent = ReasoningDelta | AnswerDelta | RedactedReasoning | ThinkingDone


# -- What a thinking call refuses, and what it sends

def thinking_refusal(spec: ModelSpec, call: CallSettings, thinking: ThinkingSettings
                     ) -> str | None:
    """The sentence saying which parameter this provider's thinking call refuses and why, or
    None. Checked before any call: the provider would answer with an error (or, worse, ignore
    the parameter and think anyway)."""
    del call  # timeouts and retries only: nothing a provider refuses
    if spec.mode == "completion":
        return (f"{spec.model} is set up for text completion: a thinking call is a chat call "
                "(choose the chat endpoint)")
    if thinking.n != 1:
        return (f"n={thinking.n}: a thinking call writes one trace; run it again for "
                "another (no provider streams several reasonings apart)")
    if thinking.effort is not None and thinking.effort not in EFFORTS:
        return f"--thinking-effort must be low, medium or high, not {thinking.effort!r}"
    if is_offline(spec):
        return None  # the offline thinking model takes what it can and ignores the rest
    return _provider_refusal(spec, thinking)


def _provider_refusal(spec: ModelSpec, thinking: ThinkingSettings) -> str | None:
    wire = thinking_wire(spec)
    if thinking.budget_tokens is not None and not takes_thinking_budget(spec):
        return (f"--thinking-budget: {spec.model} takes no budget of thinking tokens "
                "(Anthropic and Gemini do); use --thinking-effort where it takes one")
    if thinking.effort is not None and not takes_thinking_effort(spec):
        return (f"--thinking-effort: {spec.model} takes no thinking effort "
                f"({'DeepSeek' if wire == 'deepseek' else 'its provider'} decides how long "
                "it thinks)")
    if wire == "anthropic":
        return _anthropic_refusal(spec, thinking)
    if wire == "ollama" and thinking.effort is not None and not takes_ollama_effort(spec):
        return (f"--thinking-effort: Ollama's {spec.model.split('/', 1)[-1]} thinks or not "
                "(`think` on or off; only gpt-oss takes an effort): leave it unset")
    if wire == "openai_reasoning":
        return _openai_reasoning_refusal(spec, thinking)
    if thinking.logprobs and wire in ("deepseek", "ollama"):
        return (f"log-probabilities: {spec.model} gives none with thinking on "
                f"({'DeepSeek answers 400' if wire == 'deepseek' else 'litellm refuses them'})")
    return None


def _anthropic_refusal(spec: ModelSpec, thinking: ThinkingSettings) -> str | None:
    """Anthropic's extended thinking: temperature only 1, top_p at least 0.95, no
    log-probabilities, a budget from 1,024 tokens and under max_tokens."""
    if thinking.temperature is not None and thinking.temperature != 1:
        return (f"temperature {thinking.temperature:g}: Anthropic takes only temperature 1 "
                "with thinking on (leave it unset)")
    if thinking.top_p is not None and thinking.top_p < 0.95:
        return (f"top_p {thinking.top_p:g}: Anthropic takes top_p from 0.95 to 1 with "
                "thinking on")
    if thinking.logprobs:
        return f"log-probabilities: Anthropic gives none ({spec.model})"
    if any(not stop.strip() for stop in thinking.stop):
        return "stop: Anthropic refuses a stop sequence that is only whitespace"
    budget = anthropic_budget(thinking)
    if budget < MIN_THINKING_BUDGET:
        return (f"--thinking-budget {budget}: Anthropic's thinking budget is at least "
                f"{MIN_THINKING_BUDGET} tokens")
    if thinking.max_tokens is not None and budget >= thinking.max_tokens:
        return (f"--thinking-budget {budget}: Anthropic's thinking budget must be under "
                f"max_tokens ({thinking.max_tokens}), which also holds the answer")
    return None


def _openai_reasoning_refusal(spec: ModelSpec, thinking: ThinkingSettings) -> str | None:
    """OpenAI's o-series and gpt-5 through chat completions: fixed sampling, no `stop`, no
    log-probabilities."""
    name = spec.model.rsplit("/", 1)[-1]
    if thinking.stop:
        return f"stop: OpenAI's reasoning models ({name}) refuse stop sequences"
    if thinking.temperature is not None and thinking.temperature != 1:
        return (f"temperature {thinking.temperature:g}: OpenAI's reasoning models ({name}) "
                "take only temperature 1 (leave it unset)")
    if thinking.top_p is not None and thinking.top_p != 1:
        return f"top_p {thinking.top_p:g}: OpenAI's reasoning models ({name}) take none"
    if thinking.logprobs:
        return f"log-probabilities: OpenAI's reasoning models ({name}) give none"
    return None


def anthropic_budget(thinking: ThinkingSettings) -> int:
    """The thinking budget sent to Anthropic: the one given, else the effort's."""
    if thinking.budget_tokens is not None:
        return thinking.budget_tokens
    return EFFORT_BUDGETS[thinking.effort or DEFAULT_EFFORT]


def thinking_kwargs(spec: ModelSpec, call: CallSettings, thinking: ThinkingSettings
                    ) -> dict[str, Any]:
    """What litellm is called with for one streamed thinking call (messages aside)."""
    kwargs: dict[str, Any] = {"model": spec.model, "timeout": call.timeout_s,
                              "max_retries": 0, "stream": True,
                              "stream_options": {"include_usage": True}, **auth_kwargs(spec)}
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    for name in ("max_tokens", "temperature", "top_p"):
        value = getattr(thinking, name)
        if value is not None:
            kwargs[name] = value
    if thinking.stop:
        kwargs["stop"] = list(thinking.stop)
    if thinking.logprobs:
        kwargs["logprobs"] = True
    if not is_offline(spec):
        kwargs |= _switch_on(spec, thinking)
    return kwargs


def _switch_on(spec: ModelSpec, thinking: ThinkingSettings) -> dict[str, Any]:
    """The parameters that switch thinking on, in each provider's terms (litellm maps them to
    its wire): Anthropic's `thinking` budget (with a max_tokens that holds it and the answer),
    Gemini's `thinkingConfig` (includeThoughts, and the budget), Ollama's `think`, and
    `reasoning_effort` where one is given. DeepSeek's reasoner and OpenAI-compatible servers
    serving a thinking model think unasked."""
    wire = thinking_wire(spec)
    if wire == "anthropic":
        budget = anthropic_budget(thinking)
        found: dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": budget}}
        if thinking.max_tokens is None:
            found["max_tokens"] = budget + ANSWER_TOKENS_AFTER_BUDGET
        return found
    if wire == "gemini":
        # `thinking` reaches Gemini as `thinkingConfig.includeThoughts` (with the budget,
        # where one is given; without, the model's own dynamic budget); an effort as the
        # budget litellm makes of it.
        if thinking.effort is not None and thinking.budget_tokens is None:
            return {"reasoning_effort": thinking.effort}
        enabled: dict[str, Any] = {"type": "enabled"}
        if thinking.budget_tokens is not None:
            enabled["budget_tokens"] = thinking.budget_tokens
        return {"thinking": enabled}
    if wire == "ollama":
        # litellm 1.103.7 maps an effort to Ollama's `think`: as it is for gpt-oss, `true`
        # for the others. Unasked, the medium effort: gpt-oss's own default, `true` else.
        return {"reasoning_effort": thinking.effort or DEFAULT_EFFORT}
    if thinking.effort is not None:
        return {"reasoning_effort": thinking.effort}
    return {}


def sent_thinking_params(spec: ModelSpec, thinking: ThinkingSettings) -> dict[str, Any]:
    """The parameters recorded beside a thinking call: those that were sent."""
    params: dict[str, Any] = {"mode": "thinking"}
    kwargs = thinking_kwargs(spec, CallSettings(), thinking)
    for name in ("max_tokens", "temperature", "top_p", "stop", "reasoning_effort",
                 "think"):
        if name in kwargs:
            params[name] = kwargs[name]
    if "budget_tokens" in kwargs.get("thinking", {}):
        params["thinking_budget"] = kwargs["thinking"]["budget_tokens"]
    return params


# -- `<think>…</think>` left in the content

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


class ThinkTags:
    """Cuts `<think>…</think>` out of a content stream (servers that leave the reasoning in
    the content: llama-server with `--reasoning-format none`, older vLLM): fed the content's
    pieces as they come, it hands back (is_reasoning, text) pieces.

    - Content that opens with `<think>` (after any whitespace): the reasoning streams live up
      to `</think>`, only what may be the start of a tag cut across chunks held back.
    - Content that does not: a chat template that opened the reasoning in the prompt
      (DeepSeek-R1's) leaves only `</think>` in it, so the content is held until `</think>`
      (all before it is the reasoning) or the stream's end (all of it is the answer). Not
      live, but never a tag in the text, nor a reasoning taken for an answer.
    - Once reasoning came in a field of its own (`answer_follows`), the content is the
      answer, passed on as it comes."""

    def __init__(self) -> None:
        self._state: Literal["start", "reasoning", "undecided", "answer"] = "start"
        self._held = ""

    def feed(self, text: str) -> list[tuple[bool, str]]:
        held = self._held + text
        self._held = ""
        if self._state == "start":
            stripped = held.lstrip()
            if len(stripped) < len(OPEN_TAG) and OPEN_TAG.startswith(stripped):
                self._held = held  # nothing yet, or maybe the tag's start
                return []
            if stripped.startswith(OPEN_TAG):
                self._state = "reasoning"
                held = stripped[len(OPEN_TAG):]
            else:
                self._state = "undecided"
        if self._state == "answer":
            return [(False, held)] if held else []
        if self._state == "undecided" and CLOSE_TAG not in held:
            self._held = held
            return []
        return self._reasoning(held)

    def answer_follows(self) -> list[tuple[bool, str]]:
        """The reasoning came in a field of its own: any content held is the answer, and so
        is all that follows."""
        if self._state == "reasoning":
            return []
        self._state = "answer"
        held, self._held = self._held, ""
        return [(False, held)] if held else []

    def _reasoning(self, text: str) -> list[tuple[bool, str]]:
        end = text.find(CLOSE_TAG)
        if end >= 0:
            self._state = "answer"
            found = [(True, text[:end])] if end else []
            rest = text[end + len(CLOSE_TAG):]
            return found + ([(False, rest)] if rest else [])
        keep = _tag_start_at_end(text, CLOSE_TAG)
        self._held = text[len(text) - keep:]
        shown = text[:len(text) - keep]
        return [(True, shown)] if shown else []

    def close(self) -> list[tuple[bool, str]]:
        """The stream ended: what was held back is what it seemed (a reasoning never
        closed stays reasoning; content never closed by `</think>` is the answer)."""
        held, self._held = self._held, ""
        if not held:
            return []
        return [(self._state == "reasoning", held)]


def _tag_start_at_end(text: str, tag: str) -> int:
    """How many characters at the end of `text` could begin `tag`."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


# -- The call

@dataclass
class _CallState:
    """What one attempt's stream said so far."""

    tags: ThinkTags = field(default_factory=ThinkTags)
    reasoning_chars: int = 0
    answer_chars: int = 0
    redacted: int = 0
    chunks: int = 0
    finish_reason: str | None = None
    usage: Any = None
    opaque: list[dict[str, Any]] = field(default_factory=list)
    time_cut: bool = False

    @property
    def started(self) -> bool:
        return bool(self.reasoning_chars or self.answer_chars or self.redacted)


@dataclass
class _Failed:
    error: LLMError


@dataclass
class _Ended:
    pass


async def stream_thinking(spec: ModelSpec, messages: list[dict[str, Any]],
                          call: CallSettings, thinking: ThinkingSettings
                          ) -> AsyncGenerator[ThinkingEvent, None]:
    """One thinking call, streamed: ReasoningDelta / AnswerDelta / RedactedReasoning in
    order, then ThinkingDone. Raises LLMError as the other calls do: a refused parameter
    before any request, and our retries only before the first event (after it, the error
    comes after what was delivered). `<think>…</think>` left in the content by a server is
    cut out here, so the consumer never sees tags. Closing the generator closes the stream.
    Until the first text the call's timeout applies, then the idle timeout between chunks;
    `answer_timeout_s` bounds the whole call (what came by then is kept, finish reason
    "time_limit")."""
    refusal = thinking_refusal(spec, call, thinking)
    if refusal is not None:
        raise LLMError("bad_request", refusal)
    missing = key_check(spec)
    if missing is not None:
        raise missing
    policy = call.retry
    for attempt in range(1, policy.attempts + 1):
        delivered = False
        try:
            async for event in _attempt_events(spec, messages, call, thinking, attempt):
                delivered = True
                yield event
            return
        except LLMError as error:
            error.attempts = attempt
            if delivered or not error.retryable or attempt == policy.attempts:
                if attempt > 1:
                    error.args = (f"{error.message} (after {attempt} attempts)",)
                raise
            await asyncio.sleep(policy.delay(attempt, error.retry_after_s))


async def _attempt_events(spec: ModelSpec, messages: list[dict[str, Any]],
                          call: CallSettings, thinking: ThinkingSettings, attempt: int
                          ) -> AsyncGenerator[ThinkingEvent, None]:
    """One attempt, read in a task of its own (so that the usage watch, a context variable
    the reply guard reports into, is this call's alone), its events passed on as they
    come. Raises LLMError; closing this generator cancels the task, which closes the
    stream."""
    queue: asyncio.Queue[ThinkingEvent | _Failed | _Ended] = asyncio.Queue()

    async def run() -> None:
        try:
            async with call_turn(spec):
                await _read_call(spec, messages, call, thinking, attempt, queue)
            await queue.put(_Ended())
        except asyncio.CancelledError:
            raise
        except Exception as raw:
            await queue.put(_Failed(classify_error(raw, spec, whole_answer=True)))

    task = asyncio.ensure_future(run())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, _Failed):
                raise item.error
            if isinstance(item, _Ended):
                return
            yield item
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


async def _read_call(spec: ModelSpec, messages: list[dict[str, Any]], call: CallSettings,
                     thinking: ThinkingSettings, attempt: int, queue: asyncio.Queue) -> None:
    watch = UsageWatch()
    usage_watch.set(watch)  # this task's own context
    kwargs = thinking_kwargs(spec, call, thinking)
    first_wait = first_text_wait(spec, call)
    # Our own limits (the first text, each silence) are the ones that count; the HTTP
    # client's, per read, is set past them.
    kwargs["timeout"] = max(first_wait, call.timeout_s) + 5.0
    kwargs["messages"] = messages
    loop = asyncio.get_running_loop()
    started_at = time.perf_counter()
    deadline = loop.time() + call.answer_timeout_s
    state = _CallState()
    stream: Any = None
    try:
        async with asyncio.timeout_at(min(loop.time() + first_wait, deadline)) as limit:
            stream = await start_call(spec, kwargs, chat=True)
            await _read_stream(stream, state, spec, call, limit, deadline, queue)
    except TimeoutError:
        if not (state.started and loop.time() >= deadline - 0.01):
            raise _silence(spec, call, state) from None
        state.time_cut = True  # the call's wall-clock limit: kept as far as it came
    finally:
        if stream is not None:
            await close_stream(stream)
    for event in _tag_events(state, state.tags.close()):
        await queue.put(event)
    if not state.time_cut:
        _check_ended_well(stream, state, spec)
    await queue.put(_done(spec, thinking, state, watch, time.perf_counter() - started_at,
                          attempt))


def first_text_wait(spec: ModelSpec, call: CallSettings) -> float:
    """How long a thinking call may be silent before its first text: the call's timeout,
    except where the provider sends none of its reasoning (OpenAI's o-series through chat
    completions write nothing until the answer, after all their thinking): the whole
    call's limit."""
    if thinking_wire(spec) == "openai_reasoning":
        return max(call.timeout_s, call.answer_timeout_s)
    return call.timeout_s


async def _read_stream(stream: Any, state: _CallState, spec: ModelSpec, call: CallSettings,
                       limit: asyncio.Timeout, deadline: float, queue: asyncio.Queue) -> None:
    """Read the chunks to the stream's end, passing on each one's events; after each text
    the silence allowed is the idle timeout (never past `deadline`)."""
    loop = asyncio.get_running_loop()
    iterator = stream.__aiter__()
    while True:
        try:
            chunk = await iterator.__anext__()
        except StopAsyncIteration:
            return
        except Exception as error:
            if state.finish_reason is None:
                raise classify_error(error, spec, whole_answer=True) from error
            return  # the answer was whole; what failed after it costs the accounting only
        events = _chunk_events(chunk, state)
        for event in events:
            await queue.put(event)
        if events:
            limit.reschedule(min(loop.time() + longest_silence(call), deadline))


def _chunk_events(chunk: Any, state: _CallState) -> list[ThinkingEvent]:
    """The events one litellm chunk carries, its usage and finish reason taken in."""
    usage = getattr(chunk, "usage", None)
    if usage is not None and getattr(usage, "total_tokens", None):
        state.usage = usage
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return []
    choice = choices[0]
    if getattr(choice, "finish_reason", None):
        state.finish_reason = choice.finish_reason
    delta = getattr(choice, "delta", None)
    if delta is None:
        return []
    state.chunks += 1
    events: list[ThinkingEvent] = []
    for block in _blocks(delta):
        if block.get("type") == "redacted_thinking":
            state.redacted += 1
            state.opaque.append(dict(block))
            events.append(RedactedReasoning())
        elif block.get("signature"):
            # The signature of the thinking block before it; its text is the reasoning,
            # kept whole elsewhere.
            state.opaque.append({"type": block.get("type") or "thinking",
                                 "signature": block["signature"]})
    reasoning = _text_field(delta, "reasoning_content") or _text_field(delta, "reasoning")
    if reasoning:
        events.extend(_tag_events(state, state.tags.answer_follows()))
        state.reasoning_chars += len(reasoning)
        events.append(ReasoningDelta(reasoning))
    content = _text_field(delta, "content")
    if content:
        events.extend(_tag_events(state, state.tags.feed(content)))
    return events


def _tag_events(state: _CallState, pieces: list[tuple[bool, str]]) -> list[ThinkingEvent]:
    events: list[ThinkingEvent] = []
    for is_reasoning, text in pieces:
        if is_reasoning:
            state.reasoning_chars += len(text)
            events.append(ReasoningDelta(text))
        else:
            state.answer_chars += len(text)
            events.append(AnswerDelta(text))
    return events


def _text_field(delta: Any, name: str) -> str:
    value = getattr(delta, name, None)
    if value is None:
        extra = getattr(delta, "provider_specific_fields", None)
        if isinstance(extra, dict):
            value = extra.get(name)
    return unicode_text(value) if isinstance(value, str) else ""


def _blocks(delta: Any) -> list[dict[str, Any]]:
    blocks = getattr(delta, "thinking_blocks", None)
    if not isinstance(blocks, list):
        return []
    return [dict(block) for block in blocks if isinstance(block, dict)]


def _check_ended_well(stream: Any, state: _CallState, spec: ModelSpec) -> None:
    """A stream must have been ended by the provider (its own finish reason): half a
    reasoning is never taken for a whole one. Raised after what came was delivered."""
    if provider_finish_reason(stream, None, state.finish_reason) is not None:
        return
    where = f" at {spec.api_base}" if spec.api_base else ""
    if not state.started and not state.chunks:
        raise StreamInterrupted(f"the reply from {spec.model}{where} was not a model's answer "
                                "(no choice, no text and no finish reason)")
    part = "answer" if state.answer_chars else "reasoning"
    raise StreamInterrupted(f"the stream from {spec.model}{where} ended mid-{part} without "
                            "a finish reason (interrupted)")


def _silence(spec: ModelSpec, call: CallSettings, state: _CallState) -> LLMError:
    return answer_silence(spec, call, started=state.started,
                          first_text_s=first_text_wait(spec, call))


def _counts(state: _CallState, watch: UsageWatch) -> UsageCounts:
    """The provider's own counts as the reply guard read them from its events; unknown
    where it sent none (never litellm's estimate); an in-process provider's its own."""
    if not watch.replies:
        return counts_from_litellm(state.usage)
    counts = watch.usage
    if counts.prompt is None or counts.completion is None:
        return UsageCounts()
    return counts


def _done(spec: ModelSpec, thinking: ThinkingSettings, state: _CallState, watch: UsageWatch,
          latency: float, attempt: int) -> ThinkingDone:
    counts = _counts(state, watch)
    call = CallRecord(
        model=spec.model,
        params=sent_thinking_params(spec, thinking),
        latency_s=latency,
        prompt_tokens=counts.prompt,
        completion_tokens=counts.completion,
        cost=cost_of(spec, counts),
        finish_reason="time_limit" if state.time_cut else state.finish_reason,
        attempts=attempt,
        cached_tokens=counts.cached,
        cache_write_tokens=counts.cache_write,
    )
    return ThinkingDone(call=call, reasoning_kind=reasoning_kind(spec, state),
                        reasoning_tokens=counts.reasoning, opaque=state.opaque)


def reasoning_kind(spec: ModelSpec, state: _CallState) -> ReasoningKind:
    """None when no reasoning text came (o-series through chat completions; a redacted block
    alone is no text either); else a summary or the model's own, by provider and model."""
    if not state.reasoning_chars:
        return ReasoningKind.NONE
    return ReasoningKind.SUMMARY if reasoning_is_summary(spec) else ReasoningKind.RAW
