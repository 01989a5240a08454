"""Text beside a gutter, wrapped with a hanging indent: "  3 ✓ " and then lines that all start
under the text, not under the number (the annotation queue's thoughts)."""

from __future__ import annotations

from textual.content import Content
from textual.geometry import Size
from textual.widgets import Static


class HangingStatic(Static):
    """A Static whose text wraps beside a fixed-width gutter. `show(gutter, body)` replaces
    both; the gutter is drawn on the first line only, blank cells under it after."""

    def __init__(self, *, gutter_width: int = 6, **kwargs) -> None:
        super().__init__(**kwargs)
        self._gutter_width = gutter_width
        self._gutter = Content("")
        self._body = Content("")
        self._cache: tuple[int, Content, int] | None = None

    def show(self, gutter: Content, body: Content) -> None:
        """Replace the gutter and the text. The screen is laid out again only when the height
        changes: a thought whose state changes keeps it, and a layout costs every widget."""
        width = self.content_size.width
        before = self._drawn(width)[1] if width > 0 else -1
        self._gutter, self._body = gutter, body
        self._cache = None
        after = self._drawn(width)[1] if width > 0 else -2
        self.refresh(layout=before != after)

    def _drawn(self, width: int) -> tuple[Content, int]:
        """The text wrapped to `width`, and its height in lines."""
        if self._cache is not None and self._cache[0] == width:
            return self._cache[1], self._cache[2]
        lines = self._body.wrap(max(width - self._gutter_width, 8)) or [Content("")]
        gutter = self._gutter.pad_right(self._gutter_width - self._gutter.cell_length)
        # A style of its own (one that changes nothing): an SVG screenshot then draws the
        # indent as its own run and the text at its column, instead of one run that starts
        # with spaces, which renderers that collapse leading whitespace shifted left.
        indent = Content.styled(" " * self._gutter_width, "not dim")
        drawn = Content("\n").join((gutter if index == 0 else indent).append(line)
                                   for index, line in enumerate(lines))
        self._cache = (width, drawn, len(lines))
        return drawn, len(lines)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._drawn(width)[1]

    def render(self) -> Content:
        return self._drawn(self.content_size.width)[0]
