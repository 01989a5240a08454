"""Resampling a step of a thinking model's reasoning (issue 35): the paper's backtracking
(generation/backtrack.py) on a thinking trace, over a server that goes on from a prefix
(core/llm/prefix.py).

Step k is resampled by sending the question's prompt, the reasoning opened and steps 1..k-1
exactly as the raw reasoning had them, and cutting what comes back where the trace's split
rule ends its first step (or at `</think>`, where the reasoning ends). A sample equal to the
original step (both stripped) is dropped; the paper's choice among the rest is
generation/backtrack.choose's (the highest log-probability, else the first that differs).
Going on from the chosen one is one more call from the new prefix, to the end of the
reasoning and the answer after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, replace

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import ChosenBy, choose
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.generation.stepper import StepEvent
from bbm_tui.core.generation.thinking import ReasoningFinished, answer_of, thinking_events
from bbm_tui.core.llm.prefix import THINK_CLOSE, Continuation, Prefixer, PrefixSettings
from bbm_tui.core.llm.prefix_stream import stream_continuation
from bbm_tui.core.llm.thinking import AnswerDelta, ReasoningDelta, ThinkingDone
from bbm_tui.core.records import ReasoningKind, TokenLogprob
from bbm_tui.core.tasks import Task
from bbm_tui.core.types import SplitRule

SAMPLES = 8
# A step's sample is asked for this many tokens at most: more than any step of the field's
# traces (DeltaBench's sections average ~275 tokens), and the cut keeps only the first step.
STEP_MAX_TOKENS = 400
# Going on to the answer: the rest of the reasoning and the answer.
ANSWER_MAX_TOKENS = 8192


@dataclass
class StepSample:
    """One sample of step k: `raw` the slice as the reasoning would have it (the split rule's
    first step of the continuation), `text` it stripped, as a step is shown and stored;
    `logprob` the total over the tokens of `text` (None: the server sent none)."""

    raw: str
    tokens: list[TokenLogprob] | None
    # The continuation ran out of tokens inside the step: it is cut, not ended by the rule.
    truncated: bool
    call: llm.CallRecord

    @property
    def text(self) -> str:
        return self.raw.strip()

    @property
    def logprob(self) -> float | None:
        if not self.tokens:
            return None
        return sum(token.logprob for token in tokens_of(self.tokens, self.raw.rstrip()))


@dataclass
class ThinkingResample:
    number: int  # 1-based: the step resampled
    original: str  # its raw slice
    samples: list[StepSample]
    dropped: list[bool]
    chosen: int | None
    chosen_by: ChosenBy | None

    @property
    def chosen_sample(self) -> StepSample | None:
        return None if self.chosen is None else self.samples[self.chosen]


def first_step(continuation: str, rule: SplitRule,
               finish_reason: str | None) -> tuple[str, bool]:
    """The first step the rule cuts from a continuation of the reasoning (the raw slice), and
    whether it is cut short by the token limit rather than ended. The reasoning ends at
    `</think>`: what comes after it is the answer, never part of a step."""
    reasoning, closed, _ = continuation.partition(THINK_CLOSE)
    steps = split_text(reasoning, rule)
    if not steps:
        return "", False
    ended = len(steps) > 1 or bool(closed) or finish_reason != "length"
    return steps[0], not ended


def tokens_of(tokens: Sequence[TokenLogprob], text: str) -> list[TokenLogprob]:
    """The tokens that write `text`, the start of what they wrote (a token that begins inside
    it counts whole)."""
    kept, written = [], 0
    for token in tokens:
        if written >= len(text):
            break
        kept.append(token)
        written += len(token.text)
    return kept


def is_original(sample: StepSample, original: str) -> bool:
    return sample.text == original.strip()


OnStepSample = Callable[[int, StepSample, bool], None]


async def resample_thinking_step(
    prefixer: Prefixer,
    raw_steps: Sequence[str],
    number: int,
    rule: SplitRule,
    settings: PrefixSettings,
    *,
    n: int = SAMPLES,
    concurrency: int = SAMPLES,
    on_sample: OnStepSample | None = None,
) -> ThinkingResample:
    """`n` samples of step `number` (1-based), each after steps 1..number-1 as they were
    written, and the paper's choice among them. Raises LLMError."""
    kept = "".join(raw_steps[: number - 1])
    original = raw_steps[number - 1]
    step_settings = replace(settings, max_tokens=min(settings.max_tokens, STEP_MAX_TOKENS))
    gate = asyncio.Semaphore(max(1, concurrency))
    samples: list[StepSample | None] = [None] * n

    async def one(position: int) -> None:
        async with gate:
            continuation = await prefixer.go_on(kept, step_settings)
        raw, truncated = first_step(continuation.text, rule, continuation.finish_reason)
        sample = StepSample(raw, continuation.tokens, truncated, continuation.call)
        samples[position] = sample
        if on_sample is not None:
            on_sample(position, sample, is_original(sample, original))

    await asyncio.gather(*(one(position) for position in range(n)))
    drawn = [sample for sample in samples if sample is not None]
    dropped = [is_original(sample, original) for sample in drawn]
    chosen, chosen_by = choose(drawn, dropped)
    return ThinkingResample(number, original, drawn, dropped, chosen, chosen_by)


@dataclass
class Ending:
    """The rest of a trace after a prefix: the reasoning's rest (raw), the answer's text,
    the answer read from it by the task's rule (None: none stated, or the reasoning never
    ended)."""

    reasoning_rest: str
    answer_text: str
    answer: str | None
    call: llm.CallRecord


def ending_of(task: Task, continuation: Continuation) -> Ending:
    reasoning, closed, content = continuation.text.partition(THINK_CLOSE)
    answer = answer_of(task, content) if closed else None
    return Ending(reasoning, content.strip() if closed else "", answer, continuation.call)


async def go_on_to_answer(prefixer: Prefixer, task: Task, kept: str,
                          settings: PrefixSettings) -> Ending:
    """One continuation from the kept reasoning (raw) to the end of the reasoning and the
    answer (`settings.max_tokens` for both: `answer_settings` gives room for them)."""
    return ending_of(task, await prefixer.go_on(kept, replace(settings, logprobs=False)))


async def go_on_streaming(
    prefixer: Prefixer,
    task: Task,
    kept: str,
    first_number: int,
    rule: SplitRule,
    settings: PrefixSettings,
    *,
    target: str | None = None,
) -> AsyncGenerator[StepEvent | ReasoningFinished, None]:
    """The rest of a trace after `kept` (steps 1..first_number-1, raw) as the thinking mode's
    events (generation/thinking.py): steps from `first_number` on, each as the splitter is
    sure of it, then the answer. ReasoningFinished carries the whole reasoning, `kept` and
    all (the new branch's record). Raises nothing: an error is a StepFailed."""

    async def pieces() -> AsyncGenerator[llm.ThinkingEvent, None]:
        held = ""  # text that may be the start of `</think>`
        closed = False
        async for item in stream_continuation(prefixer, kept, settings):
            if isinstance(item, Continuation):
                if held:
                    yield AnswerDelta(held) if closed else ReasoningDelta(held)
                yield ThinkingDone(item.call, ReasoningKind.RAW, None)
                return
            if closed:
                yield AnswerDelta(item)
                continue
            held += item
            before, found, after = held.partition(THINK_CLOSE)
            if found:
                closed, held = True, ""
                if before:
                    yield ReasoningDelta(before)
                if after:
                    yield AnswerDelta(after)
                continue
            keep = _partial_close(held)
            if len(held) > keep:
                yield ReasoningDelta(held[: len(held) - keep])
                held = held[len(held) - keep:]

    async with aclosing(thinking_events(task, prefixer.spec, pieces(), rule, target=target,
                                        first_number=first_number)) as events:
        async for event in events:
            if isinstance(event, ReasoningFinished):
                event = replace(event, text=kept + event.text)
            yield event


def _partial_close(text: str) -> int:
    """How many characters at the end of `text` may begin `</think>`."""
    for size in range(min(len(THINK_CLOSE) - 1, len(text)), 0, -1):
        if THINK_CLOSE.startswith(text[-size:]):
            return size
    return 0


def answer_settings(settings: PrefixSettings, temperature: float | None = None,
                    max_tokens: int = ANSWER_MAX_TOKENS) -> PrefixSettings:
    """The settings of a call that goes on to the answer: room for the rest of the reasoning,
    no log-probabilities; at `temperature` where given (backtracking goes on greedily, as the
    paper's does; rollouts sample at the settings' own)."""
    return replace(settings, max_tokens=max_tokens, logprobs=False,
                   temperature=settings.temperature if temperature is None else temperature)
