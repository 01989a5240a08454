"""The sessions screen on many sessions: paging, search, filters, order, and where the cursor
goes after a delete (issue 8 item 13, issue 10 item 10)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from textual.pilot import Pilot
from textual.widgets import DataTable, Input
from ui_helpers import SIZE, make_app, recorded_session, wait_for

from bbm_tui.core.records import LabelFilter, SessionQuery
from bbm_tui.core.store import Store, default_path
from bbm_tui.ui.dialogs import ConfirmScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import KEPT, PAGE, SessionsScreen
from tests.big_stores import many_sessions


async def open_sessions(pilot) -> SessionsScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
    await pilot.press("s")
    await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                   and app.screen.query_one(DataTable).row_count > 0)
    return app.screen


def table(screen: SessionsScreen) -> DataTable:
    return screen.query_one(DataTable)


def names(screen: SessionsScreen) -> list[str]:
    """The names of the sessions in the list, in order, whole (a long one is shown cut)."""
    return [screen._summaries[int(row.key.value)].session.name
            for row in table(screen).ordered_rows]


def shown_names(screen: SessionsScreen) -> list[str]:
    """The names as the Name column shows them."""
    grid = table(screen)
    return [grid.get_row_at(row)[0].plain for row in range(grid.row_count)]


def status(screen: SessionsScreen) -> str:
    return str(screen.query_one("#sessions-status").render())


TASKS = ["word_sorting", "tracking_shuffled_objects", "logical_deduction",
         "multistep_arithmetic", "dyck_languages"]


def name_at(position: int, count: int = 1_000) -> str:
    """The name of the session at `position` of the list, newest first (tests/big_stores.py)."""
    index = count - 1 - position
    return f"{TASKS[index % 5]} #{index}"


@asynccontextmanager
async def a_thousand_sessions() -> AsyncIterator[tuple[Pilot, SessionsScreen, DataTable]]:
    """The app's sessions screen on 1,000 sessions (tests/big_stores.py), and its table."""
    many_sessions(default_path(), 1_000)
    async with make_app().run_test(size=SIZE) as pilot:
        screen = await open_sessions(pilot)
        yield pilot, screen, table(screen)


async def test_a_thousand_sessions_are_held_a_window_of_pages_at_a_time(store: Store) -> None:
    async with a_thousand_sessions() as (pilot, screen, grid):
        # A whole window at once: the table does not grow as the cursor goes down.
        assert grid.row_count == KEPT
        assert "1,000 sessions · newest first" in status(screen)
        assert names(screen)[0] == name_at(0)
        assert names(screen)[-1] == name_at(KEPT - 1)
        # Moving down to near the end of what is held brings the next page, and the first
        # goes: the table holds a window of the list.
        await pilot.press("ctrl+end")
        await wait_for(pilot, lambda: screen._offset == PAGE)
        assert grid.row_count == KEPT and names(screen)[0] == name_at(PAGE)
        assert names(screen)[-1] == name_at(PAGE + KEPT - 1)
        assert len(set(names(screen))) == KEPT  # no row twice
        assert screen.selected_id() is not None
        selected = screen._summaries[screen.selected_id()].session.name
        assert selected == name_at(PAGE + grid.cursor_row)
        # A delete this far down keeps the cursor on the row that followed.
        position = PAGE + grid.cursor_row - 5
        grid.move_cursor(row=grid.cursor_row - 5)
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
        await pilot.press("y")
        following = name_at(position + 1)
        await wait_for(pilot, lambda: screen.selected_id() is not None and screen._summaries[
            screen.selected_id()].session.name == following)
        assert screen._total == 999 and screen._offset + grid.cursor_row == position
        # Back up to the top: the pages before come back (the table was rebuilt by the
        # delete, around the cursor).
        await pilot.press("ctrl+home")
        await wait_for(pilot, lambda: screen._offset == 0)
        assert names(screen)[0] == name_at(0) and grid.row_count <= KEPT
        assert screen._summaries[screen.selected_id()].session.name == name_at(grid.cursor_row)


async def test_the_next_page_is_read_ahead_and_appended_by_the_key_that_reaches_it(
        store: Store) -> None:
    """The page after the table's last row is read while the reader is still above it, so
    the key that comes near the end appends it at once (no store read then, no second
    drawing of the screen when the page comes back: bench/big_store.py)."""
    async with a_thousand_sessions() as (pilot, screen, grid):
        reads_at_the_edge: list[int] = []
        more = screen._more

        def counted(query: SessionQuery, position: int) -> object:
            reads_at_the_edge.append(position)
            return more(query, position)

        screen._more = counted  # type: ignore[method-assign]
        for pages in (4, 5, 6):
            await wait_for(pilot, lambda: screen._next_page is not None)
            await pilot.press("ctrl+end")
            await wait_for(pilot, lambda pages=pages: screen._offset + grid.row_count
                           == pages * PAGE)
        assert reads_at_the_edge == []
        assert screen._offset == 3 * PAGE and grid.row_count == KEPT
        assert names(screen) == [name_at(3 * PAGE + row) for row in range(KEPT)]
        # A delete fills the table anew: the page read ahead before it is not used, the one
        # read after it is the list without the deleted session.
        grid.move_cursor(row=grid.row_count - 30)
        await pilot.pause()
        selected = screen.selected_id()
        assert selected is not None
        deleted = screen._summaries[selected].session.name
        fills = screen._fills
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen._fills > fills and screen._next_page is not None)
        left = [name_at(position) for position in range(1_000) if name_at(position) != deleted]
        assert names(screen) == left[screen._offset:screen._offset + grid.row_count]
        ahead = screen._next_page
        assert ahead is not None
        assert ahead.position == screen._offset + grid.row_count
        assert [row.summary.session.name for row in ahead.rows] == \
            left[ahead.position:ahead.position + PAGE]


async def test_a_key_that_crosses_into_the_next_page_lays_nothing_out_again(
        store: Store) -> None:
    """The key that crosses into the next page appends it and lets the first one go at
    once, so the table stays as tall as it was and asks for no layout: the screen laid out
    again a frame after the key's own, 40-50 ms later (bench/big_store.py). The table is
    filled a whole window at once for that (it does not grow as the cursor goes down)."""
    async with a_thousand_sessions() as (pilot, screen, grid):
        await wait_for(pilot, lambda: screen._next_page is not None)
        await pilot.pause()
        height = grid.virtual_size.height
        layouts: list[dict[str, object]] = []
        refresh = grid.refresh

        def noted(*regions: object, **options: object) -> object:
            if options.get("layout"):
                layouts.append(options)
            return refresh(*regions, **options)  # type: ignore[arg-type]

        grid.refresh = noted  # type: ignore[method-assign]
        for offset in (PAGE, 2 * PAGE):
            await pilot.press("ctrl+end")
            await wait_for(pilot, lambda offset=offset: screen._offset == offset)
            await pilot.pause()
            assert names(screen) == [name_at(offset + row) for row in range(KEPT)]
            assert layouts == [] and grid.virtual_size.height == height
            await wait_for(pilot, lambda: screen._next_page is not None)


async def test_a_page_read_ahead_before_a_resize_is_laid_out_again(store: Store) -> None:
    """The page read ahead is laid out for the columns of its time: after a resize (80
    columns show fewer, narrower ones) the key that crosses into it lays it out again."""
    async with a_thousand_sessions() as (pilot, screen, grid):
        await wait_for(pilot, lambda: screen._next_page is not None)
        ahead = screen._next_page
        assert ahead is not None and len(ahead.rows[0].cells) == len(grid.columns)
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: len(grid.columns) < len(ahead.rows[0].cells))
        await pilot.press("ctrl+end")
        await wait_for(pilot, lambda: screen._offset == PAGE)
        assert names(screen) == [name_at(PAGE + row) for row in range(KEPT)]
        assert shown_names(screen)[-1] == name_at(PAGE + KEPT - 1)
        assert all(len(grid.get_row_at(row)) == len(grid.columns)
                   for row in range(grid.row_count))


async def test_search_and_filters_narrow_the_list(store: Store) -> None:
    many_sessions(default_path(), 300)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sessions(pilot)
        await pilot.press("slash")
        assert screen.query_one(Input).has_focus
        await pilot.press(*"question 123")
        await wait_for(pilot, lambda: names(screen) == ["multistep_arithmetic #123"])
        assert "1 of 300 sessions" in status(screen)
        # Filters: a task, a label, a model, together.
        screen.query_one(Input).value = "task:dyck label:mistake model:replay"
        expected = store.count_sessions(SessionQuery(task="dyck", label=LabelFilter.MISTAKE,
                                                     model="replay"))
        assert expected > 0
        await wait_for(pilot, lambda: table(screen).row_count == expected
                       and all(name.startswith("dyck_languages") for name in names(screen)))
        screen.query_one(Input).value = "label:whatever date:yesterday"
        await wait_for(pilot, lambda: "not understood" in status(screen))
        assert "label:whatever" in status(screen) and "date:yesterday" in status(screen)
        # esc clears the search, then goes back to the list.
        await pilot.press("escape")
        await wait_for(pilot, lambda: table(screen).row_count == KEPT
                       and "300 sessions" in status(screen))
        await pilot.press("escape")
        assert table(screen).has_focus
        screen.query_one(Input).value = "nothing matches this"
        await wait_for(pilot, lambda: table(screen).row_count == 0)
        assert "No session matches" in str(screen.query_one("#sessions-empty").render())


def last_changed_on(store: Store, session_id: int, day: str) -> None:
    """Set when the session was last changed: noon, local time, on `day` (YYYY-MM-DD)."""
    noon = time.mktime(time.strptime(f"{day} 12:00", "%Y-%m-%d %H:%M"))
    with sqlite3.connect(store.path) as connection:
        connection.execute("UPDATE sessions SET updated_at = ? WHERE id = ?",
                           (noon, session_id))
    connection.close()


async def test_the_date_filters_through_the_search_line(store: Store) -> None:
    """since:, before: and date: (the search help's date filters), typed as a person types
    them, alone, together and with a word; a date it cannot read is named, not applied."""
    days = {"word_sorting": "2026-11-01", "dyck_languages": "2026-11-24",
            "multistep_arithmetic": "2026-12-03"}
    for index, (task, day) in enumerate(days.items()):
        trace = recorded_session(store, task, index, name=f"{task} on {day}")
        last_changed_on(store, trace.id, day)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sessions(pilot)
        await wait_for(pilot, lambda: table(screen).row_count == 3)
        assert "since:YYYY-MM-DD before:… date:…" in screen.query_one(Input).placeholder

        async def search(line: str, expected: list[str]) -> None:
            await pilot.press("slash")
            if screen.query_one(Input).value:
                await pilot.press("escape")  # clears the line, the focus stays there
            await pilot.press(*line)
            await wait_for(pilot, lambda: sorted(names(screen)) == sorted(
                f"{task} on {days[task]}" for task in expected))

        await search("since:2026-11-20", ["dyck_languages", "multistep_arithmetic"])
        assert "2 of 3 sessions" in status(screen)
        await search("before:2026-11-24", ["word_sorting"])
        await search("date:2026-11-24", ["dyck_languages"])
        await search("since:2026-11-01 before:2026-12-01", ["word_sorting", "dyck_languages"])
        await search("since:2026-11-20 arithmetic", ["multistep_arithmetic"])
        await search("since:2026-13-45", ["word_sorting", "dyck_languages",
                                          "multistep_arithmetic"])
        assert "since:2026-13-45 (a date is YYYY-MM-DD)" in status(screen)


async def test_o_sorts_and_capital_o_reverses(store: Store) -> None:
    for index, name in ((0, "bravo"), (1, "alpha"), (2, "charlie")):
        recorded_session(store, "word_sorting", index, name=name)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sessions(pilot)
        assert names(screen) == ["charlie", "alpha", "bravo"]
        await pilot.press("o")
        await wait_for(pilot, lambda: names(screen) == ["alpha", "bravo", "charlie"])
        assert "by name, A-Z" in status(screen)
        await pilot.press("O")
        await wait_for(pilot, lambda: names(screen) == ["charlie", "bravo", "alpha"])
        await pilot.press("o", "o", "o")  # task, model, steps: 17, 15, 13 thoughts
        await wait_for(pilot, lambda: "most thoughts first" in status(screen))
        assert [table(screen).get_row_at(r)[3].plain for r in range(3)] == ["15", "13", "7"]


async def test_after_a_delete_the_cursor_stays_on_the_neighbouring_row(store: Store) -> None:
    traces = [recorded_session(store, "word_sorting", index, name=f"s{index}")
              for index in range(4)]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_sessions(pilot)
        assert names(screen) == ["s3", "s2", "s1", "s0"]
        await pilot.press("down")  # s2
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: names(screen) == ["s3", "s1", "s0"])
        assert screen.selected_id() == traces[1].id  # the row that followed it
        await pilot.press("ctrl+end", "d")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: names(screen) == ["s3", "s1"])
        assert screen.selected_id() == traces[1].id  # the last row: the one before it


async def test_the_columns_fit_without_a_horizontal_scrollbar(store: Store) -> None:
    for index in range(3):
        trace = recorded_session(store, "tracking_shuffled_objects", index,
                                 name="a very long name for a session " * 3)
        trace.flag_mistake(len(trace.steps))
    for size in ((250, 50), (120, 40), (80, 24)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            screen = await open_sessions(pilot)
            await pilot.pause()
            grid = table(screen)
            assert grid.max_scroll_x == 0, size
            assert not grid.show_horizontal_scrollbar, size
            # At 80 columns the answer and the date are left out; the label stays whole.
            keys = [str(key.value) for key in grid.columns]
            wide = size[0] >= 118
            assert ("answer" in keys, "updated" in keys) == (wide, wide)
            assert grid.get_row_at(0)[keys.index("label")].plain.startswith("✗ mistake at ")
            # Wide, the room goes to the names: the task's is whole.
            task_width = next(column.width for column in grid.columns.values()
                              if column.key.value == "task")
            assert (task_width >= len("tracking_shuffled_objects")) == (size[0] == 250), size


async def test_names_made_from_a_file_and_line_stay_apart(store: Store, tmp_path) -> None:
    """Sessions a queue made are named "multistep_arithmetic.jsonl:N": cut at their end, every
    row read "multistep_arithmetic.js…". Cut in the middle, each keeps its line number; and a
    label on a branch not on show ("↪ other branch") is explained when its row is
    highlighted."""
    from bbm_tui.core.annotation.queue import AnnotationQueue, read_queue_file
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.ui.screens.sessions import ELSEWHERE

    path = tmp_path / "multistep_arithmetic.jsonl"
    path.write_text("".join(row.to_line() + "\n"
                            for row in bundled_rows("multistep_arithmetic")[:12]))
    queue = AnnotationQueue(store, "alice", read_queue_file(path))
    for position in range(12):  # each trace's session is made by its first judgement
        queue.go_to(position)
        queue.judge(True)
    flagged = recorded_session(store, "word_sorting", 3)
    flagged.flag_mistake(2)
    async for _ in flagged.rewrite(2, "A thought of my own.", generate=False):
        pass
    for size in ((80, 24), (120, 40)):
        app = make_app()
        async with app.run_test(size=size) as pilot:
            screen = await open_sessions(pilot)
            await pilot.pause()
            width = next(column.width for column in table(screen).columns.values()
                         if column.key.value == "name")
            # The queue's sessions (at 80 columns the cut leaves "…onl:12" of the file's name).
            shown = [name for name in shown_names(screen) if name.startswith("multistep_")]
            assert len(shown) == 12 and len(set(shown)) == 12, shown
            assert all(len(name) <= width for name in shown)
            assert any(name.endswith(":12") for name in shown)
            grid = table(screen)
            keys = [str(key.value) for key in grid.columns]
            row = shown_names(screen).index("word_sorting #3")
            assert grid.get_row_at(row)[keys.index("label")].plain == ELSEWHERE
            grid.move_cursor(row=row)
            await pilot.pause()
            assert "labelled on another branch than the one the session shows" in \
                status(screen)


async def two_models_labelled(store: Store) -> int:
    """A session of replay/bbm beside solver/bbm on tracking #3, both answered: replay's
    trace flagged at Thought 5, the solver's labelled no mistake (labelled last)."""
    from bbm_tui.core import llm
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.generation.stepper import StepperSettings
    from bbm_tui.core.trace.session import NewTrace, on_the_loop
    from bbm_tui.core.trace.side_by_side import SideBySide

    row = bundled_rows("tracking_shuffled_objects")[3]
    race = SideBySide.create(
        store, NewTrace("tracking_shuffled_objects", row.input, row.target, 3,
                        row.mistake_index),
        [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm")], store_work=on_the_loop)

    async for _event in race.race(settings=StepperSettings()):
        pass
    race.columns[0].flag_mistake(5)
    race.columns[1].mark_no_mistake()
    return race.id


def row_lines(screen: SessionsScreen, session_id: int) -> list[list[str]]:
    """A session's row line by line, each line its cells' text (a cell of one line on the
    first)."""
    grid = table(screen)
    cells = [cell.plain.split("\n") for cell in grid.get_row_at(grid.get_row_index(
        str(session_id)))]
    return [[cell[line] if line < len(cell) else "" for cell in cells]
            for line in range(max(len(cell) for cell in cells))]


def screen_text(screen: SessionsScreen) -> str:
    return screen.app.export_screenshot().replace("&#160;", " ")


async def test_a_session_of_two_models_lists_each_models_label_and_answer(
        store: Store) -> None:
    """Issue 34, items 3 and 15: a session of two models listed the label in force (the
    solver's "no mistake", the newer) beside the session head's answer (replay's (E)), and at
    80x24 its models as "replay/bb…". Now each model has a line of its own: its whole name,
    its length, its own label and (where the column fits) its own answer."""
    session_id = await two_models_labelled(store)
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_sessions(pilot)
        lines = row_lines(screen, session_id)
        # Name, task, model, steps, label, cost (no room for the answer at 80 columns).
        assert [line[2:5] for line in lines] == [
            ["replay/bbm", "7", "✗ mistake at 5"], ["solver/bbm", "7", "✓ no mistake"]]
        await pilot.pause()
        shown = screen_text(screen)
        assert "replay/bbm" in shown and "solver/bbm" in shown and "replay/bb…" not in shown
        await pilot.resize_terminal(120, 40)
        await wait_for(pilot, lambda: len(row_lines(screen, session_id)[0]) == 8)
        lines = row_lines(screen, session_id)
        assert [(line[2], line[4], line[6]) for line in lines] == [
            ("replay/bbm", "✗ mistake at 5", "(E)"), ("solver/bbm", "✓ no mistake", "(B)")]
