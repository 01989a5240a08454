"""Textual's painting, made cheaper where it costs the streaming screens most: a compositor
that repaints, on a scroll right after a layout, only what the scroll moved, not the whole
screen (the side-by-side screen's columns: side_by_side.py); and strips that do not hold
themselves (`strips_divided_whole_make_no_cycle`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from textual._compositor import Compositor, CompositorMap, ReflowResult
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget


class ScrollAfterLayoutCompositor(Compositor):
    """Textual's compositor, with one difference: a scroll's repaint is worked out against
    the last layout's map when no scroll came since that layout.

    A scroll's quick path (`reflow_visible`) marks dirty what moved since the last map of the
    visible widgets. A layout (`reflow`) drops that map, and Textual's scroll then compares
    with nothing: every visible widget counts as moved, the screen itself too, and the whole
    screen is painted again (title, question, both columns, footer). Side by side, each line
    a streaming column gains is a layout, and the scroll of the columns that follow it comes
    a frame after: 5-10 whole screens in 5 s of two columns streaming, 18% of the cells they
    paint (bench/side_by_side.py). The layout's map is what the screen shows after that
    layout's frame (Screen._refresh_layout paints it at once), so the widgets the scroll did
    not move are left as they are on screen."""

    def __init__(self) -> None:
        super().__init__()
        # The map of the last layout, while no scroll has come since (the screen shows it).
        self._laid_out: CompositorMap | None = None

    def reflow(self, parent: Widget, size: Size) -> ReflowResult:
        result = super().reflow(parent, size)
        self._laid_out = self._full_map
        return result

    def reflow_visible(self, parent: Widget, size: Size) -> set[Widget]:
        if self._visible_map is None and self._laid_out is not None:
            # Every widget of the layout's map, the visible ones among them: those the
            # scroll left where they were are no change; those it moved, or showed, are.
            self._visible_map = self._laid_out
        self._laid_out = None
        return super().reflow_visible(parent, size)


def strips_divided_whole_make_no_cycle() -> None:
    """Textual's `Strip.divide` keeps what it returns in the strip's own cache, and a strip
    cut at its own end alone returns itself: a strip that holds itself, a reference cycle
    (with its seven caches and its segments) that only the cycle collector frees. The
    compositor divides every line it paints so: in 3 s of two columns streaming, 911 of the
    992 strips in the collector's garbage (23,341 objects) were such cycles, and the young
    passes that found them came 2.5 times as often as for one column (bench/side_by_side.py,
    traced with gc.DEBUG_SAVEALL). Such a division is answered here without the cache: the
    same strip, in a new list each time, and nothing holds the strip but its painter."""
    if hasattr(Strip.divide, "__wrapped__"):
        return  # already answered so (one app after another in a process: the tests)
    divide = Strip.divide

    @functools.wraps(divide)  # Textual's own as __wrapped__ (tests/ui/test_textual_private.py)
    def divide_without_cycle(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        cuts = list(cuts)
        length = self.cell_length
        if [cut for cut in cuts if cut <= length] == [length]:
            return [self]
        return divide(self, cuts)

    # setattr, not an assignment: the type checker rightly refuses to assign to a method.
    setattr(Strip, "divide", divide_without_cycle)  # noqa: B010
