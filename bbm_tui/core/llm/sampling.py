"""Several candidates for one step (docs/DESIGN.md §5): what backtracking resamples a mistaken
thought with. One call with `n` where the provider takes `n`, else parallel calls; the same
result either way. Each candidate is cut like a streamed step (prompts/thoughts.step_span)
and keeps the tokens of exactly its text with their log-probabilities, where the provider
sends them.

Each call's candidates are handed on as the call returns (`on_arrival`), so a view can show
them as they come.

Facts from real servers (docs/NOTES.md): candidates are never streamed (litellm merges a
streamed text completion's choices into one, with no log-probabilities); log-probabilities are
asked for only where the provider gives them (capabilities.gives_logprobs), and `top_logprobs`
with them wherever the provider takes it (capabilities.TOP_ALTERNATIVES: without it, or at 0,
one of the llama.cpp servers sends none); llama-cpp-python's server ignores `n` and llama-server
caps it at its slot count, so fewer choices than asked are made up with parallel calls;
llama-server counts usage for one choice only (recorded as sent).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bbm_tui.core.llm.caching import step_messages
from bbm_tui.core.llm.capabilities import accepts_n, asks_logprobs, logprob_kwargs, sent_params
from bbm_tui.core.llm.errors import with_retries
from bbm_tui.core.llm.router import served_by, start_call
from bbm_tui.core.llm.transport import (
    ImpossibleLogprobs,
    aligned_tokens,
    aligned_tokens_short_of_stop,
    call_kwargs,
    native_stop_kwargs,
    not_an_answer,
    token_logprobs,
    unicode_text,
)
from bbm_tui.core.llm.usage import cost_of, counts_from_litellm
from bbm_tui.core.prompts.thoughts import asked_number, step_span
from bbm_tui.core.records import CallRecord, TokenLogprob
from bbm_tui.core.types import CallSettings, ModelSpec


@dataclass
class Candidate:
    """One sampled step: `text` as it would be stored, `tokens` the tokens of exactly that
    text (None where the provider sent no log-probabilities). `call` indexes Samples.calls;
    `choice` is the choice's index within that call."""

    text: str
    tokens: list[TokenLogprob] | None
    raw: str
    finish_reason: str | None
    truncated: bool
    call: int
    choice: int
    # The provider sent log-probabilities no model could give: `tokens` is None.
    impossible_logprobs: bool = False
    # The end of `text` the provider sent no log-probability for (llama-server leaves out
    # the token before a stop sequence): `logprob` is the rest's.
    unscored: str = ""

    @property
    def logprob(self) -> float | None:
        return sum(token.logprob for token in self.tokens) if self.tokens else None


@dataclass
class Samples:
    candidates: list[Candidate] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)
    # How the candidates were asked for: "n" (one call), "parallel", or "n+parallel" (the
    # provider returned fewer choices than asked).
    how: str = ""
    # Whether log-probabilities were asked for: False where the provider gives none
    # (capabilities.gives_logprobs), so that a choice without them can say why.
    logprobs_asked: bool = False


@dataclass(frozen=True)
class Arrived:
    """One call's candidates, as soon as it returned, as they will stand in Samples:
    `call_index` is the call's place in Samples.calls (and each candidate's `call`),
    `positions[i]` is where candidates[i] stands in Samples.candidates. The places do not
    depend on which call comes back first, so a view can show each in its row and the result
    is the same every time."""

    call: CallRecord
    call_index: int
    candidates: list[Candidate]
    positions: list[int]


OnArrival = Callable[[Arrived], None]


async def sample_steps(
    spec: ModelSpec, prompt: str, n: int, settings: CallSettings,
    on_arrival: OnArrival | None = None, *, parts: Sequence[str] = (),
) -> Samples:
    """`n` candidates for the step `prompt` asks for; `on_arrival` hears of each call's
    candidates as the call returns (parallel calls in any order). Cancelled, it cancels
    the calls still out. `parts`: the prompt's pieces, as stream_step takes them. Raises
    LLMError (the first call that failed; the others are cancelled)."""
    samples = Samples(logprobs_asked=asks_logprobs(spec, settings, streamed=False))
    arrivals: list[Arrived] = []

    def arrived(arrival: Arrived) -> None:
        arrivals.append(arrival)
        if on_arrival is not None:
            on_arrival(arrival)

    if n <= 0:
        return samples
    first = 0
    if accepts_n(spec) and n > 1:
        call, candidates = await _call(spec, prompt, parts, n, settings)
        candidates = candidates[:n]
        arrived(_arrival(call, 0, candidates, 0))
        first = len(candidates)
        samples.how = "n" if first >= n else "n+parallel"
    else:
        samples.how = "parallel"
    await _parallel(spec, prompt, parts, settings, n - first, len(arrivals), first, arrived)
    for arrival in sorted(arrivals, key=lambda arrival: arrival.call_index):
        samples.calls.append(arrival.call)
        samples.candidates.extend(arrival.candidates)
    return samples


async def _parallel(spec: ModelSpec, prompt: str, parts: Sequence[str], settings: CallSettings,
                    count: int,
                    first_call: int, first_position: int, arrived: OnArrival) -> None:
    """`count` calls of one candidate each, all at once; call k's candidate stands at
    `first_position + k` whatever the order they return in."""
    if count <= 0:
        return
    pending = {asyncio.ensure_future(_call(spec, prompt, parts, 1, settings)): index
               for index in range(count)}
    try:
        while pending:
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in sorted(done, key=pending.__getitem__):
                index = pending.pop(task)
                call, candidates = task.result()  # a failed call raises here
                # One asked for: a server that sends more gets its first counted.
                arrived(_arrival(call, first_call + index, candidates[:1],
                                 first_position + index))
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)


def _arrival(call: CallRecord, call_index: int, candidates: list[Candidate],
             first_position: int) -> Arrived:
    for candidate in candidates:
        candidate.call = call_index
    return Arrived(call, call_index, candidates,
                   list(range(first_position, first_position + len(candidates))))


async def _call(
    spec: ModelSpec, prompt: str, parts: Sequence[str], n: int, settings: CallSettings
) -> tuple[CallRecord, list[Candidate]]:
    async def once(attempt: int) -> tuple[CallRecord, list[Candidate]]:
        return await _call_once(spec, prompt, parts, n, settings, attempt)

    return await with_retries(spec, settings.retry, once)


async def _call_once(
    spec: ModelSpec, prompt: str, parts: Sequence[str], n: int, settings: CallSettings,
    attempt: int,
) -> tuple[CallRecord, list[Candidate]]:
    kwargs = call_kwargs(spec, settings) | native_stop_kwargs(spec)
    if n > 1:
        kwargs["n"] = n
    logprobs = asks_logprobs(spec, settings, streamed=False)
    started = time.perf_counter()
    if logprobs:
        kwargs |= logprob_kwargs(spec)
    if spec.mode != "completion":
        kwargs["messages"] = step_messages(spec, settings, prompt, parts)
    else:
        kwargs["prompt"] = prompt
    response = await asyncio.wait_for(start_call(spec, kwargs, chat=spec.mode != "completion"),
                                      settings.timeout_s + 5)
    latency = time.perf_counter() - started
    number = asked_number(prompt)
    candidates = [
        _candidate(choice, index, spec.mode, number, native_stop="stop" in kwargs)
        for index, choice in enumerate(getattr(response, "choices", None) or [])
    ]
    if not any(candidate.raw or candidate.finish_reason for candidate in candidates):
        # No choice at all, or only empty ones no provider finished: not an answer.
        raise not_an_answer(spec, "no choice with text or a finish reason")
    counts = counts_from_litellm(getattr(response, "usage", None))
    call = CallRecord(
        model=spec.model,
        params=sent_params(spec, settings) | ({"n": n} if n > 1 else {})
        | ({"logprobs": True} if logprobs else {}),
        latency_s=latency,
        prompt_tokens=counts.prompt,
        completion_tokens=counts.completion,
        cost=cost_of(spec, counts),
        finish_reason=candidates[0].finish_reason if candidates else None,
        impossible_logprobs=any(candidate.impossible_logprobs for candidate in candidates),
        attempts=attempt,
        native_stop="stop" in kwargs,
        cached_tokens=counts.cached,
        cache_write_tokens=counts.cache_write,
        deployment=served_by(response) if spec.router else None,
    )
    return call, candidates


def _candidate(choice: Any, index: int, mode: str, number: int | None,
               native_stop: bool = False) -> Candidate:
    if mode != "completion":
        message = getattr(choice, "message", None)
        raw = getattr(message, "content", None) or ""
    else:
        raw = getattr(choice, "text", None) or ""
    raw = unicode_text(raw)
    start, end = step_span(raw, number)
    finish_reason = getattr(choice, "finish_reason", None)
    # Cut at its token limit without reaching a line break: kept, marked like a streamed cut.
    truncated = finish_reason == "length" and end == len(raw.rstrip())
    logprobs = getattr(choice, "logprobs", None)
    tokens, impossible, unscored = None, False, ""
    if logprobs:
        try:
            sent = token_logprobs(logprobs)
        except ImpossibleLogprobs:
            impossible = True
        else:
            if native_stop and finish_reason == "stop":
                tokens, unscored = aligned_tokens_short_of_stop(raw, sent, start, end)
            else:
                tokens = aligned_tokens(raw, sent, start, end)
    choice_index = getattr(choice, "index", None)
    return Candidate(
        text=raw[start:end], tokens=tokens, raw=raw, finish_reason=finish_reason,
        truncated=truncated, call=0,
        choice=choice_index if isinstance(choice_index, int) else index,
        impossible_logprobs=impossible, unscored=unscored,
    )
