"""The generation stepper (docs/DESIGN.md §3): one model call per `Thought N`, as an async
generator of events that the app, the batch runner and the tests all consume the same way.

Stop rules: a step that states an answer (the paper's regex), the step limit, or the model
going silent. A single empty step is held back and kept only if the model goes on after it
(one recorded trace has an empty thought in the middle); two empty steps in a row end the
trace and neither is kept. A step cut at its token limit is kept, marked truncated, and ends
the run so that a person can look at it.

Consumers commit each `StepFinished` as it arrives; a step that was started but not finished
when the run ends (error, cancellation, the silent end) is to be discarded.

One-call mode (`StepperSettings.one_call`, opt-in) makes the first call of a run with no stop
and takes as many steps from it as the model writes with their labels (core/llm/one_call.py);
from where that call stops giving steps, the run goes on with one call a step. Its steps come
as the same events, each with its share of the call.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace

from bbm_tui.core import llm
from bbm_tui.core.prompts.generation import next_step_parts
from bbm_tui.core.records import TraceEnd
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.types import DEFAULT_STEP_LIMIT, StepperSettings

__all__ = ["DEFAULT_STEP_LIMIT", "StepperSettings"]  # re-exported: the stepper's settings

@dataclass
class StepStarted:
    number: int


@dataclass
class StepDelta:
    number: int
    text: str


@dataclass
class StepRestarted:
    """A retry after text had streamed: what was shown for this step is void."""

    number: int
    reason: str
    delay_s: float


@dataclass
class StepFinished:
    number: int
    text: str
    call: llm.CallRecord
    answer: str | None
    truncated: bool = False
    # A thinking step (generation/thinking.py): its raw slice of the reasoning, whitespace
    # and all (`text` is it stripped). None: a step of its own call.
    raw: str | None = None


@dataclass
class AnswerFound:
    answer: str
    correct: bool | None  # None when the target is unknown


@dataclass
class StepFailed:
    number: int
    error: llm.LLMError


@dataclass
class OneCallEnded:
    """One-call mode's call is over. `unkept`: what the request cost beyond the steps it gave
    (all of it when it gave none; else the text streamed past its last whole step), to be
    counted and stored as a call of its own; None: nothing. `fell_back`: why the trace goes on
    with one call a step from here (None: a stop rule ended it on one of the call's steps)."""

    unkept: llm.CallRecord | None
    fell_back: str | None


@dataclass
class TraceFinished:
    reason: TraceEnd
    steps: list[str]
    answer: str | None


StepEvent = (
    StepStarted
    | StepDelta
    | StepRestarted
    | StepFinished
    | AnswerFound
    | StepFailed
    | OneCallEnded
    | TraceFinished
)


async def run_steps(
    task: Task | str,
    input_text: str,
    spec: llm.ModelSpec,
    steps: Sequence[str] = (),
    *,
    target: str | None = None,
    max_new_steps: int | None = None,
    settings: StepperSettings | None = None,
) -> AsyncGenerator[StepEvent, None]:
    """Generate steps after `steps` until a stop rule fires, `max_new_steps` have been added
    (TraceEnd.PAUSED), or an error (StepFailed, then the generator ends). The answer regex
    and the comparison with `target` are the task's."""
    settings = settings or StepperSettings()
    task = get_task(task)
    written = list(steps)
    if written and task.extract_answer(written[-1]) is not None:
        yield TraceFinished(TraceEnd.ANSWER, written, task.extract_answer(written[-1]))
        return
    refusal = llm.offline_refusal(spec, task)
    if refusal is not None:
        yield StepFailed(len(written) + 1, refusal)
        return
    held_empty: StepFinished | None = None
    added = 0
    # The calls of one trace stay on one deployment of a router while it is healthy.
    pin = llm.DeploymentPin()
    one_call = settings.one_call
    streaming: int | None = None  # the step whose StepStarted was said and not finished yet
    try:
        while True:
            if len(written) + (held_empty is not None) >= settings.step_limit:
                yield TraceFinished(TraceEnd.STEP_LIMIT, written, None)
                return
            if max_new_steps is not None and added >= max_new_steps and held_empty is None:
                yield TraceFinished(TraceEnd.PAUSED, written, None)
                return
            number = len(written) + 1 + (held_empty is not None)
            context = written + ([""] if held_empty is not None else [])
            parts = next_step_parts(task, input_text, context)
            prompt = "".join(parts)
            if one_call and held_empty is None:
                one_call = False  # one such call a run; then one call a step
                yield StepStarted(number)
                streaming = number
                end: TraceFinished | None = None
                async with aclosing(_one_call_steps(task, spec, parts, number, settings, pin,
                                                    target, written, max_new_steps)) as events:
                    async for event in events:
                        if isinstance(event, StepStarted):
                            streaming = event.number
                        elif isinstance(event, StepFinished):
                            written.append(event.text)
                            added += 1
                            streaming = None
                        elif isinstance(event, TraceFinished):
                            end = event
                        yield event
                if end is not None:
                    return
                continue
            if streaming != number:
                yield StepStarted(number)
            streaming = None
            result: llm.StepText | None = None
            try:
                async for item in llm.stream_step(spec, prompt, _call_settings(settings, number),
                                                  pin, parts=parts):
                    if isinstance(item, llm.TextDelta):
                        yield StepDelta(number, item.text)
                    elif isinstance(item, llm.Restart):
                        yield StepRestarted(number, item.reason, item.delay_s)
                    else:
                        result = item
            except llm.LLMError as error:
                yield StepFailed(number, error)
                return
            assert result is not None
            answer = task.extract_answer(result.text)
            finished = StepFinished(number, result.text, result.call, answer, result.truncated)
            if result.text == "":
                if held_empty is not None:
                    yield TraceFinished(TraceEnd.EMPTY, written, None)
                    return
                held_empty = finished
                continue
            if held_empty is not None:
                yield held_empty
                written.append("")
                added += 1
                held_empty = None
            yield finished
            written.append(result.text)
            added += 1
            if answer is not None:
                yield AnswerFound(answer,
                                  None if target is None else task.is_correct(answer, target))
                yield TraceFinished(TraceEnd.ANSWER, written, answer)
                return
            if result.truncated:
                yield TraceFinished(TraceEnd.TRUNCATED, written, None)
                return

    finally:
        pin.release()  # its deployment holds one trace fewer

async def _one_call_steps(
    task: Task,
    spec: llm.ModelSpec,
    parts: Sequence[str],
    number: int,
    settings: StepperSettings,
    pin: llm.DeploymentPin,
    target: str | None,
    written: list[str],
    max_new_steps: int | None,
) -> AsyncGenerator[StepEvent, None]:
    """The steps one call gives from Thought `number` on (StepStarted for each after the
    first, whose StepStarted the caller said), ending with a TraceFinished where a stop rule
    fires on one of them (the answer, the step limit, the steps asked for); when the call
    stops giving steps first, a StepRestarted voids the text of a step it had begun.
    `written` is the caller's list of steps, which it extends at each StepFinished."""
    added = 0
    unkept: list[llm.CallRecord] = []
    fell_back: str | None = None
    ending: list[StepEvent] = []  # a stop rule's events, said once the call is closed
    async with aclosing(llm.stream_steps(spec, "".join(parts), number, settings.call, pin,
                                         parts=parts, unkept=unkept)) as items:
        async for item in items:
            if isinstance(item, llm.LineStarted):
                number = item.number
                yield StepStarted(number)
            elif isinstance(item, llm.TextDelta):
                yield StepDelta(number, item.text)
            elif isinstance(item, llm.CallStopped):
                if item.voided is not None:
                    yield StepRestarted(item.voided, item.reason, 0.0)
                fell_back = item.reason
                break
            else:
                answer = task.extract_answer(item.text)
                yield StepFinished(number, item.text, item.call, answer)
                added += 1
                ending = _stop_rule(task, answer, target, list(written), settings, added,
                                    max_new_steps)
                if ending:
                    break
    # The call is closed now: what it streamed past its last step is known.
    yield OneCallEnded(unkept[0] if unkept else None, None if ending else fell_back)
    for event in ending:
        yield event


def _call_settings(settings: StepperSettings, number: int) -> llm.CallSettings:
    """Step `number`'s call settings: the step limit's step leaves nothing in the prompt
    cache for a next step (caching.step_messages)."""
    if number < settings.step_limit:
        return settings.call
    return replace(settings.call, cache_for_next=False)


def _stop_rule(task: Task, answer: str | None, target: str | None, so_far: list[str],
               settings: StepperSettings, added: int,
               max_new_steps: int | None) -> list[StepEvent]:
    """The events that end a trace after one of the call's steps (none: it goes on).
    `so_far`: the steps written, the caller having added this one."""
    if answer is not None:
        return [AnswerFound(answer, None if target is None else task.is_correct(answer, target)),
                TraceFinished(TraceEnd.ANSWER, so_far, answer)]
    if len(so_far) >= settings.step_limit:
        return [TraceFinished(TraceEnd.STEP_LIMIT, so_far, None)]
    if max_new_steps is not None and added >= max_new_steps:
        return [TraceFinished(TraceEnd.PAUSED, so_far, None)]
    return []
