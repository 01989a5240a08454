"""The sessions screen: the saved sessions, filtered, searched and sorted; resume, rename or
delete one.

The list is paged (issue 8, item 13): the store answers one SQL query for a page of rows
(filters, search and order included) and the table holds a window of KEPT rows of the list,
from `_offset` on. The page after it is read ahead; the key that comes within MARGIN rows of
the window's end appends it and lets the first page go. Near its start, the page before is read
and the window built again around it. A store of 100,000 sessions opens as fast as one of ten.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.widgets import DataTable, Input, Static

from bbm_tui.core.accounting import UNKNOWN, format_total_cost
from bbm_tui.core.records import SessionQuery, SessionSort
from bbm_tui.core.store import Label, SessionSummary
from bbm_tui.core.store.records import ModelSummary
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.context import AppContext, context
from bbm_tui.ui.dialogs import ConfirmScreen, RenameScreen
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import GoBack, OpenSession, SessionRemoved, SessionRenamed
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED, safe_cell, safe_line, styled, thoughts
from bbm_tui.ui.viewmodels.sessions import (
    LABEL_HELP,
    SEARCH_HELP,
    describe,
    is_filtered,
    next_sort,
    parse_search,
    sorted_by,
)
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar
from bbm_tui.ui.widgets.window_table import NewRow, WindowTable

# (title, key, width from WIDE columns on, width below (0: left out), the order a click on
# its header asks for). The widths fit 120 columns, and 80, with the cells' padding and the
# scrollbar, so that there is no horizontal scrollbar.
COLUMNS: tuple[tuple[str, str, int, int, SessionSort | None], ...] = (
    ("Name", "name", 20, 17, SessionSort.NAME),
    ("Task", "task", 12, 11, SessionSort.TASK),
    ("Model", "model", 14, 10, SessionSort.MODEL),
    ("Steps", "steps", 6, 5, SessionSort.STEPS),
    ("Label", "label", 15, 15, SessionSort.LABEL),
    ("Cost", "cost", 9, 8, None),
    ("Answer", "answer", 8, 0, None),
    ("Updated", "updated", 16, 0, SessionSort.UPDATED),
)
WIDE = 118
# Where the room past WIDE columns goes, each column up to the most it can use (the longest
# task name is 25 characters), so that a wide terminal shows whole names, not ellipses.
GROWS = {"name": 60, "task": 26, "model": 40, "answer": 40}
PAGE = 100  # rows a query brings
MARGIN = 20  # the next page is asked for this many rows before an edge
KEPT = 3 * PAGE  # rows the table holds at most: past it, the far side's page is let go


@dataclass(frozen=True)
class ListedRow:
    """A session's row, laid out for the table's columns."""

    summary: SessionSummary
    cells: tuple[Text, ...]
    height: int


@dataclass(frozen=True)
class NextPage:
    """The page read ahead: the query, list position and column widths it is for."""

    query: SessionQuery
    position: int
    widths: dict[str, int]
    rows: list[ListedRow]


# A label on a branch that is not the one on show (the session was left on another).
ELSEWHERE = "↪ other branch"
ELSEWHERE_HELP = (f"{ELSEWHERE}: labelled on another branch than the one the session shows; "
                  "open it and press t (or < >) to see that branch")


def label_cell(summary: SessionSummary, colors: dict[str, str]) -> Text:
    """The label status, coloured from the theme (DataTable cells are Rich text); side by
    side, each model's on its own line, beside its name in the Model cell."""
    if summary.branches:
        return lines_cell([label_text(branch.label, branch.mistake_number, colors)
                           for branch in summary.branches])
    return label_text(summary.label, summary.mistake_number, colors)


def label_text(label: Label | None, mistake_number: int | None,
               colors: dict[str, str]) -> Text:
    if label is None:
        return Text("—", style="dim")
    if mistake_number is not None:
        return Text(f"{GLYPH_MISTAKE} mistake at {mistake_number}",
                    style=colors.get("text-error", "red"))
    if label.no_mistake:
        return Text(f"{GLYPH_OK} no mistake", style=colors.get("text-success", "green"))
    return Text(ELSEWHERE, style="dim")


def lines_cell(lines: list[Text]) -> Text:
    """A cell of several lines (a session side by side: a line for each model), each cut
    at the column's width."""
    justify = lines[0].justify if lines else None
    return Text("\n", no_wrap=True, overflow="ellipsis", justify=justify).join(lines)


def per_model(summary: SessionSummary, whole: Text, each: Callable[[ModelSummary], Text]
              ) -> Text:
    """`whole` for a session of one model; side by side, `each` model's on its own line."""
    if not summary.branches:
        return whole
    return lines_cell([each(branch) for branch in summary.branches])


def labelled_elsewhere(summary: SessionSummary) -> bool:
    labels = [(branch.label, branch.mistake_number) for branch in summary.branches] or \
        [(summary.label, summary.mistake_number)]
    return any(label is not None and number is None and not label.no_mistake
               for label, number in labels)


def name_cell(name: str, width: int) -> Text:
    """A session's name in `width` cells, cut in the middle where it is longer: names made
    from a file and a line ("multistep_arithmetic.jsonl:12") differ at their end, which a
    cut at the end took away from every one of them."""
    line = one_line(name)
    if cell_len(line) <= width or width < 8:
        return Text(line, no_wrap=True, overflow="ellipsis")
    tail = max(6, width * 2 // 5)
    head = width - 1 - tail
    return Text(f"{line[:head].rstrip()}…{line[-tail:]}", no_wrap=True)


def cost_cell(summary: SessionSummary) -> Text:
    """What the session's calls cost: "—" (dim) when no call's price is known, "≥$…" when
    some are not."""
    cost = format_total_cost(summary.cost, summary.calls, summary.unpriced_calls)
    return Text(cost, justify="right", style="dim" if cost == UNKNOWN else "")


def when_cell(timestamp: float, *, wall_clock: bool) -> Text:
    if not wall_clock:
        return Text("—", style="dim")
    return Text(time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp)))


def column_widths(width: int) -> dict[str, int]:
    """Each shown column's width in a terminal `width` columns wide: COLUMNS' widths, and past
    WIDE the room left shared out in proportion to what each GROWS column can still use."""
    wide = width >= WIDE
    widths = {key: wide_width if wide else narrow
              for _title, key, wide_width, narrow, _sort in COLUMNS}
    room = max(width - WIDE, 0) if wide else 0
    wants = {key: most - widths[key] for key, most in GROWS.items()}
    total = sum(wants.values())
    for key, want in wants.items():
        widths[key] += min(want, room * want // total)
    return {key: value for key, value in widths.items() if value}


class SessionsScreen(BbmScreen):
    CSS_PATH = stylesheet("sessions")
    HELP_TITLE = "the sessions screen"
    AUTO_FOCUS = "#sessions-table"  # the keys act on the list; / goes to the search line

    BINDINGS: ClassVar[list[BindingType]] = [
        # Priority: the list's own enter (select the row) would hide this one from the Footer
        # while the list has the focus, which it has nearly always. From the search line,
        # enter searches (check_action).
        Binding("enter", "resume", "resume", id="sessions_resume", priority=True,
                tooltip="Open the selected session as it was saved"),
        Binding("r", "rename", "rename", id="sessions_rename",
                tooltip="Rename the selected session"),
        Binding("d", "delete", "delete", id="sessions_delete",
                tooltip="Delete the selected session (asks first)"),
        Binding("slash", "search", "search", id="sessions_search",
                tooltip="Search and filter: words, task:… model:… label:… since:… before:…"),
        Binding("o", "sort", "sort", id="sessions_sort",
                tooltip="Sort by the next column (updated, name, task, model, steps, label)"),
        Binding("O", "reverse", "reverse", id="sessions_reverse", show=False,
                tooltip="Reverse the order"),
        Binding("escape", "back", "back", id="sessions_back",
                tooltip="Back (from the search line: to the list)"),
    ]
    # The palette's commands (ui/palette.py): binding id, the command's title.
    PALETTE: ClassVar[dict[str, str]] = {
        "sessions_rename": "Rename the session", "sessions_delete": "Delete the session",
        "sessions_search": "Search the sessions", "sessions_sort": "Sort the sessions",
    }

    def __init__(self) -> None:
        super().__init__(classes="sessions")
        self._summaries: dict[int, SessionSummary] = {}
        self._rows: list[int] = []  # the ids in the table, in order
        self._offset = 0  # the list position of the table's first row
        self._query = SessionQuery()
        self._total = 0
        self._everything: int | None = None  # all sessions, when a filter is on
        self._problems: tuple[str, ...] = ()
        self._loading_more = False
        # The page after the table's last row, read ahead of the cursor and laid out while
        # idle: the key that crosses into it appends it at once, in the frame of its own
        # move, rather than drawing the screen again when the page comes back.
        self._next_page: NextPage | None = None
        self._fills = 0  # how many times the table was filled anew: a page read before is stale
        self._widths: dict[str, int] = {}

    @property
    def bbm_app(self) -> AppContext:
        return context(self)

    def compose(self) -> ComposeResult:
        yield TitleBar(styled("bbm-tui — sessions", "bold"), styled(self._keys_line(), MUTED),
                       id="title-bar")
        yield Input(placeholder=f"{key_for(self, 'sessions_search')} search: {SEARCH_HELP}",
                    id="sessions-search", tooltip=f"{SEARCH_HELP}; {LABEL_HELP}")
        yield LeanStatic(id="sessions-status")
        yield WindowTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="sessions-empty", classes="hint")
        yield KeysFooter()

    def _keys_line(self) -> str:
        """"⏎ resume · / search · o sort · d delete · esc back", as the keys are bound."""
        return " · ".join(f"{key_for(self, binding_id)} {what}" for binding_id, what in (
            ("sessions_resume", "resume"), ("sessions_search", "search"),
            ("sessions_sort", "sort"), ("sessions_delete", "delete"), ("sessions_back", "back")))

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        self._widths = column_widths(self.app.size.width)
        self._add_columns()
        table.loading = True
        table.focus()
        self.reload()

    def _add_columns(self) -> None:
        table = self.query_one(DataTable)
        for title, key, *_ in COLUMNS:
            if key in self._widths:
                table.add_column(title, key=key, width=self._widths[key])

    def on_resize(self) -> None:
        widths = column_widths(self.app.size.width)
        if widths == self._widths:
            return
        # The columns that fit: rebuilt with the rows already read (no query).
        self._widths = widths
        table = self.query_one(DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        self._add_columns()
        summaries = [self._summaries[session_id] for session_id in self._rows]
        self._summaries, self._rows = {}, []
        self._add_rows(self._lay_out(summaries))
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1), animate=False)

    # -- loading (one query a page, in a thread)

    @work(exclusive=True, group="sessions", exit_on_error=False,
          description="Listing the sessions")
    async def reload(self, select: int | None = None, row: int | None = None) -> None:
        """The list again from the top (a new search or order), with the session `select` (or
        the row `row`) under the cursor, or else the first."""
        store = await self.bbm_app.wait_for_store()
        if store is None:
            return
        query = self._query
        filtered = is_filtered(query)

        def read() -> tuple[int, int | None, int, list[SessionSummary], int | None]:
            total = store.count_sessions(query)
            everything = store.count_sessions(SessionQuery()) if filtered else None
            position = store.session_position(query, select) if select is not None else None
            wanted = row if position is None else position
            target = None if wanted is None else max(min(wanted, total - 1), 0)
            # A whole window with the target in it, a page before it at most: the table does
            # not grow as the cursor goes down (a taller table is laid out again, in a frame
            # after the key's), it takes a page at its end and lets one go at its start.
            offset = max(0, (target or 0) - PAGE)
            return (total, everything, offset, store.session_page(query, offset, KEPT), target)

        total, everything, offset, summaries, target = await asyncio.to_thread(read)
        if query != self._query:
            return  # the search changed meanwhile: its own reload follows
        self._total, self._everything = total, everything
        self._fill(summaries, offset, target)

    def _fill(self, summaries: list[SessionSummary], offset: int, target: int | None) -> None:
        table = self.query_one(DataTable)
        table.loading = False
        table.clear()
        self._next_page = None
        self._fills += 1
        self._summaries = {}
        self._rows = []
        self._offset = offset
        self._add_rows(self._lay_out(summaries))
        empty = self.query_one("#sessions-empty", Static)
        empty.display = not summaries
        empty.update(styled(
            f"No session matches the search: {key_for(self, 'sessions_back')} in the search "
            "line clears it." if is_filtered(self._query) else
            f"No sessions yet: {key_for(self, 'new_session')} starts one.", MUTED))
        if target is not None and 0 <= target - offset < table.row_count:
            table.move_cursor(row=target - offset, animate=False)
        self._show_status()
        self._read_ahead()

    def _lay_out(self, summaries: list[SessionSummary]) -> list[ListedRow]:
        """Each session's row for the table's columns."""
        columns = [str(key.value) for key in self.query_one(DataTable).columns]
        wall_clock = self.bbm_app.wall_clock
        colors = self.app.theme_variables
        rows: list[ListedRow] = []
        for summary in summaries:
            session = summary.session
            cells = {
                "name": name_cell(session.name, self._widths.get("name", 60)),
                "task": safe_cell(session.task),
                # Side by side, a line for each model: its name, length, label and answer.
                "model": per_model(summary, safe_cell(summary.model_names, 60),
                                   lambda branch: safe_cell(branch.model, 60)),
                "steps": per_model(summary, Text(str(summary.steps), justify="right"),
                                   lambda branch: Text(str(branch.steps), justify="right")),
                "label": label_cell(summary, colors),
                "cost": cost_cell(summary),
                "answer": per_model(summary, safe_cell(summary.answer or "—", 40),
                                    lambda branch: safe_cell(branch.answer or "—", 40)),
                "updated": when_cell(session.updated_at, wall_clock=wall_clock),
            }
            rows.append(ListedRow(summary, tuple(cells[key] for key in columns),
                                  max(1, len(summary.branches))))
        return rows

    def _add_rows(self, rows: list[ListedRow]) -> None:
        table = self.query_one(WindowTable)
        new: list[NewRow] = []
        for row in rows:
            session = row.summary.session
            if session.id in self._summaries:
                continue  # a page moved under a change made meanwhile
            self._summaries[session.id] = row.summary
            self._rows.append(session.id)
            new.append((row.cells, str(session.id), row.height))
        table.add_rows_at_once(new)

    @on(DataTable.RowHighlighted)
    def _near_an_edge(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one(DataTable)
        if self._loading_more:
            return
        if (event.cursor_row >= table.row_count - MARGIN
                and self._offset + table.row_count < self._total):
            position = self._offset + table.row_count
            ahead = self._next_page
            if ahead is not None and (ahead.query, ahead.position) == (self._query, position):
                rows = ahead.rows if ahead.widths == self._widths else \
                    self._lay_out([row.summary for row in ahead.rows])  # resized since
                self._append_page(rows)
                return
            self._loading_more = True
            self._more(self._query, position)
        elif event.cursor_row < MARGIN and self._offset > 0:
            self._loading_more = True
            self._earlier(self._query, self._offset)

    @work(group="sessions-more", exit_on_error=False, description="Listing more sessions")
    async def _more(self, query: SessionQuery, position: int) -> None:
        """The page at list position `position`, after the window's last row."""
        try:
            store = await self.bbm_app.wait_for_store()
            if store is None:
                return
            page = await asyncio.to_thread(store.session_page, query, position, PAGE)
            table = self.query_one(DataTable)
            if query == self._query and position == self._offset + table.row_count:
                self._append_page(self._lay_out(page))
        finally:
            self._loading_more = False

    def _append_page(self, rows: list[ListedRow]) -> None:
        """The page after the table's last row: appended, the first page let go of, and the
        page after it read ahead once this key's frame is drawn (read in a thread meanwhile,
        it took the interpreter from the frame's drawing: 10-30 ms of wall time for 2-3 of
        CPU at load 5)."""
        self._next_page = None
        self._add_rows(rows)
        self._let_go_of_the_first_page()
        self._show_status()
        self.call_after_refresh(self._read_ahead)

    def _read_ahead(self) -> None:
        """Read the page after the table's last row, if the list goes on."""
        position = self._offset + self.query_one(DataTable).row_count
        if position < self._total:
            self._read_next_page(self._query, position, self._fills)

    @work(exclusive=True, group="sessions-ahead", exit_on_error=False,
          description="Reading the next sessions ahead")
    async def _read_next_page(self, query: SessionQuery, position: int, fills: int) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            return
        page = await asyncio.to_thread(store.session_page, query, position, PAGE)
        table = self.query_one(DataTable)
        # Kept only for the table it was read for: not one filled anew since (a delete, a
        # rename, a search), whose rows may have moved. Laid out now, while the app is idle,
        # not in the key that crosses into it.
        if (fills, query) == (self._fills, self._query) \
                and position == self._offset + table.row_count:
            self._next_page = NextPage(query, position, dict(self._widths), self._lay_out(page))

    def _let_go_of_the_first_page(self) -> None:
        table = self.query_one(WindowTable)
        extra = table.row_count - KEPT
        if extra <= 0:
            return
        for session_id in self._rows[:extra]:
            del self._summaries[session_id]
        self._rows = self._rows[extra:]
        self._offset += extra
        table.drop_first_rows(extra)  # in one pass (remove_row's cost grows with the table)

    @work(group="sessions-more", exit_on_error=False, description="Listing the earlier sessions")
    async def _earlier(self, query: SessionQuery, offset: int) -> None:
        """The page before the window (whose first row is at list position `offset`): the
        table is built again from it (a DataTable cannot insert rows at the top)."""
        try:
            store = await self.bbm_app.wait_for_store()
            if store is None:
                return
            start = max(0, offset - PAGE)
            page = await asyncio.to_thread(store.session_page, query, start, offset - start)
            if query != self._query or offset != self._offset:
                return
            table = self.query_one(DataTable)
            cursor = table.cursor_row
            kept = [self._summaries[session_id] for session_id in self._rows]
            kept = kept[:max(KEPT - len(page), 0)]
            self._fill([*page, *kept], start, None)
            table.move_cursor(row=cursor + (offset - start), animate=False)
        finally:
            self._loading_more = False

    def _show_status(self) -> None:
        line = describe(self._query, self._total, self._everything)
        status = Content(line).stylize(MUTED)
        if self._problems:
            status = status.append(styled(" · not understood: " + "; ".join(self._problems),
                                          "$text-warning"))
        selected = self.selected_id()
        summary = self._summaries.get(selected) if selected is not None else None
        if summary is not None and labelled_elsewhere(summary):
            status = status.append(styled(f" · {ELSEWHERE_HELP}", MUTED))
        self.query_one("#sessions-status", LeanStatic).show(status)

    @on(DataTable.RowHighlighted)
    def _explain_the_row(self) -> None:
        self._show_status()

    def selected_id(self) -> int | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return int(key.value) if key.value is not None else None

    # -- search, filters and order

    def action_search(self) -> None:
        self.query_one("#sessions-search", Input).focus()

    @on(Input.Changed, "#sessions-search")
    def _search_changed(self, event: Input.Changed) -> None:
        parsed = parse_search(event.value, self._query.sort, self._query.descending)
        self._problems = parsed.problems
        if parsed.query != self._query:
            self._query = parsed.query
            self.reload()
        else:
            self._show_status()

    @on(Input.Submitted, "#sessions-search")
    def _search_done(self) -> None:
        self.query_one(DataTable).focus()

    def action_sort(self) -> None:
        self._set_order(next_sort(self._query))

    def action_reverse(self) -> None:
        self._set_order(sorted_by(self._query, self._query.sort))

    @on(DataTable.HeaderSelected)
    def _header_clicked(self, event: DataTable.HeaderSelected) -> None:
        sort = next((sort for _t, key, _w, _n, sort in COLUMNS
                     if key == event.column_key.value), None)
        if sort is not None:
            self._set_order(sorted_by(self._query, sort))

    def _set_order(self, query: SessionQuery) -> None:
        self._query = query
        self.reload()

    # -- actions

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "resume":
            return not isinstance(self.focused, Input)
        return True

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_resume()

    def action_resume(self) -> None:
        session_id = self.selected_id()
        if session_id is not None:
            self.post_message(OpenSession(session_id))

    def action_rename(self) -> None:
        session_id = self.selected_id()
        if session_id is None:
            return
        current = self._summaries[session_id].session.name

        def renamed(name: str | None) -> None:
            if name is not None and name != current:
                self._rename(session_id, name)

        self.app.push_screen(RenameScreen(current), renamed)

    @work(group="sessions-write", exit_on_error=False, description="Renaming")
    async def _rename(self, session_id: int, name: str) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            return
        await asyncio.to_thread(store.rename_session, session_id, name)
        self.post_message(SessionRenamed(session_id))
        self.notify("Renamed.", markup=False, timeout=3)
        self.reload(select=session_id)

    def action_delete(self) -> None:
        session_id = self.selected_id()
        if session_id is None:
            return
        summary = self._summaries[session_id]
        question = Content.assemble(
            "Delete the session ", safe_line(summary.session.name, 60).stylize("bold"),
            f" ({thoughts(summary.steps)})? This cannot be undone.",
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._delete(session_id)

        self.app.push_screen(ConfirmScreen(question), confirmed)

    @work(group="sessions-write", exit_on_error=False, description="Deleting")
    async def _delete(self, session_id: int) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            return
        row = (self._offset + self._rows.index(session_id) if session_id in self._rows
               else None)
        await asyncio.to_thread(store.delete_session, session_id)
        self.post_message(SessionRemoved(session_id))
        self.notify("Deleted.", markup=False, timeout=3)
        # The cursor stays where it was: on the row after the deleted one (the one before,
        # if it was the last).
        self.reload(row=row)

    def action_back(self) -> None:
        search = self.query_one("#sessions-search", Input)
        if search.has_focus:
            if search.value:
                search.value = ""  # esc clears the search first, then leaves it
            else:
                self.query_one(DataTable).focus()
            return
        self.post_message(GoBack(self))
