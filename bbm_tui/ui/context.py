"""What a screen may ask of the app it runs in, as a protocol: the screens depend on this, not
on the app's class, so that app.py imports the screens and no screen imports app.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

if TYPE_CHECKING:
    from textual.dom import DOMNode
    from textual.screen import Screen

    from bbm_tui.core.config import Config
    from bbm_tui.core.store import Store
    from bbm_tui.core.types import ModelSpec, StepperSettings
    from bbm_tui.ui.paint_clock import PaintClock


class AppContext(Protocol):
    config: Config
    stepper_settings: StepperSettings
    # The new-session screen's last choices this run (ui/screens/new_session.py).
    chosen_spec: ModelSpec | None
    recorded_trace: bool
    # False in screenshots and snapshot tests: no latencies or dates that change between runs.
    wall_clock: bool
    # Sessions deleted while the app ran (a screen still showing one starts afresh).
    deleted_sessions: set[int]
    # Notes said once a run, whichever screen gave them (a prompt below its model's caching
    # minimum).
    notes_said: set[str]
    # Presenter mode (a trace screen's P), kept from one screen to the next this run.
    presenter: bool
    # Why the session store could not be opened (None: it is open, or opening).
    store_error: str | None
    # Streamed text is painted on it: every trace's in the same frames.
    paint_clock: PaintClock
    # Served to a browser (`bbm-tui serve`): the user's own screen is never left.
    served: bool

    async def wait_for_store(self) -> Store | None:
        """The store once it is open, or None if it cannot be (the error is on show)."""

    async def pop_to(self, depth: int) -> None:
        """Pop screens until `depth` are left (1: only the bottom one)."""
        ...

    def can_leave(self, screen: Screen) -> bool:
        """Whether Esc on `screen` has a screen to go back to."""
        ...

    def session_left(self, session_id: int) -> None:
        """A trace screen went away: a session made in this run with nothing done in it is
        deleted (in a thread)."""


def context(node: DOMNode) -> AppContext:
    """The app `node` runs in, as a screen may use it."""
    return cast("AppContext", node.app)


@runtime_checkable
class HomeScreen(Protocol):
    """A screen the app stands on: the screens above it (sessions, a new session, dialogs) are
    ones Esc leaves, and ctrl+n starts a new session on its task. A trace screen, and the
    annotation and adjudication queues."""

    @property
    def home_task(self) -> str | None:
        """The task of the session on show (a new session starts on it), if one is."""
        ...

    def shows_session(self, session_id: int) -> bool:
        """Whether the session with this id is on show."""
        ...

    def session_renamed(self, session_id: int) -> None:
        """That session was renamed elsewhere: show its new name, if it is on show."""
        ...

    def stop_work(self) -> None:
        """The session on show was deleted by another process: stop every worker (no more
        calls, no more writes)."""
        ...
