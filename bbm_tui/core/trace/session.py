"""A trace being worked on: the store's rows plus the stepper, shared by the app and `run`.

`generate()` passes the stepper's events through and commits each finished step before it
hands the event on, so whoever shows the event can rely on the step being saved. Store calls
that may wait on the disk run in a thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bbm_tui.core import llm
from bbm_tui.core.generation.stepper import (
    StepEvent,
    StepFailed,
    StepFinished,
    StepperSettings,
    run_steps,
)
from bbm_tui.core.redact import REDACTED, redact_url
from bbm_tui.core.store import Label, Session, Step, Store, Totals
from bbm_tui.core.tasks import extract_answer, is_correct
from bbm_tui.core.types import StepOrigin


@dataclass(frozen=True)
class NewTrace:
    """What a new session starts from."""

    task: str
    input: str
    target: str | None = None
    dataset_index: int | None = None
    gold_mistake_index: int | None = None


class TraceSession:
    """`spec` is the model the session generates with now. It lives in memory only: the store
    keeps the api base redacted (a password or key in it is never written), so a session
    opened from the store calls its stored model until `use_model()` says otherwise."""

    def __init__(self, store: Store, session: Session, spec: llm.ModelSpec | None = None) -> None:
        self.store = store
        self.session = session
        self.steps: list[Step] = store.branch(session.id)
        self.label: Label | None = store.current_label(session.id)
        self._spec = spec or _stored_spec(session)

    # -- opening

    @classmethod
    def create(
        cls,
        store: Store,
        trace: NewTrace,
        spec: llm.ModelSpec,
        *,
        name: str | None = None,
        source: str = "app",
    ) -> TraceSession:
        session = store.create_session(
            task=trace.task,
            input=trace.input,
            target=trace.target,
            dataset_index=trace.dataset_index,
            gold_mistake_index=trace.gold_mistake_index,
            model=spec.model,
            api_base=redact_url(spec.api_base),
            mode=spec.mode,
            name=name,
            source=source,
        )
        return cls(store, session, spec)

    @classmethod
    def load(cls, store: Store, session_id: int) -> TraceSession:
        return cls(store, store.session(session_id))

    def use_model(self, spec: llm.ModelSpec) -> None:
        """Generate with `spec` from now on (a corrected api base or mode wins over the stored
        one); the session records it when it next generates."""
        self._spec = spec

    def _record_model(self) -> None:
        """The session row says what it is generated with (its api base redacted)."""
        stored = (self.session.model, self.session.api_base, self.session.mode)
        wanted = (self._spec.model, redact_url(self._spec.api_base), self._spec.mode)
        if stored != wanted:
            self.session = self.store.update_session_model(
                self.session.id, model=wanted[0], api_base=wanted[1], mode=wanted[2])

    def reload(self) -> None:
        self.session = self.store.session(self.session.id)
        self.steps = self.store.branch(self.session.id)
        self.label = self.store.current_label(self.session.id)

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
        return is_correct(self.answer, self.session.target)

    @property
    def mistake_number(self) -> int | None:
        """1-based number of the flagged first mistake on the branch on show, if any."""
        if self.label is None or self.label.mistake_step_id is None:
            return None
        for step in self.steps:
            if step.id == self.label.mistake_step_id:
                return step.number
        return None

    @property
    def no_mistake(self) -> bool:
        return self.label is not None and self.label.mistake_step_id is None

    def totals(self) -> Totals:
        return self.store.totals(self.session.id)

    # -- generating

    async def generate(
        self,
        *,
        max_new_steps: int | None = None,
        settings: StepperSettings | None = None,
        spec: llm.ModelSpec | None = None,
    ) -> AsyncIterator[StepEvent]:
        if spec is not None:
            self.use_model(spec)
        if self.needs_api_base:
            yield StepFailed(len(self.steps) + 1, llm.LLMError(
                "bad_request",
                f"session {self.id}'s api base held a password or key, which bbm-tui never "
                f"saves ({self._spec.api_base}); open it again with --model "
                f"{self._spec.model} --api-base URL"))
            return
        await asyncio.to_thread(self._record_model)
        async for event in run_steps(
            self.session.task,
            self.session.input,
            self._spec,
            self.texts,
            target=self.session.target,
            max_new_steps=max_new_steps,
            settings=settings,
        ):
            if isinstance(event, StepFinished):
                # A cancelled run still waits for the step it is saving, so that the session
                # and the store agree when it is over (the next run neither loses nor
                # repeats the step).
                commit = asyncio.ensure_future(asyncio.to_thread(self._commit, event))
                try:
                    await asyncio.shield(commit)
                except asyncio.CancelledError:
                    await commit
                    raise
            yield event

    def _commit(self, event: StepFinished) -> Step:
        parent = self.steps[-1].id if self.steps else None
        step = self.store.add_step(
            self.session.id,
            parent_id=parent,
            number=event.number,
            text=event.text,
            origin=StepOrigin.MODEL,
            answer=event.answer,
            truncated=event.truncated,
            call=event.call,
        )
        self.steps.append(step)
        return step

    def load_recorded(self, steps: list[str]) -> None:
        """Put a recorded trace (e.g. the dataset's) on the branch, to label it."""
        answered = [(text, extract_answer(text)) for text in steps]
        self.steps = self.store.add_steps(self.session.id, answered, origin=StepOrigin.DATASET)

    def append_typed(self, text: str) -> Step:
        """A step the person wrote."""
        parent = self.steps[-1].id if self.steps else None
        step = self.store.add_step(
            self.session.id,
            parent_id=parent,
            number=len(self.steps) + 1,
            text=text,
            origin=StepOrigin.TYPED,
            answer=extract_answer(text),
        )
        self.steps.append(step)
        return step

    # -- labelling (the paper's protocol: the first mistaken step, or none)

    def flag_mistake(self, number: int) -> Label:
        step = self.steps[number - 1]
        self.label = self.store.set_label(self.session.id, step.id, self._leaf_id())
        return self.label

    def mark_no_mistake(self) -> Label:
        self.label = self.store.set_label(self.session.id, None, self._leaf_id())
        return self.label

    def undo_label(self) -> Label | None:
        self.label = self.store.undo_label(self.session.id)
        return self.label

    def _leaf_id(self) -> int | None:
        return self.steps[-1].id if self.steps else None

    def rename(self, name: str) -> None:
        self.store.rename_session(self.session.id, name)
        self.session = self.store.session(self.session.id)


def _stored_spec(session: Session) -> llm.ModelSpec:
    return llm.ModelSpec(session.model, session.api_base, session.mode)  # type: ignore[arg-type]
