"""A DataTable that holds a window of a longer list and lets go of its first rows at once.

The sessions screen (screens/sessions.py) holds at most a few pages of a list of 10^5
sessions: as the cursor goes down, the next page is appended and the first one let go.
Textual's `remove_row` rebuilds the table's whole row index, and sets the cursor and the hover
again (each a redraw of their cells and a pass over every row), for each row it removes: a
page of 100 rows out of 400 took 30 ms of CPU in the key that crossed into the next page
(bench/big_store.py). `drop_first_rows` lets go of them in one pass, and keeps the rows in
view where they were; `add_rows_at_once` appends a page in one pass.

It also draws less (issue 36: every key of the sessions screen under 50 ms until settled): a
line of a row is drawn once and kept while the cursor moves and rows come and go, a new row's
cells are laid out without Rich's general renderable path (and a cell's text once for all the
rows that show the same, and once with each kind of row's styles: only the mouse's meta is put
on each cell), and new rows are not measured (the columns' widths are fixed). Each
draws exactly what DataTable draws (tests/ui/test_ui_window_table.py compares them segment for
segment); each leans on Textual 8.2's DataTable internals, as `drop_first_rows` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, islice, zip_longest
from typing import Any

from rich.console import Console, ConsoleOptions
from rich.segment import Segment
from rich.style import Style
from rich.text import DEFAULT_JUSTIFY, DEFAULT_OVERFLOW, Text, TextType
from textual._segment_tools import line_crop
from textual._two_way_dict import TwoWayDict
from textual._types import SegmentLines
from textual.cache import LRUCache
from textual.coordinate import Coordinate
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, ColumnKey, DuplicateKey, Row, RowKey

# What a data row's line is drawn from, besides the cursor's and the hover's row being that
# row or not: the row (key, index: the cells' mouse meta carries it), the line in the row, the
# horizontal scroll and width, the styles, and the table's content version.
LineKey = tuple[object, ...]
# A row to append: its cells (in the columns' order), its key and its height in lines.
NewRow = tuple[Sequence[object], str, int]
# Lines of rows the table keeps drawn (a few screens: a page further on is drawn anew), and
# cells' texts kept laid out; the least recently drawn go first, one at a time.
LINES_KEPT = 400
TEXTS_KEPT = 2000
STYLED_KEPT = 600  # cells laid out with their row's styles: two screens' worth
# DataTable's own caches, smaller: its drawn lines and rows are keyed on the cursor's place and
# its cells on the update count (which each appended row moves on), so past a screen or two
# they held only what would not be asked for again: 11 MB more RSS after 20 pages of 100.
CELLS_KEPT = 1000
ROWS_KEPT = 200


@dataclass
class Frame:
    """What every line of a frame is drawn with (the table's settings, read once a frame
    rather than for each line and each cell), and each kind of row's styles (worked out at
    its first line)."""

    widths: list[int]
    column_keys: list[ColumnKey]
    table_width: int
    width: int
    simple: bool  # a row cursor, no fixed rows or columns, no row labels
    show_cursor: bool
    show_hover_cursor: bool
    css_foreground: bool
    css_background: bool
    padding: int
    options: ConsoleOptions
    console: Console
    row_styles: dict[tuple[object, ...], tuple[Style, Style]] = field(default_factory=dict)
    cell_options: dict[tuple[int, int], ConsoleOptions] = field(default_factory=dict)


class WindowTable(DataTable):
    """A DataTable whose first rows can be let go of at once (`drop_first_rows`), and whose
    row lines stay drawn while the cursor moves (for a row cursor and fixed-width columns).

    DataTable keys every drawn line on the cursor's coordinate and on its update count, so a
    cursor move drew every line in view again (~37 lines of 8 cells: 15 ms of CPU a `down`
    in bench/big_store.py), and each appended row (a page of 100 as the cursor goes down)
    drew them all again too. A line of a row is the same whichever other row has the cursor;
    and with fixed-width columns, appending rows at the end, or letting go of the first ones
    (the line's row index is in its key), changes no other row's line."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Before DataTable's own: it clears its caches (and so these) as it starts.
        self._lines: LRUCache[LineKey, Strip] = LRUCache(LINES_KEPT)
        self._texts: LRUCache[tuple[object, ...], SegmentLines] = LRUCache(TEXTS_KEPT)
        # The same laid out with a kind of row's styles, all but the mouse's meta.
        self._styled: LRUCache[tuple[object, ...], SegmentLines] = LRUCache(STYLED_KEPT)
        # The update count's bumps that changed no drawn row (rows appended or let go of):
        # the content version is the update count less these.
        self._unchanging_updates = 0
        self._line_style = Style()
        self._frame: Frame | None = None  # while a frame is drawn
        super().__init__(*args, **kwargs)
        self._cell_render_cache = LRUCache(CELLS_KEPT)
        self._row_render_cache = LRUCache(ROWS_KEPT)
        self._line_cache = LRUCache(ROWS_KEPT)

    def add_row(self, *cells: object, height: int | None = 1, key: str | None = None,
                label: TextType | None = None) -> RowKey:
        before = self._update_count
        row_key = super().add_row(*cells, height=height, key=key, label=label)
        if self._fixed_widths():
            self._unchanging_updates += self._update_count - before
        return row_key

    def add_rows_at_once(self, rows: Sequence[NewRow]) -> None:
        """Append `rows`, as `add_row` appends each (Textual 8.2: the row index, data, rows,
        new rows and update count), once for all of them: `add_row` also orders the columns,
        clamps the cursor and asks for an idle pass again for each row (a page of 100: 2 ms of
        CPU in the key that crosses into it, bench/big_store.py)."""
        if not rows:
            return
        columns = self.ordered_columns
        was_empty = self.row_count == 0
        index = self.row_count
        for cells, key, height in rows:
            row_key = RowKey(key)
            if row_key in self._row_locations:
                raise DuplicateKey(f"The row key {row_key!r} already exists.")
            if len(cells) > len(columns):
                raise ValueError("More values provided than there are columns.")
            self._row_locations[row_key] = index
            self._data[row_key] = {column.key: cell
                                   for column, cell in zip_longest(columns, cells)}
            self.rows[row_key] = Row(row_key, height, None, False)
            self._new_rows.add(row_key)
            index += 1
        self._require_update_dimensions = True
        self.cursor_coordinate = self.cursor_coordinate
        if was_empty and self.columns and self.show_cursor and self.cursor_type != "none":
            self._highlight_cursor()  # a cursor can show now: add_row posts its highlight
        self._update_count += 1
        if self._fixed_widths():
            self._unchanging_updates += 1
        self.check_idle()

    def _fixed_widths(self) -> bool:
        return not any(column.auto_width for column in self.columns.values())

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """DataTable's, less the measuring of every new cell's width (800 measures, 9 ms a
        page of 100 rows), which only auto-width columns use: with fixed widths, new rows of a
        fixed height change only the table's height."""
        rows = [self.rows[key] for key in new_rows if key in self.rows]
        if not self._fixed_widths() or any(row.auto_height or row.label is not None
                                           for row in rows):
            super()._update_dimensions(rows_keys(rows))
            return
        width = sum(column.get_render_width(self) for column in self.columns.values())
        header = self.header_height if self.show_header else 0
        self.virtual_size = Size(width + self._row_label_column_width,
                                 self._total_row_height + header)

    def _clear_caches(self) -> None:
        super()._clear_caches()
        self._lines.clear()
        self._texts.clear()
        self._styled.clear()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines.clear()

    def _render_line_in_row(self, row_key: RowKey, line_no: int, base_style: Style,
                            cursor_location: Coordinate, hover_location: Coordinate
                            ) -> tuple[SegmentLines, SegmentLines]:
        """DataTable's, for a data row under a row cursor with no fixed columns and no labels:
        with what is the same for every line worked out once a frame (DataTable works out the
        row's styles and the columns' widths again for each line), and its cells drawn by
        `_draw_cell`."""
        frame = self._frame
        row_index = self._row_locations.get(row_key)
        if frame is None or row_index is None or not frame.simple:
            return super()._render_line_in_row(row_key, line_no, base_style, cursor_location,
                                               hover_location)
        cursor = row_index == cursor_location.row
        hover = row_index == hover_location.row
        row_style, extend_style = self._row_styles(frame, row_index % 2, cursor, hover,
                                                   base_style)
        component_style, post_style = self._get_styles_to_render_cell(
            False, False, False, hover, cursor, frame.show_cursor, frame.show_hover_cursor,
            frame.css_foreground, frame.css_background)
        row = self.rows[row_key]
        # The cells as they were given (DataTable formats each for its renderable, which
        # for a Text is the Text; `_draw_cell` leaves anything else to DataTable's path).
        data = self._data[row_key]
        cells = [data.get(key) for key in frame.column_keys]
        scrollable = [self._draw_cell(frame, row_index, index, cells[index], row.height,
                                      row_style, component_style, post_style, width, cursor,
                                      hover)[line_no]
                      for index, width in enumerate(frame.widths)]
        remaining = max(0, frame.width - frame.table_width)
        scrollable.append([Segment(" " * remaining, extend_style + Style.from_meta(
            {"row": row_index, "column": 0, "out_of_bounds": True}))])
        return [], scrollable

    def _draw_cell(self, frame: Frame, row_index: int, column_index: int, cell: object,
                   height: int, row_style: Style, component_style: Style, post_style: Style,
                   width: int, cursor: bool, hover: bool) -> SegmentLines:
        """A data cell, as DataTable's `_render_cell` draws it. A Text on one line a row's
        line (no wrapping) is laid out without Rich's general renderable path (its
        `Styled(Padding(cell))` through the console), which was most of a new row's cost (a
        `pgdn` draws ~30 new rows of 8 cells), and its text once for every row that shows the
        same (a task, a model, a label, "—"); the row's styles and its mouse meta are put on
        each time. Anything else is DataTable's own."""
        options = frame.cell_options.get((width, height))
        if options is None:
            options = frame.options.update_dimensions(width, height)
            if height == 1:
                options = options.update(no_wrap=True)
            frame.cell_options[width, height] = options
        if not isinstance(cell, Text) or height < 1 \
                or not (options.no_wrap if cell.no_wrap is None else cell.no_wrap) \
                or width - 2 * frame.padding < 1:
            return self._render_cell(row_index, column_index, row_style, width, cursor, hover)
        text = text_key(cell, options, frame.padding)
        styled_key = (text, row_style, component_style, post_style)
        styled = self._styled.get(styled_key)
        if styled is None:
            unstyled = self._texts.get(text)
            if unstyled is None:
                unstyled = text_cell_lines(frame.console, options, cell, frame.padding)
                self._texts.set(text, unstyled)
            styled = [list(Segment.apply_style(line, row_style + component_style, post_style))
                      for line in unstyled]
            self._styled.set(styled_key, styled)
        # The mouse's meta last: DataTable puts it between the row's style and the cell's,
        # which gives the same style (a meta-only style sets no colour or attribute, and no
        # other style here has a meta), and it is the one part that differs from row to row.
        meta = Style.from_meta({"row": row_index, "column": column_index})
        metered: dict[int, Style] = {}  # a cell's segments share one or two styles
        lines: SegmentLines = []
        for line in styled:
            drawn: list[Segment] = []
            for text_part, style, control in line:
                if style is None:
                    drawn.append(Segment(text_part, meta, control))
                    continue
                with_meta = metered.get(id(style))
                if with_meta is None:
                    with_meta = metered[id(style)] = plus_meta(style, meta)
                drawn.append(Segment(text_part, with_meta, control))
            lines.append(drawn)
        return lines

    def _row_styles(self, frame: Frame, odd: int, cursor: bool, hover: bool,
                    base_style: Style) -> tuple[Style, Style]:
        """A row's style and the style past its last column (DataTable's `_get_row_style`
        and its `extend_style`), once a frame for each kind of row."""
        key = (odd, cursor, hover, base_style)
        styles = frame.row_styles.get(key)
        if styles is None:
            row_style = self._get_row_style(odd, base_style)  # only the parity counts here
            extend, _ = self._get_styles_to_render_cell(
                False, False, False, hover, cursor, frame.show_cursor,
                frame.show_hover_cursor, False, False)
            styles = frame.row_styles[key] = (row_style, row_style + extend)
        return styles

    def render_lines(self, crop: Region) -> list[Strip]:
        self._line_style = self.rich_style  # once a frame (it walks the ancestors' styles)
        columns = self.ordered_columns
        widths = [column.get_render_width(self) for column in columns]
        self._frame = Frame(
            widths=widths, column_keys=[column.key for column in columns],
            table_width=sum(widths) + self._row_label_column_width,
            width=self.size.width,
            simple=(self.cursor_type == "row" and not self.fixed_rows
                    and not self.fixed_columns
                    and not (self._labelled_row_exists and self.show_row_labels)),
            show_cursor=self.show_cursor, show_hover_cursor=self._show_hover_cursor,
            css_foreground=self.cursor_foreground_priority == "css",
            css_background=self.cursor_background_priority == "css",
            padding=self.cell_padding, options=self.app.console_options,
            console=self.app.console)
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        header = self.header_height if self.show_header else 0
        if self.cursor_type != "row" or self.fixed_rows or self.fixed_columns or y < header \
                or self._labelled_row_exists:
            return super().render_line(y)
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        line = y + scroll_y
        try:
            row_key, line_no = self._get_offsets(line)
        except LookupError:
            return Strip.blank(width, self._line_style)
        row = self._row_locations.get(row_key)
        key = (row_key, row, line_no, scroll_x, width, row == self.cursor_coordinate.row,
               row == self.hover_coordinate.row, self.show_cursor, self._show_hover_cursor,
               self._line_style, self._pseudo_class_state,
               self._update_count - self._unchanging_updates)
        strip = self._lines.get(key)
        if strip is None:
            if self._frame is not None and self._frame.simple:
                strip = self._draw_line(row_key, line_no, scroll_x, width)
            else:
                strip = self._render_line(line, scroll_x, scroll_x + width, self._line_style)
            self._lines.set(key, strip)
        return strip

    def _draw_line(self, row_key: RowKey, line_no: int, scroll_x: int, width: int) -> Strip:
        """DataTable's `_render_line` for a data row of a table with no fixed columns, less
        its own line cache (`render_line` keeps the lines) and its ordering of the columns for
        each line."""
        _, scrollable = self._render_line_in_row(row_key, line_no, self._line_style,
                                                 self.cursor_coordinate, self.hover_coordinate)
        segments = line_crop(list(chain.from_iterable(scrollable)), scroll_x, scroll_x + width,
                             width)
        return Strip(segments).adjust_cell_length(width, self._line_style).simplify()

    def drop_first_rows(self, count: int) -> None:
        """Remove the first `count` rows (in the order on screen), keeping the cursor on the
        row it was on (or on the first row, if that one went). Does what `remove_row` does for
        each, once for all of them (Textual 8.2: its row index, data, pending cell updates
        and update count)."""
        count = min(count, self.row_count)
        if count <= 0:
            return
        cursor = self.cursor_coordinate
        locations = self._row_locations
        gone: list[RowKey] = []
        kept: dict[RowKey, int] = {}
        for key in locations:
            index = locations.get(key)
            assert index is not None
            if index < count:
                gone.append(key)
            else:
                kept[key] = index - count
        # The rows in view stay in view: the scroll moves up by the height that went (else
        # the next frame draws the rows that many lines further down, and the cursor's
        # scroll a frame later draws the right ones: every cell in view drawn twice).
        gone_height = sum(self.rows[key].height for key in gone)
        for key in gone:
            for column_key in self._data[key]:
                self._updated_cells.discard(CellKey(key, column_key))
            del self.rows[key]
            del self._data[key]
        self._row_locations = TwoWayDict(kept)
        self._require_update_dimensions = True
        self._update_count += 1
        self._unchanging_updates += 1  # the rows kept are drawn as they were
        self.check_idle()
        # A repaint, not a layout (remove_row's): the table's height is set again when idle
        # (`_update_dimensions`), a layout only if it changed. A page appended and one let go
        # in the same key leave it as it was; a layout asked for here came a frame after the
        # key's own (the screen lays out on a later tick), 40-50 ms later at load 0.3.
        self.refresh()
        self.scroll_to(y=max(self.scroll_y - gone_height, 0), animate=False, immediate=True)
        self.move_cursor(row=max(cursor.row - count, 0), column=cursor.column, animate=False)
        self.hover_coordinate = self.hover_coordinate  # clamped, as remove_row does


def plus_meta(style: Style, meta: Style) -> Style:
    """`style + meta` for a meta-only `meta` (Style.from_meta), made as Rich 14's Style._add
    makes it, less its cache: each cell's meta differs, so every such add was a miss, which
    cost more than the add and pushed Textual's own entries out of the cache."""
    if style._null or style._meta or not meta._meta:
        return style + meta
    combined: Style = Style.__new__(Style)
    combined._ansi = None
    combined._style_definition = None
    combined._color = style._color
    combined._bgcolor = style._bgcolor
    combined._attributes = style._attributes
    combined._set_attributes = style._set_attributes
    combined._link = style._link
    combined._link_id = meta._link_id or style._link_id
    combined._null = False
    combined._meta = meta._meta
    combined._hash = None
    return combined.copy() if combined._link else combined


def rows_keys(rows: list[Row]) -> list[RowKey]:
    return [row.key for row in rows]


def text_cell_lines(console: Console, options: ConsoleOptions, cell: Text,
                    padding: int) -> SegmentLines:
    """The lines `console.render_lines(Padding(cell, (0, padding)), options)` gives for a Text
    that is not wrapped (Rich 14: Padding, Text's `__rich_console__` and `render_lines` done in
    line), segment for segment. `options` has the cell's width and its row's height."""
    assert options.height is not None
    inner = options.max_width - 2 * padding
    blank = console.get_style("none")  # Padding's style
    tab_size = console.tab_size if cell.tab_size is None else cell.tab_size
    wrapped = cell.wrap(console, inner, justify=cell.justify or options.justify or DEFAULT_JUSTIFY,
                        overflow=cell.overflow or options.overflow or DEFAULT_OVERFLOW,
                        tab_size=tab_size or 8, no_wrap=True)
    segments = Text("\n").join(wrapped).render(console, end=cell.end)
    lines = list(islice(Segment.split_and_crop_lines(segments, inner, style=blank,
                                                     include_new_lines=False),
                        options.height))
    lines.extend([Segment(" " * inner, blank)] for _ in range(options.height - len(lines)))
    side = [Segment(" " * padding, blank)] if padding else []
    return [[*side, *line, *side] for line in lines]


def text_key(cell: Text, options: ConsoleOptions, padding: int) -> tuple[object, ...]:
    """What a Text cell's lines (`text_cell_lines`) are made from."""
    return (cell.plain, cell.style, tuple(cell.spans), cell.justify, cell.overflow, cell.end,
            cell.tab_size, options.justify, options.overflow, options.max_width,
            options.height, padding)
