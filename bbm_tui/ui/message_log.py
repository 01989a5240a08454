"""Every notice, warning and error of the session, whole (issue 34, item 12): toasts go after
a few seconds and the status line and columns cut what does not fit with "…", so the app keeps
each message as it was said, for the messages screen (ui/dialogs/messages.py) to show newest
first, as lazygit's command log does; the app keeps them through ui/notices.py."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.dom import DOMNode

# The most messages kept: a long session's first ones give way (each is kept whole).
KEPT = 500


@dataclass(frozen=True)
class LoggedMessage:
    at: datetime
    severity: str  # Textual's: "information", "warning" or "error"
    title: str
    text: str


class MessageLog:
    def __init__(self, kept: int = KEPT) -> None:
        self._entries: deque[LoggedMessage] = deque(maxlen=kept)

    def add(self, text: str, *, title: str = "", severity: str = "information",
            once: bool = False) -> None:
        """Keep `text` as said; the same message said twice in a row is kept once (a status
        line fitted again after a resize says nothing new), and with `once` not at all if it
        is kept already (a pane shown again)."""
        entry = LoggedMessage(datetime.now().astimezone(), severity, title, text)
        if once and any((kept.severity, kept.title, kept.text) == (severity, title, text)
                        for kept in self._entries):
            return
        last = self._entries[-1] if self._entries else None
        if last is not None and (last.severity, last.title, last.text) == (
                severity, title, text):
            return
        self._entries.append(entry)

    def newest_first(self) -> list[LoggedMessage]:
        return list(reversed(self._entries))

    def __len__(self) -> int:
        return len(self._entries)


def keep_message(node: DOMNode, text: str, *, severity: str = "information",
                 once: bool = False) -> None:
    """Keep a message said elsewhere than in a notification (a status line) in the app's log,
    whole (with `once`, unless it is there already); an app that keeps none (a widget tested
    on its own) is left alone."""
    log = getattr(node.app, "message_log", None)
    if isinstance(log, MessageLog):
        log.add(text, severity=severity, once=once)
