"""Two branches side by side (docs/DESIGN.md §5): the thoughts they share folded, then each
one's own, with both answers and which is right. The diff is core/trace/tree.py's."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core.tasks import Task
from bbm_tui.core.trace.tree import BranchDiff
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe_line, styled
from bbm_tui.ui.viewmodels.branches import answer_words


class CompareScreen(Dialog[None]):
    """Two branches side by side: the thoughts they share folded, then each one's own, with
    both answers and which is right."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,v", "close", "close", id="compare_close"),
    ]

    def __init__(self, diff: BranchDiff, target: str | None, task: Task | None = None) -> None:
        super().__init__()
        self.diff = diff
        self.target = target
        self.scored_by = task

    def compose(self) -> ComposeResult:
        shared = len(self.diff.shared)
        with Vertical(id="compare", classes="dialog"):
            yield Static(styled("Two branches side by side", "bold"), classes="dialog-title")
            same = "Thought 1 is" if shared == 1 else f"Thoughts 1-{shared} are"
            folded = ("They part at Thought 1." if not shared else
                      f"{same} the same on both (folded); they part at Thought {shared + 1}.")
            yield Static(styled(folded, MUTED), classes="dialog-text")
            with Horizontal(id="compare-columns"):
                for title, steps in (("On show", self.diff.left), ("The other", self.diff.right)):
                    with VerticalScroll(classes="compare-column"):
                        yield Static(styled(title, "bold"))
                        for step in steps:
                            yield Static(Content.assemble(styled(f"{step.number} ", "bold"),
                                                          safe_line(step.text)),
                                         classes="compare-step")
                        end = steps[-1] if steps else (self.diff.shared[-1] if shared else None)
                        if end is not None:
                            words, style = answer_words(end, self.target, self.scored_by)
                            colour = {"green": "$text-success", "red": "$text-error"}.get(
                                style, MUTED)
                            yield Static(styled(words, f"bold {colour}"), classes="compare-end")
            yield Static(styled(f"{key_for(self, 'compare_close')} closes", MUTED),
                         classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)
