"""No flash of a stale screen (issue 10, item 9): moving between screens, every frame shows
either the screen being left or the one arriving, never one underneath them."""

from __future__ import annotations

from textual.widgets import DataTable, OptionList
from ui_helpers import SIZE, ScreensShown, make_app, recorded_session, wait_for

from bbm_tui.core.store import Store
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen


async def settled(pilot, condition) -> None:
    await wait_for(pilot, condition)
    await pilot.pause(0.2)


async def test_starting_a_second_session_shows_no_stale_screen(store: Store) -> None:
    first = recorded_session(store, "word_sorting", 1)
    app = make_app(session_id=first.id)
    shown = ScreensShown(app)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, lambda: isinstance(app.screen, TraceScreen))
        old = app.screen
        await pilot.press("ctrl+n")
        await settled(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                      and app.screen.query_one("#questions", OptionList).option_count > 0)
        new_session = app.screen
        mark = len(shown.frames)
        await pilot.press("slash", "4", "enter")
        await settled(pilot, lambda: isinstance(app.screen, TraceScreen)
                      and app.screen is not old)
        arrived = app.screen
        screens = shown.since(mark)
        assert old not in screens, "the session left behind flashed"
        assert set(screens) <= {new_session, arrived} and screens[-1] is arrived


async def test_opening_a_session_from_the_list_shows_no_stale_screen(store: Store) -> None:
    first = recorded_session(store, "word_sorting", 1)
    recorded_session(store, "dyck_languages", 2)
    app = make_app(session_id=first.id)
    shown = ScreensShown(app)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, lambda: isinstance(app.screen, TraceScreen))
        old = app.screen
        await pilot.press("s")
        await settled(pilot, lambda: isinstance(app.screen, SessionsScreen)
                      and app.screen.query_one(DataTable).row_count == 2)
        sessions = app.screen
        mark = len(shown.frames)
        await pilot.press("enter")  # the newest: dyck_languages
        await settled(pilot, lambda: isinstance(app.screen, TraceScreen)
                      and app.screen is not old)
        arrived = app.screen
        screens = shown.since(mark)
        assert set(screens) <= {sessions, arrived} and screens[-1] is arrived, [
            type(screen).__name__ for screen in screens]


async def test_a_new_session_from_the_sessions_screen_shows_no_stale_screen(
    store: Store,
) -> None:
    first = recorded_session(store, "word_sorting", 1)
    app = make_app(session_id=first.id)
    shown = ScreensShown(app)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("s")
        await settled(pilot, lambda: isinstance(app.screen, SessionsScreen))
        sessions = app.screen
        mark = len(shown.frames)
        await pilot.press("ctrl+n")
        await settled(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        arrived = app.screen
        screens = shown.since(mark)
        assert set(screens) <= {sessions, arrived} and screens[-1] is arrived, [
            type(screen).__name__ for screen in screens]
