"""A trace open while the terminal changes size: every thought that fits is shown from the
top (no blank band left by the anchor that followed the end), and the selected thought stays
in view when the thoughts get taller."""

from __future__ import annotations

from ui_helpers import make_app, steady_frame, thought, wait_for

from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.thought_list import ThoughtList


async def run_to_the_answer(pilot) -> TraceScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
    screen = app.screen
    await pilot.press("r")
    await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                   timeout=30)
    await pilot.pause()
    return screen


def in_view(screen: TraceScreen, number: int) -> bool:
    pane = screen.query_one("#thoughts")
    region = thought(screen, number).region
    return bool(region) and pane.content_region.contains_region(region)


async def test_growing_from_80x24_to_250x50_leaves_no_blank_band() -> None:
    app = make_app(task="word_sorting", question=15)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await run_to_the_answer(pilot)
        pane = screen.query_one("#thoughts")
        assert pane.max_scroll_y > 0 and in_view(screen, len(screen.view.trace.steps))
        await pilot.resize_terminal(250, 50)
        await pilot.pause()
        await pilot.pause()
        assert pane.max_scroll_y == 0  # everything fits now
        assert pane.scroll_y == 0
        assert thought(screen, 1).region.y == pane.content_region.y
        for key in ("home", "G"):
            await pilot.press(key)
            await pilot.pause()
            assert thought(screen, 1).region.y == pane.content_region.y
        # And the trace still follows new thoughts once they overflow again.
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert in_view(screen, len(screen.view.trace.steps))


async def test_shrinking_from_120_to_80_columns_keeps_the_selection_in_view() -> None:
    app = make_app(task="word_sorting", question=15)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await run_to_the_answer(pilot)
        await pilot.press("6", "enter")
        await pilot.pause()
        assert screen.view.selected == 6 and in_view(screen, 6)
        await pilot.resize_terminal(80, 40)
        await pilot.pause()
        await pilot.pause()
        assert in_view(screen, 6)
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        await pilot.pause()
        assert in_view(screen, 6)


async def test_at_250_columns_the_trace_screen_uses_the_width() -> None:
    """Issue 34, item 15: at 250 columns the trace screen stopped at ~200, its two panes
    capped (80 and 120) and centred, 25 empty columns either side. The question keeps its
    readable width; the thoughts take the rest, to the right edge."""
    app = make_app(task="word_sorting", question=15)
    async with app.run_test(size=(250, 50)) as pilot:
        screen = await run_to_the_answer(pilot)
        await pilot.pause()
        question = screen.query_one("#question-pane").region
        thoughts = screen.query_one("#thoughts-pane").region
        assert question.x == 0 and question.right == thoughts.x
        assert thoughts.right == 250
        await pilot.resize_terminal(120, 40)  # narrower: the panes share it as before
        await pilot.pause()
        question = screen.query_one("#question-pane").region
        thoughts = screen.query_one("#thoughts-pane").region
        assert question.x == 0 and thoughts.right == 120
        assert question.width * 3 // 2 - 2 <= thoughts.width <= question.width * 3 // 2 + 2


async def test_the_scroll_bar_is_drawn_at_the_bottom_when_the_pane_got_shorter() -> None:
    """At 80x24 the thoughts pane loses a line as a step finishes, while it follows the end.
    Textual's anchor scrolled by the pane's height of the layout before: the pane stopped a
    line short of the bottom and its scroll bar was painted there; the next layout scrolled
    the last line in but left the bar as drawn, its thumb part of a cell above the bottom
    (the snapshot test_main_screen_after_a_few_steps caught it). The bar as drawn is the bar
    drawn again."""
    app = make_app(task="word_sorting", question=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.query_one(ThoughtList).is_mounted)
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        pane = screen.query_one(ThoughtList)
        # Each frame written (App._display, as test_ui_big_trace.py counts them) while the
        # pane follows the end: where it is and where its end is.
        short: list[tuple[float, int]] = []
        original = app._display

        def display(screen_, renderable) -> None:  # type: ignore[no-untyped-def]
            original(screen_, renderable)
            if renderable is not None and pane.is_anchored and pane.scroll_y < pane.max_scroll_y:
                short.append((pane.scroll_y, pane.max_scroll_y))

        app._display = display  # type: ignore[method-assign]
        for count in (1, 2, 3):
            await pilot.press("n")
            await wait_for(pilot, lambda count=count: len(screen.view.trace.steps) == count
                           and not screen.view.running)
        await steady_frame(pilot)
        # And a line less for it, every time: the terminal one line shorter.
        await pilot.resize_terminal(80, 23)
        await steady_frame(pilot)
        assert pane.scroll_y == pane.max_scroll_y > 0  # following the end, at the bottom
        assert short == []  # no frame stopped short of the bottom
        drawn = app.export_screenshot()
        pane.vertical_scrollbar.refresh()
        await steady_frame(pilot)
        assert app.export_screenshot() == drawn
