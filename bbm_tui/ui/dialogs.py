"""Modal screens: help, a yes/no confirmation, a one-line rename, and the store failure."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from bbm_tui.ui.text import MUTED, safe, safe_line, styled


@dataclass(frozen=True)
class KeyHelp:
    keys: str
    description: str
    detail: str
    binding_id: str = ""


class HelpScreen(ModalScreen[None]):
    """Every key that works on the screen below, with its current binding (keymap applied)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "close", id="help_close"),
    ]

    def __init__(self, rows: list[KeyHelp], title: str) -> None:
        super().__init__(classes="dialog-screen")
        self.rows = rows
        self._title = title

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Static(styled(self._title, "bold"), classes="dialog-title")
            with VerticalScroll(id="help-keys"):
                yield Static(self._table(), id="help-table")
            yield Static(
                styled('Change a key in config.toml\'s [keymap] table: binding id = "keys", '
                       'e.g. step = "n,space".', MUTED),
                classes="dialog-hint",
            )

    def _table(self) -> Table:
        # A Rich grid sizes the columns; every cell is our own text (a Text, never markup).
        colors = self.app.theme_variables
        table = Table.grid(padding=(0, 2))
        table.add_column(justify="right", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(no_wrap=True, overflow="ellipsis")
        table.add_column(no_wrap=True)
        for row in self.rows:
            table.add_row(
                Text(row.keys, style=f"bold {colors.get('accent', 'yellow')}"),
                Text(row.description, style="bold"),
                Text(row.detail),
                Text(row.binding_id, style="dim"),
            )
        return table

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmScreen(ModalScreen[bool]):
    """Ask before doing something that cannot be undone."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm_no"),
    ]

    def __init__(self, question: Content, confirm_label: str = "Delete") -> None:
        super().__init__(classes="dialog-screen")
        self._question = question
        self._confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm", classes="dialog"):
            yield Static(self._question, classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(f"{self._confirm_label} (y)", variant="error", id="yes")
                yield Button("Cancel (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class RenameScreen(ModalScreen[str | None]):
    """A new name for a session; Enter keeps it, Esc drops it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="rename_cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__(classes="dialog-screen")
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="rename", classes="dialog"):
            yield Static(styled("Rename the session", "bold"), classes="dialog-title")
            yield Input(value=self._current, id="rename-input", select_on_focus=True)
            yield Static(styled("enter to save · esc to cancel", MUTED),
                         classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        name = " ".join(event.value.split())
        if not name:
            self.notify("A session needs a name.", severity="warning", markup=False)
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class StoreErrorScreen(ModalScreen[None]):
    """The session store cannot be opened: say why and where, and let the person leave."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape,enter", "quit_app", "quit", id="store_error_quit"),
    ]

    def __init__(self, message: str) -> None:
        super().__init__(classes="dialog-screen")
        self._message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="store-error", classes="dialog -error"):
            yield Static(styled("The session store cannot be opened", "bold $text-error"),
                         classes="dialog-title")
            yield Static(safe(self._message), id="store-error-message", classes="dialog-text")
            yield Static(
                safe_line(
                    "Nothing was changed. Fix or move the file, or set BBM_TUI_HOME to another "
                    "folder, then start bbm-tui again. Press q to quit."
                ),
                classes="dialog-hint",
            )

    def action_quit_app(self) -> None:
        self.app.exit(return_code=1)
