"""Short dialogs: yes or no before what cannot be undone, a session's new name, and the store
that cannot be opened."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, Static

from bbm_tui.ui.dialogs.base import Dialog, with_key
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe, safe_line, styled


class ConfirmScreen(Dialog[bool]):
    """Ask before doing something that cannot be undone."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm_no"),
    ]

    def __init__(self, question: Content, confirm_label: str = "Delete") -> None:
        super().__init__()
        self._question = question
        self._confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm", classes="dialog"):
            yield Static(self._question, classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(with_key(self._confirm_label, key_for(self, "confirm_yes")),
                             variant="error", id="yes")
                yield Button(with_key("Cancel", key_for(self, "confirm_no")), id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class RenameScreen(Dialog[str | None]):
    """A new name for a session; Enter keeps it, Esc drops it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="rename_cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="rename", classes="dialog"):
            yield Static(styled("Rename the session", "bold"), classes="dialog-title")
            yield Input(value=self._current, id="rename-input", select_on_focus=True)
            # enter is the input's own key, not a binding: no keymap moves it.
            yield Static(styled(f"enter to save · {key_for(self, 'rename_cancel')} to cancel",
                                MUTED), classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        name = " ".join(event.value.split())
        if not name:
            self.notify("A session needs a name.", severity="warning", markup=False)
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class StoreErrorScreen(Dialog[None]):
    """The session store cannot be opened: say why and where, and let the person leave."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape,enter", "quit_app", "quit", id="store_error_quit"),
    ]

    def __init__(self, message: str) -> None:
        super().__init__()
        self._message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="store-error", classes="dialog -error"):
            yield Static(styled("The session store cannot be opened", "bold $text-error"),
                         classes="dialog-title")
            yield Static(safe(self._message), id="store-error-message", classes="dialog-text")
            yield Static(
                safe_line(
                    "Nothing was changed. Fix or move the file, or set BBM_TUI_HOME to another "
                    f"folder, then start bbm-tui again. Press {key_for(self, 'store_error_quit')}"
                    " to quit."
                ),
                classes="dialog-hint",
            )

    def action_quit_app(self) -> None:
        self.app.exit(return_code=1)
