"""Mistake finding (DESIGN §4; paper section 3, appendix A.2): prompts, answer parsing, and
running a method on one trace.

Messages are the method's few-shot messages verbatim, then one user message
`TEMPLATE.format(input=..., steps=..., current_step=...)` where `steps` is
`"\\n".join(f"Thought {i}: {s}")` numbered from 1; step-level methods show thoughts 1..k for
the question about Thought k. Temperature 0, no stop.

`find_mistake()` is an async generator of events, so the app can show each step's verdict as it
arrives; `record_find()` wraps it and commits the run and every verdict to the store as they
happen (as `session.TraceSession.generate` does for steps).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from bbm_tui.core import llm
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import get_task

# --------------------------------------------------------------------------- methods


@dataclass(frozen=True)
class Method:
    name: str
    title: str
    template_key: str
    messages_key: str
    step_level: bool
    cot: bool


METHODS: dict[str, Method] = {
    method.name: method
    for method in (
        Method("direct-trace", "Direct, trace-level", "DIRECT_TEMPLATE", "DIRECT_MESSAGES",
               step_level=False, cot=False),
        Method("direct-step", "Direct, step-level", "DIRECT_PERSTEP_TEMPLATE",
               "DIRECT_PERSTEP_MESSAGES", step_level=True, cot=False),
        Method("cot-step", "CoT, step-level", "COT_PERSTEP_TEMPLATE", "COT_PERSTEP_MESSAGES",
               step_level=True, cot=True),
        # The paper has CoT trace-level prompts for word sorting only.
        Method("cot-trace", "CoT, trace-level", "COT_TEMPLATE", "COT_MESSAGES",
               step_level=False, cot=True),
    )
}
METHOD_NAMES: tuple[str, ...] = tuple(METHODS)

# A finder answer is short; CoT reasoning runs to a few hundred tokens.
FINDER_MAX_TOKENS = 2048


class MethodError(ValueError):
    """An unknown method, or one the task has no prompts for."""


@cache
def finding_prompts() -> dict[str, dict[str, Any]]:
    """prompts/mistake_finding_prompts.json, as shipped."""
    path = prompts_dir() / "mistake_finding_prompts.json"
    return json.loads(path.read_bytes().decode("utf-8"))


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise MethodError(
            f"unknown method {name!r}; known methods: {', '.join(METHOD_NAMES)}"
        ) from None


def methods_for(task: str) -> tuple[str, ...]:
    """The methods the paper has prompts for on this task."""
    prompts = finding_prompts()[get_task(task).name]
    return tuple(name for name, m in METHODS.items() if m.template_key in prompts)


def check_method(task: str, method: str) -> Method:
    found = get_method(method)
    if method not in methods_for(task):
        raise MethodError(
            f"method {method!r} has no prompts for task {task!r} (the paper wrote CoT "
            f"trace-level prompts for word sorting only); use one of: "
            f"{', '.join(methods_for(task))}"
        )
    return found


# --------------------------------------------------------------------------- prompts


def format_steps(steps: Sequence[str]) -> str:
    """`Thought 1: s1\\nThought 2: s2...` (no trailing newline: the templates add their own)."""
    return "\n".join(f"Thought {number}: {step}" for number, step in enumerate(steps, start=1))


def build_messages(
    task: str, method: str, input_text: str, steps: Sequence[str], current_step: int | None = None
) -> list[dict[str, str]]:
    """The messages for one call: the few-shot messages, then the filled template.
    Step-level methods need `current_step` (1-based) and see thoughts 1..current_step."""
    spec = check_method(task, method)
    prompts = finding_prompts()[task]
    if spec.step_level:
        if current_step is None or not 1 <= current_step <= len(steps):
            raise ValueError(f"current_step must be 1..{len(steps)}, not {current_step!r}")
        shown = steps[:current_step]
    else:
        shown = steps
    # str.format parses only the template: braces in the input or the steps stay as they are.
    question = prompts[spec.template_key].format(
        input=input_text, steps=format_steps(shown), current_step=current_step
    )
    few_shot = [dict(message) for message in prompts[spec.messages_key]]
    return [*few_shot, {"role": "user", "content": question}]


# --------------------------------------------------------------------------- parsing

# Markdown and quoting that models wrap answers in; they never change the answer.
_DECORATION = re.compile(r"[*_`\"“”‘’«»#>]|(?<!\w)'|'(?!\w)")
_TRAILING = re.compile(r"[\s.,;:!?)\]]+$")
_LEADING = re.compile(
    r"^\s*(?:[-•]\s+|[(\[]\s*)*(?:(?:my\s+|final\s+|the\s+)*answer\s*(?:is\s*)?[:\-]?\s*)?",
    re.I,
)
_ANSWER_CLAUSE = re.compile(r"\b(?:the\s+)?(?:final\s+)?answer\s+is\s*:?\s*([^\n]*)", re.I)
# "3", "Thought 3", "Step 3", "Yes, Thought 3", "3 - the sort is wrong"; not "Thought 3 is
# ...", nor "Thought 3: ..." (a thought quoted back, not an answer).
_LEAD_NUMBER = re.compile(
    r"^(?:yes\b[\s,:;.!\-]*)?(?:(?:in|at)\s+)?(?:thought|step)?\s*(?:number\s+)?(\d+)"
    r"\s*(?:$|[-–—(,;]|\.\s)",
    re.I,
)
_LEAD_NO = re.compile(r"^(?:no|none|nope)\b", re.I)
_NO_MISTAKE = re.compile(
    r"\b(?:no|not\s+any|zero)\s+(?:mistakes?|errors?|incorrect\s+thoughts?)\b"
    r"|\ball\s+(?:the\s+)?(?:thoughts|steps)\s+(?:are|were)\s+correct\b"
    r"|\bthere\s+(?:are|is)\s+no\s+(?:mistakes?|errors?)\b",
    re.I,
)
# "The first mistake is in Thought 3", "an error in thought 3", "mistake: Thought 3";
# not "no mistake in Thought 3". Group 1 is "first" when the answer says so.
_MISTAKE_IN = re.compile(
    r"(?<!\bno )(?<!\bany )\b(first\s+)?(?:mistake|error)\s+"
    r"(?:is\s+|was\s+|occurs\s+|appears\s+|lies\s+)?(?:made\s+)?(?:(?:in|at|on)\s+|:\s*)?"
    r"(?:thought|step)\s*(\d+)\b",
    re.I,
)
# "Thought 3 is incorrect", "Thought 3 contains the first mistake".
_THOUGHT_WRONG = re.compile(
    r"\b(?:thought|step)\s*(\d+)\s+(?:is|was|contains|has|makes)\s+"
    r"(?:the\s+first\s+|a\s+|an\s+)?(?:incorrect|wrong|mistaken|erroneous|mistake|error)\b",
    re.I,
)


@dataclass(frozen=True)
class TraceAnswer:
    """A trace-level answer: `mistake_number` is the 1-based thought of the first mistake, None
    for "no mistake". When `parsed` is False the answer said nothing usable (or named a thought
    the trace does not have) and `mistake_number` means nothing."""

    mistake_number: int | None
    parsed: bool

    @property
    def verdict(self) -> str | None:
        """The answer in the paper's own format ("No" or "N"), None when unparseable."""
        if not self.parsed:
            return None
        return "No" if self.mistake_number is None else str(self.mistake_number)


UNPARSEABLE = TraceAnswer(None, False)


def _clean(text: str) -> str:
    text = _DECORATION.sub("", text)
    text = " ".join(text.split())
    text = _LEADING.sub("", text)
    return _TRAILING.sub("", text)


def _short_trace_answer(text: str) -> TraceAnswer | None:
    """An answer in (or close to) the paper's format: "No", "3", "Thought 3", "No mistakes".
    None when the text does not start like one; UNPARSEABLE when it contradicts itself."""
    text = _clean(text)
    number = _LEAD_NUMBER.match(text)
    if number:
        return TraceAnswer(int(number.group(1)), True)
    if _LEAD_NO.match(text) or _NO_MISTAKE.match(text):
        # "No, the mistake is in Thought 3": a "No" that names a mistake says two things.
        if _named_mistakes(text):
            return UNPARSEABLE
        return TraceAnswer(None, True)
    return None


def _named_mistakes(text: str) -> set[int]:
    named = {int(number) for _, number in _MISTAKE_IN.findall(text)}
    return named | {int(number) for number in _THOUGHT_WRONG.findall(text)}


def _stated_trace_answer(text: str) -> TraceAnswer | None:
    """An answer stated in prose: exactly one thought named as the (first) mistake, or a plain
    statement that there is none. Several thoughts, or both, are unparseable."""
    text = _DECORATION.sub("", text)
    first = {int(number) for first, number in _MISTAKE_IN.findall(text) if first}
    named = first or _named_mistakes(text)
    if len(named) == 1:
        return TraceAnswer(named.pop(), True)
    if named:
        return UNPARSEABLE
    if _NO_MISTAKE.search(text):
        return TraceAnswer(None, True)
    return None


def parse_trace_answer(text: str, n_steps: int) -> TraceAnswer:
    """Parse a direct or CoT trace-level answer about a trace of `n_steps` thoughts.

    In order: the last "the answer is ..." (the CoT format), the whole answer, its first line
    and its last line in the paper's short format, then a prose statement of the mistake.
    A thought number outside 1..n_steps is unparseable."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    clauses = _ANSWER_CLAUSE.findall(text)
    candidates = [clauses[-1]] if clauses else []
    candidates += [text] if len(lines) == 1 else lines[:1] + lines[-1:]
    for candidate in candidates:
        answer = _short_trace_answer(candidate)
        if answer is not None:
            return _in_range(answer, n_steps)
    answer = _stated_trace_answer(text)
    return _in_range(answer, n_steps) if answer is not None else UNPARSEABLE


def _in_range(answer: TraceAnswer, n_steps: int) -> TraceAnswer:
    number = answer.mistake_number
    if answer.parsed and number is not None and not 1 <= number <= n_steps:
        return UNPARSEABLE
    return answer


_WORD = re.compile(r"[A-Za-z]+|\d+")
_YES = frozenset({"yes", "correct", "right", "true"})
_NO = frozenset({"no", "incorrect", "wrong", "false"})
_LEAD_WORDS = frozenset({"answer", "final", "my", "the", "verdict", "is"})
_NOTHING_WRONG = frozenset({"mistake", "mistakes", "error", "errors", "issues", "problems"})
_STATED = re.compile(
    r"\b(?:thought\s*\d+|it|this(?:\s+thought)?|the\s+thought)\s+(?:is|was)\s+"
    r"(not\s+correct|incorrect|wrong|correct|right)\b",
    re.I,
)


def _word_verdict(word: str | None, neighbour: str | None) -> bool | None:
    """Yes/No from one word, read with the word beside it: "not correct", "no mistakes"."""
    if word in _YES:
        return neighbour != "not"
    if word in _NO:
        return word == "no" and neighbour in _NOTHING_WRONG
    return None


def parse_step_answer(text: str, cot: bool = False) -> bool | None:
    """A step-level answer: True for "Yes" (the thought is correct), False for "No", None when
    unparseable. Direct answers are read from their first word, CoT answers from their last
    (the format the paper asks for), each falling back on the other end, then on a plain
    "Thought k is (in)correct"."""
    words = [w.lower() for w in _WORD.findall(text)]
    lead = words
    while lead and lead[0] in _LEAD_WORDS:
        lead = lead[1:]
    first = _word_verdict(lead[0], lead[1] if len(lead) > 1 else None) if lead else None
    last = _word_verdict(words[-1], words[-2] if len(words) > 1 else None) if words else None
    for verdict in ((last, first) if cot else (first, last)):
        if verdict is not None:
            return verdict
    stated = _STATED.findall(text)
    if stated:
        return stated[-1].lower() in ("correct", "right")
    return None


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class StepJudged:
    """A step-level verdict on Thought `number`: `correct` is True for Yes, False for No, None
    when the answer could not be parsed. `raw` is the model's answer verbatim (for CoT, its
    reasoning too)."""

    number: int
    correct: bool | None
    raw: str
    call: llm.CallRecord

    @property
    def parsed(self) -> bool:
        return self.correct is not None

    @property
    def verdict(self) -> str | None:
        return None if self.correct is None else ("Yes" if self.correct else "No")


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


FindEvent = StepJudged | TraceJudged | FindFinished
# Awaited before every model call, e.g. a batch's rate limiter.
Pace = Callable[[], Awaitable[None]]


async def _ask(
    spec: llm.ModelSpec, messages: list[dict[str, str]], settings: llm.CallSettings,
    pace: Pace | None,
) -> llm.Completion:
    if pace is not None:
        await pace()
    return await llm.complete(spec, messages, settings)


def finder_settings() -> llm.CallSettings:
    """Temperature 0 and no stop, as in the paper; room for CoT reasoning."""
    return llm.CallSettings(temperature=0.0, max_tokens=FINDER_MAX_TOKENS)


async def find_mistake(
    task: str,
    method: str,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    *,
    settings: llm.CallSettings | None = None,
    judge_all: bool = False,
    pace: Pace | None = None,
) -> AsyncIterator[FindEvent]:
    """Run `method` on one trace. Yields a TraceJudged (trace-level) or one StepJudged per
    thought as each answer arrives (step-level), then one FindFinished. Step-level methods stop
    once the outcome is known (the first "No", or an unparseable answer before any "No")
    unless `judge_all`. Raises MethodError before any call, LLMError from the model."""
    found = check_method(task, method)
    settings = settings or finder_settings()
    if not steps:
        raise ValueError("the trace has no thoughts to judge")
    if found.step_level:
        async for event in _find_by_step(task, found, input_text, steps, spec, settings,
                                         judge_all, pace):
            yield event
        return
    messages = build_messages(task, method, input_text, steps)
    completion = await _ask(spec, messages, settings, pace)
    answer = parse_trace_answer(completion.text, len(steps))
    yield TraceJudged(answer, completion.text, completion.call)
    index = answer.mistake_number - 1 if answer.mistake_number is not None else None
    yield FindFinished(FindResult(method, spec.model, index, answer.parsed, [completion.text],
                                  [completion.call]))


async def _find_by_step(
    task: str,
    method: Method,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    settings: llm.CallSettings,
    judge_all: bool,
    pace: Pace | None,
) -> AsyncIterator[FindEvent]:
    result = FindResult(method.name, spec.model, None, True)
    decided = False
    for number in range(1, len(steps) + 1):
        messages = build_messages(task, method.name, input_text, steps, number)
        completion = await _ask(spec, messages, settings, pace)
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
    task: str,
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
    async for event in find_mistake(task, method, input_text, steps, spec, settings=settings,
                                    judge_all=judge_all, pace=pace):
        if isinstance(event, FindFinished):
            return event.result
    raise AssertionError("find_mistake ended without a result")


# --------------------------------------------------------------------------- recording


async def record_find(
    store: Any,
    session_id: int,
    task: str,
    method: str,
    input_text: str,
    steps: Sequence[str],
    spec: llm.ModelSpec,
    *,
    leaf_step_id: int | None = None,
    settings: llm.CallSettings | None = None,
    judge_all: bool = False,
) -> AsyncIterator[FindEvent]:
    """find_mistake(), committing the run to `store` (a store.Store) first and each verdict
    before its event is handed on, so whoever shows a verdict can rely on it being saved.
    Store calls run in a thread, never on the event loop. A run that fails or is cancelled
    keeps the verdicts it got and has no result."""
    settings = settings or finder_settings()
    check_method(task, method)
    run_id = await asyncio.to_thread(
        store.create_finder_run, session_id, method=method, model=spec.model,
        params=settings.params() | {"mode": spec.mode, "judge_all": judge_all},
        leaf_step_id=leaf_step_id,
    )
    try:
        async for event in find_mistake(task, method, input_text, steps, spec,
                                        settings=settings, judge_all=judge_all):
            if isinstance(event, StepJudged):
                await asyncio.to_thread(store.add_finder_verdict, run_id,
                                        step_number=event.number, raw=event.raw,
                                        verdict=event.verdict, call=event.call)
            elif isinstance(event, TraceJudged):
                await asyncio.to_thread(store.add_finder_verdict, run_id, step_number=None,
                                        raw=event.raw, verdict=event.verdict, call=event.call)
            else:
                await asyncio.to_thread(store.finish_finder_run, run_id,
                                        mistake_number=event.result.mistake_number,
                                        parsed=event.result.parsed)
            yield event
    except llm.LLMError as error:
        await asyncio.to_thread(store.end_finder_run, run_id, ended="failed",
                                error=error.message)
        raise
    except (asyncio.CancelledError, GeneratorExit):
        # No awaiting here: the task is being cancelled (or the caller let go of this
        # generator). One short write, in this thread, says the person stopped it.
        store.end_finder_run(run_id, ended="stopped")
        raise
