"""Tab at 80x24: on every screen and dialog with focusable widgets, a full
cycle of Tab never lands on a widget the person cannot see. Each widget Tab focuses must be
shown and, once Textual has scrolled it into view, wholly inside the screen and its
containers; the cycle must come back to where it started."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from textual.css.query import NoMatches
from textual.errors import NoWidget
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, OptionList
from ui_helpers import make_app, recorded_session, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.store import Store
from bbm_tui.ui.dialogs import (
    ConfirmScreen,
    FindScreen,
    HelpScreen,
    ModelScreen,
    RenameScreen,
    StoreErrorScreen,
    TypedQuestionScreen,
)
from bbm_tui.ui.screens.backtrack import EditThoughtScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen

SMALL = (80, 24)
Opener = Callable[[Pilot], Awaitable[None]]


def in_view(widget: Widget) -> Region | None:
    """The part of `widget` the person sees, if that is all of it (else None)."""
    screen = widget.screen
    try:
        geometry = screen.find_widget(widget)
    except NoWidget:
        return None
    whole = geometry.region
    seen = geometry.visible_region.intersection(screen.region)
    shown = widget.display and widget.visible and all(
        node.display for node in widget.ancestors if isinstance(node, Widget))
    return seen if shown and whole.area and seen == whole else None


def describe(widget: Widget | None) -> str:
    if widget is None:
        return "nothing"
    try:
        region = widget.screen.find_widget(widget)
    except NoWidget:
        return f"{widget!r} (not on screen)"
    return f"{widget!r} at {region.region}, clipped to {region.clip}"


async def tab_round(pilot: Pilot) -> list[Widget]:
    """Tab until the focus comes back to the first widget Tab reached; each one in view."""
    screen = pilot.app.screen
    reached: list[Widget] = []
    for _ in range(40):
        await pilot.press("tab")
        await pilot.pause()
        focused = screen.focused
        assert focused is not None, f"Tab focused nothing on {screen!r}"
        try:
            await wait_for(pilot, lambda focused=focused: in_view(focused) is not None,
                           timeout=3)
        except AssertionError:
            raise AssertionError(f"Tab landed on a widget out of view: {describe(focused)}; "
                                 f"the cycle so far: {reached}") from None
        if reached and focused is reached[0]:
            return reached
        reached.append(focused)
    raise AssertionError(f"Tab never came back round: {reached}")


# -- how each screen or dialog is reached, as a person reaches it

async def new_session(pilot: Pilot) -> None:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, NewSessionScreen)
                   and pilot.app.screen.query_one("#questions", OptionList).option_count > 0)


def on_new_session(key: str, dialog: type) -> Opener:
    async def opener(pilot: Pilot) -> None:
        await new_session(pilot)
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, dialog))

    return opener


def on_sessions(key: str | None, dialog: type = SessionsScreen) -> Opener:
    async def opener(pilot: Pilot) -> None:
        await new_session(pilot)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, SessionsScreen)
                       and pilot.app.screen.query_one(DataTable).row_count == 1)
        if key is not None:
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(pilot.app.screen, dialog))

    return opener


def on_trace(*keys: str, dialog: type) -> Opener:
    async def opener(pilot: Pilot) -> None:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                       and pilot.app.screen.is_mounted)
        await pilot.press(*keys)
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, dialog))

    return opener


OPENERS: dict[str, tuple[Opener, bool]] = {
    # name: (how to get there, whether the app starts on a saved session's main screen)
    "new session": (new_session, False),
    "model": (on_new_session("ctrl+e", ModelScreen), False),
    "typed question": (on_new_session("ctrl+t", TypedQuestionScreen), False),
    "sessions": (on_sessions(None), False),
    "rename": (on_sessions("r", RenameScreen), False),
    "confirm": (on_sessions("d", ConfirmScreen), False),
    "finder": (on_trace("f", dialog=FindScreen), True),
    "edit thought": (on_trace("j", "w", dialog=EditThoughtScreen), True),
    "help": (on_trace("question_mark", dialog=HelpScreen), True),
}


@pytest.mark.parametrize("name", list(OPENERS))
async def test_tab_never_lands_out_of_view_at_80x24(name: str, store: Store) -> None:
    opener, on_the_trace = OPENERS[name]
    saved = recorded_session(store, "word_sorting", 3)
    app = make_app(Config(model="solver/bbm"), session_id=saved.id if on_the_trace else None)
    async with app.run_test(size=SMALL) as pilot:
        await opener(pilot)
        await pilot.pause()
        reached = await tab_round(pilot)
        assert reached, name


async def test_the_store_error_has_nothing_to_tab_to_and_says_how_to_leave(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bbm-tui.sqlite3").write_text("not a database")
    from pathlib import Path

    app = make_app(store_path=Path("bbm-tui.sqlite3"))
    async with app.run_test(size=SMALL) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StoreErrorScreen))
        await pilot.press("tab")
        await pilot.pause()
        assert app.screen.focused is None or in_view(app.screen.focused) is not None
        try:
            hint = app.screen.query_one(".dialog-hint")
        except NoMatches:
            raise AssertionError("the store error says nothing of how to leave") from None
        assert in_view(hint) is not None and "Press q to quit" in str(hint.render())
