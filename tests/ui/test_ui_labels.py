"""Issue 10, item 5: labels that say what they mean. "No mistake" is for the thoughts it was
given on (stale once the trace grows); `c` on a wrong answer asks first; `c` on an empty trace
says why nothing happened."""

from __future__ import annotations

from textual.widgets import DataTable

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import is_correct
from bbm_tui.ui.dialogs import ConfirmScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.ui.ui_helpers import SIZE, make_app, notifications, recorded_session, wait_for

TASK = "tracking_shuffled_objects"


def text_of(screen: TraceScreen, selector: str) -> str:
    return str(screen.query_one(selector).render()).strip()


async def open_trace(pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


def right_answer_index() -> int:
    rows = bundled_rows(TASK)
    return next(i for i, row in enumerate(rows) if is_correct(row.answer, row.target))


async def test_no_mistake_on_a_trace_that_then_grew_is_shown_stale(store: Store) -> None:
    steps = list(bundled_rows(TASK)[0].steps)
    trace = recorded_session(store, TASK, 0, steps=steps[:2])
    trace.mark_no_mistake()
    trace.load_recorded(steps[2:4])  # two more thoughts after the label
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        label = text_of(screen, "#label")
        assert "no mistake in Thoughts 1-2 only" in label
        assert "stale: given before 2 more were written" in label
        # c again covers all four: no longer stale.
        await pilot.press("c")
        await wait_for(pilot, lambda: "stale" not in text_of(screen, "#label"))
        assert text_of(screen, "#label") == "Label: ✓ no mistake"


async def test_c_on_a_wrong_answer_asks_first(store: Store) -> None:
    row = bundled_rows(TASK)[0]
    assert not is_correct(row.answer, row.target)
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "is wrong" in str(app.screen.query_one(".dialog-text").render())
        await pilot.press("n")  # changed my mind: nothing labelled
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("u")  # a later key's effect proves c's refusal went through
        await wait_for(pilot, lambda: "no label to undo" in text_of(screen, "#run-status"))
        assert screen.view.trace.label is None and store.current_label(trace.id) is None
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.view.trace.no_mistake)


async def test_c_on_a_right_answer_labels_at_once(store: Store) -> None:
    trace = recorded_session(store, TASK, right_answer_index())
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: screen.view.trace.no_mistake)
        assert not isinstance(app.screen, ConfirmScreen)


async def test_c_on_an_empty_trace_says_why_nothing_happened(store: Store) -> None:
    trace = recorded_session(store, TASK, 0, steps=[])
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("c")
        await wait_for(pilot, lambda: "Nothing to label yet" in text_of(screen, "#run-status"))
        assert screen.view.trace.label is None


# -- messages: undo says what the label is now; "1 thought"

async def test_undo_says_what_the_label_is_now(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        await pilot.press("c")  # the answer is wrong: c asks first
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.view.trace.no_mistake)
        await pilot.press("u")
        await wait_for(pilot, lambda: text_of(screen, "#run-status")
                       == "Label undone: ✗ first mistake in Thought 2")
        await pilot.press("u")
        await wait_for(pilot, lambda: text_of(screen, "#run-status")
                       == "Label undone: not labelled yet")
        assert text_of(screen, "#label") == "Label: not labelled yet"


async def test_one_thought_is_one_thought_everywhere_it_is_counted(store: Store) -> None:
    steps = list(bundled_rows(TASK)[0].steps)
    trace = recorded_session(store, TASK, 0, steps=steps[:1])
    trace.mark_no_mistake()
    trace.load_recorded(steps[1:2])  # one more thought after the label
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        assert "(stale: given before 1 more was written; label again)" in \
            text_of(screen, "#label")
        assert "no mistake in Thought 1 only" in text_of(screen, "#label")
        await pilot.press("Y")
        await wait_for(pilot, lambda: any("Copied the trace (2 thoughts)." in note
                                          for note in notifications(app)))

    one = recorded_session(store, TASK, 1, steps=steps[:1])
    app = make_app(session_id=one.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        assert text_of(screen, "#run-status").startswith("1 thought so far. n for the next")
        await pilot.press("Y")
        await wait_for(pilot, lambda: any("Copied the trace (1 thought)." in note
                                          for note in notifications(app)))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one(DataTable).row_count == 2)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert "(1 thought)? This cannot be undone." in \
            str(app.screen.query_one(".dialog-text").render())
