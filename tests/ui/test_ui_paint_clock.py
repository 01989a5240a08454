"""Streamed text is painted on the app's one clock (ui/paint_clock.py): what came between two
ticks, from every trace, is painted in one go; a thought that grows a line costs one layout of
the screen, not two; side by side, a column that follows its end keeps following when the
focused column's scroll is passed on to it; the collector runs on the app's schedule from
the first frame (issue 25: two columns streaming cost no more than the sum of one)."""

from __future__ import annotations

import asyncio
import gc

from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.strip import Strip
from textual.visual import Visual
from ui_helpers import make_app, on_each_frame, wait_for

from bbm_tui.core.store import Store
from bbm_tui.ui.paint_clock import PaintClock
from bbm_tui.ui.screens.model_column import Filler
from bbm_tui.ui.termination import DEFERRED_FULL_PASS, YOUNG_OBJECTS, collect_from_now_on
from bbm_tui.ui.widgets.thought import ThoughtView
from tests.ui.test_ui_side_by_side import raced_offline


class ClockApp(App[None]):
    def __init__(self) -> None:
        super().__init__()
        self.clock = PaintClock(self, per_second=20)


def recorder(order: list[str], name: str):
    """A paint that notes itself, and notes again once the event loop has moved on: two paints
    of one tick come before either's "after"."""
    def paint() -> None:
        order.append(name)
        asyncio.get_running_loop().call_soon(order.append, f"after {name}")
    return paint


async def test_what_came_between_two_ticks_is_painted_in_one_go() -> None:
    app = ClockApp()
    async with app.run_test() as pilot:
        order: list[str] = []
        app.clock.request("a", recorder(order, "a"))
        app.clock.request("b", recorder(order, "b"))
        app.clock.request("a", recorder(order, "a again"))  # replaces a's: one paint each
        await wait_for(pilot, lambda: len(order) == 4, timeout=5)
        assert order == ["a again", "b", "after a again", "after b"]


async def test_the_clock_paints_again_after_a_quiet_spell_and_forgets_what_is_cancelled(
) -> None:
    app = ClockApp()
    async with app.run_test() as pilot:
        order: list[str] = []
        app.clock.request("a", recorder(order, "a"))
        await wait_for(pilot, lambda: "after a" in order, timeout=5)
        await asyncio.sleep(0.3)  # several ticks with nothing to paint: the clock pauses
        app.clock.request("b", recorder(order, "b"))
        app.clock.request("c", recorder(order, "c"))
        app.clock.cancel("c")
        await wait_for(pilot, lambda: "after b" in order, timeout=5)
        await asyncio.sleep(0.2)
        assert order == ["a", "after a", "b", "after b"]


class OneThought(App[None]):
    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield ThoughtView(1, streaming=True)


async def test_a_thought_that_grows_a_line_costs_one_layout() -> None:
    """Textual's own virtual size asked for a second layout of the whole screen after the one
    that gave the thought its new height."""
    app = OneThought()
    async with app.run_test(size=(60, 20)) as pilot:
        thought = app.query_one(ThoughtView)
        thought.append("one line")
        thought.paint_appended()
        await pilot.pause()
        await pilot.pause()
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(app.screen, layouts.append)
        height = thought.size.height
        thought.append(" and then enough words to wrap onto a second line of the thought")
        assert thought.paint_appended(), "it took a line more"
        await wait_for(pilot, lambda: thought.size.height == height + 1, timeout=5)
        for _ in range(4):
            await pilot.pause()
        assert len(layouts) == 1


async def test_a_thought_that_grows_within_its_rows_height_costs_no_layout() -> None:
    """Side by side, a thought held at its row's height (`min-height`: the other column's
    thought of its number is taller) that gains a line within it keeps its height: it is
    drawn again where it is, as a whole render would draw it. It asked for a layout of the
    whole screen, as a thought that grows does (bench/side_by_side.py)."""
    app = OneThought()
    async with app.run_test(size=(60, 20)) as pilot:
        thought = app.query_one(ThoughtView)
        thought.styles.min_height = 4  # its row: the other column's thought has 4 lines
        thought.append("one line")
        thought.paint_appended()
        await wait_for(pilot, lambda: thought.size.height == 4, timeout=5)
        await pilot.pause()
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(app.screen, layouts.append)
        lines = len(thought._lines(thought.content_size.width))
        thought.append(" and then enough words to wrap onto a second line of the thought")
        assert not thought.paint_appended(), "laid out again"
        assert len(thought._lines(thought.content_size.width)) == lines + 1
        for _ in range(4):
            await pilot.pause()
        assert layouts == [] and thought.size.height == 4
        assert thought._render_cache.lines == drawn_lines(thought)
        # Past its row's height it is laid out again.
        thought.append(" and many more words, enough of them to wrap onto a third line and a"
                       " fourth line and a fifth line of the thought at this width")
        assert thought.paint_appended()
        await wait_for(pilot, lambda: thought.size.height > 4, timeout=5)
        assert len(layouts) == 1


class OneFiller(App[None]):
    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield ThoughtView(1)
            yield Filler()


async def test_a_filler_that_grows_costs_one_layout() -> None:
    """The blank under a column's last thought grows as the other columns' rows do: its
    own virtual size asked for a second layout of the whole screen, and a second frame,
    after the one that gave it its height."""
    app = OneFiller()
    async with app.run_test(size=(60, 20)) as pilot:
        filler = app.query_one(Filler)
        await pilot.pause()
        layouts: list[object] = []
        app.screen.screen_layout_refresh_signal.subscribe(app.screen, layouts.append)
        filler.set_rows(3)
        await wait_for(pilot, lambda: filler.size.height == 3, timeout=5)
        for _ in range(4):
            await pilot.pause()
        assert len(layouts) == 1


async def test_text_appended_is_drawn_at_the_paint_not_before() -> None:
    app = OneThought()
    async with app.run_test(size=(60, 20)) as pilot:
        thought = app.query_one(ThoughtView)
        thought.append("first")
        thought.paint_appended()
        await pilot.pause()
        thought.append(" second")
        assert thought.text == "first second"  # kept at once
        assert "second" not in thought.render().plain  # drawn at the clock's tick
        thought.paint_appended()
        assert "first second" in thought.render().plain
        await pilot.pause()
        assert "first second" in app.export_screenshot().replace("&#160;", " ")


def drawn_lines(thought: ThoughtView) -> list[Strip]:
    """The thought's lines as Textual draws them when it renders the whole widget."""
    width, height = thought.size
    return Visual.to_strips(thought, thought.render(), width, height, thought.visual_style)


async def forty_words_counting_renders(app: OneThought, pilot, monkeypatch
                                       ) -> tuple[ThoughtView, list[int]]:  # type: ignore[no-untyped-def]
    """The app's thought holding forty words, laid out; and, from now on, the lines with text
    each render of it by Textual draws (a line is drawn under blank ones)."""
    thought = app.query_one(ThoughtView)
    thought.append(" ".join(f"word{number}" for number in range(40)))
    thought.paint_appended()
    await wait_for(pilot, lambda: thought.size.height > 4, timeout=5)
    await pilot.pause()
    rendered: list[int] = []
    original = Visual.to_strips

    def to_strips(widget, visual, width, height, style, **kwargs):  # type: ignore[no-untyped-def]
        strips = original(widget, visual, width, height, style, **kwargs)
        if widget is thought:
            rendered.append(len([strip for strip in strips if strip.text.strip()]))
        return strips

    monkeypatch.setattr(Visual, "to_strips", to_strips)
    return thought, rendered


async def test_a_token_redraws_only_the_lines_it_changed(monkeypatch) -> None:
    """Textual rendered every line of the streaming thought again for each frame's tokens,
    though a token changes its last line or two (the thinking mode's paragraphs are ten
    lines and more: bench/thinking_stream.py)."""
    app = OneThought()
    async with app.run_test(size=(60, 20)) as pilot:
        thought, rendered = await forty_words_counting_renders(app, pilot, monkeypatch)
        height = thought.size.height
        thought.append("x")  # the last word grows: the same height
        assert not thought.paint_appended()
        await pilot.pause()
        await pilot.pause()
        assert thought.size.height == height
        assert rendered == [1], f"lines rendered for one token: {rendered}"
        assert thought._render_cache.lines == drawn_lines(thought)


async def test_a_thought_laid_out_for_a_line_it_gained_renders_only_the_lines_after_those_kept(
        monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A thought that gains a line is laid out again, and Textual rendered all its lines for
    its new height: a paragraph of ten lines and more, about ten times a second as a
    reasoning streams (bench/thinking_stream.py). Now the lines still as drawn are kept, and
    the lines drawn are those a whole render draws."""
    app = OneThought()
    async with app.run_test(size=(60, 20)) as pilot:
        thought, rendered = await forty_words_counting_renders(app, pilot, monkeypatch)
        for _ in range(3):
            height = thought.size.height
            rendered.clear()
            thought.append(" " + " ".join(["more"] * 12))  # a line more, at least
            assert thought.paint_appended()
            await wait_for(pilot, lambda height=height: thought.size.height > height,
                           timeout=5)
            await pilot.pause()
            # The line the cursor left, the new ones and the figures under them: not all.
            assert 0 < sum(rendered) <= thought.size.height - height + 2, rendered
            assert thought._render_cache.lines == drawn_lines(thought)
        # A new style (the selection's background): every line rendered again.
        rendered.clear()
        thought.add_class("-selected")
        thought.styles.background = "red"
        await pilot.pause()
        await pilot.pause()
        assert thought._render_cache.lines == drawn_lines(thought)


async def test_a_streaming_thought_draws_as_a_whole_render_would() -> None:
    """The lines redrawn alone are those a whole render draws, token after token (the cursor,
    new lines, the figures once finished, a status)."""
    app = OneThought()
    async with app.run_test(size=(50, 30)) as pilot:
        thought = app.query_one(ThoughtView)
        words = ["so", "the", "answer", "is", "12", "because", "3", "×", "4", "=", "12,",
                 "and", "[bold]not[/]", "13;", "then", "\\", "we", "check\n\nagain"] * 6
        for word in words:
            thought.append(word + " ")
            thought.paint_appended()
            await pilot.pause()
            assert thought._render_cache.lines == drawn_lines(thought), word
        thought.set_status("mistake")
        await pilot.pause()
        assert thought._render_cache.lines == drawn_lines(thought)
        assert "[bold]not[/]" in app.export_screenshot().replace("&#160;", " ")


async def test_a_following_column_keeps_following_when_the_scroll_is_passed_on(
        store: Store) -> None:
    """The columns scroll with the focused one; passing its scroll on to a column already
    there let go of that column's anchor, so that it lagged a line behind after each line
    the columns gained, caught up by a scroll (a frame) of its own."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        screen = await raced_offline(pilot, store)
        focused, other = screen.columns[0], screen.columns[1]
        for column in (focused, other):
            column.view.thoughts.scroll_end(animate=False, immediate=True)
            column.view.thoughts.anchor()
        thoughts, focused_thoughts = other.view.thoughts, focused.view.thoughts
        # Levelled (the columns as tall), both at their end: the focused one's scroll is
        # where the other already is.
        await wait_for(pilot, lambda: thoughts.max_scroll_y > 0
                       and thoughts.scroll_y == thoughts.max_scroll_y
                       == focused_thoughts.scroll_y == focused_thoughts.max_scroll_y,
                       timeout=10)
        scrolled: list[object] = []
        original = thoughts.scroll_to

        def scroll_to(*args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            scrolled.append((args, kwargs))
            original(*args, **kwargs)

        thoughts.scroll_to = scroll_to  # type: ignore[method-assign]
        screen._scrolled(focused)  # what a scroll of the focused column does
        assert scrolled == [], "a column already in place was scrolled (its anchor let go)"
        # Textual's own flag (test_textual_private.py pins the version): still following.
        assert thoughts.is_anchored and not thoughts._anchor_released
        # And one that is not in place is brought there.
        focused_thoughts.scroll_to(y=0, animate=False, immediate=True)
        await pilot.pause()
        screen._scrolled(focused)
        assert len(scrolled) == 1 and thoughts.scroll_y == 0


async def test_a_following_column_scrolls_in_the_layout_that_moved_the_focused_one(
        store: Store) -> None:
    """Side by side, the focused column follows its end: lines more in each column move it
    in a layout (Textual's anchor), and the other column is scrolled with it in that same
    layout, not by a scroll (and a frame) of its own after it. Textual lays the right-hand
    column out before the focused left-hand one: it took the offset a frame late, 7-10
    frames in 5 s of two columns streaming (bench/side_by_side.py)."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        screen = await raced_offline(pilot, store)
        lead, other = screen.columns[0].view.thoughts, screen.columns[1].view.thoughts
        lead.scroll_end(animate=False, immediate=True)
        lead.anchor()
        await wait_for(pilot, lambda: lead.max_scroll_y > 0
                       and other.scroll_y == lead.scroll_y == lead.max_scroll_y, timeout=10)
        for _ in range(4):
            await pilot.pause()
        start = lead.scroll_y
        seen: list[tuple[float, float]] = []
        screen.screen_layout_refresh_signal.subscribe(
            screen, lambda _screen: seen.append((lead.scroll_y, other.scroll_y)))
        scrolls: list[object] = []
        compositor = screen._compositor
        reflow_visible = compositor.reflow_visible

        def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
            scrolls.append(args)
            return reflow_visible(*args, **kwargs)

        compositor.reflow_visible = counted  # type: ignore[method-assign]
        # The last thought of each column two lines longer (a finder's verdict and its
        # answer shown under it): one layout.
        for thoughts in (lead, other):
            last = thoughts.views()[-1]
            last.set_judgement("yes", raw="right")
            last.set_expanded(True)
        await wait_for(pilot, lambda: lead.scroll_y > start, timeout=10)
        for _ in range(4):
            await pilot.pause()
        assert seen and seen[0][0] > start, seen
        assert seen[0][1] == seen[0][0], f"the other column was not moved with it: {seen}"
        assert other.scroll_y == lead.scroll_y
        assert scrolls == [], "the other column scrolled after the layout"


async def test_headers_shown_again_unchanged_paint_no_frame(store: Store) -> None:
    """The columns' headers are shown again each time a column finishes a step (both
    columns, whichever finished): their border titles and the focused column's heavy
    border, set again as they were, repainted both columns, a frame for nothing, while both
    streamed (bench/side_by_side.py)."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        screen = await raced_offline(pilot, store)
        for _ in range(8):
            await pilot.pause()
        frames: list[object] = []
        on_each_frame(app, lambda _screen, update: frames.append(update))
        screen._show_headers()
        for _ in range(4):
            await pilot.pause()
        assert frames == []
        # A column given the keys is still drawn so (and the other one no longer).
        screen.action_column(1)
        await wait_for(pilot, lambda: bool(frames), timeout=10)
        assert screen.columns[1].styles.border_top[0] == "heavy"
        assert screen.columns[0].styles.border_top[0] != "heavy"


def test_the_collector_runs_on_the_apps_schedule_from_the_first_frame() -> None:
    before = gc.get_threshold()
    try:
        collect_from_now_on()
        assert gc.get_threshold() == (YOUNG_OBJECTS, before[1], DEFERRED_FULL_PASS)
        assert gc.isenabled()
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
