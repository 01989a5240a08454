"""Two branches side by side (docs/DESIGN.md §5): the thoughts they share (or each has word
for word: two models' traces) folded, then each one's own, a row per thought number (both
versions of a thought start on the same line and scroll together), the words that differ
between them marked, with both answers and which is right. Each column says what its branch
is. The diff is core/trace/tree.py's."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core.store import Step
from bbm_tui.core.tasks import Task
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.tree import BranchDiff
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe_line, styled
from bbm_tui.ui.viewmodels.branches import answer_words, word_diff

# The words that differ between two versions of a thought: bold and underlined, so that they
# read without colour too.
DIFFERS = "bold underline $text-warning"


class Rows(VerticalScroll, can_focus=False):
    """The rows, scrolled by the dialog's keys (never taking the focus, so j/k reach it)."""


class CompareScreen(Dialog[None]):
    """Two branches side by side: the thoughts they share folded, then each one's own by
    thought number, with both answers and which is right. j/k move a row at a time, pgdn/pgup
    a screenful; both columns move together."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,v", "close", "close", id="compare_close"),
        Binding("j,down", "move(1)", "next", id="compare_next",
                tooltip="The next thought (both columns)"),
        Binding("k,up", "move(-1)", "previous", id="compare_previous",
                tooltip="The previous thought (both columns)"),
        Binding("pagedown", "page(1)", "page down", id="compare_page_down", show=False,
                tooltip="Down a screenful (both columns)"),
        Binding("pageup", "page(-1)", "page up", id="compare_page_up", show=False,
                tooltip="Up a screenful (both columns)"),
        Binding("home", "end(-1)", "first", id="compare_first", show=False,
                tooltip="The first thought where the branches part"),
        Binding("G,end", "end(1)", "last", id="compare_last", show=False,
                tooltip="The branches' answers"),
    ]

    def __init__(self, diff: BranchDiff, target: str | None, left_is: str = "",
                 right_is: str = "", task: Task | None = None) -> None:
        super().__init__()
        self.diff = diff
        self.target = target
        # Whose comparison says an answer is right (`task` is a Textual name: MessagePump).
        self.scored_by = task
        self.left_is = left_is  # what each branch is: "original · replay/bbm"
        self.right_is = right_is
        self.numbers = _numbers(diff, diff.alike)
        self.selected = 0  # a place in `numbers`, then the answers' row

    def compose(self) -> ComposeResult:
        shared = self.diff.alike
        with Vertical(id="compare", classes="dialog"):
            yield Static(styled("Two branches side by side", "bold"), classes="dialog-title")
            same = "Thought 1 is" if shared == 1 else f"Thoughts 1-{shared} are"
            folded = ("They part at Thought 1." if not shared else
                      f"{same} the same on both (folded); they part at Thought {shared + 1}.")
            yield Static(styled(folded, MUTED), id="compare-folded")
            with Horizontal(id="compare-heads"):
                for title, what in (("On show", self.left_is), ("The other", self.right_is)):
                    yield Static(Content.assemble(styled(f"{title}: ", "bold"),
                                                  safe_line(what)), classes="compare-head")
            with Rows(id="compare-rows"):
                for place, number in enumerate(self.numbers):
                    left, right = _step(self.diff.left, number), _step(self.diff.right, number)
                    with Horizontal(id=f"compare-row-{number}",
                                    classes="compare-row" + (" -selected" if place == 0 else "")):
                        for cell in _cells(number, left, right):
                            yield Static(cell, classes="compare-cell")
                with Horizontal(id="compare-end", classes="compare-row"):
                    for steps in (self.diff.left, self.diff.right):
                        yield Static(self._end(steps), classes="compare-cell compare-end")
            yield Static(self._hint(), classes="dialog-hint")

    def _end(self, steps: tuple[Step, ...]) -> Content:
        shared = self.diff.shared
        end = steps[-1] if steps else (shared[-1] if shared else None)
        if end is None:
            return styled("no thoughts", MUTED)
        words, style = answer_words(end, self.target, self.scored_by)
        colour = {"green": "$text-success", "red": "$text-error"}.get(style, MUTED)
        return styled(words, f"bold {colour}")

    def _hint(self) -> Content:
        return styled(f"{key_for(self, 'compare_next')}/{key_for(self, 'compare_previous')} "
                      "move both columns · the words that differ are underlined · "
                      f"{key_for(self, 'compare_close')} closes", MUTED)

    # -- moving (both columns are one scroll: a row holds both versions of a thought)

    @property
    def _rows(self) -> list[Horizontal]:
        return list(self.query(".compare-row").results(Horizontal))

    def action_move(self, delta: int) -> None:
        self._select(self.selected + delta)

    def action_end(self, direction: int) -> None:
        self._select(0 if direction < 0 else len(self._rows) - 1)

    def action_page(self, direction: int) -> None:
        pane = self.query_one(Rows)
        top = pane.scroll_y
        bottom = top + pane.scrollable_content_region.height
        in_view = sum(1 for row in self._rows
                      if row.virtual_region.y < bottom and row.virtual_region.bottom > top)
        # The row chosen goes to the top: a screenful further on, not just into view.
        self._select(self.selected + direction * max(1, in_view - 1), top=True)

    def _select(self, place: int, *, top: bool = False) -> None:
        rows = self._rows
        self.selected = min(max(place, 0), len(rows) - 1)
        for index, row in enumerate(rows):
            row.set_class(index == self.selected, "-selected")
        self.query_one(Rows).scroll_to_widget(rows[self.selected], animate=False, top=top)

    def action_close(self) -> None:
        self.dismiss(None)


def _numbers(diff: BranchDiff, folded: int) -> list[int]:
    """The thought numbers either branch has beyond the `folded` ones, in order."""
    return sorted({step.number for step in (*diff.left, *diff.right)
                   if step.number > folded})


def _step(steps: tuple[Step, ...], number: int) -> Step | None:
    return next((step for step in steps if step.number == number), None)


def _cells(number: int, left: Step | None, right: Step | None) -> tuple[Content, Content]:
    """Thought `number` on each branch, the words that differ marked where both have it."""
    def cell(runs: list[tuple[str, bool]]) -> Content:
        # The runs are of one_line text already (safe, one space between words).
        return Content.assemble(styled(f"{number} ", "bold"), *(
            styled(text, DIFFERS) if differs else Content(text) for text, differs in runs))

    def absent() -> Content:
        return Content.assemble(styled(f"{number} ", "bold"),
                                styled("— no such thought on this branch", MUTED))

    if left is not None and right is not None:
        left_runs, right_runs = word_diff(one_line(left.text), one_line(right.text))
        return cell(left_runs), cell(right_runs)
    return (cell([(one_line(left.text), False)]) if left is not None else absent(),
            cell([(one_line(right.text), False)]) if right is not None else absent())
