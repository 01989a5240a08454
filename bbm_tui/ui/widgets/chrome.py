"""The screens' chrome: a static line without a line-cache, the footer that shows its keys in
the first frame, and the one-line title bar."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import HorizontalGroup
from textual.content import Content
from textual.widgets import Footer, Static


class LeanStatic(Static):
    """A Static that asks for a re-layout of the screen only when its size changes.

    A layout costs every widget on the screen (hundreds on a long trace), and most updates
    while a thought streams keep the size: then repainting this one widget is enough.
    """

    def __init__(self, *args, auto_width: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._auto_width = auto_width
        self._shape: tuple[int, int] | None = None

    def show(self, content: Content) -> None:
        width = self.content_size.width
        height = content.get_height(self.styles, width) if width > 0 else -1
        shape = (height, content.cell_length if self._auto_width else 0)
        self.update(content, layout=height < 0 or shape != self._shape)
        self._shape = shape


class KeysFooter(Footer):
    """A Footer that shows the screen's keys in its first frame.

    Textual's Footer draws nothing until the screen announces its bindings, and then
    recomposes a frame later; on the app's first screen that put the keys a few hundred
    milliseconds after everything else. The screen's and the app's bindings are known when
    the Footer is composed, so it may as well draw them then (later changes still recompose).
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._bindings_ready = True  # Textual's own flag (textual 8): "bindings are known"


class TitleBar(HorizontalGroup):
    """One line at the top of a screen: what is on show (left) and running figures (right)."""

    def __init__(self, left: Content | str = "", right: Content | str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self._left = LeanStatic(left, classes="title-left", markup=False)
        self._right = LeanStatic(right, classes="title-right", markup=False, auto_width=True)

    def compose(self) -> ComposeResult:
        yield self._left
        yield self._right

    def set_left(self, content: Content) -> None:
        self._left.show(content)

    def set_right(self, content: Content) -> None:
        self._right.show(content)
