"""Backtracking a step of a thinking trace in a session (issue 35, `b` in the app): the
paper's backtracking (trace/session.py's resample and continue_with) on a thinking model's
reasoning, over a model that goes on from a prefix (core/llm/prefix.py).

Step k is resampled from steps 1..k-1 exactly as the branch's raw reasoning had them
(generation/resample_thinking.py); the samples are stored as any backtracking's are (the
`candidates` table, with their log-probabilities and calls), so the samples dialog, the tree,
compare and exports read them as they read the paper's. Going on from one makes a new branch:

- a new reasoning (store v18's `reasonings`), begun with steps 1..k-1 raw, then the sample's
  raw slice and the continuation's steps as each is stored, and the whole text once the call
  ends: the new branch's reasoning is stored whole, so it can be re-cut (`S`) like any other;
- Thought k, the sample taken (origin `backtrack`, pointing at its candidate), then the rest as
  the thinking mode's steps (origin `thinking`), streamed at greedy (temperature 0), as the
  paper goes on after backtracking; the original branch stays in the tree.

Stopped before its answer (esc, a failure), the new branch keeps what came, and goes on from
its reasoning so far (`stopped_branch`, `go_on_from_stopped`: the app's `r`), not from a
fresh call. So does a plain thinking trace whose call stopped, where the model can go on from
a prefix.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import OnSample, Resample, SampleArrived
from bbm_tui.core.generation.resample_thinking import (
    SAMPLES,
    StepSample,
    ThinkingResample,
    answer_settings,
    go_on_streaming,
    resample_thinking_step,
    tokens_of,
)
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.generation.stepper import StepEvent
from bbm_tui.core.llm.prefix import Prefixer, PrefixSettings, prefix_refusal
from bbm_tui.core.prompts.thinking import thinking_messages
from bbm_tui.core.records import CallPurpose, ReasoningKind, SessionSource
from bbm_tui.core.store import Step, Store, StoredCandidate
from bbm_tui.core.store.steps import ReasoningSlice
from bbm_tui.core.trace.session import (
    BranchMade,
    NewTrace,
    SamplesReady,
    StoppedBranch,
    TraceSession,
    digest_of,
    on_the_loop,
)
from bbm_tui.core.types import SplitRule, StepOrigin


class NotContinuable(ValueError):
    """The branch on show cannot be backtracked from a prefix; the message says why."""


@dataclass
class ThinkingSamples:
    """Step k's samples, stored (`ready`, as the samples dialog takes them), and what going on
    from one needs: each sample's raw slice (by position), steps 1..k-1 raw, the rule."""

    ready: SamplesReady
    raws: list[str]
    kept: str
    rule: SplitRule

    def raw_of(self, candidate: StoredCandidate) -> str:
        for position, stored in enumerate(self.ready.stored):
            if stored.id == candidate.id:
                return self.raws[position]
        raise ValueError(f"candidate {candidate.id} is not one of these samples")


def thinking_refusal(trace: TraceSession, chat_template: Path | None = None) -> str | None:
    """Why this session's model cannot resample a step of its thinking trace (before any
    call); None: it can. Reads the store (the branch's reasoning)."""
    refusal = prefix_refusal(trace.spec, chat_template)
    if refusal is not None:
        return refusal
    try:
        branch_raw_steps(trace)
    except NotContinuable as error:
        return str(error)
    return None


def branch_raw_steps(trace: TraceSession) -> tuple[list[str], SplitRule]:
    """The branch's steps as slices of its raw reasoning, and the rule that cut them. Raises
    NotContinuable: not a thinking trace, its reasoning not stored whole, or its steps not
    that reasoning cut by the rule (a summary's steps, a branch rewritten by hand)."""
    rule = trace.split_rule()
    reasoning = trace.reasoning()
    if rule is None or reasoning is None:
        raise NotContinuable("this trace's steps are not a thinking model's reasoning")
    if reasoning.kind != str(ReasoningKind.RAW):
        raise NotContinuable(f"the provider sent {reasoning.kind} of the reasoning, not the "
                             "reasoning itself: a model goes on from its own text only")
    if not reasoning.complete:
        raise NotContinuable("the reasoning is stored whole when its call ends; resample it "
                             "then")
    raw = split_text(reasoning.text, rule)
    if [step.strip() for step in raw] != trace.texts:
        raise NotContinuable(f"its thoughts are not its reasoning cut by the {rule} rule")
    return raw, rule


def prefixer_for(trace: TraceSession, chat_template: Path | None = None) -> Prefixer:
    """The session's model going on from prefixes of its question's reasoning. Raises
    LLMError (the provider cannot)."""
    return Prefixer(trace.spec, thinking_messages(trace.task, trace.session.input),
                    chat_template)


async def resample_thinking(
    trace: TraceSession,
    prefixer: Prefixer,
    number: int,
    settings: PrefixSettings,
    *,
    n: int = SAMPLES,
    on_sample: OnSample | None = None,
) -> ThinkingSamples:
    """`n` samples of Thought `number` of the branch on show, each after Thoughts
    1..number-1 as its raw reasoning had them, stored with the paper's choice; the trace is
    unchanged. `on_sample` hears of each as it arrives. Cancelled before all are in, nothing
    is stored. Raises LLMError, NotContinuable, SessionBusy."""
    raw, rule = await asyncio.to_thread(branch_raw_steps, trace)
    if not 1 <= number <= len(raw):
        raise ValueError(f"there is no Thought {number} (the trace has {len(raw)})")
    parent = trace.steps[number - 2].id if number > 1 else None

    def arrived(position: int, sample: StepSample, dropped: bool) -> None:
        if on_sample is not None:
            on_sample(SampleArrived(position, _candidate(sample, position), dropped))

    async with trace.claimed():
        thinking = await resample_thinking_step(prefixer, raw, number, rule, settings, n=n,
                                                on_sample=arrived)
        resample = _as_resample(thinking, settings)
        # Cancelled while saving, the samples are saved all the same, then it goes on.
        store = asyncio.ensure_future(trace.store_work(trace.store_samples, resample, parent))
        try:
            stored = await asyncio.shield(store)
        except asyncio.CancelledError:
            await store
            raise
    return ThinkingSamples(SamplesReady(number, resample, stored),
                           [sample.raw for sample in thinking.samples],
                           "".join(raw[: number - 1]), rule)


def _candidate(sample: StepSample, position: int) -> llm.Candidate:
    """A thinking sample as the step-at-a-time backtracking's candidate: its own call (at
    `position`), the tokens of its text only."""
    tokens = None if not sample.tokens else tokens_of(sample.tokens, sample.raw.rstrip())
    return llm.Candidate(sample.text, tokens or None, sample.raw,
                         "length" if sample.truncated else "stop", sample.truncated,
                         call=position, choice=0)


def _as_resample(thinking: ThinkingResample, settings: PrefixSettings) -> Resample:
    samples = llm.Samples(
        candidates=[_candidate(sample, position)
                    for position, sample in enumerate(thinking.samples)],
        calls=[sample.call for sample in thinking.samples], how="parallel",
        logprobs_asked=settings.logprobs)
    return Resample(thinking.number, thinking.original.strip(), samples, thinking.dropped,
                    thinking.chosen, thinking.chosen_by)


async def continue_thinking(
    trace: TraceSession,
    prefixer: Prefixer,
    samples: ThinkingSamples,
    candidate: StoredCandidate,
    settings: PrefixSettings,
) -> AsyncIterator[BranchMade | StepEvent]:
    """A new branch from the sample `candidate`: its Thought k, then the rest of the
    reasoning and the answer, streamed at temperature 0 and stored as they come (the
    thinking mode's events)."""
    raw = samples.raw_of(candidate)
    reasoning_id, step = await trace.store_work(_take_sample, trace, samples.kept,
                                                samples.rule, candidate, raw)
    yield BranchMade(step)
    events = go_on_streaming(prefixer, trace.task, samples.kept + raw, candidate.number + 1,
                             samples.rule, answer_settings(settings, temperature=0.0),
                             target=trace.session.target)
    async for event in trace.go_on_thinking(reasoning_id, samples.rule, events):
        yield event


def stopped_branch(trace: TraceSession) -> StoppedBranch | None:
    """The branch on show, if its thinking call, or its going on after `b` then `enter`,
    stopped (esc, a failure) before the answer with its raw reasoning so far stored; None for
    any other branch, and for a plain trace once another model is chosen (that model makes
    its own call, from the start, as before). The trace knows it (learnt when its branch was
    loaded, kept in step as steps are saved): no query."""
    stopped = trace.stopped
    if stopped is not None and not stopped.backtracked and stopped.model != trace.spec.model:
        return None
    return stopped


async def go_on_from_stopped(
    trace: TraceSession,
    prefixer: Prefixer,
    stopped: StoppedBranch,
    settings: PrefixSettings,
) -> AsyncIterator[StepEvent]:
    """A stopped branch going on from where it stopped: the rest of the reasoning after its
    stored steps (raw) and the answer, streamed and stored into the same reasoning, below
    its last step (the steps that came are kept; the thought that was streaming when it
    stopped is written again). A backtracked branch at temperature 0, as `enter` went on; a
    plain trace at `settings`' temperature (its own)."""
    temperature = 0.0 if stopped.backtracked else None
    events = go_on_streaming(prefixer, trace.task, stopped.text, len(trace.steps) + 1,
                             stopped.rule, answer_settings(settings, temperature=temperature),
                             target=trace.session.target)
    async for event in trace.go_on_thinking(stopped.reasoning_id, stopped.rule, events):
        yield event


def _take_sample(trace: TraceSession, kept: str, rule: SplitRule,
                 candidate: StoredCandidate, raw: str) -> tuple[int, Step]:
    """The new branch's reasoning, begun with steps 1..k-1 raw, and its Thought k: the
    sample taken (its candidate marked chosen in the same transaction as the step)."""
    store = trace.store
    reasoning = store.add_reasoning(trace.session.id, trace.spec.model, str(ReasoningKind.RAW),
                                    trace.model_branch_id, text=kept)
    step = store.add_step(
        trace.session.id, parent_id=candidate.parent_id, number=candidate.number,
        text=candidate.text, origin=StepOrigin.BACKTRACK,
        answer=trace.task.extract_answer(candidate.text), call_id=candidate.call_id,
        choice=candidate.choice, tokens=candidate.tokens, candidate_id=candidate.id,
        model_branch_id=trace.model_branch_id,
        view=ReasoningSlice(reasoning.id, str(rule), raw))
    trace.show_new_step(step)
    return reasoning.id, step



# -- `backtrack --mode thinking`: its result as a branch in the store


@dataclass(frozen=True)
class RecordedBacktrack:
    """What `backtrack --mode thinking` did to one row, to keep as a session: the row's
    reasoning (raw, whole) and its rule, the step resampled (0-based `location`), the
    samples, and (where one was chosen and went on) the new reasoning, whole, its answer's
    text and answer, and the call that wrote its rest."""

    task: str
    input: str
    target: str
    gold: int | None  # the row's labelled first mistake (None: none, or unlabelled)
    labelled: bool
    reasoning: str
    reasoning_kind: str
    rule: SplitRule
    answer: str | None
    location: int
    resample: ThinkingResample
    settings: PrefixSettings
    new_reasoning: str | None = None
    new_answer_text: str | None = None
    new_answer: str | None = None
    ending_call: llm.CallRecord | None = None


def record_backtrack(store: Store, spec: llm.ModelSpec, done: RecordedBacktrack) -> int:
    """`backtrack --mode thinking`'s result as a session of the store (source "backtrack", as
    the paper's traces' backtracking keeps): the row's trace as its first branch, a view of
    its reasoning stored whole; the samples of the step (the `candidates`, their calls); and
    the new branch from the chosen one, its reasoning stored whole too (re-cut by `S`). The
    app opens it as any session: the tree, compare and exports. The session's id."""
    trace = _row_session(store, spec, done)
    number = done.location + 1
    parent = trace.steps[number - 2].id if number > 1 else None
    stored = trace.store_samples(_as_resample(done.resample, done.settings), parent)
    chosen = done.resample.chosen
    if chosen is None or done.new_reasoning is None:
        return trace.id
    candidate = stored[chosen]
    kept = "".join(split_text(done.reasoning, done.rule)[: done.location])
    new_raw = split_text(done.new_reasoning, done.rule)
    reasoning_id, step = _take_sample(trace, kept, done.rule, candidate,
                                      done.resample.samples[chosen].raw)
    rest = new_raw[number:]
    for offset, raw in enumerate(rest):
        last = offset == len(rest) - 1
        step = store.add_step(
            trace.id, parent_id=step.id, number=number + 1 + offset, text=raw.strip(),
            origin=StepOrigin.THINKING, answer=done.new_answer if last else None,
            call=done.ending_call if last else None, model_branch_id=trace.model_branch_id,
            view=ReasoningSlice(reasoning_id, str(done.rule), raw))
    if done.ending_call is not None and not rest:
        store.record_call(trace.id, CallPurpose.STEP, done.ending_call)
    store.finish_reasoning(reasoning_id, text=done.new_reasoning, kind=str(ReasoningKind.RAW),
                           answer_text=done.new_answer_text, reasoning_tokens=None)
    return trace.id


def _row_session(store: Store, spec: llm.ModelSpec, done: RecordedBacktrack) -> TraceSession:
    """The batch's session of this row and model (found from an earlier run, or made), with
    the row's trace as its first branch: a view of its reasoning, stored whole."""
    digest = digest_of(done.task)
    steps = [raw.strip() for raw in split_text(done.reasoning, done.rule)]
    for session in store.sessions_of_question(task=done.task, input=done.input,
                                              model=spec.model):
        if session.source != SessionSource.BACKTRACK or session.task_digest != digest:
            continue
        trace = TraceSession(store, session, spec, store_work=on_the_loop)
        first = _first_branch(trace)
        if [step.text for step in first] == steps:
            trace.switch_to(first[-1].id)
            return trace
    trace = TraceSession.create(
        store, NewTrace(done.task, done.input, done.target or None,
                        gold_mistake_index=done.gold if done.labelled else None),
        spec, source=SessionSource.BACKTRACK, store_work=on_the_loop)
    reasoning = store.add_reasoning(trace.id, spec.model, done.reasoning_kind)
    store.finish_reasoning(reasoning.id, text=done.reasoning, kind=done.reasoning_kind,
                           answer_text=None, reasoning_tokens=None)
    rows = [(text, done.answer if index == len(steps) - 1 else None)
            for index, text in enumerate(steps)]
    # As `import` keeps a reasoning written elsewhere (annotation/export.py): thinking steps.
    store.add_view(trace.id, reasoning.id, str(done.rule), rows, str(StepOrigin.THINKING))
    trace.reload()
    if done.labelled and done.gold is not None and 0 <= done.gold < len(steps):
        trace.flag_mistake(done.gold + 1)
    elif done.labelled and steps:
        trace.mark_no_mistake()
    return trace


def _first_branch(trace: TraceSession) -> list[Step]:
    """The row's trace: the first branch, the steps loaded from the row."""
    path: list[Step] = []
    children = trace.tree.children(None)
    while children and children[0].origin == StepOrigin.THINKING:
        path.append(children[0])
        children = trace.tree.children(children[0].id)
    return path
