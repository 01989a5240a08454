"""A trace open while the terminal changes size: every thought that fits is shown from the
top (no blank band left by the anchor that followed the end), and the selected thought stays
in view when the thoughts get taller."""

from __future__ import annotations

from ui_helpers import make_app, thought, wait_for

from bbm_tui.ui.screens.trace import TraceScreen


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
