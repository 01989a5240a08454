"""WindowTable.drop_first_rows (ui/widgets/window_table.py): the first rows of a table let go
of in one pass leave the table as Textual's remove_row, row by row, leaves it."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.coordinate import Coordinate

from bbm_tui.ui.widgets.window_table import WindowTable


class Tables(App[None]):
    def compose(self) -> ComposeResult:
        yield WindowTable(id="bulk", cursor_type="row")
        yield WindowTable(id="one-by-one", cursor_type="row")


def fill(table: WindowTable, rows: int) -> None:
    table.add_columns("name", "steps")
    for number in range(rows):
        table.add_row(f"session {number}", str(number), key=str(number),
                      height=2 if number % 3 == 0 else 1)


def state(table: WindowTable) -> tuple[object, ...]:
    return (table.row_count, [row.key.value for row in table.ordered_rows],
            [table.get_row_at(index) for index in range(table.row_count)],
            table.cursor_coordinate, table.virtual_size.height,
            table.coordinate_to_cell_key(Coordinate(0, 0)).row_key.value)


async def test_dropping_the_first_rows_at_once_is_removing_them_one_by_one() -> None:
    app = Tables()
    async with app.run_test(size=(80, 40)) as pilot:
        bulk = app.query_one("#bulk", WindowTable)
        one_by_one = app.query_one("#one-by-one", WindowTable)
        for table in (bulk, one_by_one):
            fill(table, 30)
            table.move_cursor(row=17, animate=False)
        await pilot.pause()
        bulk.drop_first_rows(10)
        for number in range(10):
            one_by_one.remove_row(str(number))
        one_by_one.move_cursor(row=7, animate=False)
        await pilot.pause()
        assert state(bulk) == state(one_by_one)
        assert bulk.cursor_coordinate == Coordinate(7, 0)
        assert bulk.get_row_at(bulk.cursor_row) == ["session 17", "17"]  # the same row
        # More rows after it are placed after the kept ones, and the cursor moves on them.
        bulk.add_row("session 30", "30", key="30")
        await pilot.pause()
        assert bulk.get_row_at(bulk.row_count - 1) == ["session 30", "30"]
        bulk.move_cursor(row=bulk.row_count - 1, animate=False)
        await pilot.pause()
        assert bulk.coordinate_to_cell_key(bulk.cursor_coordinate).row_key.value == "30"


async def test_a_cursor_on_a_row_that_goes_lands_on_the_first_row() -> None:
    app = Tables()
    async with app.run_test(size=(80, 40)) as pilot:
        table = app.query_one("#bulk", WindowTable)
        fill(table, 12)
        table.move_cursor(row=3, animate=False)
        await pilot.pause()
        table.drop_first_rows(5)
        await pilot.pause()
        assert table.cursor_coordinate == Coordinate(0, 0)
        assert table.get_row_at(0) == ["session 5", "5"]
        table.drop_first_rows(100)  # more than it has: every row goes
        await pilot.pause()
        assert table.row_count == 0


async def test_the_rows_in_view_stay_in_view() -> None:
    """The scroll moves up by the height of the rows that went: the same rows on screen, not
    those that many lines further down (a frame of the wrong rows, then a second drawing)."""
    app = Tables()
    async with app.run_test(size=(80, 40)) as pilot:
        table = app.query_one("#bulk", WindowTable)
        fill(table, 60)  # rows 0, 3, 6, ... are two lines high
        await pilot.pause()
        table.move_cursor(row=50, animate=False)
        await pilot.pause()
        top = table.scroll_y
        assert top > 0
        first_in_view = table._get_offsets(int(top))[0].value
        table.drop_first_rows(10)  # 14 lines: rows 0, 3, 6, 9 have two
        await pilot.pause()
        assert table.scroll_y == top - 14
        assert table._get_offsets(int(table.scroll_y))[0].value == first_in_view
        assert table.get_row_at(table.cursor_row) == ["session 50", "50"]
