"""What the branch views say of a branch's end (ui/screens/branch_tree.py and compare.py):
its answer and whether it is right, from core/trace/branches.py."""

from __future__ import annotations

from bbm_tui.core.store import Step
from bbm_tui.core.tasks import Task
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.branches import outcome
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED


def answer_words(step: Step, target: str | None, task: Task | None = None) -> tuple[str, str]:
    """The words for a branch ending in `step` and their style ("green" right, "red"
    wrong, MUTED no answer yet, "" no target to judge by), right by the task's comparison."""
    right = outcome(step, target, task)
    if step.answer is None:
        return "no answer yet", MUTED
    if right is None:
        return f"answer {one_line(step.answer, 30)}", ""
    mark = f"{GLYPH_OK} right" if right else f"{GLYPH_MISTAKE} wrong"
    return f"answer {one_line(step.answer, 30)} {mark}", "green" if right else "red"
