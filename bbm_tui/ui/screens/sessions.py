"""The sessions screen: every saved session; resume, rename or delete one."""

from __future__ import annotations

import asyncio
import time
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.widgets import DataTable, Static

from bbm_tui.core.store import SessionSummary
from bbm_tui.ui.context import AppContext, context
from bbm_tui.ui.dialogs import ConfirmScreen, RenameScreen
from bbm_tui.ui.messages import GoBack, OpenSession, SessionRemoved, SessionRenamed
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED, safe_cell, safe_line, styled
from bbm_tui.ui.widgets.chrome import KeysFooter, TitleBar

COLUMNS = ("Name", "Task", "Model", "Steps", "Label", "Answer", "Updated")


def label_cell(summary: SessionSummary, colors: dict[str, str]) -> Text:
    """The label status, coloured from the theme (DataTable cells are Rich text)."""
    if summary.label is None:
        return Text("—", style="dim")
    if summary.mistake_number is not None:
        return Text(f"{GLYPH_MISTAKE} mistake at {summary.mistake_number}",
                    style=colors.get("text-error", "red"))
    if summary.label.mistake_step_id is None:
        return Text(f"{GLYPH_OK} no mistake", style=colors.get("text-success", "green"))
    return Text("mistake on another branch", style="dim")


def when_cell(timestamp: float, *, wall_clock: bool) -> Text:
    if not wall_clock:
        return Text("—", style="dim")
    return Text(time.strftime("%Y-%m-%d %H:%M", time.localtime(timestamp)))


class SessionsScreen(BbmScreen):
    CSS_PATH = stylesheet("sessions")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "resume", "resume", id="sessions_resume",
                tooltip="Open the selected session as it was saved"),
        Binding("r", "rename", "rename", id="sessions_rename",
                tooltip="Rename the selected session"),
        Binding("d", "delete", "delete", id="sessions_delete",
                tooltip="Delete the selected session (asks first)"),
        Binding("escape", "back", "back", id="sessions_back", tooltip="Back"),
    ]

    def __init__(self) -> None:
        super().__init__(classes="sessions")
        self._summaries: dict[int, SessionSummary] = {}

    @property
    def bbm_app(self) -> AppContext:
        return context(self)

    def compose(self) -> ComposeResult:
        yield TitleBar(styled("bbm-tui — sessions", "bold"),
                       styled("enter resume · r rename · d delete · esc back", MUTED),
                       id="title-bar")
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="sessions-empty", classes="hint")
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column.lower())
        table.loading = True
        self.reload()

    @work(exclusive=True, group="sessions", exit_on_error=False)
    async def reload(self, select: int | None = None) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            return
        summaries = await asyncio.to_thread(store.sessions)
        self._fill(summaries, select)

    def _fill(self, summaries: list[SessionSummary], select: int | None) -> None:
        table = self.query_one(DataTable)
        table.loading = False
        previous = self.selected_id()
        table.clear()
        self._summaries = {summary.session.id: summary for summary in summaries}
        wall_clock = self.bbm_app.wall_clock
        colors = self.app.theme_variables
        for summary in summaries:
            session = summary.session
            table.add_row(
                safe_cell(session.name, 40),
                safe_cell(session.task),
                safe_cell(session.model, 28),
                Text(str(summary.steps), justify="right"),
                label_cell(summary, colors),
                safe_cell(summary.answer or "—", 24),
                when_cell(session.updated_at, wall_clock=wall_clock),
                key=str(session.id),
            )
        empty = self.query_one("#sessions-empty", Static)
        empty.display = not summaries
        empty.update(styled("No sessions yet: ctrl+n starts one.", MUTED))
        target = select if select is not None else previous
        if target is not None and target in self._summaries:
            table.move_cursor(row=table.get_row_index(str(target)))
        table.focus()

    def selected_id(self) -> int | None:
        table = self.query_one(DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        return int(key.value) if key.value is not None else None

    # -- actions

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

    @work(group="sessions-write", exit_on_error=False)
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
            f" ({summary.steps} thoughts)? This cannot be undone.",
        )

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._delete(session_id)

        self.app.push_screen(ConfirmScreen(question), confirmed)

    @work(group="sessions-write", exit_on_error=False)
    async def _delete(self, session_id: int) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            return
        await asyncio.to_thread(store.delete_session, session_id)
        self.post_message(SessionRemoved(session_id))
        self.notify("Deleted.", markup=False, timeout=3)
        self.reload()

    def action_back(self) -> None:
        self.post_message(GoBack(self))
