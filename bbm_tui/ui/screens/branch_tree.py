"""The tree of a session's branches (docs/DESIGN.md §5): the thoughts between branch points
as one row each, each branch's end with its answer and whether it is right; Enter shows the
branch through the highlighted row. What it shows is computed in core/trace/branches.py."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static, Tree

from bbm_tui.core.tasks import Task
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.branches import Segment
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, styled
from bbm_tui.ui.viewmodels.branches import answer_words


class BranchTreeScreen(Dialog[int | None]):
    """Every branch of the session as a tree of segments; Enter shows the branch through the
    highlighted segment (its newest end)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t", "close", "close", id="tree_close"),
    ]

    def __init__(self, roots: list[Segment], shown: set[int], target: str | None,
                 task: Task | None = None) -> None:
        super().__init__()
        self.roots = roots
        self.shown = shown  # the ids of the steps of the branch on show
        self.target = target
        self.scored_by = task

    def compose(self) -> ComposeResult:
        with Vertical(id="branch-tree", classes="dialog"):
            yield Static(styled("The session's branches", "bold"), classes="dialog-title")
            tree: Tree[int] = Tree(Text("Question"), id="branch-tree-view")
            tree.show_root = False
            for segment in self.roots:
                self._add(tree.root, segment)
            tree.root.expand_all()
            yield tree
            yield Static(styled("● the branch on show · enter shows the branch through the "
                                f"highlighted part · {key_for(self, 'tree_close')} closes",
                                MUTED), classes="dialog-hint")

    def _add(self, parent, segment: Segment) -> None:
        node = parent.add(self._label(segment), data=segment.end.id, expand=True)
        for child in segment.children:
            self._add(node, child)

    def _label(self, segment: Segment) -> Text:
        span = (f"Thought {segment.first}" if segment.first == segment.last
                else f"Thoughts {segment.first}-{segment.last}")
        label = Text()
        label.append("● " if segment.end.id in self.shown else "  ", style="bold")
        label.append(span, style="bold")
        label.append(f"  {one_line(segment.steps[0].text, 48)}")
        if not segment.children:
            words, style = answer_words(segment.end, self.target, self.scored_by)
            label.append(f"  → {words}", style=style or "dim")
        elif len(segment.children) > 1:
            label.append(f"  ({len(segment.children)} versions of Thought {segment.last + 1})",
                         style="dim")
        return label

    def on_mount(self) -> None:
        self.query_one(Tree).focus()

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)

    def action_close(self) -> None:
        self.dismiss(None)
