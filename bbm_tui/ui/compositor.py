"""Textual's painting, made cheaper where it costs the streaming screens most: a compositor
that renders, for a frame that repaints a few lines, only the widgets on those lines (the
trace screen: screens/trace/screen.py); one that repaints, on a scroll right after a layout,
only what the scroll moved, not the whole screen (the side-by-side screen's columns:
side_by_side.py); and strips that do not hold themselves
(`strips_divided_whole_make_no_cycle`)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence

from textual._compositor import Compositor, CompositorMap, ReflowResult
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget


class LinesOnlyCompositor(Compositor):
    """Textual's compositor, with one difference: a frame that repaints part of the screen
    renders only the widgets that show on its lines, and only those lines of them.

    Textual renders, for such a frame, every widget whose clip (its container's visible
    region) meets the lines to repaint, and the whole of each: a token streamed into a thought
    repaints one line, yet every thought on show was rendered again (from their caches), the
    footer and the title too (their clip is the screen), and all but that line thrown away.
    With a dozen short thoughts on show (a reasoning cut by sentence), that was half the
    cost of a streaming frame (bench/thinking_stream.py). What reaches the terminal is the
    same: the frame paints only the lines and columns it repaints, and a widget that does
    not show there gave nothing to them."""

    def _get_renders(
        self, crop: Region | None = None
    ) -> Iterable[tuple[Region, Region, list[Strip]]]:
        if crop is None or crop == self.size.region:
            yield from super()._get_renders(crop)
            return
        top, bottom = crop.y, crop.bottom
        overlaps = crop.overlaps
        for widget, (region, clip) in self.visible_widgets.items():
            shown = region.intersection(clip)
            if not overlaps(shown):
                continue  # nothing of it on the lines and columns repainted
            # Its part on the lines repainted, the whole width it shows (the compositor cuts
            # each line at every widget's edges, as for a whole render).
            first, last = max(shown.y, top), min(shown.bottom, bottom)
            lines = Region(shown.x, first, shown.width, last - first)
            # As Textual's: the region, a clip (the part rendered: the compositor paints
            # `region ∩ clip`, line by line from its top) and that part's lines.
            yield region, lines, widget.render_lines(lines.translate(-region.offset))


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
