"""What the parts of a trace view tell it, and what a trace view tells the screen that holds
it: Textual messages, so that no part reaches into another's state (docs/DESIGN.md §7)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

if TYPE_CHECKING:
    from textual.widget import Widget

    from bbm_tui.core.llm import CallRecord


class CallsMade(Message, bubble=False):
    """A part of the view made model calls (a finder's verdicts, backtracking's samples), each
    saved already: the view adds them to the session's totals."""

    def __init__(self, *calls: CallRecord | None) -> None:
        super().__init__()
        # None: a verdict no model gave (the task verifiers).
        self.calls = [call for call in calls if call is not None]


class BranchShown(Message, bubble=False):
    """Another branch of the session is on show (backtracked, rewritten, or chosen): the view
    shows that branch's own finder run, if any (a run stays with the branch it judged)."""


class TitleChanged(Message):
    """What a trace's title shows changed: its session's name, the model the next step uses, or
    its totals. The screen holding the view shows it (a title bar, a column's header)."""

    def __init__(self, view: Widget) -> None:
        super().__init__()
        self.view = view

    @property
    def control(self) -> Widget:
        return self.view
