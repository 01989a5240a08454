"""The app's base: every notification kept whole in the session's message log
(ui/message_log.py) as well as shown as a toast, and the messages screen one key away."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import App
from textual.content import Content

from bbm_tui.ui.message_log import MessageLog

if TYPE_CHECKING:
    from textual.notifications import SeverityLevel


class KeepsMessages(App[int]):
    """The app's base: every notification is kept in `message_log` as well as shown, and
    `action_messages` shows them all (the messages screen)."""

    def __init__(self) -> None:
        super().__init__()
        self.message_log = MessageLog()
        self.wall_clock = True

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        # A message given as markup is kept as its plain text (what the toast shows).
        text = Content.from_markup(message).plain if markup else message
        self.message_log.add(text, title=title, severity=severity)
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=markup)

    def action_messages(self) -> None:
        from bbm_tui.ui.dialogs.messages import MessagesScreen

        if not isinstance(self.screen, MessagesScreen):
            self.push_screen(MessagesScreen(self.message_log.newest_first(),
                                            wall_clock=self.wall_clock))
