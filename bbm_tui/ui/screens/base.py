"""The base of every screen of the app, of the queues' screens, and the splash screen."""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from bbm_tui.ui.context import context
from bbm_tui.ui.keys import declared_bindings
from bbm_tui.ui.messages import WorkerFailed
from bbm_tui.ui.panels import mark_panels
from bbm_tui.ui.text import MUTED, styled


class BbmScreen(Screen[None]):
    """A screen whose workers' failures go to the app's one handler (`Worker.StateChanged`
    does not bubble, so the screen passes a failure on as a message, ui/messages.py), and
    whose Footer keeps the keys in the order the screen declares them, remapped or not."""

    # What the help screen (?) calls the screen: "Keys on the main screen".
    HELP_TITLE: ClassVar[str] = "this screen"
    # Widgets on the screen with keys of their own, which act while one has the focus (a
    # trace view): the keymap check takes their keys with the screen's (ui/keymap.py).
    KEYED_WIDGETS: ClassVar[tuple[type[Widget], ...]] = ()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.post_message(WorkerFailed(event.worker))

    # The focused panel's marker (ui/panels.py) follows the focus.
    def on_descendant_focus(self) -> None:
        mark_panels(self)

    def on_descendant_blur(self) -> None:
        mark_panels(self)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """Textual's, each binding in the place its class declares it. Textual puts a key the
        user's [keymap] remapped after every other key of its node
        (`BindingsMap.apply_keymap`), which moved "m first mistake" to the end of the Footer
        (or out of it, where the Footer has no room)."""
        active = super().active_bindings
        if not context(self).config.keymap:
            return active
        nodes: dict[int, int] = {}
        for item in active.values():
            nodes.setdefault(id(item.node), len(nodes))

        def place(entry: tuple[str, ActiveBinding]) -> tuple[int, int]:
            item = entry[1]
            return nodes[id(item.node)], _declared_place(type(item.node), item.binding)

        return dict(sorted(active.items(), key=place))


class QueueScreen(BbmScreen):
    """A screen that goes through a queue of traces (annotation, adjudication): a home screen
    of the app (ui/context.py, `HomeScreen`) with no session of its own on show; Esc on it
    goes back to the new-session screen (what was done in it is saved already)."""

    @property
    def home_task(self) -> str | None:
        return None  # a new session from here starts on the first task

    def shows_session(self, session_id: int) -> bool:
        return False

    def session_renamed(self, session_id: int) -> None:
        pass  # the queue names its traces by their files, not by their sessions' names

    def stop_work(self) -> None:
        pass  # its writes are to the queue's own sessions, never the one deleted

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Served (`bbm-tui serve`), the user's own screen has nowhere to go back to: Esc is
        # left out of its footer (the lead's adjudication goes back to the agreement).
        if action == "back" and context(self).served:
            return len(self.app.screen_stack) > 2
        return True


def _declared_place(owner: type, binding: Binding) -> int:
    """Where `owner`'s class declares `binding`: by its id (its key may be remapped), else by
    its action and key; after the rest when not declared there."""
    places = _places(owner)
    if binding.id is not None and binding.id in places:
        return places[binding.id]
    return places.get(f"{binding.action} {binding.key}", len(places))


@lru_cache(maxsize=64)
def _places(owner: type) -> dict[str, int]:
    places: dict[str, int] = {}
    for place, binding in enumerate(declared_bindings(owner)):
        if binding.id is not None:
            places.setdefault(binding.id, place)
        places.setdefault(f"{binding.action} {binding.key}", place)
    return places


class SplashScreen(Screen[None]):
    """The bottom screen while a session or queue given on the command line opens."""

    def compose(self) -> ComposeResult:
        yield Static(styled("bbm-tui · opening…", MUTED), id="splash")
