"""Keys found as harlequin, posting and lazygit users expect (issue 34, item 16): the help
screen filtered by typing, the palette naming each command's key, and the focus marked
without colour (a marker, not only a tint) on the finder's radio buttons and on the focused
side-by-side column."""

from __future__ import annotations

import io

from rich.console import Console
from textual.widgets import Static
from ui_helpers import SIZE, make_app, recorded_session, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace
from bbm_tui.core.trace.side_by_side import SideBySide
from bbm_tui.ui.dialogs import FindScreen, HelpScreen
from bbm_tui.ui.dialogs.find import MarkedRadioButton
from bbm_tui.ui.screens.side_by_side import SideBySideScreen
from bbm_tui.ui.screens.trace import TraceScreen

TASK = "word_sorting"


async def open_trace(pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


def help_text(app) -> str:
    table = app.screen.query_one("#help-table", Static)
    console = Console(width=100, file=io.StringIO(), record=True)
    console.print(table.content)
    return console.export_text()


async def test_typing_filters_the_help(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_trace(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        every = len(help_screen.shown_rows)
        await pilot.press(*"gold")
        await pilot.pause()
        assert [row.binding_id for row in help_screen.shown_rows] == ["show_gold"]
        assert "show_gold" in help_text(app) and "flag_mistake" not in help_text(app)
        # Two words: both in a row (its name, description, keys or id).
        await pilot.press(*["backspace"] * 4, *"copy trace")
        await pilot.pause()
        assert {row.binding_id for row in help_screen.shown_rows} == {"copy_trace"}
        await pilot.press(*"zzz")
        await pilot.pause()
        assert "No key matches “copy tracezzz”." in help_text(app)
        await pilot.press(*["backspace"] * 13)
        await pilot.pause()
        assert len(help_screen.shown_rows) == every
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))


async def test_the_palette_names_each_commands_key_as_bound(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(Config(keymap={"flag_mistake": "m"}), session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        titles = {command.title for command in app.get_system_commands(screen)}
        assert {"Step once · n", "Flag the first mistake · m", "Keys · ?", "Sessions · s",
                "Messages · M"} <= titles
        # Commands with no key keep their title alone.
        assert "Screenshot" in titles


async def test_the_focused_radio_button_has_a_marker(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_trace(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.pause()

        def marked() -> list[bool]:
            return [str(button.render()).startswith(MarkedRadioButton.MARKER)
                    for button in app.screen.query(MarkedRadioButton)]

        first = marked()
        assert first.count(True) == 1
        await pilot.press("down")
        await pilot.pause()
        assert marked().count(True) == 1 and marked() != first
        await pilot.press("tab")  # the focus leaves the set: no marker
        await pilot.pause()
        assert marked().count(True) == 0


async def test_the_focused_column_has_a_marker_and_a_heavy_border(store: Store) -> None:
    row = bundled_rows("tracking_shuffled_objects")[3]
    race = SideBySide.create(
        store, NewTrace("tracking_shuffled_objects", row.input, row.target, 3,
                        row.mistake_index),
        [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm")])
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.open_session(race.id)
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        assert isinstance(screen, SideBySideScreen)
        await wait_for(pilot, lambda: all(column.view.is_mounted for column in screen.columns))
        await pilot.pause()

        def shown() -> list[tuple[bool, str]]:
            return [(column.title.plain.startswith("▸"), column.styles.border_top[0])
                    for column in screen.columns]

        assert shown() == [(True, "heavy"), (False, "round")]
        await pilot.press("tab")
        await wait_for(pilot, lambda: shown()[1][0])
        assert shown() == [(False, "round"), (True, "heavy")]
