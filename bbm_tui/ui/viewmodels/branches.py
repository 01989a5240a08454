"""What the branch views say of a branch (ui/screens/branch_tree.py and compare.py): its answer
and whether it is right, what the branch is (from core/trace/branches.py), and the words that
differ between two versions of a thought."""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher

from rich.cells import cell_len
from rich.text import Text

from bbm_tui.core.store import Step
from bbm_tui.core.tasks import Task
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.branches import BranchHow, BranchOrigin, Segment, outcome
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED

_WORD = re.compile(r"\S+\s*")


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
    elif origin.how == BranchHow.MODEL:
        what = "a model's own trace"
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


def from_the_difference(runs: list[tuple[str, bool]], context: int = 6
                        ) -> list[tuple[str, bool]]:
    """`runs` (word_diff's) from a few words (`context`) before the first that differs, with
    "…" where words are left out: a long thought that differs late shows where it does."""
    index = next((i for i, (_text, differs) in enumerate(runs) if differs), None)
    if index is None:
        return runs  # nothing differs: all of it
    skip = sum(len(text.split()) for text, _differs in runs[:index]) - context
    if skip <= 0:
        return runs
    kept: list[tuple[str, bool]] = [("…", False)]
    for text, differs in runs[:index]:
        words = _WORD.findall(text)
        if skip >= len(words):
            skip -= len(words)
            continue
        kept.append(("".join(words[skip:]), differs))
        skip = 0
    return kept + runs[index:]


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


# -- the branch tree's rows (ui/screens/branch_tree.py)

# The least of a cut part worth showing; shorter, it is left out.
MIN_PART = 10


@dataclass(frozen=True)
class TreeRow:
    """One row of the branch tree, in parts, cut to the room it has by `fit`: the mark, the
    span and the verdict (✓ ✗) are never cut; then, as room allows, the answer's start, what
    the branch is and the models that wrote it, and its first thought from where it parts
    from the other versions (what tells two branches apart comes before the rest of a long
    answer)."""

    head: tuple[tuple[str, str], ...]  # "● ", "Thoughts 2-4  ", "✗ "
    answer: tuple[str, str] | None  # "0" and its style, or "3 versions of Thought 2"
    what: str  # "backtracked, sample 5 of 8" (or "")
    models: str  # "solver/bbm" (or "")
    snippet: str  # the first thought from where it parts: "“…= 3.”" (or "")

    def fit(self, room: int | None) -> Text:
        parts = {"answer": self.answer[0] if self.answer else "", "what": self.what,
                 "models": self.models, "snippet": self.snippet}
        if room is not None:
            parts = _fit_parts(room - sum(cell_len(text) for text, _ in self.head), parts)
        row = Text(no_wrap=True, overflow="ellipsis")
        for text, style in self.head:
            row.append(text, style=style)
        what = " · ".join(part for part in (parts["what"], parts["models"]) if part)
        shown = [(text, style) for text, style in (
            (parts["answer"], self.answer[1] if self.answer else ""), (what, "dim"),
            (parts["snippet"], "italic")) if text]
        # Two spaces between parts, at the end of a run, never at its start: librsvg drops
        # a run's leading spaces in screenshots.
        for index, (text, style) in enumerate(shown):
            row.append(text + ("  " if index < len(shown) - 1 else ""), style=style)
        return row


# How far each part gives way, in turn, until the row fits: a long answer to its start first,
# then the first thought's words, the models, what the branch is, the rest of the answer.
_GIVING_WAY = (("answer", 24), ("snippet", MIN_PART), ("models", MIN_PART),
               ("what", MIN_PART), ("answer", 2))


def _fit_parts(room: int, parts: dict[str, str]) -> dict[str, str]:
    """The parts cut (with "…"), or left out, in the order of _GIVING_WAY, until with the
    space between them they take at most `room` cells."""
    parts = dict(parts)

    def total() -> int:
        what = " · ".join(part for part in (parts["what"], parts["models"]) if part)
        shown = [part for part in (parts["answer"], what, parts["snippet"]) if part]
        return sum(cell_len(part) for part in shown) + 2 * max(0, len(shown) - 1)

    for name, least in _GIVING_WAY:
        over = total() - room
        if over <= 0:
            break
        part = parts[name]
        keep = max(cell_len(part) - over, least if name == "answer" else 0)
        parts[name] = _cut(part, keep) if keep >= min(least, MIN_PART) else ""
    return parts


def _cut(text: str, cells: int) -> str:
    if cell_len(text) <= cells:
        return text
    return text[: max(1, cells - 1)].rstrip() + "…"


def tree_row(segment: Segment, target: str | None, on_show: bool,
             origin: BranchOrigin | None, others: list[list[str]],
             task: Task | None = None) -> TreeRow:
    """The row of `segment`: its span, its end's verdict and answer (a branch's end) or its
    versions (a branch point), what it is where it parts from other versions (`origin`), and
    its first thought that differs from `others` (its siblings' thoughts, each from their
    first), from its first word that differs. Its answer is right or wrong by the task's
    comparison."""
    span = (f"Thought {segment.first}" if segment.first == segment.last
            else f"Thoughts {segment.first}-{segment.last}")
    head: list[tuple[str, str]] = [("● " if on_show else "  ", "bold"), (f"{span}  ", "bold")]
    answer: tuple[str, str] | None
    if len(segment.children) > 1:
        answer = (f"{len(segment.children)} versions of Thought {segment.last + 1}", "dim")
    elif segment.children:
        answer = None
    else:
        end = segment.end
        right = outcome(end, target, task)
        if end.answer is None:
            answer = ("no answer yet", "dim")
        else:
            mark = {True: (f"{GLYPH_OK} ", "bold green"), False: (f"{GLYPH_MISTAKE} ", "bold red"),
                    None: ("→ ", "dim")}[right]
            head.append(mark)
            colours: dict[bool | None, str] = {True: "green", False: "red"}
            answer = (one_line(end.answer), colours.get(right, ""))
    what, models = _origin_short(origin) if others else ("", "")
    return TreeRow(tuple(head), answer, what, models, _snippet(segment, others))


def _snippet(segment: Segment, others: list[list[str]]) -> str:
    """The segment's first thought that is not word for word the same in every sibling (two
    models' traces part after thoughts alike; a backtrack at its first), from its first
    word that differs; numbered where it is not the segment's first."""
    texts = [one_line(step.text) for step in segment.steps]
    siblings = [[one_line(text) for text in other] for other in others]
    index = 0
    while index < len(texts) - 1 and siblings and all(
            index < len(other) and other[index] == texts[index] for other in siblings):
        index += 1
    said = _parting(texts[index], [other[index] for other in siblings if index < len(other)])
    return said if index == 0 else f"{segment.steps[index].number}: {said}"


def _origin_short(origin: BranchOrigin | None) -> tuple[str, str]:
    """What a branch is, for a row that already names its thoughts ("backtracked, sample 5
    of 8", "your rewrite", "original"), and the models that wrote it."""
    if origin is None:
        return "", ""
    if origin.how == BranchHow.BACKTRACK:
        what = "backtracked" + (f", sample {origin.sample} of {origin.samples}"
                                if origin.sample is not None and origin.samples else "")
    else:
        what = {BranchHow.REWRITE: "your rewrite", BranchHow.VERSION: "another version",
                BranchHow.ORIGINAL: "original", BranchHow.MODEL: "a model's own"}[origin.how]
    models = ", then ".join(one_line(model, 40) for model in origin.models)
    if origin.recorded:
        models = "recorded" + (f", then {models}" if models else "")
    return what, models


def _parting(text: str, others: list[str]) -> str:
    """`text` from its first word that is not the same in the other versions (all of it
    where it differs from the start), with "…" where its start is left out."""
    words = text.split(" ")
    start = 0
    for other in others:
        other_words = other.split(" ")
        same = 0
        while same < min(len(words), len(other_words)) and words[same] == other_words[same]:
            same += 1
        start = max(start, same)
    start = min(start, max(0, len(words) - 1))
    shown = " ".join(words[start:])
    return f"“{'…' if start else ''}{shown}”"
