"""The snapshot tests' helpers (ui_helpers.py) against what Textual does under load."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import TextArea
from ui_helpers import still_cursors, wait_for


class OneTextArea(App):
    def compose(self) -> ComposeResult:
        yield TextArea("pear fig", id="area")


async def test_still_cursors_draws_a_cursor_a_blink_had_hidden() -> None:
    """Textual caches a TextArea's lines under one key for "blinking, cursor hidden" and "not
    blinking", so a line drawn while a blink hid the cursor was drawn again without it once
    blinking was off (a snapshot taken under load lost its cursor so)."""
    app = OneTextArea()
    async with app.run_test(size=(40, 8)) as pilot:
        area = app.query_one("#area", TextArea)
        area.focus()
        # The blink's hidden half (Textual's own flag), and the line drawn then.
        await wait_for(pilot, lambda: not area._cursor_visible, timeout=30)
        hidden = area.render_line(0)
        still_cursors(pilot)
        await pilot.pause()
        assert not area.cursor_blink
        assert area.render_line(0).text == hidden.text
        assert list(area.render_line(0)) != list(hidden), "the cursor is not drawn"
