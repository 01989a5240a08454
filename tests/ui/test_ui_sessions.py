"""The sessions screen: list, resume, rename, delete (with confirmation)."""

from __future__ import annotations

from textual.widgets import DataTable, Input
from textual.widgets._footer import FooterKey
from ui_helpers import SIZE, make_app, recorded_session, wait_for

from bbm_tui.core.store import Store
from bbm_tui.ui.dialogs import ConfirmScreen, RenameScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.thought import ThoughtView


async def sessions_screen(pilot, rows: int) -> SessionsScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
    await pilot.press("s")
    await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
    screen = app.screen
    await wait_for(pilot, lambda: screen.query_one(DataTable).row_count == rows)
    return screen


def cell_texts(screen: SessionsScreen, row: int) -> list[str]:
    table = screen.query_one(DataTable)
    return [str(cell) for cell in table.get_row_at(row)]


async def test_the_list_shows_every_session_with_its_label(store: Store) -> None:
    first = recorded_session(store, "word_sorting", 0)
    second = recorded_session(store, "dyck_languages", 3, name="mine")
    second.flag_mistake(2)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await sessions_screen(pilot, 2)
        newest = cell_texts(screen, 0)
        assert newest[:3] == ["mine", "dyck_languages", "replay/bbm"]
        assert newest[3] == str(len(second.steps)) and "mistake at 2" in newest[4]
        oldest = cell_texts(screen, 1)
        assert oldest[0] == "word_sorting #0" and oldest[4] == "—"
        assert screen.selected_id() == second.id
        assert first.id != second.id


async def test_enter_resumes_the_session_as_saved(store: Store) -> None:
    trace = recorded_session(store, "word_sorting", 4)
    trace.flag_mistake(3)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await sessions_screen(pilot, 1)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.pause()
        screen = app.screen
        views = list(screen.query(ThoughtView))
        assert [view.text for view in views] == [step.text for step in trace.steps]
        assert views[2].status == "mistake" and views[3].status == "after"
        assert screen.view.selected == 3


async def test_r_renames_in_the_store(store: Store) -> None:
    trace = recorded_session(store, "word_sorting", 0)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await sessions_screen(pilot, 1)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
        app.screen.query_one(Input).value = "  first  pass  "
        await pilot.press("enter")
        await wait_for(pilot, lambda: store.session(trace.id).name == "first pass")
        await wait_for(pilot, lambda: cell_texts(screen, 0)[0] == "first pass")
        # Esc in the rename box changes nothing.
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RenameScreen))
        app.screen.query_one(Input).value = "never"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RenameScreen))
        await app.workers.wait_for_complete()  # a rename would be a worker
        assert store.session(trace.id).name == "first pass"


async def test_d_deletes_only_after_confirmation(store: Store) -> None:
    keep = recorded_session(store, "word_sorting", 0)
    doomed = recorded_session(store, "word_sorting", 1)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await sessions_screen(pilot, 2)
        assert screen.selected_id() == doomed.id
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await app.workers.wait_for_complete()  # a deletion would be a worker
        assert {s.session.id for s in store.sessions()} == {keep.id, doomed.id}
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.query_one(DataTable).row_count == 1)
        assert [s.session.id for s in store.sessions()] == [keep.id]
        leftover = store._read("SELECT COUNT(*) FROM steps WHERE session_id = ?", (doomed.id,))
        assert leftover[0][0] == 0


async def test_deleting_the_open_session_leaves_it(store: Store) -> None:
    trace = recorded_session(store, "word_sorting", 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        screen = app.screen
        await wait_for(pilot, lambda: screen.query_one(DataTable).row_count == 1)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.query_one(DataTable).row_count == 0)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        assert store.sessions() == []


async def test_escape_goes_back() -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await sessions_screen(pilot, 0)
        assert "No sessions yet" in str(app.screen.query_one("#sessions-empty").render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))


async def test_the_footer_names_enter_and_enter_in_the_search_line_searches(
    store: Store,
) -> None:
    recorded_session(store, "word_sorting", 0)
    recorded_session(store, "dyck_languages", 3, name="mine")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await sessions_screen(pilot, 2)
        assert isinstance(screen.focused, DataTable)  # the list's own enter must not hide it
        await wait_for(pilot, lambda: any(
            key.action == "resume" and key.display for key in screen.query(FooterKey)))
        resumes = []
        resume = screen.action_resume
        screen.action_resume = lambda: (resumes.append(screen.focused), resume())
        await pilot.press("slash", *"mine", "enter")
        await wait_for(pilot, lambda: screen.query_one(DataTable).row_count == 1
                       and isinstance(screen.focused, DataTable))
        assert resumes == []  # enter in the search line searched, and opened nothing
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        assert len(resumes) == 1 and app.screen.view.trace.session.name == "mine"
