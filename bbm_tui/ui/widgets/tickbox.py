"""A checkbox that reads as what it is. Apart from the screens' chrome (ui/widgets/chrome.py)
so that the app's first frame, which has none, does not import Textual's toggle buttons."""

from __future__ import annotations

from textual.widgets import Checkbox


class TickBox(Checkbox):
    """A checkbox that reads as what it is: a tick when on, nothing when off. Textual's shows
    an X either way and only changes its colour, and an X reads as ticked."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._show_mark()

    def watch_value(self) -> None:
        super().watch_value()
        self._show_mark()

    def _show_mark(self) -> None:
        self.BUTTON_INNER = "✓" if self.value else " "
        self.refresh()
