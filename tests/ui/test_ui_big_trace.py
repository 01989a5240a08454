"""A trace of 10^4 thoughts mounts a bounded window of them and every key still works at the
far end (issue 8 item 13); the keyboard flow of issue 10 item 6."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from textual.pilot import Pilot
from ui_helpers import SIZE, make_app, on_each_frame, recorded_session, thought, wait_for

from bbm_tui.core.store import Store, Totals, default_path
from bbm_tui.core.trace.tree import CHUNK
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.screens.trace.host import TOTALS_LATER_FROM_STEPS
from bbm_tui.ui.viewmodels.trace import FinderShown
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import WINDOW, ThoughtList
from tests.big_stores import big_session

STEPS = 10_000
# G, home and G again on a trace of 500 thoughts, each with the thought it selects.
JUMPS = (("G", 500), ("home", 1), ("G", 500))


async def open_trace(pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted, timeout=30)
    await pilot.pause()
    return pilot.app.screen


@asynccontextmanager
async def settled_trace(steps: int) -> AsyncIterator[tuple[Pilot, TraceScreen]]:
    """The app on a stored trace of `steps` thoughts, open, given time to draw itself."""
    app = make_app(session_id=big_session(default_path(), steps))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.pause(0.3)
        yield pilot, screen


async def jump(pilot: Pilot, screen: TraceScreen, key: str, number: int) -> None:
    """`key`, once it selected thought `number`, and time for any later layout or frame."""
    await pilot.press(key)
    await wait_for(pilot, lambda: screen.view.selected == number)
    await pilot.pause(0.3)


def mounted(screen: TraceScreen) -> list[ThoughtView]:
    return list(screen.query(ThoughtView))


def status_text(screen: TraceScreen) -> str:
    return str(screen.query_one("#run-status").render())


async def test_ten_thousand_thoughts_mount_a_window_and_keys_work_at_the_end(
    store: Store,
) -> None:
    session_id = big_session(default_path(), STEPS)
    app = make_app(session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        assert len(screen.view.trace.steps) == STEPS
        assert len(mounted(screen)) <= WINDOW
        assert screen.view.selected == 1
        assert f"{STEPS - WINDOW:,} later thoughts" in str(
            screen.query_one("#thoughts-after").render())
        await pilot.press("end")
        assert screen.view.selected == STEPS
        last = thought(screen, STEPS)
        await wait_for(pilot, lambda: screen.query_one("#thoughts").region
                       .contains_region(last.region))
        await pilot.press("k")
        assert screen.view.selected == STEPS - 1
        assert len(mounted(screen)) <= WINDOW
        assert [v.number for v in screen.query(".-selected")] == [STEPS - 1]
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == STEPS - 1)
        label = store.current_label(session_id)
        assert label is not None and label.mistake_step_id == screen.view.trace.steps[-2].id
        await wait_for(pilot, lambda: thought(screen, STEPS).status == "after")
        assert thought(screen, STEPS - 1).status == "mistake"
        # Back at the start: the window moved, the thoughts there are dressed as "ok".
        await pilot.press("home")
        assert screen.view.selected == 1
        first = thought(screen, 1)
        assert first.status == "ok" and first.has_class("-selected")
        assert len(mounted(screen)) <= WINDOW
        assert screen.query_one(ThoughtList).view(STEPS) is None
        # Typing a number, then enter, goes there.
        await pilot.press("5", "0", "0", "0")
        assert "Go to Thought 5000" in status_text(screen)
        await pilot.press("enter")
        assert screen.view.selected == 5000
        view = thought(screen, 5000)
        assert view.has_class("-selected")
        await pilot.pause()
        pane = screen.query_one("#thoughts")
        await wait_for(pilot, lambda: pane.region.contains_region(view.region))
        await pilot.press("9", "9", "9", "9", "9", "enter")
        assert screen.view.selected == 5000 and "There is no Thought 99999" in status_text(screen)
        # y copies the thought selected, even far from where the window began.
        await pilot.press("G", "y")
        assert app.clipboard == screen.view.trace.steps[-1].text
        assert len(mounted(screen)) <= WINDOW


def shown_in_order(screen: TraceScreen) -> list[ThoughtView]:
    """The finished views in their order on screen (the pane's children)."""
    pane = screen.query_one(ThoughtList)
    return [child for child in pane.children if isinstance(child, ThoughtView)]


def assert_window_shows_its_steps(screen: TraceScreen, first: int, last: int) -> None:
    views = shown_in_order(screen)
    assert [view.number for view in views] == list(range(first, last + 1))
    for view in views:
        step = screen.view.trace.steps[view.number - 1]
        assert view.step == step and view.text == step.text
        assert view.has_class("-selected") == (view.number == screen.view.selected)
    assert screen.query_one(ThoughtList).views() == views


async def test_a_moving_window_hands_its_views_on_instead_of_mounting_new_ones(
    store: Store,
) -> None:
    """G, home and a jump move the window by far more than its size: the same views show
    the new thoughts (no widget mounted or removed, which was most of a key's time), each
    dressed for its new thought: its number, text, status, finder mark and selection."""
    session_id = big_session(default_path(), 2_000)
    app = make_app(session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("3", "enter", "x")  # the first mistake in Thought 3
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 3)
        shown = FinderShown("direct-step", "replay/bbm", state="finished")
        shown.verdicts = {2: ("Yes", "Yes"), 1_990: ("No", "No, it is wrong.")}
        screen.view.finder = shown
        screen.view._show_finder()
        await pilot.press("k", "e", "k")  # Thought 2's mark opened, then Thought 1
        assert thought(screen, 2).expanded
        views = set(shown_in_order(screen))
        assert len(views) == WINDOW
        await pilot.press("G")
        assert set(shown_in_order(screen)) == views
        assert_window_shows_its_steps(screen, 2_000 - WINDOW + 1, 2_000)
        assert {view.status for view in views} == {"after"}
        assert "model: ✗" in thought(screen, 1_990).meta
        assert not any(view.expanded for view in views)
        assert [view.number for view in views if view.judgement] == [1_990]
        await pilot.press("home")
        assert set(shown_in_order(screen)) == views
        assert_window_shows_its_steps(screen, 1, WINDOW)
        assert [thought(screen, n).status for n in (1, 2, 3, 4)] == [
            "ok", "ok", "mistake", "after"]
        assert "model: ✓" in thought(screen, 2).meta and not thought(screen, 2).expanded
        # Down past the window's margin: it moves by part of itself, the views that left
        # the top go to the bottom, in order.
        for _ in range(WINDOW - 7):
            await pilot.press("j")
        low, high = screen.query_one(ThoughtList).window
        assert low > 1 and set(shown_in_order(screen)) == views
        assert_window_shows_its_steps(screen, low, high)
        await pilot.press("1", "0", "0", "0", "enter")
        assert set(shown_in_order(screen)) == views
        low, high = screen.query_one(ThoughtList).window
        assert low <= 1_000 <= high
        assert_window_shows_its_steps(screen, low, high)
        pane = screen.query_one("#thoughts")
        view = thought(screen, 1_000)
        await wait_for(pilot, lambda: pane.region.contains_region(view.region))


async def test_a_moved_window_is_laid_out_once(store: Store) -> None:
    """G, home and a jump lay the screen out once: the pane's new scrollable height, set in
    that layout, asked Textual for a second layout of the whole screen (and a second frame,
    20-30 ms later: bench/big_store.py's "until settled"), which changed nothing."""
    async with settled_trace(500) as (pilot, screen):
        layouts: list[bool] = []
        # Counted at the screen's private layout method (Textual has no public hook for it);
        # the test alone uses it.
        original = screen._refresh_layout

        def counted(*args, **kwargs) -> None:  # type: ignore[no-untyped-def]
            layouts.append(True)
            original(*args, **kwargs)

        screen._refresh_layout = counted  # type: ignore[method-assign]
        for key, number in JUMPS:
            layouts.clear()
            await jump(pilot, screen, key, number)
            assert len(layouts) == 1, key
            assert screen.query_one("#thoughts").region.contains_region(
                thought(screen, number).region)


async def test_a_moved_window_draws_each_thought_once(store: Store) -> None:
    """After G, home or a jump each thought that entered the window is drawn once, in the
    layout's frame: the new size the layout gave it (its `virtual_size`) asked for a repaint
    of every one of them a frame later (bench/big_store.py: a second frame of ~30 views)."""
    async with settled_trace(500) as (pilot, screen):
        drawn: list[int] = []
        # Counted where the compositor draws a widget's lines (Widget.render_lines).
        original = ThoughtView.render_lines

        def counted(view: ThoughtView, crop):  # type: ignore[no-untyped-def]
            drawn.append(id(view))
            return original(view, crop)

        ThoughtView.render_lines = counted  # type: ignore[method-assign]
        try:
            for key, number in JUMPS:
                drawn.clear()
                await jump(pilot, screen, key, number)
                assert drawn, key
                assert max(drawn.count(view) for view in drawn) == 1, key
        finally:
            ThoughtView.render_lines = original  # type: ignore[method-assign]


async def test_a_jump_settles_in_one_frame(store: Store) -> None:
    """G, home, a page and digits+enter each make one frame: the jump that moved the window
    scrolled once laid out (a second layout and frame), and the scroll bar, its thumb moved,
    was repainted a frame after that (bench/big_store.py's "until settled", 47-66 ms where
    the first frame took 25). The thought is in sight and the thumb where the pane is."""
    async with settled_trace(500) as (pilot, screen):
        frames: list[bool] = []  # counted where the app writes a frame, as the bench does
        on_each_frame(pilot.app, lambda screen_, update: frames.append(True))
        pane = screen.query_one(ThoughtList)
        for keys in (["G"], ["home"], ["pagedown"], ["2", "5", "0", "enter"], ["pagedown"],
                     ["G"], ["1", "2", "enter"]):
            *digits, key = keys
            for digit in digits:
                await pilot.press(digit)
            await pilot.pause(0.3)
            before = screen.view.selected
            frames.clear()
            await pilot.press(key)
            await wait_for(pilot, lambda before=before: screen.view.selected != before
                           and bool(frames))
            await pilot.pause(0.3)  # time for any later frame to come
            assert len(frames) == 1, keys
            view = thought(screen, screen.view.selected)
            assert pane.region.contains_region(view.region), keys
            assert pane.vertical_scrollbar.position == pane.scroll_y, keys


async def test_finder_marks_show_on_thoughts_that_enter_the_window(store: Store) -> None:
    session_id = big_session(default_path(), 2_000)
    app = make_app(session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        shown = FinderShown("direct-step", "replay/bbm", state="finished")
        shown.verdicts = {1: ("Yes", "Yes"), 1_999: ("No", "No, it is wrong.")}
        screen.view.finder = shown
        screen.view._show_finder()
        assert "model: ✓" in thought(screen, 1).meta
        await pilot.press("end", "k")
        view = thought(screen, 1999)
        assert "model: ✗" in view.meta
        await pilot.press("e")
        assert view.expanded and "No, it is wrong." in view.shown


async def test_page_keys_move_by_a_screenful(store: Store) -> None:
    session_id = big_session(default_path(), 500)
    app = make_app(session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.pause()
        in_view = screen.view.thoughts_in_view()
        assert 3 <= in_view < 40
        await pilot.press("pagedown")
        assert screen.view.selected == 1 + max(1, in_view - 1)
        await pilot.press("pagedown", "pageup")
        assert screen.view.selected == 1 + max(1, in_view - 1)
        await pilot.press("pageup", "pageup")
        assert screen.view.selected == 1


async def test_the_selection_follows_generation_so_x_after_r_flags_the_last(
    store: Store,
) -> None:
    app = make_app(task="word_sorting", question=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=30)
        last = len(screen.view.trace.steps)
        assert last > 2 and screen.view.selected == last
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == last)


async def test_a_moved_selection_stays_while_thoughts_come(store: Store) -> None:
    app = make_app(task="word_sorting", question=2)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("n", "n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 2 and not screen.view.running)
        await pilot.press("k")  # the reader moves: Thought 1
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 3 and not screen.view.running)
        assert screen.view.selected == 1
        await pilot.press("G", "n")  # back at the end: following again
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 4 and not screen.view.running)
        assert screen.view.selected == 4


@pytest.mark.parametrize("size", [(80, 24), SIZE])
async def test_a_long_thought_and_the_question_scroll_by_keyboard(
    store: Store, size: tuple[int, int]
) -> None:
    trace = recorded_session(store, "logical_deduction", 0,
                             steps=["word " * 600, "A short one."])
    app = make_app(session_id=trace.id)
    async with app.run_test(size=size) as pilot:
        screen = await open_trace(pilot)
        thoughts = screen.query_one("#thoughts")
        assert screen.view.selected == 1 and thoughts.max_scroll_y > 3
        await pilot.press("J", "J")
        assert thoughts.scroll_y == 6
        await pilot.press("K")
        assert thoughts.scroll_y == 3
        question = screen.query_one("#question-pane")
        if size == (80, 24):
            assert question.max_scroll_y > 0
        await pilot.press("]")
        assert question.scroll_y == min(3, question.max_scroll_y)
        await pilot.press("[")
        assert question.scroll_y == 0


async def test_a_branch_switch_shows_the_new_branchs_thoughts(store: Store) -> None:
    session_id = big_session(default_path(), 300)
    app = make_app(session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("end")
        # A new version of Thought 3 (what backtracking and hand edits do): the branch on
        # show is now three thoughts long, and the pane shows them, not the old ones.
        old_third = screen.view.trace.steps[2]
        screen.view.trace.fork_at(3)
        screen.view.trace.append_typed("a new third thought")
        screen.view.sync_views()
        await pilot.pause()
        numbers = [view.number for view in mounted(screen)]
        assert numbers == [1, 2, 3]
        assert thought(screen, 3).text == "a new third thought"
        # Both branches have a Thought 3; the views are found by step, so they never collide,
        # and no view shows the old branch's any more.
        assert thought(screen, 3).step == screen.view.trace.steps[2]
        assert not [view for view in screen.query(ThoughtView) if view.step == old_third]
        assert not screen.query_one("#thoughts-before").display
        assert not screen.query_one("#thoughts-after").display


async def test_a_big_sessions_totals_are_read_after_its_first_frame(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every call of a session of thousands of steps summed costs SQLite tens of ms (57 on
    10^5 steps): the trace screen is on show before they are read, and its title shows
    them as soon as they are (a small session's are read before, tests/ui/test_ui_cost.py)."""
    session_id = big_session(default_path(), TOTALS_LATER_FROM_STEPS + 1)
    app = make_app(session_id=session_id)
    screens_when_read: list[object] = []
    read = Store.totals

    def totals(self: Store, session: int) -> Totals:
        screens_when_read.append(app.screen)
        return read(self, session)

    monkeypatch.setattr(Store, "totals", totals)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        right = screen.query_one("#title-bar .title-right")
        await wait_for(pilot, lambda: str(right.render()).startswith(
            f"{TOTALS_LATER_FROM_STEPS + 1:,} calls"))
        assert screen.view.totals.calls == TOTALS_LATER_FROM_STEPS + 1
        assert screens_when_read == [screen]


async def test_n_reads_a_long_branch_once_a_key_not_twice(store: Store) -> None:
    """Whether `n` goes on from a stopped backtracked thinking branch is the trace's state,
    known since it was loaded (core/trace/session.py `stopped`): before, every n and r asked
    the store in a thread first, and the question read every step of the branch, besides
    the read the prompt makes (counted on the real SQLite store's connection)."""
    steps = 2_000
    session_id = big_session(default_path(), steps)
    app = make_app(session_id=session_id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        assert app.store is not None
        statements: list[str] = []
        app.store._connection.set_trace_callback(statements.append)
        try:
            for _ in range(3):  # each at once at the step limit (160), with no call
                screen.view.say("")
                await pilot.press("n")
                await wait_for(pilot, lambda: "step limit" in status_text(screen)
                               and not screen.view.running)
        finally:
            app.store._connection.set_trace_callback(None)
    step_reads = [sql for sql in statements if "s.id IN (" in sql]
    # Each key reads the branch once, for the prompt (its thoughts so far: 32 windows of 64
    # steps), and once more before for the question, its windows gone from the cache by then.
    windows = -(-steps // CHUNK)
    assert len(step_reads) <= 3 * windows + 3, (len(step_reads), windows)


async def test_a_call_made_while_a_big_sessions_totals_are_read_is_counted_once(
    store: Store, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call saved while the totals are still being read (after the first frame) reads them
    again: the read under way may have missed it, the next one counts it, once."""
    import threading

    from bbm_tui.core.records import CallPurpose, CallRecord
    from bbm_tui.ui.screens.trace.messages import CallsMade

    calls = TOTALS_LATER_FROM_STEPS + 1
    session_id = big_session(default_path(), calls)
    app = make_app(session_id=session_id)
    first_read_may_end = threading.Event()
    reads: list[int] = []
    read = Store.totals

    def totals(self: Store, session: int) -> Totals:
        reads.append(session)
        found = read(self, session)
        if len(reads) == 1:  # the first read ends after the call below is saved: stale
            first_read_may_end.wait(30)
        return found

    monkeypatch.setattr(Store, "totals", totals)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await wait_for(pilot, lambda: len(reads) == 1)
        call = CallRecord(model="replay/bbm", params={}, latency_s=0.1, prompt_tokens=9,
                              completion_tokens=3, cost=0.0)
        store.record_call(session_id, CallPurpose.FIND, call)
        screen.view.post_message(CallsMade(call))
        await wait_for(pilot, lambda: len(reads) == 2)
        first_read_may_end.set()  # without the call: dropped
        right = screen.query_one("#title-bar .title-right")
        await wait_for(pilot, lambda: str(right.render()).startswith(f"{calls + 1:,} calls"))
        await pilot.pause(0.2)
        assert screen.view.totals.calls == calls + 1
        assert str(right.render()).startswith(f"{calls + 1:,} calls")


async def test_a_click_on_the_line_of_later_thoughts_brings_them_in(store: Store) -> None:
    """"↓ N later thoughts (…)" under the window is a button: a click moves the window down
    (and "↑ N earlier thoughts" appears above it); a click on that one moves it back up."""
    app = make_app(session_id=big_session(default_path(), 300))
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        pane = screen.query_one(ThoughtList)
        assert pane.window[0] == 1 and pane.view(WINDOW + 1) is None
        pane.scroll_end(animate=False, immediate=True)  # the line is under the window
        await pilot.pause()
        await pilot.click("#thoughts-after")
        await wait_for(pilot, lambda: pane.view(WINDOW + 1) is not None)
        assert pane.window[0] > 1 and len(mounted(screen)) <= WINDOW
        earlier = screen.query_one("#thoughts-before")
        assert earlier.display and "earlier thoughts" in str(earlier.render())
        pane.scroll_home(animate=False, immediate=True)
        await pilot.pause()
        await pilot.click("#thoughts-before")
        await wait_for(pilot, lambda: pane.window[0] == 1)
        assert not screen.query_one("#thoughts-before").display
