"""A question of one's own (the new-session screen's t): its text and, optionally, its target."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Input, Static

from bbm_tui.core.tasks import Task
from bbm_tui.core.types import MAX_QUESTION_CHARS
from bbm_tui.ui.dialogs.base import Dialog, with_key
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe, safe_line, styled


class TypedQuestionScreen(Dialog[tuple[str, str | None] | None]):
    """A question of one's own for the task: the text (several lines if need be) and,
    optionally, the target answer to compare with."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "submit", "start", id="typed_start"),
        Binding("escape", "cancel", "cancel", id="typed_cancel"),
    ]
    # Under 32 rows the text box is shorter (dialogs.tcss): with the footer, the dialog
    # then fits 80x24 without scrolling its title away.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (32, "-tall")]

    def __init__(self, task: Task) -> None:
        super().__init__()
        self._question_task = task

    def compose(self) -> ComposeResult:
        # Imported here: a TextArea is costly, and only this dialog needs one.
        from textual.widgets import TextArea

        task = self._question_task
        prefix, _, suffix = task.question_template.partition("{input}")
        title = Content.assemble("Type a ", safe_line(task.title.lower(), 40), " question")
        before = (safe(prefix).stylize("bold") if prefix
                  else styled("(nothing: your text is the whole question)", "bold"))
        # A template that goes on after the text shows where the text goes.
        asked = Content.assemble(("The model is asked: ", MUTED), before,
                                 ("your text" if suffix else "+ your text", MUTED),
                                 safe(suffix).stylize("bold"))
        with Vertical(id="typed", classes="dialog"):
            yield Static(title.stylize("bold"), classes="dialog-title")
            yield Static(asked, id="typed-hint")
            yield TextArea(id="typed-input", soft_wrap=True, show_line_numbers=False)
            yield Input(placeholder="Target answer (optional)", id="typed-target")
            with Horizontal(classes="dialog-buttons"):
                yield Button(with_key("Start", key_for(self, "typed_start")),
                             variant="primary", id="typed-start")
                yield Button(with_key("Cancel", key_for(self, "typed_cancel")),
                             id="typed-cancel")

    def on_mount(self) -> None:
        self.query_one("#typed-input").focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "typed-start":
            self.action_submit()
        else:
            self.action_cancel()

    def action_submit(self) -> None:
        from textual.widgets import TextArea

        text = self.query_one("#typed-input", TextArea).text.strip()
        if not text:
            self.notify("Type a question first.", severity="warning", markup=False)
            return
        target = self.query_one("#typed-target", Input).value.strip() or None
        longest = max(len(text), len(target or ""))
        if longest > MAX_QUESTION_CHARS:
            self.notify(f"That is {longest:,} characters; bbm-tui takes questions of up to "
                        f"{MAX_QUESTION_CHARS:,} characters (and targets as long).",
                        severity="warning", markup=False)
            return
        self.dismiss((text, target))

    def action_cancel(self) -> None:
        self.dismiss(None)
