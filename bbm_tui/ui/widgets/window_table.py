"""A DataTable that holds a window of a longer list and lets go of its first rows at once.

The sessions screen (screens/sessions.py) holds at most a few pages of a list of 10^5
sessions: as the cursor goes down, the next page is appended and the first one let go.
Textual's `remove_row` rebuilds the table's whole row index, and sets the cursor and the hover
again (each a redraw of their cells and a pass over every row), for each row it removes: a
page of 100 rows out of 400 took 30 ms of CPU in the key that crossed into the next page
(bench/big_store.py). `drop_first_rows` lets go of them in one pass, and keeps the rows in
view where they were.
"""

from __future__ import annotations

from textual._two_way_dict import TwoWayDict
from textual.widgets import DataTable
from textual.widgets.data_table import CellKey, RowKey


class WindowTable(DataTable):
    """A DataTable whose first rows can be let go of at once (`drop_first_rows`)."""

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
        self.check_idle()
        self.refresh(layout=True)
        self.scroll_to(y=max(self.scroll_y - gone_height, 0), animate=False, immediate=True)
        self.move_cursor(row=max(cursor.row - count, 0), column=cursor.column, animate=False)
        self.hover_coordinate = self.hover_coordinate  # clamped, as remove_row does
