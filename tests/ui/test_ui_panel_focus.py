"""Issue 34 item 16: the panel with the focus reads without colour: a heavy border and a "▸"
before its title, on the main screen and on the new-session screen; the marker follows the
focus and stays through a title changed while the panel has it."""

from __future__ import annotations

from textual.widget import Widget
from ui_helpers import SIZE, make_app, recorded_session, wait_for

from bbm_tui.core.store import Store
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.trace import TraceScreen


def title(panel: Widget) -> str:
    return panel.border_title or ""


def border(panel: Widget) -> str:
    return panel.styles.border_top[0]


async def test_the_main_screens_focused_panel_has_a_marker_and_a_heavy_border(
        store: Store) -> None:
    trace = recorded_session(store, "tracking_shuffled_objects", 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        thoughts, question = screen.query_one("#thoughts-pane"), screen.query_one("#question-pane")
        await pilot.pause()
        # The focus is on the trace view, whose keys act on the thoughts.
        await wait_for(pilot, lambda: app.focused is screen.view)
        await pilot.pause()
        assert title(thoughts).startswith("▸ Thoughts"), title(thoughts)
        assert not title(question).startswith("▸"), title(question)
        assert (border(thoughts), border(question)) == ("heavy", "round")
        # A title changed while the pane has the focus keeps the marker.
        screen.view.show_thoughts_title()
        await pilot.pause()
        assert title(thoughts).startswith("▸ Thoughts"), title(thoughts)
        # The focus leaves the view: no marker, no heavy border.
        screen.set_focus(None)
        await pilot.pause()
        assert not title(thoughts).startswith("▸"), title(thoughts)
        assert border(thoughts) == "round"


async def test_the_marker_follows_the_focus_between_panels() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                       and app.screen.is_mounted)
        await pilot.pause()
        screen = app.screen
        left, right = screen.query_one("#question-side"), screen.query_one("#model-side")
        marked: set[str] = set()
        for _ in range(12):  # Tab until each side has had the focus
            await pilot.press("tab")
            await pilot.pause()
            assert title(left).startswith("▸") == left.has_focus_within, title(left)
            assert title(right).startswith("▸") == right.has_focus_within, title(right)
            marked |= {title(panel) for panel in (left, right) if title(panel).startswith("▸")}
        assert marked == {"▸ Question", "▸ Task and model"}, marked
