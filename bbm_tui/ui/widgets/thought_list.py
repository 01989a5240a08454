"""The thoughts pane: a window of a trace's thoughts, never all of them (bench/big_store.py).

A trace of 10^5 steps mounted as 10^5 `ThoughtView`s took 22 s a key and 2.6 GB. This pane
mounts at most `WINDOW` finished thoughts (plus the one streaming), around the thought the
screen asks to show; a line above and below says how many thoughts are out of the window. When
the screen asks for a thought outside it, or near its edge, the window moves there: the views
of thoughts that leave are handed on to the thoughts that enter (`ThoughtView.show_step`) and
moved in place, rather than removed and new ones mounted, which cost two layouts and the new
widgets' styles (`G` and `home` took 57-84 ms, bench/big_store.py); then the screen dresses
them through `decorate` (status, finder mark, selection). At the end of the trace the window
follows the new thoughts as they come, so streaming and following work as before.

While the pane follows the end of a trace being generated (anchored), it mounts fewer: only
the last thoughts that fill it twice over, and at least `FOLLOWED` of them. Each line a
streaming thought gains is a layout of every thought mounted: a thinking model's reasoning,
whose window is full (40 paragraphs, or sentences), laid out twice the thoughts of a trace
generated a step at a time at the same pace, whose window fills as it goes
(bench/thinking_stream.py). The window widens again (to `WINDOW`) as soon as a key or a
click moves it.

The screen talks to it through `reveal`, `view`, `views`, `sync`, `add_streaming`,
`streaming_finished` and `drop`; it never mounts or queries thoughts itself.

Side by side (screens/side_by_side.py), the columns share one window of thought numbers
(`share_window`): it is always WINDOW numbers wide, a column mounting those of them it has;
the column with the keys leads, and the others (`lead` set) take its window and its scroll
offset, never scrolling or moving their window on their own. A column that ran out of
thoughts or went on longer then still shows Thought N on Thought N's row.

Views are looked up by the step they show, not by their number: a number is a
place on the path from the root to the head, and two branches each have a "Thought 4". The
window itself is a range of places on the path on show.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, cast

from textual.await_remove import AwaitRemove
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.reactive import Reactive
from textual.scrollbar import ScrollBar
from textual.widget import Widget

from bbm_tui.ui.widgets.out_of_window import OutOfWindow
from bbm_tui.ui.widgets.thought import ThoughtView

if TYPE_CHECKING:
    from textual.layout import DockArrangeResult

    from bbm_tui.core.store import Step

# Finished thoughts mounted at most; a move that comes within MARGIN of an edge of the window
# (short of the trace's ends) centres the window again. A trace of up to WINDOW thoughts is
# mounted whole, as before.
WINDOW = 40
MARGIN = 8
# While following the end (see the module's docstring): at least this many thoughts mounted
# (more than MARGIN, so that the selection following the last thought never moves the window).
FOLLOWED = 2 * MARGIN


class ThoughtList(VerticalScroll, can_focus=False):
    """A scrolling pane of thoughts that never takes the focus (the screen's keys always reach
    the screen; the mouse wheel still scrolls it), mounting only a window of them."""

    # Textual's `virtual_size` asks for a layout when it changes, and it changes in the layout
    # that placed a moved window's thoughts: a second layout of the whole screen and a second
    # frame, 20-30 ms after the first, for every G, home or jump (bench/big_store.py: a key
    # "until settled"). Nothing in that second layout depends on it: the layout that set it
    # placed the thoughts, updated the scrollbar (`_scroll_update`) and kept the anchor, and a
    # scrollbar that comes or goes asks for its own layout (`show_vertical_scrollbar`). Nor a
    # repaint: the pane draws nothing of its own that its scrollable height changes (its
    # scrollbars are widgets of their own, updated by that layout).
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)

    def __init__(
        self,
        steps: Callable[[], Sequence[Step]],
        *,
        around: int,
        wall_clock: bool,
        decorate: Callable[[list[ThoughtView]], None],
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self._steps = steps
        self._wall_clock = wall_clock
        self._decorate = decorate
        # The finished views, in their order on screen, and the same by the step they show.
        self._shown: list[ThoughtView] = []
        self._views: dict[int, ThoughtView] = {}
        self._streaming: ThoughtView | None = None
        # Side by side (share_window): the window is WINDOW numbers wide, whatever this
        # trace's length; `lead` is the list whose window and scrolling this one follows
        # (None: its own); `on_window_moved` is told when the window moved.
        self.shared = False
        self.lead: ThoughtList | None = None
        self.on_window_moved: Callable[[], None] | None = None
        count = len(steps())
        # The number of steps the window was last fitted to: a window that reached the end
        # then takes in the steps added since.
        self._count = count
        self._lo, self._hi = self._window_around(around, count)
        # The window changed since the last layout: places read now are stale.
        self._reflowing = False
        # A view to scroll into sight (centred or not) in the layout that places it: see
        # `arrange`.
        self._scroll_pending: tuple[ThoughtView, bool] | None = None
        self._before = OutOfWindow("before")
        self._after = OutOfWindow("after")
        # Everything fitted when the end was last to be followed: anchor once it no longer
        # does (see `follow`).
        self._follow_pending = True

    # -- what the screen reads

    @property
    def window(self) -> tuple[int, int]:
        """The first and last thought number of the window (1-based; (1, 0) for none): the
        thoughts mounted are those of them the trace has."""
        return self._lo, self._hi

    @property
    def last_mounted(self) -> int:
        """The number of the last finished thought mounted (lo - 1 for none)."""
        return min(self._hi, len(self._steps()))

    @property
    def at_end(self) -> bool:
        """The window reaches the last thought (new thoughts will be shown as they come)."""
        return self._hi >= len(self._steps())

    def view(self, number: int) -> ThoughtView | None:
        """The finished view of the path's thought `number`, if it is in the window."""
        steps = self._steps()
        if not 1 <= number <= len(steps):
            return None
        return self._views.get(steps[number - 1].id)

    @property
    def streaming(self) -> ThoughtView | None:
        """The thought streaming now, if any (on show or not)."""
        return self._streaming

    def views(self) -> list[ThoughtView]:
        """The finished thoughts mounted, in order."""
        return list(self._shown)

    # -- building

    def compose(self):
        yield self._before
        steps = self._steps()
        for number in range(self._lo, self.last_mounted + 1):
            view = ThoughtView.of_step(steps[number - 1], wall_clock=self._wall_clock)
            self._shown.append(view)
            yield view
        self._index()
        yield self._after

    def on_mount(self) -> None:
        self._show_counts()

    # -- moving the window

    def reveal(self, number: int) -> ThoughtView | None:
        """Make thought `number` part of the window (moving the window if it is outside or
        near an edge) and return its view."""
        count = len(self._steps())
        if not 1 <= number <= count:
            return None
        near_top = number - self._lo < MARGIN and self._lo > 1
        near_bottom = self._hi - number < MARGIN and self._hi < count
        if (number < self._lo or number > self._hi or near_top or near_bottom) \
                and self.lead is None:
            self._move_to(*self._window_around(number, count))
        return self.view(number)

    def scroll_to_thought(self, view: ThoughtView, *, center: bool = False) -> None:
        """Scroll `view` into sight: now if it is laid out and in place, else once it is (a
        view that just entered the window has no place yet, and views that entered or left
        above it move it). A list that follows another's scrolling (`lead`) is left where
        that one puts it."""
        if self.lead is not None:
            return

        def scroll() -> None:
            if center:
                self.scroll_to_center(view, animate=False, immediate=True)
            else:
                self.scroll_to_widget(view, animate=False, immediate=True)

        if view.number == 1 and self._lo == 1:
            # Forced: a pane with nothing to scroll keeps any offset it had otherwise.
            self.scroll_home(animate=False, immediate=True, force=True)
        elif view.number == len(self._steps()) and self.max_scroll_y > 0:
            self.anchor()  # the bottom, once laid out (and it follows new thoughts)
        elif view.virtual_region.height and not self._reflowing:
            scroll()
        else:
            # Scrolled in the layout that places it (`arrange`), in the same frame; scrolled
            # after that layout only if it did not (the view not laid out there). Side by
            # side, always after: the other columns follow this one's scrolling through its
            # watchers, which the scroll set in the layout does not call.
            if not self.shared:
                self._scroll_pending = (view, center)

            def settled() -> None:
                self._reflowing = False
                pending = self._scroll_pending
                if self.shared or (pending is not None and pending[0] is view):
                    self._scroll_pending = None
                    scroll()

            self.call_after_refresh(settled)

    def _scroll_update(self, virtual_size: Size) -> None:
        """Textual's update of the scroll bar after a layout changed the pane's scrollable
        height (every jump that moves the window), with its repaint in that layout's frame.
        Textual asks for that repaint with a message handled after the frame: a second frame,
        20-30 ms after the first (at most 60 a second), for the scroll bar alone
        (bench/big_store.py, "until settled"). Called only from the screen's layout, which
        paints the compositor's dirty regions right after (Screen._refresh_layout)."""
        super()._scroll_update(virtual_size)
        bar = self.vertical_scrollbar
        compositor = self.screen._compositor
        if bar._repaint_required and bar in compositor.visible_widgets:
            compositor.update_widgets({bar})
            bar._repaint_required = False

    def arrange(self, size: Size, optimal: bool = False) -> DockArrangeResult:
        """Place the thoughts, and scroll a view that waited for its place (a jump that moved
        the window) to it, in this same layout, as Textual's anchor keeps the bottom: the
        compositor places the thoughts by the scroll offset set here. Scrolled once laid out
        instead (`call_after_refresh`), the jump took a second layout and frame, 20-40 ms
        after the first (bench/big_store.py, "until settled")."""
        arrangement = super().arrange(size, optimal)
        if optimal:
            return arrangement
        self._anchor_to_this_height(size)
        # The places read from now on are this layout's (the compositor's map of it).
        self._reflowing = False
        self._take_leads_offset(arrangement, size)
        pending = self._scroll_pending
        if pending is None:
            return arrangement
        view, center = pending
        placed = next((placement for placement in arrangement.placements
                       if placement.widget is view), None)
        if placed is None:
            return arrangement
        self._scroll_pending = None
        region = placed.region + placed.offset
        height = size.height
        if center:
            y = region.y - (height - region.height) // 2
        elif region.y < self.scroll_y or region.height > height:
            y = region.y
        elif region.bottom > self.scroll_y + height:
            y = region.bottom - height
        else:
            y = round(self.scroll_y)
        y = max(0, min(y, arrangement.total_region.bottom - height))
        # As a scroll to a widget does: an anchor (set by G) would put the bottom back.
        self.release_anchor()
        # Without their watchers (which would ask for another layout): the compositor reads
        # the offset right after this; the scroll bar's thumb is drawn from its position.
        self.set_reactive(cast("Reactive[float]", Widget.scroll_y), float(y))
        self.set_reactive(cast("Reactive[float]", Widget.scroll_target_y), float(y))
        self.vertical_scrollbar.set_reactive(cast("Reactive[float]", ScrollBar.position),
                                             float(y))
        self.vertical_scrollbar.refresh()  # painted in this layout's frame: _scroll_update
        return arrangement

    def _take_leads_offset(self, arrangement: DockArrangeResult, size: Size) -> None:
        """Side by side, a list that follows another (`lead`) takes its scroll offset in the
        layout that moved it, as the lead's anchor moved it there (Textual sets an anchored
        list's offset in the layout, without its watchers: the screen passed it on once laid
        out, a scroll and a frame of their own after each line the columns gained: 7-10 in
        5 s of two columns streaming, bench/side_by_side.py). Textual lays the columns out
        right to left, so the lead's offset is worked out here as its anchor will set it:
        the bottom of its thoughts less its height, from its arrangement, which Textual keeps
        for the lead's own layout that follows (the same size, the same children)."""
        lead = self.lead
        if lead is None or not (lead._anchored and not lead._anchor_released):
            return
        lead_size = lead.scrollable_content_region.size
        if not lead_size.height:
            return  # not laid out yet
        lead_y = Widget.arrange(lead, lead_size).total_region.bottom - lead_size.height
        y = max(0, min(lead_y, arrangement.total_region.bottom - size.height))
        if y == round(self.scroll_y):
            return
        # As `arrange` scrolls to a pending view: the compositor places the thoughts by the
        # offset set here, and the scroll bar's thumb is drawn from its position.
        self.set_reactive(cast("Reactive[float]", Widget.scroll_y), float(y))
        self.set_reactive(cast("Reactive[float]", Widget.scroll_target_y), float(y))
        self.vertical_scrollbar.set_reactive(cast("Reactive[float]", ScrollBar.position),
                                             float(y))
        self.vertical_scrollbar.refresh()

    def _anchor_to_this_height(self, size: Size) -> None:
        """Keep the bottom in view in a layout that changed the pane's height (a line under
        it came or went as a thought finished). Textual's anchor, right after this arrange,
        scrolls to the bottom by `container_size`, which is still the last layout's until the
        screen's layout updates it (`_size_updated`): the pane stopped a line short of the
        bottom, its scroll bar painted there, and the next layout scrolled the last line in
        without repainting the bar (the anchor sets the bar's position without a refresh):
        the thumb stayed drawn part of a cell above the bottom. The height `size` gives (the
        pane's own, less a horizontal bar) is the one the layout is about to set."""
        if not self._anchored or self._anchor_released:
            return
        height = size.height + self.scrollbar_size_horizontal
        if self._container_size.height != height:
            self._container_size = self._container_size.with_height(height)

    def on_out_of_window_clicked(self, message: OutOfWindow.Clicked) -> None:
        message.stop()
        self.page(message.direction)

    def page(self, direction: int) -> None:
        """Bring in the thoughts beyond one edge (a click on "↑ N earlier thoughts")."""
        count = len(self._steps())
        if self.lead is not None:
            return
        if direction < 0 and self._lo > 1:
            self._move_to(*self._window_around(self._lo - WINDOW // 2 + MARGIN, count))
            view = self.view(self._lo + WINDOW // 2 - MARGIN)
        elif direction > 0 and self._hi < count:
            self._move_to(*self._window_around(self._hi + WINDOW // 2 - MARGIN, count))
            view = self.view(self._hi - WINDOW // 2 + MARGIN)
        else:
            return
        if view is not None:
            self.scroll_to_thought(view)

    def sync(self) -> None:
        """Mount the committed steps the window should show and has no view for (new steps
        at the end while the window reaches it, a commit that finished as a run stopped)."""
        count = len(self._steps())
        if self._hi >= self._count:  # the window reached the end: it takes in the new steps
            hi = max(count, self._hi) if self.shared else count
        else:
            hi = min(self._hi, count)
        lo = max(self._lo, hi - WINDOW + 1)
        if lo > min(hi, count):  # the branch on show got shorter than where the window was
            lo, hi = self._window_around(min(hi, count), count)
        self._move_to(lo, hi)

    async def replace_stale(self) -> None:
        """After the branch on show changed: the views of steps it no longer has show its
        own (or go), and those that go are waited for (so that a query never finds both
        branches' thoughts)."""
        steps = self._steps()
        if any(not _shows(view, steps) for view in self._shown):
            count = len(steps)
            hi = min(self._hi, count)
            lo = max(self._lo, hi - WINDOW + 1)
            if lo > hi:
                lo, hi = self._window_around(hi, count)
            removed = self._move_to(lo, hi)
            if removed is not None:
                await removed
        self.sync()

    def _window_around(self, number: int, count: int) -> tuple[int, int]:
        if count <= WINDOW:
            return (1, WINDOW if self.shared else count)
        lo = min(max(number - WINDOW // 2, 1), count - WINDOW + 1)
        return lo, lo + WINDOW - 1

    def _move_to(self, lo: int, hi: int) -> AwaitRemove | None:
        """Show thoughts `lo` to `hi`: views that show one of them already stay as they are;
        the others are handed on to the thoughts without a view, in place (new ones mounted
        only when the window grew); views left over are removed (what their removal returns,
        to wait for it). A list that follows another (`lead`) takes that one's window."""
        if self.lead is not None:
            lo, hi = self.lead.window
        elif self.shared:
            hi = lo + WINDOW - 1
        moved = (lo, hi) != (self._lo, self._hi)
        self._lo, self._hi = lo, hi
        steps = self._steps()
        self._count = len(steps)
        last = min(hi, len(steps))
        # Kept: a view that shows the step the trace has at its number, in the window.
        kept = {view.step.id: view for view in self._shown
                if view.step is not None and lo <= view.number <= last and _shows(view, steps)}
        spare = [view for view in self._shown
                 if view.step is None or kept.get(view.step.id) is not view]
        spare.reverse()  # handed on from the top of the screen down
        order: list[ThoughtView] = []
        handed_on: list[ThoughtView] = []
        for number in range(lo, last + 1):
            step = steps[number - 1]
            view = kept.get(step.id)
            if view is None:
                if spare:
                    view = spare.pop()
                    view.show_step(step, wall_clock=self._wall_clock)
                else:
                    view = ThoughtView.of_step(step, wall_clock=self._wall_clock)
                handed_on.append(view)
            order.append(view)
        self._place(order)
        self._shown = order
        self._index()
        removed = self.remove_children(spare) if spare else None
        if handed_on:
            self._decorate(handed_on)
        if handed_on or spare:
            self._reflowing = True
        streaming = self._streaming
        if streaming is not None and streaming.parent is None and self.at_end:
            self.mount(streaming, before=self._after)  # the reader is back at the end
        self._show_counts()
        if moved and self.on_window_moved is not None:
            self.on_window_moved()
        return removed

    def _place(self, order: list[ThoughtView]) -> None:
        """Put the views in `order` on screen, one after the other under the line of
        earlier thoughts: new ones mounted there, the others moved only if out of place
        (after a window moved down, the views handed on from the top go to the bottom)."""
        previous: Widget = self._before
        for view in order:
            if view.parent is None:
                self.mount(view, after=previous)
            elif self.children.index(view) != self.children.index(previous) + 1:
                self.move_child(view, after=previous)
            previous = view

    def _index(self) -> None:
        self._views = {view.step.id: view for view in self._shown if view.step is not None}

    def _show_counts(self) -> None:
        count = len(self._steps())
        self._before.set_count(min(self._lo - 1, count) if self._hi else 0)
        self._after.set_count(max(0, count - self._hi))

    @property
    def later_line_shown(self) -> bool:
        """The line "↓ N later thoughts" is on show under the window."""
        return self._after.display

    def share_window(self) -> None:
        """Side by side: the window is WINDOW thought numbers wide from now on, whatever the
        trace's length (see the module's docstring)."""
        self.shared = True
        self._move_to(self._lo, self._hi)

    def follow_lead(self, lead: ThoughtList | None) -> None:
        """Take `lead`'s window and scrolling (None: lead, with the window as it is). A list
        that follows lets go of its own anchor: it is scrolled with the lead."""
        self.lead = lead
        if lead is None:
            return
        if self.is_anchored:
            self.anchor(False)
        if lead.window != self.window:
            self._move_to(*lead.window)

    # -- following the end

    def follow(self, *, at_end: bool = False) -> None:
        """Keep new text in view while the reader is at the end of the trace, and only then
        (`at_end`: the reader just went back to the last thought).

        Textual's anchor does the following (and lets go when the reader scrolls up, and
        takes hold again back at the bottom); it also pins short content to the bottom, so
        it is only set once the thoughts overflow the pane.
        """
        if self.lead is not None:
            return  # scrolled with the list it follows (side by side)
        if not self.at_end:
            return  # the window is elsewhere in a long trace: nothing to follow there
        if self.is_anchored and not at_end:
            return
        if self.max_scroll_y == 0:
            self._follow_pending = True  # everything fits: follow once it no longer does
        elif at_end or self._follow_pending or self.scroll_y >= self.max_scroll_y - 1:
            self._follow_pending = False
            self.anchor()

    def fit_after_resize(self) -> bool:
        """A taller or wider pane can fit every thought: the anchor that followed the end
        would then pin them to the bottom, under a blank band. Let go of it (True) then."""
        if self.lead is not None or not (self.is_anchored and self.max_scroll_y == 0):
            return False
        self.anchor(False)
        self._follow_pending = True  # anchored again once the thoughts overflow
        # Forced: with nothing to scroll, Textual would leave the anchor's offset as it was.
        self.scroll_home(animate=False, immediate=True, force=True)
        return True

    def keep_in_view(self, view: ThoughtView | None, *, moved: bool) -> None:
        """After a resize: scroll `view` (the selection) back into sight if it left it, unless
        the pane follows the end and the reader has not moved away from it."""
        if view is None or self.lead is not None or (self.is_anchored and not moved):
            return  # following the end: the anchor keeps the last thought in view
        top, bottom = self.scroll_y, self.scroll_y + self.scrollable_content_region.height
        region = view.virtual_region
        if region.y < top or region.bottom > bottom:
            self.scroll_to_thought(view)

    # -- streaming

    def add_streaming(self, view: ThoughtView) -> None:
        """A thought starting to stream: on show if the window reaches the end; otherwise it
        streams unseen until the reader comes back to the end."""
        self._streaming = view
        if self.at_end:
            self.mount(view, before=self._after)

    def streaming_finished(self, view: ThoughtView, *, selected: int = 0) -> None:
        """Its step is committed (and in the steps): it is one of the window's thoughts now.
        While the pane follows the end, the window keeps only the last thoughts that fill it
        (see the module's docstring), and thought `selected` (the selection) with them."""
        if self._streaming is view:
            self._streaming = None
        if view.parent is self and self._hi >= view.number - 1 and view.step is not None:
            self._shown.append(view)
            self._index()
            self._decorate([view])
            hi = max(self._hi, view.number) if self.shared else view.number
            lo = max(self._lo, hi - WINDOW + 1)
            if self._following_the_end():
                followed = self._followed_from()
                lo = max(lo, min(followed, selected) if selected >= 1 else followed)
            self._move_to(lo, hi)
        else:
            self.drop(view)
            self.sync()

    def _following_the_end(self) -> bool:
        """The pane follows the end of its own trace (anchored there, the reader has not
        scrolled away); never side by side, where the columns share one window."""
        return (not self.shared and self.lead is None and self._anchored
                and not self._anchor_released)

    def _followed_from(self) -> int:
        """The first of the last thoughts mounted that fill the pane twice over (their
        heights as last laid out), at least FOLLOWED of them: the window's first thought
        while the pane follows the end."""
        height = self.scrollable_content_region.height
        if not height:
            return self._lo  # not laid out yet
        rows = 0
        for count, shown in enumerate(reversed(self._shown), start=1):
            rows += shown.outer_size.height
            if count >= FOLLOWED and rows >= 2 * height:
                return shown.number
        return self._lo

    def drop(self, view: ThoughtView) -> None:
        """A thought that stopped streaming without being committed."""
        if self._streaming is view:
            self._streaming = None
        if view.parent is not None:
            view.remove()


def _shows(view: ThoughtView, steps: Sequence[Step]) -> bool:
    """The view shows the step the trace has at its number."""
    return (view.number <= len(steps) and view.step is not None
            and view.step.id == steps[view.number - 1].id)
