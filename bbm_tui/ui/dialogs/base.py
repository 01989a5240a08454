"""What every dialog is: a modal box in the middle of the screen, with a footer of its own."""

from __future__ import annotations

from typing import TypeVar

from textual.content import Content
from textual.screen import ModalScreen

from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.widgets.chrome import KeysFooter

R = TypeVar("R")


class Dialog(ModalScreen[R]):
    """A modal box in the middle of the screen; its styles load with the first one shown.

    It has a footer of its own, over the screen behind's: that one listed keys (f find, x
    first mistake) that do nothing while the dialog is open, and this one lists the
    dialog's, which do (a modal's bindings stop at the modal: Screen._modal_binding_chain).
    """

    CSS_PATH = stylesheet("dialogs")

    def __init__(self) -> None:
        super().__init__(classes="dialog-screen")

    def on_mount(self) -> None:
        # Mounted before the first frame, after the subclass's own widgets (each dialog
        # composes its box; this is the one thing every dialog adds).
        self.mount(KeysFooter(show_command_palette=False))


def with_key(label: str, key: str) -> Content:
    """A button's label and its key: "Start (^r)". Content, not a string: a string label is
    read as markup, and a key from the user's keymap may be "[" ."""
    return Content(f"{label} ({key})")
