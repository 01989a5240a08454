"""Several models on one question, side by side (docs/DESIGN.md §15): a session whose model
branches (store v15) each hold one model's trace, generated at once.

Each model branch is worked through a TraceSession of its own (its steps stored on the
branch, its head and model the branch's), all sharing one step tree and one claim on the
session, so that every key of a single trace works on each and the columns stream together.
A column that fails says why in its own branch and leaves the others running.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing, suppress
from dataclasses import dataclass

from bbm_tui.core import llm
from bbm_tui.core.generation.stepper import StepEvent, StepperSettings
from bbm_tui.core.records import ModelBranchState, SessionSource
from bbm_tui.core.redact import redact_url
from bbm_tui.core.store import ModelBranch, Session, Step, Store, calls_latency, steps_calls
from bbm_tui.core.trace.session import (
    NewTrace,
    SessionClaim,
    StoreWork,
    TraceSession,
)
from bbm_tui.core.trace.tree import StoredTree
from bbm_tui.core.types import DEFAULT_ANNOTATOR

# The most models one session runs side by side (four columns fit 250 columns of terminal).
MAX_MODELS = 4


class TooManyModels(ValueError):
    """More models than a session runs side by side."""


@dataclass(frozen=True)
class BranchFigures:
    """What one model's branch on show cost: its thoughts, the calls that wrote them and the
    seconds they took, their tokens (and of the prompt's, those read from the provider's
    cache), and their cost: `cost` sums the calls whose price is known, `unpriced_calls` are
    not (a lower bound then; `known_cost` None when none is). `estimated`: some counts are
    estimates. A thought chosen among a call's samples counts its own tokens and no cost (its
    call's figures are for all of them)."""

    thoughts: int
    calls: int
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    cost: float
    unpriced_calls: int = 0
    cached_tokens: int = 0
    estimated: bool = False

    @classmethod
    def of(cls, steps: Sequence[Step]) -> BranchFigures:
        called = [step for step in steps if step.call_id is not None]
        own_cost = [step for step in called if not step.call_choices]
        # One call for many steps is one call, whose latency its last step holds.
        unpriced = {step.one_call or step.call_id for step in own_cost if step.cost is None}
        return cls(
            thoughts=len(steps),
            calls=len(steps_calls(steps)),
            latency_s=calls_latency(steps),
            prompt_tokens=sum(step.prompt_tokens or 0 for step in called),
            completion_tokens=sum(step.completion_tokens or 0 for step in called),
            cost=sum(step.cost or 0.0 for step in own_cost),
            unpriced_calls=len(unpriced),
            cached_tokens=sum(step.cached_tokens or 0 for step in called),
            estimated=any(step.usage_estimated for step in called),
        )

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    @property
    def known_cost(self) -> float | None:
        """The cost, or None when no call's price is known (never a made-up $0)."""
        return None if self.calls and self.unpriced_calls >= self.calls else self.cost


def first_difference(traces: Sequence[Sequence[str]]) -> int | None:
    """The first thought number (1-based) at which these traces part: where one's text
    differs from another's, or one has the thought and another does not. None: they are
    the same, thought for thought (or there are fewer than two)."""
    if len(traces) < 2:
        return None
    longest = max(len(trace) for trace in traces)
    for index in range(longest):
        texts = {trace[index] if index < len(trace) else None for trace in traces}
        if len(texts) > 1:
            return index + 1
    return None


class SideBySide:
    """One session's model branches, each a column: `columns[i]` is the TraceSession of the
    branch in column i. Model settings given here (`specs`) are kept in memory with their
    api bases whole; the store keeps them redacted, as for a session of one model."""

    def __init__(
        self,
        store: Store,
        session: Session,
        specs: Sequence[llm.ModelSpec | None] = (),
        *,
        annotator: str = DEFAULT_ANNOTATOR,
        store_work: StoreWork = asyncio.to_thread,
    ) -> None:
        self.store = store
        self.session = session
        self.annotator = annotator
        self.store_work = store_work
        self.claim = SessionClaim(store, session.id, store_work)
        self.tree = StoredTree(store, session.id)
        self.columns: list[TraceSession] = []
        for position, branch in enumerate(store.model_branches(session.id)):
            spec = specs[position] if position < len(specs) else None
            self.columns.append(self._column(branch, spec))
        # Made by `create` in this process: left with nothing done, it is deleted.
        self.created_now = False

    def _column(self, branch: ModelBranch, spec: llm.ModelSpec | None) -> TraceSession:
        return TraceSession(self.store, self.session, spec, self.annotator, self.store_work,
                            model_branch=branch, claim=self.claim, tree=self.tree)

    # -- opening

    @classmethod
    def create(
        cls,
        store: Store,
        trace: NewTrace,
        specs: Sequence[llm.ModelSpec],
        *,
        name: str | None = None,
        source: SessionSource = SessionSource.APP,
        store_work: StoreWork = asyncio.to_thread,
    ) -> SideBySide:
        """A new session of `trace`'s question with a model branch for each of `specs` (two
        to MAX_MODELS), in their order."""
        _check_count(len(specs))
        first = TraceSession.create(store, trace, specs[0], name=name, source=source,
                                    store_work=store_work)
        store.add_model_branches(first.id, [_stored(spec) for spec in specs[1:]])
        made = cls(store, store.session(first.id), specs, store_work=store_work)
        made.created_now = True
        return made

    @classmethod
    def load(cls, store: Store, session_id: int,
             specs: Sequence[llm.ModelSpec | None] = ()) -> SideBySide:
        return cls(store, store.session(session_id), specs)

    @classmethod
    def load_resumed(cls, store: Store, session_id: int,
                     configured: llm.ModelSpec) -> SideBySide:
        """A session of several models reopened, each column going on with today's settings
        for its model where they are the configured model's (as a session of one model
        does)."""
        race = cls.load(store, session_id)
        for column in race.columns:
            branch = column.model_branch
            if branch is not None and branch.model == configured.model:
                column.use_model(llm.ModelSpec(branch.model, configured.api_base,
                                               configured.mode))
        return race

    @classmethod
    def from_trace(cls, trace: TraceSession, spec: llm.ModelSpec) -> SideBySide:
        """A session of one model given a second (`m` on an open trace): its own trace
        becomes the first column, with the model it generates with now, and `spec` the
        second."""
        _check_count(2)
        trace.store.add_model_branches(trace.id, [_stored(spec)])
        made = cls(trace.store, trace.store.session(trace.id), [trace.spec, spec],
                   annotator=trace.annotator, store_work=trace.store_work)
        made.created_now = trace.created_now
        return made

    def add_model(self, spec: llm.ModelSpec) -> TraceSession:
        """One more model in the next column (nothing generated yet)."""
        _check_count(len(self.columns) + 1)
        branches = self.store.add_model_branches(self.session.id, [_stored(spec)])
        column = self._column(branches[-1], spec)
        self.columns.append(column)
        return column

    # -- what it holds

    @property
    def id(self) -> int:
        return self.session.id

    @property
    def models(self) -> list[str]:
        return [column.spec.model for column in self.columns]

    def resuming(self) -> list[TraceSession]:
        """The columns that were streaming when the session was last left (a kill, a quit):
        they go on when it is opened again."""
        return [column for column in self.columns
                if column.state == ModelBranchState.STREAMING and not column.finished]

    def parting(self) -> int | None:
        """The first thought at which the columns' branches on show differ."""
        return first_difference([column.texts for column in self.columns])

    def figures(self) -> list[BranchFigures]:
        return [BranchFigures.of(column.steps) for column in self.columns]

    # -- generating

    async def race(
        self,
        *,
        settings: StepperSettings | None = None,
        columns: Sequence[int] | None = None,
        max_new_steps: int | None = None,
    ) -> AsyncIterator[tuple[int, StepEvent]]:
        """Generate every column (or those given) at once: each event with its column, as
        it comes. A column that fails ends with its StepFailed and the others go on; a
        fault that is no column's own (the session busy in another window) stops them all."""
        chosen = list(range(len(self.columns))) if columns is None else list(columns)
        queue: asyncio.Queue[tuple[int, StepEvent] | int] = asyncio.Queue()

        async def one(position: int) -> None:
            try:
                column = self.columns[position]
                async with aclosing(column.generate(settings=settings,
                                                    max_new_steps=max_new_steps)) as events:
                    async for event in events:
                        await queue.put((position, event))
            finally:
                queue.put_nowait(position)  # this column is over

        tasks = [asyncio.ensure_future(one(position)) for position in chosen]
        try:
            running = len(tasks)
            while running:
                item = await queue.get()
                if isinstance(item, int):
                    running -= 1
                    over = tasks[chosen.index(item)]
                    error = over.exception() if over.done() and not over.cancelled() else None
                    if error is not None:
                        raise error
                    continue
                yield item
        finally:
            for task in tasks:
                task.cancel()
            with suppress(asyncio.CancelledError):
                await asyncio.gather(*tasks, return_exceptions=True)


def _check_count(count: int) -> None:
    if count > MAX_MODELS:
        raise TooManyModels(f"at most {MAX_MODELS} models side by side")
    if count < 2:
        raise TooManyModels("side by side needs at least two models")


def _stored(spec: llm.ModelSpec) -> tuple[str, str | None, str]:
    return spec.model, redact_url(spec.api_base), spec.mode
