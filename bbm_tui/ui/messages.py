"""What the screens tell the app (docs/DESIGN.md §7: screens talk through Textual messages). A
screen posts one; the app, which owns navigation, decides what to show. Messages bubble from
a screen to the app."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.worker import Worker

    from bbm_tui.core.store import Totals
    from bbm_tui.core.trace.session import TraceSession
    from bbm_tui.core.trace.side_by_side import SideBySide
    from bbm_tui.core.types import ModelSpec, StepperSettings


class OpenTrace(Message):
    """Show this session on the main screen (it was just created, or chosen)."""

    def __init__(self, trace: TraceSession, totals: Totals | None = None) -> None:
        super().__init__()
        self.trace = trace
        self.totals = totals


class OpenModels(Message):
    """Show this session of several models side by side (just made, or given a model)."""

    def __init__(self, race: SideBySide, totals: Totals | None = None) -> None:
        super().__init__()
        self.race = race
        self.totals = totals


class AddModel(Message):
    """Give the session on show another model beside its own (`m` on a trace): it becomes a
    session of several models, side by side."""

    def __init__(self, trace: TraceSession, spec: ModelSpec) -> None:
        super().__init__()
        self.trace = trace
        self.spec = spec


class OpenSession(Message):
    """Show the session with this id (it has to be loaded from the store)."""

    def __init__(self, session_id: int) -> None:
        super().__init__()
        self.session_id = session_id


class SessionRenamed(Message):
    def __init__(self, session_id: int) -> None:
        super().__init__()
        self.session_id = session_id


class SessionRemoved(Message):
    """The person deleted this session (from the sessions screen)."""

    def __init__(self, session_id: int) -> None:
        super().__init__()
        self.session_id = session_id


class GoBack(Message):
    """Esc on a screen: back to the one below it, where there is one to go back to."""

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self.screen = screen


class SessionMissing(Message):
    """The session on show was deleted meanwhile (another process): start afresh."""

    def __init__(self, screen: Screen) -> None:
        super().__init__()
        self.screen = screen


class ModelChosen(Message):
    """The person chose a model and how to generate (the model dialog): new sessions ask it,
    and the app generates with these settings from now on, until it is closed (config.toml
    keeps the defaults)."""

    def __init__(self, spec: ModelSpec, settings: StepperSettings) -> None:
        super().__init__()
        self.spec = spec
        self.settings = settings


class WorkerFailed(Message):
    """A screen's worker raised: the app says what failed, in one place for every screen
    (`Worker.StateChanged` does not bubble)."""

    def __init__(self, worker: Worker) -> None:
        super().__init__()
        self.worker = worker
