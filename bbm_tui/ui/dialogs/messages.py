"""The messages screen (M, issue 34, item 12): every notice, warning and error of the session
(ui/message_log.py), whole and newest first, in one scrolling list. Toasts go after a few
seconds and the status line cuts with "…"; here nothing is cut."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.ui.dialogs.base import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.message_log import LoggedMessage
from bbm_tui.ui.text import MUTED, safe_cut, styled

# Rows around the list in the dialog (border, padding, the title and the hint with their
# margins), and the footer's below it.
AROUND_THE_LIST = 8
FOOTER = 1
# How each severity is marked: a word as well as a colour (readable without colour).
_MARKS = {
    "error": ("✗ error", "bold $text-error"),
    "warning": ("! warning", "bold $text-warning"),
    "information": ("· notice", "bold $text-accent"),
}


class MessagesScreen(Dialog[None]):
    """The session's messages, newest first; `wall_clock=False` leaves out the times (for
    screenshots that must not change between runs)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,M,q", "close", "close", id="messages_close"),
        Binding("y", "copy", "copy all", id="messages_copy",
                tooltip="Copy every message, whole, newest first"),
        Binding("j,down", "scroll(1)", "down", id="messages_down", show=False),
        Binding("k,up", "scroll(-1)", "up", id="messages_up", show=False),
    ]

    def __init__(self, messages: list[LoggedMessage], *, wall_clock: bool = True) -> None:
        super().__init__()
        self._messages = messages
        self._wall_clock = wall_clock

    def compose(self) -> ComposeResult:
        count = len(self._messages)
        title = f"Messages · {count}, newest first" if count else "Messages"
        with Vertical(id="messages", classes="dialog"):
            yield Static(styled(title, "bold"), classes="dialog-title")
            with VerticalScroll(id="messages-list"):
                if not self._messages:
                    yield Static(styled("No notices, warnings or errors yet.", MUTED))
                for message in self._messages:
                    yield Static(self._entry(message), classes="message")
            yield Static(styled(f"{key_for(self, 'messages_close')} closes · "
                                f"{key_for(self, 'messages_copy')} copies them all · each "
                                "whole, as it was said", MUTED), classes="dialog-hint")

    def _entry(self, message: LoggedMessage) -> Content:
        mark, style = _MARKS.get(message.severity, _MARKS["information"])
        head = [styled(mark, style)]
        if self._wall_clock:
            head.append(styled(f"  {message.at:%H:%M:%S}", MUTED))
        if message.title:
            head.append(styled(f"  {message.title}", "bold"))
        return Content.assemble(*head, "\n", safe_cut(message.text, "y copies them all"))

    def on_mount(self) -> None:
        self._fit_list()
        self.query_one("#messages-list").focus()

    def on_resize(self) -> None:
        self._fit_list()

    def _fit_list(self) -> None:
        """The list scrolls in what the dialog's 90% of the screen leaves it, so that the
        title and the hint stay in view (the dialog's own scrolling took them away)."""
        room = int((self.app.size.height - FOOTER) * 0.9) - AROUND_THE_LIST
        self.query_one("#messages-list").styles.max_height = max(3, room)

    def action_scroll(self, lines: int) -> None:
        self.query_one("#messages-list", VerticalScroll).scroll_relative(y=lines,
                                                                         animate=False)

    def action_copy(self) -> None:
        text = "\n\n".join(_plain(message) for message in self._messages)
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied {len(self._messages)} messages ({len(text):,} characters).",
                    markup=False, timeout=3)

    def action_close(self) -> None:
        self.dismiss(None)


def _plain(message: LoggedMessage) -> str:
    title = f" {message.title}:" if message.title else ""
    return f"[{message.at:%Y-%m-%d %H:%M:%S}] {message.severity}{title} {message.text}"
