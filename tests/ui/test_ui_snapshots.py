"""SVG snapshots of the screens (pytest-textual-snapshot). `--snapshot-update` accepts changes;
look at the SVGs (or the HTML report of a failure) before accepting them.

Deterministic by construction: an instant replay model, a fresh store per test, no latencies
or dates on screen (wall_clock=False), no blinking cursors, no toasts.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Checkbox, DataTable, OptionList
from ui_helpers import make_app, recorded_session, steady_frame, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.store import Store
from bbm_tui.ui.dialogs import (
    ConfirmScreen,
    FindScreen,
    HelpScreen,
    ModelScreen,
    RenameScreen,
    StoreErrorScreen,
    TypedQuestionScreen,
)
from bbm_tui.ui.screens.backtrack import EditThoughtScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen

SIZE = (120, 36)
# Every screen and dialog at the smallest size it is made for and at a roomy one (issue 10,
# item 14).
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])


async def settle(pilot: Pilot) -> None:
    await steady_frame(pilot)


@SIZES
def test_new_session_screen(snap_compare, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await wait_for(pilot, lambda: app.screen.query_one("#questions", OptionList)
                       .option_count > 0)
        await pilot.press("down", "down")
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=run_before)


@SIZES
def test_main_screen_after_a_few_steps(snap_compare, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        for count in (1, 2, 3):
            await pilot.press("n")
            await wait_for(pilot, lambda count=count: len(screen.view.trace.steps) == count
                           and not screen.view.running, timeout=30)
        await settle(pilot)

    app = make_app(task="word_sorting", question=0)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_main_screen_at_250_columns(snap_compare) -> None:
    """Wide: the lines stop at a readable length and the panes sit together in the middle."""
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        for count in (1, 2):
            await pilot.press("n")
            await wait_for(pilot, lambda count=count: len(screen.view.trace.steps) == count
                           and not screen.view.running, timeout=30)
        await settle(pilot)

    app = make_app(task="word_sorting", question=0)
    assert snap_compare(app, terminal_size=(250, 50), run_before=run_before)


@SIZES
def test_main_screen_with_a_flagged_mistake(snap_compare, size: tuple[int, int]) -> None:
    with Store.open() as store:
        trace = recorded_session(store, "tracking_shuffled_objects", 0)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("j", "j", "j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await settle(pilot)

    app = make_app(session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_main_screen_with_finder_verdicts_and_agreement(
    snap_compare, size: tuple[int, int]
) -> None:
    """The person flagged Thought 4; CoT step-level on replay/bbm judged every thought; the
    model's reasoning on Thought 4 is open (e)."""
    with Store.open() as store:
        trace = recorded_session(store, "tracking_shuffled_objects", 0)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("j", "j", "j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("down")  # CoT, step-level
        app.screen.query_one("#find-judge-all", Checkbox).value = True
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.finder is not None
                       and screen.view.finder.state == "finished" and not screen.view.finding)
        assert screen.view.selected == 4  # the thought the model faults
        await pilot.press("e")
        await settle(pilot)

    app = make_app(session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_find_dialog(snap_compare, size: tuple[int, int]) -> None:
    with Store.open() as store:
        trace = recorded_session(store, "word_sorting", 3)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("down")
        await settle(pilot)

    app = make_app(session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_sessions_screen(snap_compare, size: tuple[int, int]) -> None:
    with Store.open() as store:
        recorded_session(store, "word_sorting", 2)
        flagged = recorded_session(store, "dyck_languages", 7, name="dyck, checked")
        flagged.flag_mistake(3)
        fine = recorded_session(store, "multistep_arithmetic", 11)
        fine.mark_no_mistake()

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one(DataTable).row_count == 3)
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=size, run_before=run_before)


@SIZES
def test_help_screen(snap_compare, size: tuple[int, int]) -> None:
    with Store.open() as store:
        trace = recorded_session(store, "logical_deduction", 1)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await settle(pilot)

    app = make_app(session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def _sessions_with_filters(snap_compare, size: tuple[int, int]) -> bool:
    """The sessions screen searched (`task:word`), then sorted by name (issue 10, item 10)."""
    with Store.open() as store:
        for index in (2, 5, 9):
            recorded_session(store, "word_sorting", index)
        flagged = recorded_session(store, "word_sorting", 7, name="sorting, checked")
        flagged.flag_mistake(3)
        recorded_session(store, "dyck_languages", 7, name="dyck, not listed")
        fine = recorded_session(store, "multistep_arithmetic", 11)
        fine.mark_no_mistake()

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one(DataTable).row_count == 6)
        await pilot.press("slash", *"task:word", "enter", "o")
        await wait_for(pilot, lambda: app.screen.query_one(DataTable).row_count == 4
                       and app.screen.query_one(DataTable).get_row_at(0)[0].plain
                       == "sorting, checked")
        await settle(pilot)

    return snap_compare(make_app(), terminal_size=size, run_before=run_before)


def test_sessions_screen_filtered_at_80x24(snap_compare) -> None:
    assert _sessions_with_filters(snap_compare, (80, 24))


def test_sessions_screen_filtered_at_120x40(snap_compare) -> None:
    assert _sessions_with_filters(snap_compare, (120, 40))


# -- the dialogs a person meets on the way (issue 10, item 14): at 80x24 nothing needed is
# cut off, and at 120x40 they look right.

def _on_new_session(key: str, dialog: type):
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                       and app.screen.query_one("#questions", OptionList).option_count > 0)
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, dialog))
        await settle(pilot)

    return run_before


@SIZES
def test_model_dialog(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(), terminal_size=size,
                        run_before=_on_new_session("ctrl+e", ModelScreen))


@SIZES
def test_typed_question_dialog(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(make_app(Config(model="solver/bbm")), terminal_size=size,
                        run_before=_on_new_session("ctrl+t", TypedQuestionScreen))


def _on_sessions(key: str, dialog: type):
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one(DataTable).row_count == 1)
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, dialog))
        await settle(pilot)

    return run_before


@SIZES
@pytest.mark.parametrize(("key", "dialog"), [("r", RenameScreen), ("d", ConfirmScreen)],
                         ids=["rename", "delete"])
def test_sessions_dialogs(snap_compare, size: tuple[int, int], key: str, dialog: type) -> None:
    with Store.open() as store:
        recorded_session(store, "dyck_languages", 7, name="dyck, checked")
    assert snap_compare(make_app(), terminal_size=size, run_before=_on_sessions(key, dialog))


# -- the store error and the rewrite dialog; the new-session and sessions screens at 250
# columns (the main screen's is above)

@SIZES
def test_store_error_dialog(snap_compare, size: tuple[int, int], tmp_path,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A file that is not a store: the dialog names it (a relative path, so that the snapshot
    does not hold the test's temporary folder)."""
    monkeypatch.chdir(tmp_path)
    Path("bbm-tui.sqlite3").write_text("not a database")

    async def run_before(pilot: Pilot) -> None:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, StoreErrorScreen))
        await settle(pilot)

    app = make_app(store_path=Path("bbm-tui.sqlite3"))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_edit_thought_dialog(snap_compare, size: tuple[int, int]) -> None:
    with Store.open() as store:
        trace = recorded_session(store, "multistep_arithmetic", 11)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("j")  # Thought 2, the one rewritten
        await wait_for(pilot, lambda: app.screen.view.selected == 2)
        # Pushed as `w` pushes it, but not from w's worker: that worker waits for the
        # dialog's answer, and a steady frame is one with no worker running.
        await app.push_screen(EditThoughtScreen(2, app.screen.view.trace.steps[1].text))
        await settle(pilot)

    app = make_app(session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_new_session_screen_at_250_columns(snap_compare) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                       and app.screen.query_one("#questions", OptionList).option_count > 0)
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=(250, 50), run_before=run_before)


def test_sessions_screen_at_250_columns(snap_compare) -> None:
    with Store.open() as store:
        recorded_session(store, "word_sorting", 2)
        flagged = recorded_session(store, "dyck_languages", 7, name="dyck, checked")
        flagged.flag_mistake(3)
        fine = recorded_session(store, "multistep_arithmetic", 11)
        fine.mark_no_mistake()

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one(DataTable).row_count == 3)
        await settle(pilot)

    assert snap_compare(make_app(), terminal_size=(250, 50), run_before=run_before)
