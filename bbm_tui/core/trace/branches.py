"""What the branch views show, from the step tree alone (docs/DESIGN.md §5): the session as segments
of thoughts between branch points, each branch's end with its answer and whether it is right, two
branches side by side, and how sure the model was of each token. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bbm_tui.core.store import Step
from bbm_tui.core.tasks import is_correct
from bbm_tui.core.trace.tree import BranchDiff, StepTree
from bbm_tui.core.types import TokenLogprob, sane_logprob_sum


@dataclass(frozen=True)
class Segment:
    """Thoughts `first`..`last` of one branch with no fork between them; `children` are the
    segments that follow (two or more: a branch point; none: a branch's end)."""

    steps: tuple[Step, ...]
    children: tuple[Segment, ...]

    @property
    def first(self) -> int:
        return self.steps[0].number

    @property
    def last(self) -> int:
        return self.steps[-1].number

    @property
    def end(self) -> Step:
        return self.steps[-1]


def segments(tree: StepTree, parent_id: int | None = None) -> list[Segment]:
    """The tree under `parent_id` as segments, oldest first. Iterative over the chains, so a
    100,000-thought trace costs one pass and no deep recursion."""
    found = []
    for start in tree.children(parent_id):
        chain = [start]
        children = tree.children(start.id)
        while len(children) == 1:
            chain.append(children[0])
            children = tree.children(children[0].id)
        found.append(Segment(tuple(chain), tuple(segments(tree, chain[-1].id))
                             if children else ()))
    return found


def outcome(step: Step, target: str | None) -> bool | None:
    """Whether a branch ending in `step` got the right answer (None: no answer or target)."""
    if step.answer is None or target is None:
        return None
    return is_correct(step.answer, target)


@dataclass(frozen=True)
class Leaf:
    step: Step
    thoughts: int
    answer: str | None
    correct: bool | None
    on_show: bool


def leaves(tree: StepTree, head_id: int | None, target: str | None) -> list[Leaf]:
    """Every branch's end, oldest first, with its answer and whether it is right."""
    shown = tree.path(head_id)[-1].id if head_id is not None and head_id in tree else None
    return [Leaf(step, step.number, step.answer, outcome(step, target), step.id == shown)
            for step in tree.leaves()]


def compare(tree: StepTree, left_leaf: int, right_leaf: int) -> BranchDiff:
    return tree.diff(left_leaf, right_leaf)


def other_branch(tree: StepTree, steps: Sequence[Step], number: int) -> int | None:
    """The branch to compare with the one on show: the newest one that parts from it at
    Thought `number` (another version of it), else the newest other branch anywhere."""
    if not steps:
        return None
    on_show = steps[-1].id
    if 1 <= number <= len(steps):
        others = [s for s in tree.siblings(steps[number - 1].id) if s.id != steps[number - 1].id]
        if others:
            return tree.newest_leaf_under(others[-1].id).id
    rest = [leaf.id for leaf in tree.leaves() if leaf.id != on_show]
    return max(rest) if rest else None


# -- tokens

# The probability bands of the token view, most sure first (the lower bound of each).
BANDS = (0.9, 0.7, 0.4, 0.15, 0.0)


def band(logprob: float) -> int:
    """0 (p >= 0.9) to 4 (p < 0.15, or no probability at all: NaN)."""
    probability = math.exp(min(logprob, 0.0))
    return next((index for index, low in enumerate(BANDS) if probability >= low),
                len(BANDS) - 1)


def confidence(tokens: Sequence[TokenLogprob] | None) -> float | None:
    """A thought's confidence: the geometric mean of its tokens' probabilities, exp(mean
    log-probability), in 0..1 (None without tokens, or with values no model could give).
    Independent of the thought's length, unlike the sum."""
    if not tokens:
        return None
    mean = sane_logprob_sum(sum(token.logprob for token in tokens) / len(tokens))
    return None if mean is None else math.exp(mean)
