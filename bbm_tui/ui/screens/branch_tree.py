"""The tree of a session's branches (docs/DESIGN.md §5): the thoughts between branch points
as one row each, each branch's end with its answer and whether it is right; Enter shows the
branch through the highlighted row. What it shows is computed in core/trace/branches.py.

Every row fits the width it has (no horizontal scrolling): its verdict (✓ ✗) always shows,
then as much of the answer, of what the branch is (backtracked, which sample; a rewrite) and
of its first thought from where it parts from the other versions as there is room for, so
that two branches that differ never read the same."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Static, Tree
from textual.widgets.tree import TreeNode

from bbm_tui.core.tasks import Task
from bbm_tui.core.trace.branches import BranchOrigin, Segment
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, styled
from bbm_tui.ui.viewmodels.branches import TreeRow, tree_row


class BranchTreeView(Tree[int]):
    """The tree, its rows cut to its width by the dialog (`TreeRow.fit`); it counts no row
    wider than that, so it has nothing to scroll sideways to, even for the moment between a
    resize and the rows fitted again."""

    def room(self, node: TreeNode[int]) -> int:
        """The cells a row's label has at its depth (0: not laid out yet)."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return 0
        depth = 0
        parent = node.parent
        while parent is not None and parent is not self.root:
            depth += 1
            parent = parent.parent
        icon = 2 if node.allow_expand else 0
        return max(1, width - depth * self.guide_depth - icon)

    def get_label_width(self, node: TreeNode[int]) -> int:
        width = super().get_label_width(node)
        room = self.room(node)
        return min(width, room) if room else width


class BranchTreeScreen(Dialog[int | None]):
    """Every branch of the session as a tree of segments; Enter shows the branch through the
    highlighted segment (its newest end)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t", "close", "close", id="tree_close"),
    ]

    def __init__(self, roots: list[Segment], shown: set[int], target: str | None,
                 origins: dict[int, BranchOrigin | None] | None = None,
                 task: Task | None = None) -> None:
        super().__init__()
        self.roots = roots
        self.shown = shown  # the ids of the steps of the branch on show
        self.target = target
        # Whose comparison says an answer is right (`task` is a Textual name: MessagePump).
        self.scored_by = task
        # What each segment that parts from others is, by the id of its first step.
        self.origins = origins or {}
        self._rows: dict[int, TreeRow] = {}  # by node id

    def compose(self) -> ComposeResult:
        with Vertical(id="branch-tree", classes="dialog"):
            yield Static(styled("The session's branches", "bold"), classes="dialog-title")
            tree = BranchTreeView(Text("Question"), id="branch-tree-view")
            tree.show_root = False
            self._add_all(tree.root, self.roots)
            tree.root.expand_all()
            yield tree
            yield Static(styled("● the branch on show · enter shows the branch through the "
                                f"highlighted part · {key_for(self, 'tree_close')} closes",
                                MUTED), classes="dialog-hint")

    def _add_all(self, parent: TreeNode[int], segments: list[Segment] | tuple[Segment, ...]
                 ) -> None:
        for segment in segments:
            others = [[step.text for step in other.steps]
                      for other in segments if other is not segment]
            row = tree_row(segment, self.target, segment.end.id in self.shown,
                           self.origins.get(segment.steps[0].id), others, self.scored_by)
            if segment.children:
                node = parent.add(row.fit(None), data=segment.end.id, expand=True)
                self._add_all(node, segment.children)
            else:
                node = parent.add_leaf(row.fit(None), data=segment.end.id)
            self._rows[node.id] = row

    def on_mount(self) -> None:
        self.query_one(Tree).focus()
        self.call_after_refresh(self._fit_rows)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_rows)

    def _fit_rows(self) -> None:
        """Each row cut to the tree's width, less its indentation and expand icon."""
        tree = self.query_one(BranchTreeView)
        stack = list(tree.root.children)
        while stack:
            node = stack.pop()
            stack.extend(node.children)
            room = tree.room(node)
            if room:
                node.set_label(self._rows[node.id].fit(room))

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)

    def action_close(self) -> None:
        self.dismiss(None)
