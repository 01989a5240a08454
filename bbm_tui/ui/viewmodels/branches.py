"""What the branch views say of a branch (ui/screens/branch_tree.py and compare.py): its answer
and whether it is right, what the branch is (from core/trace/branches.py), and the words that
differ between two versions of a thought."""

from __future__ import annotations

import re
from difflib import SequenceMatcher

from bbm_tui.core.store import Step
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.branches import BranchHow, BranchOrigin, outcome
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED

_WORD = re.compile(r"\S+\s*")


def answer_words(step: Step, target: str | None) -> tuple[str, str]:
    """The words for a branch ending in `step` and their style ("green" right, "red"
    wrong, MUTED no answer yet, "" no target to judge by)."""
    right = outcome(step, target)
    if step.answer is None:
        return "no answer yet", MUTED
    if right is None:
        return f"answer {one_line(step.answer, 30)}", ""
    mark = f"{GLYPH_OK} right" if right else f"{GLYPH_MISTAKE} wrong"
    return f"answer {one_line(step.answer, 30)} {mark}", "green" if right else "red"


def origin_words(origin: BranchOrigin | None) -> str:
    """"original · replay/bbm", "backtracked from Thought 2, sample 3 of 8 · solver/bbm",
    "your rewrite of Thought 5 · then solver/bbm"."""
    if origin is None:
        return "no thoughts of its own"
    number = origin.number
    if origin.how == BranchHow.BACKTRACK:
        which = (f", sample {origin.sample} of {origin.samples}"
                 if origin.sample is not None and origin.samples else "")
        what = f"backtracked from Thought {number}{which}"
    elif origin.how == BranchHow.REWRITE:
        what = f"your rewrite of Thought {number}"
    elif origin.how == BranchHow.VERSION:
        what = f"another version of Thought {number}"
    else:
        what = "original"
    models = ", then ".join(one_line(model, 40) for model in origin.models)
    if origin.recorded:
        models = "recorded in the dataset" + (f", then {models}" if models else "")
    elif models and origin.how == BranchHow.REWRITE:
        models = f"then {models}"
    return f"{what} · {models}" if models else what


def word_diff(left: str, right: str) -> tuple[list[tuple[str, bool]], list[tuple[str, bool]]]:
    """Two versions of a thought as runs of (text, differs): the words (and the space after
    each) compared in order, as a split diff shows them; the space after a differing run is
    its own unmarked run."""
    left_words, right_words = _WORD.findall(left), _WORD.findall(right)
    matcher = SequenceMatcher(None, [w.strip() for w in left_words],
                              [w.strip() for w in right_words], autojunk=False)
    left_runs: list[tuple[str, bool]] = []
    right_runs: list[tuple[str, bool]] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        differs = tag != "equal"
        _add_run(left_runs, "".join(left_words[i1:i2]), differs)
        _add_run(right_runs, "".join(right_words[j1:j2]), differs)
    return left_runs, right_runs


def _add_run(runs: list[tuple[str, bool]], text: str, differs: bool) -> None:
    if not text:
        return
    if differs:
        words = text.rstrip()
        runs.append((words, True))
        if len(words) < len(text):
            runs.append((text[len(words):], False))
    else:
        runs.append((text, False))
