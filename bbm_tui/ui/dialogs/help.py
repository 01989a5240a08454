"""The help dialog (?): every key that works on the screen below, as the keymap binds it;
typing filters the list (issue 34, item 16: as harlequin's and posting's help do)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from bbm_tui.ui.dialogs.base import Dialog
from bbm_tui.ui.text import MUTED, styled
from bbm_tui.ui.widgets.chrome import KeysFooter


@dataclass(frozen=True)
class KeyHelp:
    keys: str
    description: str
    detail: str
    binding_id: str = ""


# The most rows of keys the help shows at once (the rest scroll).
HELP_ROWS = 28
# The help dialog's width (styles/dialogs.tcss #help), what its border, padding and the key
# list's scrollbar take of it, the gap between the key table's columns, and the least room
# for the descriptions beside the other columns (less, and they go under the names).
HELP_WIDTH = 108
HELP_CHROME = 8
HELP_GAP = 2
HELP_MIN_DETAIL = 40


class HelpScreen(Dialog[None]):
    """Every key that works on the screen below, with its current binding (keymap applied)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "close", id="help_close"),
    ]

    def __init__(self, rows: list[KeyHelp], title: str) -> None:
        super().__init__()
        self.rows = rows
        self._title = title
        self._in_columns: bool | None = None  # the layout the table was last drawn in
        self._filter = ""

    @property
    def shown_rows(self) -> list[KeyHelp]:
        """The rows the filter keeps: every word typed is in the row's keys, name,
        description or binding id (any case)."""
        words = self._filter.casefold().split()
        return [row for row in self.rows if all(
            word in f"{row.keys} {row.description} {row.detail} {row.binding_id}".casefold()
            for word in words)]

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Static(styled(self._title, "bold"), classes="dialog-title")
            yield Input(id="help-filter", compact=True,
                        placeholder="type to filter: a key, a name, a word of what it does")
            with VerticalScroll(id="help-keys"):
                # Drawn for the width it gets, once the dialog is laid out (_fit_keys).
                yield Static(id="help-table")
            yield Static(
                styled('Type to filter; esc closes. Change a key in config.toml\'s [keymap] '
                       'table: binding id = "keys", e.g. step = "n,space".', MUTED),
                classes="dialog-hint",
            )

    def on_mount(self) -> None:
        self._draw_table(self._expected_width())
        self.call_after_refresh(self._fit_keys)
        self.query_one("#help-filter", Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self._filter = event.value
        self._in_columns = None  # drawn again, with the rows kept
        self._draw_table(self.query_one("#help-table", Static).content_size.width
                         or self._expected_width())

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_keys)

    def _expected_width(self) -> int:
        """The table's width before layout: the dialog's (108 columns, or the screen's) less
        its border, padding and the list's scrollbar."""
        return min(HELP_WIDTH, self.app.size.width) - HELP_CHROME

    def _fit_keys(self) -> None:
        """The key list gets what the title and the hint leave of the dialog's 90% of the
        screen, and scrolls in it. Left to the dialog's own scrolling, a short terminal (80x24)
        scrolled the title and the hint away and clipped the list's last rows, which its own
        scrollbar could then not reach."""
        width = self.query_one("#help-table", Static).content_size.width
        if width:
            self._draw_table(width)
        dialog = self.query_one("#help", Vertical)
        keys = self.query_one("#help-keys", VerticalScroll)
        others = dialog.styles.gutter.height + sum(
            child.outer_size.height + child.styles.margin.height
            for child in dialog.children if child is not keys)
        # The dialog's 90% is of the screen less its footer (docked at the bottom).
        footer = sum(widget.outer_size.height for widget in self.query(KeysFooter))
        room = int((self.size.height - footer) * 0.9) - others
        keys.styles.max_height = max(3, min(HELP_ROWS, room))

    def _draw_table(self, width: int) -> None:
        in_columns = self._fits_in_columns(width)
        if in_columns != self._in_columns:
            self._in_columns = in_columns
            rows = self.shown_rows
            if not rows:
                self.query_one("#help-table", Static).update(Text(
                    f"No key matches “{self._filter.strip()}”.", style="italic"))
                return
            table = self._columns_table(rows) if in_columns else self._stacked_table(rows)
            self.query_one("#help-table", Static).update(table)

    def _fits_in_columns(self, width: int) -> bool:
        """Whether the descriptions get room enough beside the keys, names and binding ids
        (they wrap in their column; a narrower one would make most of them three lines)."""
        def widest(field: Callable[[KeyHelp], str]) -> int:
            return max((cell_len(field(row)) for row in self.rows), default=0)

        beside = (widest(lambda row: row.keys) + widest(lambda row: row.description)
                  + widest(lambda row: row.binding_id) + HELP_GAP * 3)
        return width - beside >= HELP_MIN_DETAIL

    def _columns_table(self, rows: list[KeyHelp]) -> Table:
        """Four columns: keys, name, description (wrapped in its column), binding id."""
        # A Rich grid sizes the columns; every cell is our own text (a Text, never markup).
        table = Table.grid(padding=(0, HELP_GAP), expand=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(ratio=1, overflow="fold")
        table.add_column(no_wrap=True)
        for row in rows:
            table.add_row(self._keys_text(row), Text(row.description, style="bold"),
                          Text(row.detail), Text(row.binding_id, style="dim"))
        return table

    def _stacked_table(self, rows: list[KeyHelp]) -> Table:
        """Two columns: the keys, and beside them the name and binding id on one line and the
        description wrapped under them (a narrow dialog: 80 columns cut descriptions short)."""
        table = Table.grid(padding=(0, HELP_GAP), expand=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(ratio=1, overflow="fold")
        for row in rows:
            about = Text.assemble((row.description, "bold"), "  ", (row.binding_id, "dim"),
                                  "\n", row.detail)
            table.add_row(self._keys_text(row), about)
        return table

    def _keys_text(self, row: KeyHelp) -> Text:
        return Text(row.keys, style=f"bold {self.app.theme_variables.get('accent', 'yellow')}")

    def action_close(self) -> None:
        self.dismiss(None)
