"""The line above or below the thoughts pane's window (widgets/thought_list.py) that says how
many thoughts the window leaves out on that side."""

from __future__ import annotations

from textual import events
from textual.content import Content
from textual.geometry import Size
from textual.message import Message
from textual.reactive import Reactive
from textual.widget import Widget

from bbm_tui.ui.text import MUTED, styled


class OutOfWindow(Widget):
    """"↑ 9,880 earlier thoughts": what the window leaves out on one side. A click brings
    them in. One line, redrawn without a new layout when only its count changes."""

    # It does not scroll: its virtual size, set in the layout that first shows it, need not
    # ask for another layout (see ThoughtList.virtual_size), nor a repaint after it (a second
    # frame after a jump): that layout paints a line whose size changed.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)

    DEFAULT_CSS = """
    OutOfWindow {
        height: 1;
        padding: 0 1;
    }
    """

    class Clicked(Message):
        """The line was clicked: the pane pages a window's worth that way (-1 up, 1 down)."""

        def __init__(self, direction: int) -> None:
            super().__init__()
            self.direction = direction

    def __init__(self, side: str) -> None:
        super().__init__(id=f"thoughts-{side}", classes="out-of-window")
        self.side = side
        self.count = 0
        self.display = False

    def set_count(self, count: int) -> None:
        if count == self.count:
            return
        self.count = count
        if self.display != (count > 0):
            self.display = count > 0
        self.refresh()

    def render(self) -> Content:
        if not self.count:
            return Content("")
        word = "earlier" if self.side == "before" else "later"
        keys = "k, pgup or home" if self.side == "before" else "j, pgdn or G"
        arrow = "↑" if self.side == "before" else "↓"
        noun = "thought" if self.count == 1 else "thoughts"
        return styled(f"{arrow} {self.count:,} {word} {noun} ({keys})", f"italic {MUTED}")

    def on_click(self, event: events.Click) -> None:
        event.stop()
        self.post_message(self.Clicked(-1 if self.side == "before" else 1))
