"""Mistake finding (docs/DESIGN.md §4; paper section 3, appendix A.2): running one of the paper's
methods on one trace. Its prompts are in prompts/finding.py, the reading of its answers in
judging/parsing.py. Temperature 0, no stop.

`find_mistake()` is an async generator of events, so the app can show each step's verdict as it
arrives; `record_find()` wraps it and commits the run and every verdict to the store as they
happen (as `session.TraceSession.generate` does for steps).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from bbm_tui.core import llm
from bbm_tui.core.judging.parsing import (
    TraceAnswer,
    parse_critic_answer,
    parse_step_answer,
    parse_trace_answer,
)
from bbm_tui.core.prompts.finding import Method, build_messages, check_method
from bbm_tui.core.records import Verdict
from bbm_tui.core.tasks import Task
from bbm_tui.core.types import DEFAULT_FINDER_MAX_TOKENS

FINDER_MAX_TOKENS = DEFAULT_FINDER_MAX_TOKENS
NO_THOUGHTS = "the trace has no thoughts to judge"

# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class StepJudged:
    """A step-level verdict on Thought `number`: `correct` is True for Yes, False for No, None
    when the answer could not be parsed. `raw` is the model's answer verbatim (for CoT, its
    reasoning too)."""

    number: int
    correct: bool | None
    raw: str
    call: llm.CallRecord | None  # None: no model was called (the task verifiers)

    @property
    def parsed(self) -> bool:
        return self.correct is not None

    @property
    def verdict(self) -> str | None:
        if self.correct is None:
            return None
        return Verdict.CORRECT if self.correct else Verdict.MISTAKEN


@dataclass(frozen=True)
class TraceJudged:
    """A trace-level verdict: the first mistake's thought number (1-based), or None."""

    answer: TraceAnswer
    raw: str
    call: llm.CallRecord

    @property
    def parsed(self) -> bool:
        return self.answer.parsed

    @property
    def verdict(self) -> str | None:
        return self.answer.verdict


@dataclass
class FindResult:
    """What a method concluded about a trace. `mistake_index` is 0-based (the dataset's
    convention), None for "no mistake" or when unparseable (`parsed` False). `raw` holds the
    model's answers verbatim, in order: one for a trace-level method, one per judged thought
    (Thought 1 first) for a step-level one."""

    method: str
    model: str
    mistake_index: int | None
    parsed: bool
    raw: list[str] = field(default_factory=list)
    calls: list[llm.CallRecord] = field(default_factory=list)

    @property
    def mistake_number(self) -> int | None:
        return None if self.mistake_index is None else self.mistake_index + 1

    @property
    def cost(self) -> float | None:
        costs = [call.cost for call in self.calls]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)


@dataclass(frozen=True)
class FindFinished:
    result: FindResult


# What failed, in a few words, for "retry 2 of 4 (timed out)": the kinds that are retried.
RETRY_WORDS = {
    "timeout": "timed out",
    "rate_limit": "rate-limited",
    "connection": "connection failed",
    "server": "server error",
    "stream": "answer cut short",
}


@dataclass(frozen=True)
class CallRetried:
    """A model call failed and is made again: attempt `attempt` of `attempts`, after
    `delay_s`. `number` is the thought being judged (None: the whole trace); `reason` the
    failure's message, `why` it in a few words."""

    number: int | None
    attempt: int
    attempts: int
    reason: str
    why: str
    delay_s: float

    def words(self) -> str:
        """"retry 2 of 4 (timed out)": the attempt being made now, of how many."""
        return f"retry {self.attempt} of {self.attempts} ({self.why})"


FindEvent = StepJudged | TraceJudged | FindFinished
# Told of each retry of a model call as it is made (the app's status line, find's progress).
OnRetry = Callable[[CallRetried], None]
# Awaited before every model call, e.g. a batch's rate limiter.
Pace = Callable[[], Awaitable[None]]


async def _ask(
    spec: llm.ModelSpec, messages: list[dict[str, str]], settings: llm.CallSettings,
    pace: Pace | None, number: int | None, on_retry: OnRetry | None,
) -> llm.Completion:
    """One answer; `on_retry` is told of each retry of its call as it is made."""
    if pace is not None:
        await pace()
    async for item in llm.complete_events(spec, messages, settings):
        if isinstance(item, llm.Completion):
            return item
        if on_retry is not None:
            on_retry(CallRetried(number, item.attempt, settings.retry.attempts, item.reason,
                                 RETRY_WORDS.get(item.kind, "failed"), item.delay_s))
    raise AssertionError("a whole answer's call ended without one")


def finder_settings() -> llm.CallSettings:
    """Temperature 0 and no stop, as in the paper; room for CoT reasoning."""
    return llm.CallSettings(temperature=0.0, max_tokens=FINDER_MAX_TOKENS)


async def find_mistake(
    task: Task | str,
    method: str,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    *,
    settings: llm.CallSettings | None = None,
    judge_all: bool = False,
    pace: Pace | None = None,
    on_retry: OnRetry | None = None,
) -> AsyncIterator[FindEvent]:
    """Run `method` on one trace. Yields a TraceJudged (trace-level) or one StepJudged per
    thought as each answer arrives (step-level), then one FindFinished. Step-level methods stop
    once the outcome is known (the first "No", or an unparseable answer before any "No")
    unless `judge_all`. `on_retry` is told of each retry of a call as it is made. Raises
    MethodError before any call, LLMError from the model."""
    found = check_method(task, method)
    settings = settings or finder_settings()
    if not steps:
        raise ValueError(NO_THOUGHTS)
    refusal = llm.offline_refusal(spec, task)
    if refusal is not None:
        raise refusal
    if found.step_level:
        async for event in _find_by_step(task, found, input_text, steps, spec, settings,
                                         judge_all, pace, on_retry):
            yield event
        return
    messages = build_messages(task, method, input_text, steps)
    completion = await _ask(spec, messages, settings, pace, None, on_retry)
    answer = (parse_critic_answer(completion.text, len(steps)) if found.critic
              else parse_trace_answer(completion.text, len(steps)))
    yield TraceJudged(answer, completion.text, completion.call)
    index = answer.mistake_number - 1 if answer.mistake_number is not None else None
    yield FindFinished(FindResult(method, spec.model, index, answer.parsed, [completion.text],
                                  [completion.call]))


async def _find_by_step(
    task: Task | str,
    method: Method,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    settings: llm.CallSettings,
    judge_all: bool,
    pace: Pace | None,
    on_retry: OnRetry | None,
) -> AsyncIterator[FindEvent]:
    result = FindResult(method.name, spec.model, None, True)
    decided = False
    for number in range(1, len(steps) + 1):
        messages = build_messages(task, method.name, input_text, steps, number)
        completion = await _ask(spec, messages, settings, pace, number, on_retry)
        correct = parse_step_answer(completion.text, cot=method.cot)
        result.raw.append(completion.text)
        result.calls.append(completion.call)
        yield StepJudged(number, correct, completion.text, completion.call)
        if not decided and correct is not True:
            # The first "No" is the mistake; an unparseable answer before it leaves the
            # location unknown, which counts as wrong.
            decided = True
            result.parsed = correct is False
            result.mistake_index = number - 1 if correct is False else None
            if not judge_all:
                break
    yield FindFinished(result)


async def run_method(
    task: Task | str,
    method: str,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    *,
    settings: llm.CallSettings | None = None,
    judge_all: bool = False,
    pace: Pace | None = None,
) -> FindResult:
    """find_mistake() without the live events: just the result."""
    return await final_result(find_mistake(task, method, input_text, steps, spec,
                                           settings=settings, judge_all=judge_all, pace=pace))


async def final_result(events: AsyncIterator[FindEvent]) -> FindResult:
    """A judge's run without the live events: the result it ends with."""
    async for event in events:
        if isinstance(event, FindFinished):
            return event.result
    raise AssertionError("a judge's run ended without a result")
