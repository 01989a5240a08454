"""WindowTable (ui/widgets/window_table.py): the first rows of a table let go of in one pass
leave the table as Textual's remove_row, row by row, leaves it, and rows appended in one pass
as its add_row does; its lines are DataTable's own,
and a cursor move or rows appended out of sight draw no other row again."""

from __future__ import annotations

from rich.segment import Segment
from rich.text import Text
from textual.app import App, ComposeResult
from textual.coordinate import Coordinate
from textual.geometry import Region
from textual.widgets import DataTable

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


class NotedTables(Tables):
    """The tables, and each row highlighted (table, row) in turn."""

    def __init__(self) -> None:
        super().__init__()
        self.highlighted: list[tuple[str | None, int]] = []

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.highlighted.append((event.data_table.id, event.cursor_row))


async def test_appending_rows_at_once_is_adding_them_one_by_one() -> None:
    """`add_rows_at_once` (a page of the sessions list appended in the key that crosses
    into it) leaves the table as `add_row` for each row does: to an empty table (whose cursor
    shows from its first row) and after rows it has, with rows of two lines among them."""
    app = NotedTables()
    async with app.run_test(size=(80, 40)) as pilot:
        bulk = app.query_one("#bulk", WindowTable)
        one_by_one = app.query_one("#one-by-one", WindowTable)
        app.set_focus(None)  # the cursor drawn the same in both (a focused one is brighter)
        for start, count in ((0, 12), (12, 20)):
            rows = [((f"session {number}", str(number)), str(number),
                     2 if number % 3 == 0 else 1) for number in range(start, start + count)]
            if start == 0:
                for table in (bulk, one_by_one):
                    table.add_columns("name", "steps")
            bulk.add_rows_at_once(rows)
            for cells, key, height in rows:
                one_by_one.add_row(*cells, key=key, height=height)
            await pilot.pause()
            assert state(bulk) == state(one_by_one)
            assert [list(bulk.render_line(y)) for y in range(bulk.size.height)] == \
                [list(one_by_one.render_line(y)) for y in range(one_by_one.size.height)]
        assert sorted(app.highlighted) == [("bulk", 0), ("one-by-one", 0)]
        bulk.move_cursor(row=bulk.row_count - 1, animate=False)
        await pilot.pause()
        assert bulk.coordinate_to_cell_key(bulk.cursor_coordinate).row_key.value == "31"


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


# -- drawing: the same lines as DataTable's, and only the lines that changed drawn again

class SideBySide(App[None]):
    """A WindowTable and a DataTable holding the same rows, one above the other."""

    CSS = "DataTable { height: 12; }"
    AUTO_FOCUS = None  # the focus changes the header's and the cursor's colours: set by hand

    def compose(self) -> ComposeResult:
        yield WindowTable(id="window", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="plain", cursor_type="row", zebra_stripes=True)


WIDTHS = (("name", 14), ("task", 9), ("steps", 5), ("label", 12))


def row_cells(number: int) -> list[Text]:
    """Cells as the sessions screen makes them: cut, dim, right-justified, coloured spans,
    wide characters, empty, and (every fifth row) a cell of two lines."""
    name = Text(f"session {number} " + "名前" * (number % 4), no_wrap=True,
                overflow="ellipsis")
    task = Text("word_sorting" if number % 2 else "", style="dim" if number % 3 else "")
    steps = Text(str(number * 7), justify="right")
    label = Text.assemble(("✗ ", "red"), f"mistake at {number % 9}") if number % 4 else \
        Text("—", style="dim")
    if number % 5 == 0:
        label = Text("\n", no_wrap=True, overflow="ellipsis").join(
            [Text("✓ no mistake", style="green"), Text("↪ other branch", style="dim")])
    return [name, task, steps, label]


def fill_both(app: SideBySide, rows: range) -> None:
    for table in app.query(DataTable):
        if not table.columns:
            for key, width in WIDTHS:
                table.add_column(key, key=key, width=width)
        for number in rows:
            table.add_row(*row_cells(number), key=str(number),
                          height=2 if number % 5 == 0 else 1)


def drawn(table: DataTable) -> list[list[Segment]]:
    return [list(strip) for strip in table.render_lines(Region(0, 0, *table.size))]


async def test_the_window_table_draws_what_datatable_draws() -> None:
    """Every line in view, segment for segment (text, colours and the mouse's row and column
    meta), as a DataTable holding the same rows draws it: after cursor moves, rows appended,
    the first rows let go of (removed one by one from the DataTable), a cell changed, the
    focus on either, and a scroll."""
    app = SideBySide()
    async with app.run_test(size=(60, 30)) as pilot:
        window = app.query_one(WindowTable)
        plain = app.query_one("#plain", DataTable)
        fill_both(app, range(40))
        await pilot.pause()

        async def same() -> None:
            await pilot.pause()
            assert drawn(window) == drawn(plain)

        await same()
        for row in (1, 2, 5, 9, 3):
            for table in (window, plain):
                table.move_cursor(row=row, animate=False)
            await same()
        fill_both(app, range(40, 50))
        await same()
        window.drop_first_rows(6)
        for number in range(6):
            plain.remove_row(str(number))
        plain.move_cursor(row=window.cursor_row, animate=False)
        await same()
        for table in (window, plain):
            table.update_cell("10", "task", Text("multistep_arithmetic", style="bold"))
            table.move_cursor(row=20, animate=False)
        await same()
        for table in (window, plain):
            table.scroll_to(y=7, animate=False, immediate=True)
        await same()
        window.focus()
        await pilot.pause()
        focused = drawn(window)
        plain.focus()
        await pilot.pause()
        assert focused == drawn(plain)


def count_rows_drawn(table: DataTable) -> list[int]:
    """How many lines of rows (not the header) the table assembles from here on (its
    `_render_line_in_row`)."""
    drawn_rows = [0]
    assemble = table._render_line_in_row

    def counted(row_key, *args, **kwargs):  # type: ignore[no-untyped-def]
        drawn_rows[0] += row_key is not table._header_row_key
        return assemble(row_key, *args, **kwargs)

    table._render_line_in_row = counted  # type: ignore[method-assign]
    return drawn_rows


async def test_a_cursor_move_draws_again_only_the_rows_it_leaves_and_enters() -> None:
    """DataTable drew every line in view again for a move of its cursor (its lines are keyed
    on the cursor's place), and again for each row appended out of sight."""
    app = SideBySide()
    async with app.run_test(size=(60, 30)) as pilot:
        window = app.query_one(WindowTable)
        fill_both(app, range(1, 40))  # rows 4, 9, ... are two lines high
        window.move_cursor(row=1, animate=False)
        await pilot.pause()
        drawn_rows = count_rows_drawn(window)
        window.move_cursor(row=2, animate=False)  # rows 1 and 2: one line each
        await pilot.pause()
        assert drawn_rows[0] == 2
        fill_both(app, range(40, 60))  # below the view
        await pilot.pause()
        assert drawn_rows[0] == 2
