"""Thinking generation (docs/DESIGN.md §16): one thinking call a trace, its reasoning cut into
numbered steps as it streams, given as the stepper's own events so that every consumer (the
session, the app, `run`, the tests) takes a thinking trace as it takes any other.

    stream_thinking ─► ReasoningDelta ─► Splitter ─► StepStarted / StepDelta / StepFinished
                   └─► AnswerDelta ───► the task's answer rule at the end ─► AnswerFound
                   └─► ThinkingDone ──► ReasoningFinished (the raw text whole, its kind)

A step is given the moment the splitter is sure of its end (the first character of the next),
so a kill loses at most the open step. Each StepFinished carries its raw slice (`raw`) and its
share of the one call: the steps given while it streams are counted from the chunks they took
(estimates); the last one, given when the call ends, carries the rest of the call's own
figures (its prompt, the rest of its tokens and cost), so that the shares sum to the call
(the prompt is on the last share, not the first as in one-call mode: it is known only then).
The answer is read from the final content by the task's answer rule (its last line that states
one). A provider that sends no reasoning text (OpenAI's o-series) leaves the content as the
only text: its steps are cut from the content.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.generation.splitting import make_splitter, split_text
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    StepDelta,
    StepEvent,
    StepFailed,
    StepFinished,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.llm.records import UsageCounts
from bbm_tui.core.llm.thinking import EFFORTS, Effort
from bbm_tui.core.llm.usage import cost_of
from bbm_tui.core.prompts.thinking import thinking_messages
from bbm_tui.core.records import CallRecord, ReasoningKind, TraceEnd
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.types import SplitRule, StepperSettings

# What stands in the reasoning where the provider sent a block encrypted (Anthropic's
# redacted_thinking): a paragraph of its own, never the block's data.
REDACTED_MARK = "[redacted by the provider]"


@dataclass
class ReasoningFinished:
    """The call ended well: its reasoning whole (raw, as the provider sent it), what kind it
    is, the answer's text after it, and what it counted; given before TraceFinished."""

    text: str
    kind: ReasoningKind
    answer_text: str
    reasoning_tokens: int | None
    split: SplitRule
    opaque: list[dict[str, Any]] = field(default_factory=list)


def thinking_settings(settings: StepperSettings) -> llm.ThinkingSettings:
    """A thinking call's settings: the effort, the budget and the temperature given (None
    for each not given: left out of the call, the provider's default)."""
    # The effort as the model-call package names it (the config and the command line allow
    # only these words).
    effort: Effort | None = next(
        (word for word in EFFORTS if word == settings.thinking_effort), None)
    return llm.ThinkingSettings(effort=effort, budget_tokens=settings.thinking_budget,
                                temperature=settings.thinking_temperature)


def answer_of(task: Task, content: str) -> str | None:
    """The answer the final content states, by the task's answer rule: its last line that
    states one (the paper's regex reads a line)."""
    for line in reversed(content.splitlines()):
        found = task.extract_answer(line)
        if found is not None:
            return _without_full_stop(task, found)
    return None


def _without_full_stop(task: Task, answer: str) -> str:
    """Our instruction asks for the answer alone, yet thinking models often end that line
    as a sentence ("So the answer is 12."). No target of the paper's five ends with a full
    stop (nor do the paper's own traces write one), so there it is the sentence's, not the
    answer's. A task of one's own keeps its answer as its rule read it."""
    if task.is_paper and answer.endswith(".") and not answer.endswith(".."):
        return answer[:-1].rstrip()
    return answer


def strip_view(raw_steps: list[str]) -> list[str]:
    return [step.strip() for step in raw_steps if step.strip()]


@dataclass
class _Trace:
    """What one thinking call has given so far."""

    split: SplitRule
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    started_at: float = field(default_factory=time.perf_counter)
    reasoning: list[str] = field(default_factory=list)  # the raw text's pieces
    answer: list[str] = field(default_factory=list)
    open_raw: str = ""  # the open step's raw text so far
    number: int = 1  # the open step's number
    started: bool = False  # StepStarted said for the open step
    shares: int = 0
    pieces_since_step: int = 0
    counted_tokens: int = 0
    counted_cost: float = 0.0
    priced: bool = True
    redacted: int = 0


async def run_thinking(
    task: Task | str,
    input_text: str,
    spec: llm.ModelSpec,
    *,
    target: str | None = None,
    settings: StepperSettings | None = None,
) -> AsyncGenerator[StepEvent | ReasoningFinished, None]:
    """One thinking call for the question, as the stepper's events (StepStarted, StepDelta,
    StepFinished with `raw`, AnswerFound, StepFailed, TraceFinished) and one
    ReasoningFinished before the end of a call that ended well."""
    settings = settings or StepperSettings()
    task = get_task(task)
    refusal = llm.offline_refusal(spec, task)
    if refusal is not None:
        yield StepFailed(1, refusal)
        return
    stream = llm.stream_thinking(spec, thinking_messages(task, input_text), settings.call,
                                 thinking_settings(settings))
    async with aclosing(thinking_events(task, spec, stream, SplitRule(settings.split),
                                        target=target)) as events:
        async for event in events:
            yield event


async def thinking_events(
    task: Task,
    spec: llm.ModelSpec,
    stream: AsyncGenerator[llm.ThinkingEvent, None],
    split: SplitRule,
    *,
    target: str | None = None,
    first_number: int = 1,
) -> AsyncGenerator[StepEvent | ReasoningFinished, None]:
    """A thinking call's events (`stream`: the reasoning's pieces, the answer's, the end) as
    the stepper's, its steps numbered from `first_number` (a continuation of steps
    1..first_number-1: generation/resample_thinking.py)."""
    trace = _Trace(split, number=first_number)
    splitter = make_splitter(trace.split)
    done: llm.ThinkingDone | None = None
    try:
        async with aclosing(stream) as events:
            async for event in events:
                if isinstance(event, llm.ReasoningDelta | llm.RedactedReasoning):
                    text = event.text if isinstance(event, llm.ReasoningDelta) else (
                        f"\n\n{REDACTED_MARK}\n\n")
                    trace.reasoning.append(text)
                    trace.pieces_since_step += 1
                    for item in _fed(trace, splitter.feed(text), text, spec):
                        yield item
                elif isinstance(event, llm.AnswerDelta):
                    trace.answer.append(event.text)
                    trace.pieces_since_step += 1
                else:
                    done = event
    except llm.LLMError as error:
        yield StepFailed(trace.number, error)
        return
    assert done is not None
    reasoning, content = "".join(trace.reasoning), "".join(trace.answer)
    answer = answer_of(task, content)
    last = splitter.close()
    if not reasoning.strip() and first_number == 1:
        # No reasoning text (o-series; or a model that did not think): the content is the
        # trace, cut by the same rule.
        last = split_text(content, trace.split)
        trace.open_raw = content
    written: list[str] = []
    for index, raw in enumerate(last):
        final = index == len(last) - 1
        finished = _finish(trace, raw, spec, done.call if final else None,
                           answer if final else None)
        if finished is not None:
            if not trace.started:
                yield StepStarted(finished.number)
            yield finished
            written.append(finished.text)
            trace.number += 1
            trace.started = False
    yield ReasoningFinished(reasoning, done.reasoning_kind, content, done.reasoning_tokens,
                            trace.split, list(done.opaque))
    if answer is not None:
        yield AnswerFound(answer, None if target is None else task.is_correct(answer, target))
        yield TraceFinished(TraceEnd.ANSWER, written, answer)
    else:
        reason = TraceEnd.TRUNCATED if done.call.finish_reason in ("length", "time_limit") \
            else TraceEnd.EMPTY
        yield TraceFinished(reason, written, None)


def _fed(trace: _Trace, steps: list[str], text: str, spec: llm.ModelSpec) -> list[StepEvent]:
    """The events one piece of reasoning makes: the steps it finished, then the open step's
    text (what of this piece is past them)."""
    events: list[StepEvent] = []
    if not steps:
        trace.open_raw += text
        if not trace.started:
            events.append(StepStarted(trace.number))
            trace.started = True
        events.append(StepDelta(trace.number, text))
        return events
    trace.open_raw += text
    for raw in steps:
        trace.open_raw = trace.open_raw[len(raw):]
        finished = _finish(trace, raw, spec, None, None)
        if finished is None:
            continue
        if not trace.started:
            events.append(StepStarted(finished.number))
        events.append(finished)
        trace.number += 1
        trace.started = False
    if trace.open_raw:
        events.append(StepStarted(trace.number))
        trace.started = True
        events.append(StepDelta(trace.number, trace.open_raw))
    return events


def _finish(trace: _Trace, raw: str, spec: llm.ModelSpec, whole: CallRecord | None,
            answer: str | None) -> StepFinished | None:
    """A finished step with its share of the call (`whole`: the call's own record, given to
    the last step, whose share is what the others did not count). None: whitespace only."""
    text = raw.strip()
    if not text:
        return None
    call = _share(trace, spec, whole)
    return StepFinished(trace.number, text, call, answer, raw=raw)


def _share(trace: _Trace, spec: llm.ModelSpec, whole: CallRecord | None) -> CallRecord:
    share = trace.shares
    trace.shares += 1
    if whole is not None:
        completion = None if whole.completion_tokens is None else max(
            0, whole.completion_tokens - trace.counted_tokens)
        cost = None if whole.cost is None or not trace.priced else max(
            0.0, whole.cost - trace.counted_cost)
        # The prompt is counted once, here: the call's figures come only at its end.
        return replace(whole, completion_tokens=completion, cost=cost,
                       one_call=trace.call_id, one_call_share=share)
    tokens = trace.pieces_since_step or None
    trace.pieces_since_step = 0
    # A step that took no piece of the stream (several given at once as the call ends) costs
    # nothing of its own; priced as None, it left the whole call unpriced.
    cost = cost_of(spec, UsageCounts(prompt=0, completion=tokens or 0))
    trace.counted_tokens += tokens or 0
    if cost is None:
        trace.priced = False
    else:
        trace.counted_cost += cost
    return CallRecord(
        model=spec.model, params={"mode": "thinking", "split": str(trace.split)},
        latency_s=time.perf_counter() - trace.started_at, completion_tokens=tokens, cost=cost,
        usage_estimated=True, finish_reason="split", one_call=trace.call_id,
        one_call_share=share)
