"""Helpers for the app's Pilot and snapshot tests (imported by the test modules).

The autouse fixture in tests/conftest.py already gives every test its own BBM_TUI_HOME and an
instant replay model. Apps made here never warm litellm in the background and never show
wall-clock values, so tests that do not generate never import litellm and screenshots do not
change between runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.css.query import NoMatches
from textual.pilot import Pilot
from textual.widgets import Checkbox, Input, TextArea
from textual.widgets._footer import FooterKey

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.app import BbmApp
from bbm_tui.ui.widgets.chrome import KeysFooter
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import ThoughtList

SIZE = (120, 40)


def make_app(config: Config | None = None, **kwargs: Any) -> BbmApp:
    kwargs.setdefault("warm_up", False)
    kwargs.setdefault("wall_clock", False)
    return BbmApp(config or Config(), **kwargs)


async def wait_for(pilot: Pilot, condition: Callable[[], bool], timeout: float = 30.0) -> None:
    """Let the app run until `condition()` holds (workers run in threads and tasks). A widget
    not there yet (a screen still composing) counts as "not yet". The time limit only ends a
    test that would fail anyway: it is generous, because under a loaded machine (the suite's
    four workers on two cores) a step or a screen can take ten seconds to come."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not _holds(condition):
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {condition}")
        await pilot.pause(0.02)


def _holds(condition: Callable[[], bool]) -> bool:
    try:
        return bool(condition())
    except NoMatches:
        return False


def still_cursors(pilot: Pilot) -> None:
    """No blinking cursor in a screenshot. A TextArea caches its lines with no key for its
    focus once blinking is off, so a line drawn before the focus arrived (under load) kept
    showing no cursor: its cache is emptied (notify_style_update) and the lines drawn again."""
    for widget in pilot.app.screen.query("Input, TextArea"):
        assert isinstance(widget, Input | TextArea)
        widget.cursor_blink = False
        if isinstance(widget, TextArea):
            widget.notify_style_update()
            widget.refresh()


async def steady_frame(pilot: Pilot, timeout: float = 10.0) -> None:
    """Before a snapshot: no toasts, no blinking cursors, no worker running, and the screen
    drawn the same twice in a row 50 ms apart. A fixed pause is not enough under load: a
    Footer recomposing after a focus change, or a page of rows arriving, can land between the
    pause and the screenshot (a CI run caught the sessions screen that way)."""
    app = pilot.app
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    previous = None
    while True:
        app.clear_notifications()
        still_cursors(pilot)
        await app.workers.wait_for_complete()
        await pilot.pause()
        frame = app.export_screenshot()
        if frame == previous and footers_current(app):
            return
        if loop.time() > deadline:
            raise AssertionError("the screen never settled (it kept changing)")
        previous = frame
        await pilot.pause(0.05)


def footers_current(app: BbmApp) -> bool:
    """Each Footer on the screen shows the keys the screen's bindings name now: after a focus
    change the Footer recomposes a refresh later, which under load can come after two equal
    frames."""
    wanted = {binding.action for _node, binding, _enabled, _tooltip
              in app.screen.active_bindings.values() if binding.show}
    for footer in app.screen.query(KeysFooter):
        shown = {key.action for key in footer.query(FooterKey)
                 if not key.has_class("-command-palette")}
        if shown != wanted:
            return False
    return True


def recorded_session(
    store: Store, task: str = "tracking_shuffled_objects", index: int = 0, *,
    steps: list[str] | None = None, name: str | None = None,
) -> TraceSession:
    """A saved session holding the dataset's recorded trace (no model call, no litellm)."""
    row = bundled_rows(task)[index]
    trace = TraceSession.create(
        store,
        NewTrace(task, row.input, row.target, index, row.mistake_index),
        llm.ModelSpec(),
        name=name,
    )
    trace.load_recorded(list(row.steps) if steps is None else steps)
    return trace


def notifications(app: BbmApp) -> list[str]:
    return [f"{note.title}: {note.message}" for note in app._notifications]


def thought(screen: Any, number: int) -> ThoughtView:
    """The mounted view of Thought `number` on the branch on show, or of the thought streaming
    (views are keyed by the step they show, so a number is asked of the thoughts pane, not of
    the DOM)."""
    thoughts = screen.query_one(ThoughtList)
    view = thoughts.view(number)
    if view is None and thoughts.streaming is not None and thoughts.streaming.number == number:
        view = thoughts.streaming
    if view is None or not view.is_attached:
        raise NoMatches(f"Thought {number} is not in the window")
    return view


def on_each_frame(app: App[Any], noted: Callable[[Any, Any], object]) -> None:
    """Call `noted(screen, update)` with each frame the app writes, before it is written:
    wraps the app's `_display`, which Textual's compositor calls with each update it renders
    (a private hook, for tests only: a frame is what a person sees, and no public API says
    when one was written, nor of which screen). The benchmarks count frames there too."""
    original = app._display

    def display(screen: Any, renderable: Any) -> None:
        if renderable is not None:
            noted(screen, renderable)
        original(screen, renderable)

    app._display = display  # type: ignore[method-assign]


class ScreensShown:
    """The screen each frame shows, in order (`on_each_frame`)."""

    def __init__(self, app: BbmApp) -> None:
        self.frames: list[Any] = []
        on_each_frame(app, lambda screen, update: self.frames.append(screen))

    def since(self, mark: int) -> list[Any]:
        """The screens of the frames after `mark` (a length of `frames`), repeats folded."""
        shown: list[Any] = []
        for screen in self.frames[mark:]:
            if not shown or shown[-1] is not screen:
                shown.append(screen)
        return shown


async def run_finder(
    pilot: Pilot, method: str, *, model: str | None = None, api_base: str | None = None,
    judge_all: bool = False, wait: bool = True,
) -> None:
    """Press f, pick the method with the arrow keys, set the model, and press enter."""
    from bbm_tui.ui.dialogs import FindScreen
    from bbm_tui.ui.screens.trace import TraceScreen

    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    before = screen.view.finder
    await pilot.press("f")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, FindScreen))
    await pilot.pause()
    dialog = pilot.app.screen
    names = [choice.name for choice in dialog._methods]
    moves = names.index(method) - names.index(dialog.method.name)
    await pilot.press(*(["down"] * moves if moves > 0 else ["up"] * -moves))
    assert dialog.method.name == method
    if model is not None:
        dialog.query_one("#find-model", Input).value = model
    if api_base is not None:
        dialog.query_one("#find-api-base", Input).value = api_base
    if judge_all:
        dialog.query_one("#find-judge-all", Checkbox).value = True
    await pilot.press("enter")
    await wait_for(pilot, lambda: pilot.app.screen is screen)
    await wait_for(pilot, lambda: screen.view.finder is not before)
    if wait:
        await wait_for(pilot, lambda: not screen.view.finding
                       and screen.view.finder.state != "running", timeout=30)
        await pilot.pause()


def palette_commands(app: BbmApp, screen) -> dict[str, Any]:
    """The palette's commands where `screen` is, by title without the key the palette shows
    after it ("Step once · n" as "Step once")."""
    return {command.title.split(" · ")[0]: command
            for command in app.get_system_commands(screen)}
