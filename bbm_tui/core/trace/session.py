"""A trace being worked on: the store's rows plus the stepper, shared by the app and `run`.

`generate()` passes the stepper's events through and commits each finished step before it
hands the event on, so whoever shows the event can rely on the step being saved. In the app,
store calls that may wait on the disk run in a thread, never on the event loop; the headless
batches run them on their loop (`on_the_loop`), where nothing waits for a frame.
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    aclosing,
    asynccontextmanager,
    suppress,
)
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, TypeVar

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import (
    SAMPLES,
    OnSample,
    Resample,
    backtracking_model,
    resample_step,
)
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.generation.stepper import (
    OneCallEnded,
    StepEvent,
    StepFailed,
    StepFinished,
    StepperSettings,
    TraceFinished,
    run_steps,
)
from bbm_tui.core.generation.thinking import ReasoningFinished, run_thinking, strip_view
from bbm_tui.core.llm.capabilities import reasoning_is_summary
from bbm_tui.core.records import (
    CallPurpose,
    ModelBranchState,
    ReasoningKind,
    SessionSource,
    TraceEnd,
)
from bbm_tui.core.redact import REDACTED, redact_data, redact_url
from bbm_tui.core.store import (
    BUSY_TIMEOUT_MS,
    CLAIM_HEARTBEAT_S,
    Label,
    ModelBranch,
    Reasoning,
    ReasoningSlice,
    Session,
    Step,
    Store,
    StoredCandidate,
    StoreError,
    TaskDefinition,
    Totals,
    WriteLockBusy,
    first_write_without_waiting,
)
from bbm_tui.core.tasks import Task, UnknownTaskError, get_task
from bbm_tui.core.tasks.files import task_definition, task_digest, task_from_definition
from bbm_tui.core.trace.branches import BranchOrigin, branch_origin, one_sampling
from bbm_tui.core.trace.tree import Branch, StoredTree
from bbm_tui.core.types import DEFAULT_ANNOTATOR, RECORDED_MODEL, SplitRule, StepOrigin

T = TypeVar("T")


class ReadFromText(Enum):
    """A recorded trace's answer where its row gives none: what the answer regex reads."""

    FROM_THE_TEXT = "from the text"


FROM_THE_TEXT = ReadFromText.FROM_THE_TEXT

# How a session runs its store calls while it generates: `asyncio.to_thread` (the app) or
# `on_the_loop` (the batches).
StoreWork = Callable[..., Awaitable[Any]]


# A batch's store work that found another process's write under way is tried again after
# this pause (growing to the longest): another process's transactions last a millisecond or
# less, and an event loop's timers are good to a millisecond.
FIRST_RETRY_S = 0.001
LONGEST_RETRY_S = 0.02


async def on_the_loop(function: Callable[..., T], /, *args: Any) -> T:
    """Store work run right where it is asked for. For the headless batches: a commit takes a
    fraction of a millisecond, while its trip to a thread and back (and the wait for the GIL
    and the store's lock there) kept each backtracked trace out of its next call longer than
    the call's own CPU (bench/backtrack_concurrency.py).

    Its first write does not wait for the store's write lock while another process holds it
    (another `--processes` child): SQLite would wait inside the call, holding the loop and
    every trace on it (35-50 times a child in that benchmark). The work is begun again a
    moment later instead, while the loop goes on; nothing of it was written, as only its
    first `BEGIN` refuses to wait (one that has written waits at its next, as every write
    does). So a work handed here does nothing but read before its first write. Cancelled
    while it waits, the work is done at once, waiting as every write does, and the
    cancellation goes on: work handed over is done, as it would be in a thread."""
    pause = FIRST_RETRY_S
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while time.monotonic() < deadline:
        try:
            with first_write_without_waiting():
                return function(*args)
        except WriteLockBusy:
            pass
        try:
            await asyncio.sleep(pause)
        except asyncio.CancelledError:
            function(*args)
            raise
        pause = min(pause * 1.5, LONGEST_RETRY_S)
    return function(*args)  # still held after the busy timeout: wait as every write does


@dataclass(frozen=True)
class NewTrace:
    """What a new session starts from."""

    task: str
    input: str
    target: str | None = None
    dataset_index: int | None = None
    gold_mistake_index: int | None = None


@dataclass(frozen=True)
class SamplesReady:
    """Backtracking sampled Thought `number` and stored every sample (`stored`, in the order
    of `resample.samples.candidates`); `resample.chosen` is its choice, None: no sample
    differs from the original, and the trace stays as it was."""

    number: int
    resample: Resample
    stored: list[StoredCandidate]


@dataclass(frozen=True)
class BranchLabel:
    """A branch (its steps from the root) and the session annotator's label in force on
    it: `mistake_index` 0-based on the branch, None for "no mistake"."""

    steps: Sequence[Step]
    label: Label
    mistake_index: int | None
    on_show: bool


@dataclass(frozen=True)
class BranchMade:
    """A new version of Thought `step.number` is saved and shown: a new branch, the old one
    kept in the tree. Generation at temperature 0 follows."""

    step: Step


def stored_definition(task: Task) -> TaskDefinition | None:
    """What a session of `task` keeps of it: for a task of one's own, its whole definition
    and the digest of it; nothing for the paper's five (they ship with the app)."""
    if task.is_paper:
        return None
    # Redacted as every stored text is: a prompt file may hold a key (issue 33); the digest is
    # the task's own, so an unchanged file is still recognised.
    text = json.dumps(redact_data(task_definition(task)), ensure_ascii=False, sort_keys=True,
                      allow_nan=False)
    return TaskDefinition(task_digest(task), text)


def digest_of(task: Task | str) -> str | None:
    """The digest a session of this task is made with (None: one of the paper's five)."""
    found = get_task(task)
    return None if found.is_paper else task_digest(found)


def session_task(store: Store, session: Session) -> tuple[Task, str | None]:
    """The task a session works on, and what has changed since it was made (None: nothing).
    A task of one's own is the one the session stored, whatever its file says now: the
    session goes on with the prompt it was made with; a file that changed, or is no longer
    loaded, is said, not hidden."""
    if session.task_digest is None:
        return get_task(session.task), None
    try:
        current: Task | None = get_task(session.task)
    except UnknownTaskError:
        current = None
    text = store.task_definition(session.task_digest)
    try:
        stored = task_from_definition(json.loads(text)) if text is not None else None
    except ValueError:
        stored = None
    if stored is None:
        if current is None:
            raise UnknownTaskError(session.task)
        return current, (f"The task {session.task!r} this session was made with is not in the "
                         "store (was it edited?); it uses the task file as it is now.")
    where = f"Its task file ({stored.path})" if stored.path else "Its task file"
    if current is None:
        return stored, (f"{where} is not loaded now; the session goes on with the task "
                        f"{session.task!r} as it was made.")
    if task_digest(current) != session.task_digest:
        return stored, (f"{where} has changed since this session was made; the session goes "
                        "on with the prompt it was made with (a new session uses the file "
                        "as it is now).")
    return current, None


@dataclass(frozen=True)
class StoppedBranch:
    """A thinking branch that stopped before its answer: its own reasoning (not whole), which
    holds exactly its steps' raw slices so far, its rule, and the model that wrote it.
    `backtracked`: `b` then `enter` made it (it goes on greedily, as the paper's
    backtracking does); else a plain thinking call's (it goes on at the trace's own
    temperature, with its own model only)."""

    reasoning_id: int
    text: str
    rule: SplitRule
    backtracked: bool = True
    model: str | None = None


class OtherModelsBranch(ValueError):
    """A branch of another model of the session (side by side), asked to be shown in this
    model's column: `model_branch_id` is its model branch (None: no model's), `leaf_id` its
    end."""

    def __init__(self, model_branch_id: int | None, leaf_id: int) -> None:
        super().__init__("that branch is another model's: its own column shows it")
        self.model_branch_id = model_branch_id
        self.leaf_id = leaf_id


class SessionClaim:
    """A process's claim to generate a session (store v13), shared by whatever generates it
    here: the columns of several models side by side stream at once, and the claim is taken
    when the first starts, renewed every CLAIM_HEARTBEAT_S while any runs, and released when
    the last is over. Another window or process is another owner, told the session is busy."""

    def __init__(self, store: Store, session_id: int, store_work: StoreWork) -> None:
        self.store = store
        self.session_id = session_id
        self.store_work = store_work
        self.owner = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(6)}"
        self._holders = 0
        self._heartbeat: asyncio.Future[None] | None = None
        self._changing = asyncio.Lock()
        # Claimed by `take_now` and not yet held: the next `held()` holds that claim.
        self._taken = False

    def take_now(self) -> None:
        """Claim the session here and now, joining the caller's transaction (the one that
        makes the session, say): the next `held()` holds this claim instead of taking it in
        a commit of its own (a turn at the store's write lock, which --processes' children
        queue for). Raises SessionBusy as `held()` does."""
        self.store.claim_session(self.session_id, self.owner)
        self._taken = True

    @asynccontextmanager
    async def held(self) -> AsyncIterator[None]:
        """The session claimed while the block runs. Raises SessionBusy (nothing done) while
        another window or process holds it: two windows stored the same step twice."""
        async with self._changing:
            if self._holders == 0:
                if self._taken:
                    self._taken = False
                else:
                    await self.store_work(self.store.claim_session, self.session_id,
                                          self.owner)
                self._heartbeat = asyncio.ensure_future(self._renew())
            self._holders += 1
        try:
            yield
        finally:
            release = asyncio.ensure_future(self._let_go())
            try:
                await asyncio.shield(release)
            except asyncio.CancelledError:
                await release
                raise

    async def _let_go(self) -> None:
        async with self._changing:
            self._holders -= 1
            if self._holders > 0:
                return
            if self._heartbeat is not None:
                self._heartbeat.cancel()
                await asyncio.gather(self._heartbeat, return_exceptions=True)
                self._heartbeat = None
            with suppress(StoreError):  # a session deleted meanwhile has no claim to drop
                await self.store_work(self.store.release_claim, self.session_id, self.owner)

    async def _renew(self) -> None:
        """Keep the claim alive while a step takes long (a model thinking for a minute). One
        that lapsed and was taken meanwhile is left to its new holder (the store stores no
        step twice)."""
        with suppress(StoreError):
            while True:
                await asyncio.sleep(CLAIM_HEARTBEAT_S)
                await self.store_work(self.store.claim_session, self.session_id, self.owner)


class TraceSession:
    """`spec` is the model the session generates with now. It lives in memory only: the store
    keeps the api base redacted (a password or key in it is never written), so a session
    opened from the store calls its stored model until `use_model()` says otherwise. `task`
    is the task it works on as it was made (session_task), `task_change` what has changed in
    its file since (None: nothing).

    In a session of several models side by side, one TraceSession is one model's branch
    (`model_branch`, store v15): its steps are stored on that branch, its head is the
    branch's, its model the branch's, and its generating state is kept there; the columns of
    one session share one `claim`."""

    def __init__(
        self,
        store: Store,
        session: Session,
        spec: llm.ModelSpec | None = None,
        annotator: str = DEFAULT_ANNOTATOR,
        store_work: StoreWork = asyncio.to_thread,
        *,
        model_branch: ModelBranch | None = None,
        claim: SessionClaim | None = None,
        tree: StoredTree | None = None,
    ) -> None:
        self.store = store
        self.store_work = store_work
        self.session = session
        self.annotator = annotator
        self.model_branch = model_branch
        # Made by `create` in this process (not loaded): left with nothing done in it, it is
        # deleted rather than left behind in the sessions list.
        self.created_now = False
        # Every step on every branch, in the store; `steps` is the branch on show, from the
        # root to the head (its ids, each step read when asked for), and new steps hang
        # under the head.
        self.tree = tree if tree is not None else StoredTree(store, session.id)
        self.steps: Branch = self.tree.path(self._stored_head())
        self.label: Label | None = self._branch_label()
        # The branch on show, if a backtracked thinking branch whose going on stopped before
        # its answer (what `r` goes on from): learnt from the store when the branch on show
        # is loaded or changed, kept in step as its steps are saved, so that a key asks
        # nothing (a query and a trip to a thread a key before, and on a branch of 10^5
        # steps a read of every one).
        self.stopped: StoppedBranch | None = self._find_stopped()
        self._spec = spec or (_branch_spec(model_branch) if model_branch is not None
                              else _stored_spec(session))
        self.task, self.task_change = session_task(store, session)
        # Who this is when it claims the session to generate it (store v13): another window
        # or process is another owner, and is told the session is busy.
        self.claim = claim or SessionClaim(store, session.id, store_work)
        # Thinking mode: the reasoning the call now streaming writes into, and its rule.
        self._reasoning_id: int | None = None
        self._split = SplitRule.PARAGRAPH

    @property
    def owner(self) -> str:
        return self.claim.owner

    @property
    def model_branch_id(self) -> int | None:
        return self.model_branch.id if self.model_branch is not None else None

    def _stored_head(self) -> int | None:
        """Where the branch on show ends, as stored: the model branch's, else the session's."""
        if self.model_branch is not None:
            return self.model_branch.head_step_id
        return self.session.head_step_id

    # -- opening

    @classmethod
    def create(
        cls,
        store: Store,
        trace: NewTrace,
        spec: llm.ModelSpec,
        *,
        name: str | None = None,
        source: SessionSource = SessionSource.APP,
        store_work: StoreWork = asyncio.to_thread,
        run_key: str | None = None,
    ) -> TraceSession:
        session = store.create_session(
            task=trace.task,
            task_definition=stored_definition(get_task(trace.task)),
            input=trace.input,
            target=trace.target,
            dataset_index=trace.dataset_index,
            gold_mistake_index=trace.gold_mistake_index,
            model=spec.model,
            api_base=redact_url(spec.api_base),
            mode=spec.mode,
            name=name,
            source=source,
            run_key=run_key,
        )
        made = cls(store, session, spec, store_work=store_work)
        made.created_now = True
        return made

    @classmethod
    def load(cls, store: Store, session_id: int) -> TraceSession:
        return cls(store, store.session(session_id))

    def use_model(self, spec: llm.ModelSpec) -> None:
        """Generate with `spec` from now on (a corrected api base or mode wins over the stored
        one); the session records it when it next generates."""
        self._spec = spec

    def _model_unrecorded(self) -> bool:
        """The session row (or the model branch's) does not say yet what it is generated
        with."""
        row = self.model_branch or self.session
        return (row.model, row.api_base, row.mode) != self._wanted_model()

    def _wanted_model(self) -> tuple[str, str | None, str]:
        return (self._spec.model, redact_url(self._spec.api_base), self._spec.mode)

    def _record_model(self) -> None:
        """The session row (or the model branch's) says what it is generated with (its api
        base redacted)."""
        if self._model_unrecorded():
            model, api_base, mode = self._wanted_model()
            if self.model_branch is not None:
                self.model_branch = self.store.update_model_branch_model(
                    self.model_branch.id, model=model, api_base=api_base, mode=mode)
                return
            self.session = self.store.update_session_model(
                self.session.id, model=model, api_base=api_base, mode=mode)

    def reload(self) -> None:
        self.session = self.store.session(self.session.id)
        if self.model_branch is not None:
            self.model_branch = self.store.model_branch(self.model_branch.id)
        self.steps = self.tree.path(self._stored_head())
        self.label = self._branch_label()
        self.stopped = self._find_stopped()

    def labelled_branches(self) -> list[BranchLabel]:
        """Every branch with a label of the annotator's in force, the branch on show first,
        then the others oldest first: each branch is labelled by the newest label whose
        leaf is on it, as the app shows it. A flag on a step off the branch labels it not."""
        history = self.store.label_history(self.session.id, self.annotator)
        if not history:
            return []
        shown = self.steps
        # The other branches: those not through the head (one through it is the branch on
        # show, or goes on from it).
        others = [self.tree.path(leaf.id) for leaf in self.tree.leaves()]
        branches = [shown] + [path for path in others
                              if not shown or shown.ids[-1] not in path.ids]
        found = []
        for steps in branches:
            ids = steps.ids
            label = next((label for label in history if label.leaf_step_id in ids
                          or (label.leaf_step_id is None and not steps)), None)
            if label is None:
                continue
            index = label.mistake_index(ids)
            if index is None and not label.no_mistake:
                continue
            found.append(BranchLabel(steps, label, index, on_show=steps is shown))
        return found

    def _branch_label(self) -> Label | None:
        """The annotator's verdict on the branch on show: labels stay with the branch they
        were made on (the leaf they saw is on it)."""
        on_branch = self.steps.ids
        for label in self.store.label_history(self.session.id, self.annotator):
            if label.leaf_step_id in on_branch or (label.leaf_step_id is None
                                                   and not self.steps):
                return label
        return None

    # -- branches

    @property
    def head_id(self) -> int | None:
        return self.steps.ids[-1] if self.steps else None

    def alternatives(self, number: int) -> list[Step]:
        """Thought `number` of the branch on show and its siblings: every version of it (on a
        model branch, its own: another model's first thought is not a version of it)."""
        versions = self.tree.siblings(self.steps[number - 1].id)
        if self.model_branch is None:
            return versions
        return [step for step in versions if step.model_branch_id == self.model_branch.id]

    def switch_to(self, step_id: int) -> None:
        """Show the newest branch through `step_id` (an alternative at some thought). On a
        model branch, only its own: another model's branch is in that model's column
        (OtherModelsBranch)."""
        leaf = self.tree.newest_leaf_under(step_id)
        if self.model_branch is not None and leaf.model_branch_id != self.model_branch.id:
            raise OtherModelsBranch(leaf.model_branch_id, leaf.id)
        self._set_head(leaf.id)

    def fork_at(self, number: int) -> None:
        """Make the next step a new version of Thought `number`: the head moves to the thought
        before it; the old branch stays in the tree."""
        self._set_head(self.steps[number - 2].id if number > 1 else None)

    def _set_head(self, step_id: int | None) -> None:
        if self.model_branch is not None:
            self.model_branch = self.store.set_model_branch_head(self.model_branch.id, step_id)
        else:
            self.store.set_head(self.session.id, step_id)
        self.session = self.store.session(self.session.id)
        self.steps = self.tree.path(step_id)
        self.label = self._branch_label()
        self.stopped = self._find_stopped()

    # -- what it holds

    @property
    def id(self) -> int:
        return self.session.id

    @property
    def spec(self) -> llm.ModelSpec:
        return self._spec

    @property
    def needs_api_base(self) -> bool:
        """The session's api base held a secret, which was not stored: it cannot be called
        until the api base is given again (`use_model`)."""
        return bool(self._spec.api_base) and REDACTED in (self._spec.api_base or "")

    @property
    def texts(self) -> list[str]:
        return [step.text for step in self.steps]

    @property
    def answer(self) -> str | None:
        return self.steps[-1].answer if self.steps else None

    @property
    def finished(self) -> bool:
        return self.answer is not None

    @property
    def correct(self) -> bool | None:
        if self.answer is None or self.session.target is None:
            return None
        return self.task.is_correct(self.answer, self.session.target)

    @property
    def mistake_number(self) -> int | None:
        """1-based number of the flagged first mistake on the branch on show, if any."""
        if self.label is None:
            return None
        return self.place_of(self.label.mistake_step_id)

    def place_of(self, step_id: int | None) -> int | None:
        """The number of step `step_id` on the branch on show (None: not on it). A step's
        number is its place on its path, so it is found at once, without a walk of the
        branch (10^5 steps), which every key that redrew a status made."""
        if step_id is None or step_id not in self.tree:
            return None
        number = self.tree.step(step_id).number
        if 1 <= number <= len(self.steps) and self.steps.ids[number - 1] == step_id:
            return number
        return None

    @property
    def no_mistake(self) -> bool:
        return self.label is not None and self.label.no_mistake

    def totals(self) -> Totals:
        return self.store.totals(self.session.id)

    # -- generating

    async def generate(
        self,
        *,
        max_new_steps: int | None = None,
        settings: StepperSettings | None = None,
        spec: llm.ModelSpec | None = None,
        source: AsyncGenerator[StepEvent | ReasoningFinished, None] | None = None,
    ) -> AsyncGenerator[StepEvent, None]:
        """The model's next steps, stored as they come and handed on; `source`: events to
        store instead of the model's own (a thinking branch going on from a prefix,
        go_on_thinking)."""
        if spec is not None:
            self.use_model(spec)
        if self.needs_api_base:
            yield StepFailed(len(self.steps) + 1, llm.LLMError(
                "bad_request",
                # The instruction first: a narrow status line cuts the end.
                f"give the api base again (--api-base URL): session {self.id}'s held a "
                f"password or key, which bbm-tui never saves ({self._spec.api_base}, model "
                f"{self._spec.model})"))
            return
        last: StepEvent | None = None
        async with self.claimed():  # SessionBusy: another window is generating it
            if self._model_unrecorded():  # usually not: no trip to a thread for nothing
                await self.store_work(self._record_model)
            await self._keep_state(ModelBranchState.STREAMING)
            async with aclosing(source or self._events(max_new_steps, settings)) as events:
                async for event in events:
                    if isinstance(event, ReasoningFinished):  # kept, not handed on
                        await self._store_shielded(self._finish_reasoning, event)
                        continue
                    if isinstance(event, StepFinished):
                        # A cancelled run still waits for the step it is saving, so that the
                        # session and the store agree when it is over (the next run neither
                        # loses nor repeats the step).
                        commit = asyncio.ensure_future(self.store_work(self._commit, event))
                        try:
                            await asyncio.shield(commit)
                        except asyncio.CancelledError:
                            await commit
                            raise
                    if isinstance(event, OneCallEnded) and event.unkept is not None:
                        # What one call cost beyond its steps is a call too (no step of its
                        # own): the session's totals count every request made.
                        await self.store_work(self.store.record_call, self.session.id,
                                              CallPurpose.STEP, event.unkept)
                    if isinstance(event, StepFailed | TraceFinished):
                        last = event  # the last event: the claim goes before it is handed on
                        await self._keep_state(*_state_after(event))
                        break
                    yield event
        # Released first: a caller stops reading at this event, and the claim must not wait
        # for this generator to be collected.
        if last is not None:
            yield last

    def claimed(self) -> AbstractAsyncContextManager[None]:
        """The session claimed for generating while the block runs (store v13; SessionClaim),
        renewed every CLAIM_HEARTBEAT_S and released after. Raises SessionBusy (nothing done)
        while another window or process holds it: two windows stored the same step twice."""
        return self.claim.held()

    async def _keep_state(self, state: ModelBranchState, error: str | None = None) -> None:
        """A model branch keeps how its generating stands (a session reopened resumes the
        ones that were streaming); a session of one model has nothing to keep."""
        if self.model_branch is None:
            return
        self.model_branch = await self.store_work(
            self.store.set_model_branch_state, self.model_branch.id, state, error)

    def mark_stopped(self) -> None:
        """The person stopped this model branch's generating (esc): it does not resume."""
        if self.model_branch is not None:
            self.model_branch = self.store.set_model_branch_state(
                self.model_branch.id, ModelBranchState.STOPPED)

    @property
    def state(self) -> ModelBranchState | None:
        """How the model branch's generating stands, as stored (None: one model's session)."""
        if self.model_branch is None:
            return None
        return ModelBranchState(self.model_branch.state)

    def _events(self, max_new_steps: int | None, settings: StepperSettings | None
                ) -> AsyncGenerator[StepEvent | ReasoningFinished, None]:
        """The stepper's events, or in thinking mode the thinking generator's (one call for
        the whole trace, generation/thinking.py)."""
        if self._spec.mode == "thinking":
            return self._thinking_events(settings or StepperSettings())
        return run_steps(self.task, self.session.input, self._spec, self.texts,
                         target=self.session.target, max_new_steps=max_new_steps,
                         settings=settings)

    async def _thinking_events(self, settings: StepperSettings
                               ) -> AsyncGenerator[StepEvent | ReasoningFinished, None]:
        if self.finished:
            yield TraceFinished(TraceEnd.ANSWER, self.texts, self.answer)
            return
        if self.steps:
            # A thinking call cannot go on from a prefix here: it starts again, on a branch
            # of its own; the steps of the call that stopped stay in the tree.
            await self.store_work(self._set_head, None)
        self._reasoning_id = None
        self._split = SplitRule(settings.split)
        async with aclosing(run_thinking(self.task, self.session.input, self._spec,
                                         target=self.session.target,
                                         settings=settings)) as events:
            async for event in events:
                yield event

    async def _store_shielded(self, work: Callable[..., Any], *args: Any) -> Any:
        """Store work that a cancelled run still waits for (the session and the store agree
        when it is over)."""
        commit = asyncio.ensure_future(self.store_work(work, *args))
        try:
            return await asyncio.shield(commit)
        except asyncio.CancelledError:
            await commit
            raise

    def _commit(self, event: StepFinished) -> Step:
        parent = self.head_id
        view = None
        if event.raw is not None:
            view = ReasoningSlice(self._reasoning_for_commit(), str(self._split), event.raw)
        step = self.store.add_step(
            self.session.id,
            parent_id=parent,
            number=event.number,
            text=event.text,
            origin=StepOrigin.MODEL if view is None else StepOrigin.THINKING,
            answer=event.answer,
            truncated=event.truncated,
            call=event.call,
            model_branch_id=self.model_branch_id,
            view=view,
        )
        self._append(step)
        stopped = self.stopped
        if stopped is not None and view is not None and view.reasoning_id == stopped.reasoning_id:
            # Going on from where it stopped: its reasoning holds this step's slice too (the
            # store appends it), until the answer ends it.
            self.stopped = None if step.answer is not None else replace(
                stopped, text=stopped.text + (view.raw or ""))
        elif view is not None and event.number == 1 and step.answer is None \
                and not reasoning_is_summary(self._spec):
            # A thinking call's first thought: stopped from now on, it goes on from here.
            self.stopped = StoppedBranch(view.reasoning_id, view.raw or "", self._split,
                                         backtracked=False, model=self._spec.model)
        return step

    def _reasoning_for_commit(self) -> int:
        """The reasoning the thinking call now streaming writes into (begun at its first
        step, with the kind its provider sends: a summary is said so from the start)."""
        if self._reasoning_id is None:
            kind = ReasoningKind.SUMMARY if reasoning_is_summary(self._spec) \
                else ReasoningKind.RAW
            self._reasoning_id = self.store.add_reasoning(
                self.session.id, self._spec.model, str(kind), self.model_branch_id).id
        return self._reasoning_id

    def _finish_reasoning(self, event: ReasoningFinished) -> None:
        reasoning_id = self._reasoning_for_commit()
        self.store.finish_reasoning(
            reasoning_id, text=event.text, kind=str(event.kind), answer_text=event.answer_text,
            reasoning_tokens=event.reasoning_tokens, opaque=event.opaque)
        if self.stopped is not None and self.stopped.reasoning_id == reasoning_id:
            self.stopped = None  # whole now: nothing to go on from

    # -- thinking traces: the reasoning a branch is a view of, and other views of it

    def _find_stopped(self) -> StoppedBranch | None:
        """The branch on show, if its thinking call, or its going on after `b` then `enter`,
        stopped (esc, a failure) before the answer with its raw reasoning so far stored; None
        for any other branch. Reads the store: `stopped` holds the answer. A trace that is no
        thinking trace is told by its first step (a branch of 10^5 steps is not read
        through)."""
        steps = self.steps
        if not steps or steps[0].origin != StepOrigin.THINKING or self.finished:
            return None
        rule = self.split_rule()
        reasoning = self.reasoning()
        if rule is None or reasoning is None or reasoning.complete \
                or reasoning.kind != str(ReasoningKind.RAW):
            return None
        # The branch's own reasoning: begun when its sample was taken (a branch backtracked
        # again from one of its steps has a reasoning of its own), or by its call's first
        # thought.
        backtracked = [step for step in steps if step.origin == StepOrigin.BACKTRACK]
        own = backtracked[-1] if backtracked else steps[0]
        if self.store.step_view(own.id)[0] != reasoning.id:
            return None
        return StoppedBranch(reasoning.id, reasoning.text, rule, backtracked=bool(backtracked),
                             model=reasoning.model)

    def reasoning(self) -> Reasoning | None:
        """The reasoning the branch on show was cut from (None: not a thinking trace). A
        branch backtracked from Thought k shares steps 1..k-1 with the one it came from: its
        own reasoning, whole, is its last step's."""
        reasoning_id, _split = self._view()
        return None if reasoning_id is None else self.store.reasoning(reasoning_id)

    def split_rule(self) -> SplitRule | None:
        """The rule the branch on show was cut by (None: not a thinking trace)."""
        _reasoning_id, split = self._view()
        return None if split is None else SplitRule(split)

    def _view(self) -> tuple[int | None, str | None]:
        if not self.steps or self.steps[0].origin != StepOrigin.THINKING:
            return None, None
        found = self.store.step_view(self.steps[-1].id)
        return found if found[0] is not None else self.store.step_view(self.steps[0].id)

    async def go_on_thinking(
        self, reasoning_id: int, rule: SplitRule,
        events: AsyncGenerator[StepEvent | ReasoningFinished, None],
    ) -> AsyncGenerator[StepEvent, None]:
        """A thinking branch going on from a prefix of its reasoning (trace/thinking_backtrack.py):
        `events` (as the thinking mode's) stored into reasoning `reasoning_id`, cut by `rule`,
        as generate stores a thinking call's."""
        self._reasoning_id, self._split = reasoning_id, rule
        async with aclosing(self.generate(source=events)) as stored:
            async for event in stored:
                yield event

    def recut(self, rule: SplitRule) -> bool:
        """Show the branch's reasoning cut by `rule`: a new view of the same text (a branch
        of its own, no call), or the view already made by that rule. False: nothing to cut
        (not a thinking trace, or its reasoning not stored whole yet)."""
        reasoning = self.reasoning()
        if reasoning is None or not reasoning.complete:
            return False
        for leaf in self.tree.leaves():
            path = self.tree.path(leaf.id)
            if path and path[0].origin == StepOrigin.THINKING and \
                    self.store.step_view(path[-1].id) == (reasoning.id, str(rule)):
                self._set_head(leaf.id)
                return True
        steps = strip_view(split_text(reasoning.text, rule))
        if not steps:
            return False
        answer = self.steps[-1].answer
        rows = [(text, answer if index == len(steps) - 1 else None)
                for index, text in enumerate(steps)]
        ids = self.store.add_view(self.session.id, reasoning.id, str(rule), rows,
                                  str(StepOrigin.THINKING), self.model_branch_id)
        self._set_head(ids[-1])
        return True

    def load_recorded(self, steps: list[str],
                      answer: str | ReadFromText | None = FROM_THE_TEXT) -> None:
        """Put a recorded trace (e.g. the dataset's) on the branch, to label it; `answer`:
        the row's own, kept as given on its last step (else what the task's answer regex
        reads)."""
        self.store.add_steps(self.session.id, recorded_steps(self.task, steps, answer),
                             origin=StepOrigin.DATASET)
        self.reload()

    def append_typed(self, text: str, origin: StepOrigin = StepOrigin.TYPED) -> Step:
        """A step the person wrote (or rewrote: `StepOrigin.EDIT`, after `fork_at`)."""
        step = self.store.add_step(
            self.session.id,
            parent_id=self.head_id,
            number=len(self.steps) + 1,
            text=text,
            origin=origin,
            answer=self.task.extract_answer(text),
            model_branch_id=self.model_branch_id,
        )
        self._append(step)
        self.stopped = self._find_stopped()
        return step

    def _append(self, step: Step) -> None:
        """A step saved below the head, on show. The tree holds it already where another
        window stored the same step at this place first (the store keeps it once): a child
        of the head all the same."""
        if step.parent_id == self.head_id and step.number == len(self.steps) + 1:
            self.steps.append(step)
        else:
            self.steps = self.tree.path(step.id)

    # -- new branches: backtracking, another candidate, a rewritten thought. Each adds a
    #    version of Thought k beside the old one (the old branch stays in the tree, with its
    #    labels and finder runs) and continues from it at temperature 0.

    async def backtrack(
        self, number: int, *, settings: StepperSettings | None = None, n: int = SAMPLES
    ) -> AsyncIterator[SamplesReady | BranchMade | StepEvent]:
        """The paper's backtracking from a mistake at Thought `number`. Raises LLMError when
        the sampling call fails (nothing is stored then)."""
        settings = settings or StepperSettings()
        ready, step = await self._sample(number, settings, n, None, take_chosen=True)
        yield ready
        if step is None:  # no sample differed from the thought
            return
        yield BranchMade(step)
        async for event in self.generate(settings=greedy(settings)):
            yield event

    async def resample(
        self, number: int, *, settings: StepperSettings | None = None, n: int = SAMPLES,
        on_sample: OnSample | None = None,
    ) -> SamplesReady:
        """Backtracking's first half: sample Thought `number` again and store every sample
        and the paper's choice; the trace is unchanged (continue_with takes one).
        `on_sample` hears of each sample as it arrives. The samples are stored together once
        all are in: cancelled before, the session stores none of them (nor their calls)."""
        ready, _ = await self._sample(number, settings or StepperSettings(), n, on_sample,
                                      take_chosen=False)
        return ready

    async def _sample(
        self, number: int, settings: StepperSettings, n: int, on_sample: OnSample | None,
        *, take_chosen: bool,
    ) -> tuple[SamplesReady, Step | None]:
        """resample's work; with `take_chosen`, backtrack's too: the paper's choice made the
        head in the samples' own transaction (the step it is taken as, None where no sample
        differed)."""
        self._check_number(number)
        # From replay/bbm (which can only repeat the recorded trace) on with solver/bbm.
        self.use_model(backtracking_model(self._spec, self.task))
        parent = self.steps[number - 2].id if number > 1 else None
        async with self.claimed():  # SessionBusy: another window is generating it
            resample = await resample_step(
                self.task, self.session.input, self.texts[: number - 1],
                self.texts[number - 1], self._spec, settings.call, n=n, on_sample=on_sample,
            )
            # Cancelled while saving, the samples are saved all the same (the store and the
            # screen then agree that they are), then the cancellation goes on.
            store = asyncio.ensure_future(self.store_work(
                self._store_samples_taking, resample, parent, take_chosen))
            try:
                stored, step = await asyncio.shield(store)
            except asyncio.CancelledError:
                await store
                raise
        return SamplesReady(number, resample, stored), step

    async def continue_with(
        self, candidate: StoredCandidate, *, settings: StepperSettings | None = None
    ) -> AsyncIterator[BranchMade | StepEvent]:
        """Another sampled candidate instead (the person's pick): its own branch."""
        step = await self.store_work(self._take_candidate, candidate)
        yield BranchMade(step)
        async for event in self.generate(settings=greedy(settings or StepperSettings())):
            yield event

    async def rewrite(
        self, number: int, text: str, *, settings: StepperSettings | None = None,
        generate: bool = True,
    ) -> AsyncIterator[BranchMade | StepEvent]:
        """The person's own version of Thought `number` (one line), then the model goes on
        from it unless `generate` is False. As in backtracking, `replay/bbm` (which can only
        repeat the recorded trace) hands over to `solver/bbm` where the solver writes the
        task: `spec` then names it."""
        self._check_number(number)
        if generate:
            self.use_model(backtracking_model(self._spec, self.session.task))
        parent = self.steps[number - 2].id if number > 1 else None
        step = await self.store_work(self._add_branch_step, parent, number, text)
        yield BranchMade(step)
        if generate:
            async for event in self.generate(settings=greedy(settings or StepperSettings())):
                yield event

    def _check_number(self, number: int) -> None:
        if not 1 <= number <= len(self.steps):
            raise ValueError(f"there is no Thought {number} (the trace has {len(self.steps)})")

    def store_samples(self, resample: Resample, parent: int | None) -> list[StoredCandidate]:
        candidates = resample.samples.candidates
        return self.store.add_candidates(
            self.session.id, parent_id=parent, number=resample.number,
            calls=resample.samples.calls,
            candidates=[(c.call, c.choice, c.text, c.tokens, resample.dropped[i])
                        for i, c in enumerate(candidates)],
        )

    def _store_samples_taking(self, resample: Resample, parent: int | None, take_chosen: bool
                              ) -> tuple[list[StoredCandidate], Step | None]:
        """The samples stored; with `take_chosen`, the paper's choice taken as the head in
        the same transaction (one commit, one turn at the store's write lock where two were:
        --processes' children queue for it). A kill leaves the old branch and no samples, or
        the samples and the new branch."""
        chosen = resample.chosen
        if not take_chosen or chosen is None:
            return self.store_samples(resample, parent), None
        with self.store.transaction():
            stored = self.store_samples(resample, parent)
            step = self._add_candidate_step(stored[chosen])
        self.show_new_step(step)
        return stored, step

    def _take_candidate(self, candidate: StoredCandidate) -> Step:
        """One transaction makes the step, its head and the candidate's mark as chosen, so a
        kill leaves either the old branch on show or the new one, never a trace cut short nor
        a step its candidate does not point at (a resumed batch looks for that mark)."""
        step = self._add_candidate_step(candidate)
        self.show_new_step(step)
        return step

    def _add_candidate_step(self, candidate: StoredCandidate) -> Step:
        """The candidate's step in the store, marked chosen (the caller shows it)."""
        return self.store.add_step(
            self.session.id, parent_id=candidate.parent_id, number=candidate.number,
            text=candidate.text, origin=StepOrigin.BACKTRACK,
            answer=self.task.extract_answer(candidate.text), call_id=candidate.call_id,
            choice=candidate.choice, tokens=candidate.tokens, candidate_id=candidate.id,
            model_branch_id=self.model_branch_id,
        )

    def _add_branch_step(self, parent: int | None, number: int, text: str) -> Step:
        step = self.store.add_step(
            self.session.id, parent_id=parent, number=number, text=text,
            origin=StepOrigin.EDIT, answer=self.task.extract_answer(text),
            model_branch_id=self.model_branch_id,
        )
        self.show_new_step(step)
        return step

    def show_new_step(self, step: Step) -> None:
        """The step just saved, on show as the head: one of the tree's already where another
        window stored the same step at this place first (the store keeps it once)."""
        self.session = self.store.session(self.session.id)
        if self.model_branch is not None:
            self.model_branch = self.store.model_branch(self.model_branch.id)
        self.steps = self.tree.path(step.id)
        self.label = self._branch_label()
        self.stopped = self._find_stopped()

    def branch_origin(self, own: Sequence[Step]) -> BranchOrigin | None:
        """Where the branch whose own thoughts are `own` came from (reads the store: its
        sampling, its calls' models)."""
        if not own:
            return None
        first = own[0]
        sampled: list[StoredCandidate] = []
        if first.origin == StepOrigin.BACKTRACK:
            sampled = one_sampling(
                self.store.candidates(self.session.id, first.parent_id, first.number), first.id)
        models = self.store.call_models([step.call_id for step in own
                                         if step.call_id is not None])
        return branch_origin(self.tree, own, sampled, models)

    def candidates_for(self, number: int) -> list[StoredCandidate]:
        """Every sample stored for Thought `number` after the thoughts now before it."""
        parent = self.steps[number - 2].id if number > 1 else None
        return self.store.candidates(self.session.id, parent, number)

    # -- labelling (the paper's protocol: the first mistaken step, or none)

    def flag_mistake(self, number: int, *, assisted: bool = False) -> Label:
        step = self.steps[number - 1]
        self.label = self.store.set_label(self.session.id, step.id, self.head_id,
                                          annotator=self.annotator, assisted=assisted)
        return self.label

    def mark_no_mistake(self, *, assisted: bool = False) -> Label:
        self.label = self.store.set_label(self.session.id, None, self.head_id,
                                          annotator=self.annotator, assisted=assisted)
        return self.label

    def undo_label(self) -> Label | None:
        """Withdraw the annotator's latest verdict on this branch."""
        if self.label is not None:
            self.store.withdraw_label(self.session.id, self.label.id)
        self.label = self._branch_label()
        return self.label

    def rename(self, name: str) -> None:
        self.store.rename_session(self.session.id, name)
        self.session = self.store.session(self.session.id)


def recorded_steps(task: Task, steps: Sequence[str],
                   answer: str | ReadFromText | None = FROM_THE_TEXT
                   ) -> list[tuple[str, str | None]]:
    """A recorded trace's steps, each with the answer it states. The last states its row's
    own `answer`, as given (a file's "a b" stays "a b" where the regex reads "a b." in "So
    the answer is a b."; a null stays null); without one, and on every other step, the
    task's answer regex's, as for a generated trace."""
    found = [(text, task.extract_answer(text)) for text in steps]
    if found and not isinstance(answer, ReadFromText):
        found[-1] = (found[-1][0], answer)
    return found


def greedy(settings: StepperSettings) -> StepperSettings:
    """The paper continues a backtracked trace at temperature 0."""
    return replace(settings, call=replace(settings.call, temperature=0.0))


def resumed_spec(
    session: Session, configured: llm.ModelSpec, given: frozenset[str] = frozenset()
) -> llm.ModelSpec:
    """The model settings a session reopened in the app continues with. The configured ones
    (command line over config) when they are for the session's model, as in `run`, so a
    corrected api base or mode wins; a session of another model keeps its own settings, less
    those the command line gave explicitly (`given` holds "model", "api_base", "mode"): a
    session named with --session continues with what was typed next to it. A recorded trace
    whose row named no model (RECORDED_MODEL) has nothing to call: it goes on with the
    configured model, as a new session would."""
    if session.model == RECORDED_MODEL:
        return configured
    model = configured.model if "model" in given else session.model
    ours = model == configured.model
    api_base = configured.api_base if ours or "api_base" in given else session.api_base
    mode = configured.mode if ours or "mode" in given else session.mode
    return llm.ModelSpec(model, api_base, mode)


def _stored_spec(session: Session) -> llm.ModelSpec:
    return llm.ModelSpec(session.model, session.api_base, session.mode)


def _branch_spec(branch: ModelBranch) -> llm.ModelSpec:
    return llm.ModelSpec(branch.model, branch.api_base, branch.mode)


def _state_after(event: StepFailed | TraceFinished) -> tuple[ModelBranchState, str | None]:
    """How a model branch stands after its generating ended with `event`."""
    if isinstance(event, StepFailed):
        return ModelBranchState.FAILED, event.error.message
    if event.reason == TraceEnd.ANSWER:
        return ModelBranchState.ANSWERED, None
    if event.reason == TraceEnd.PAUSED:
        return ModelBranchState.IDLE, None
    return ModelBranchState.ENDED, None
