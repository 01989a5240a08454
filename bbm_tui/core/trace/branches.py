"""What the branch views show, from the step tree alone (docs/DESIGN.md §5): the session as segments
of thoughts between branch points, each branch's end with its answer and whether it is right, two
branches side by side, and how sure the model was of each token. Pure functions."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.store import Step, StoredCandidate
from bbm_tui.core.tasks import Task, is_correct
from bbm_tui.core.trace.tree import BranchDiff, Tree
from bbm_tui.core.types import StepOrigin, sane_logprob_sum


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


def segments(tree: Tree, parent_id: int | None = None) -> list[Segment]:
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


def outcome(step: Step, target: str | None, task: Task | None = None) -> bool | None:
    """Whether a branch ending in `step` got the right answer (None: no answer or target), by
    the task's comparison (the paper's exact match where no task is given)."""
    if step.answer is None or target is None:
        return None
    return (task.is_correct if task is not None else is_correct)(step.answer, target)


@dataclass(frozen=True)
class Leaf:
    step: Step
    thoughts: int
    answer: str | None
    correct: bool | None
    on_show: bool


def leaves(tree: Tree, head_id: int | None, target: str | None,
           task: Task | None = None) -> list[Leaf]:
    """Every branch's end, oldest first, with its answer and whether it is right."""
    shown = tree.path(head_id)[-1].id if head_id is not None and head_id in tree else None
    return [Leaf(step, step.number, step.answer, outcome(step, target, task), step.id == shown)
            for step in tree.leaves()]


def compare(tree: Tree, left_leaf: int, right_leaf: int) -> BranchDiff:
    return tree.diff(left_leaf, right_leaf)


def other_branch(tree: Tree, steps: Sequence[Step], number: int) -> int | None:
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


# -- where a branch came from

class BranchHow(StrEnum):
    """How a branch's first thought of its own came about."""

    ORIGINAL = "original"  # the first version of its thought (the trace as first written)
    BACKTRACK = "backtrack"  # one of backtracking's samples, chosen
    REWRITE = "rewrite"  # the person's own version
    VERSION = "version"  # a later version a model wrote (another model, or again)
    MODEL = "model"  # one model's own trace beside others' on the question (side by side)


@dataclass(frozen=True)
class BranchOrigin:
    """What a branch is, told by the first thought it does not share with the branch beside
    it (Thought `number`): how that thought came about, which sample it was where backtracking
    chose it (`sample` of `samples`, 1-based, among the samples of its sampling), whether it
    was recorded in the dataset, and the models that wrote the branch's own thoughts, in the
    order they first wrote one."""

    how: BranchHow
    number: int
    sample: int | None = None
    samples: int | None = None
    recorded: bool = False
    models: tuple[str, ...] = ()


def branch_origin(
    tree: Tree,
    own: Sequence[Step],
    sampled: Sequence[StoredCandidate] = (),
    call_models: Mapping[int, str] | None = None,
) -> BranchOrigin | None:
    """Where the branch whose own thoughts are `own` (after what it shares) came from.
    `sampled`: the candidates sampled with its first thought, where backtracking chose it
    (one sampling's, as they were stored together); `call_models`: the model of each call of
    its thoughts. None for a branch with no thought of its own."""
    if not own:
        return None
    first = own[0]
    models = tuple(dict.fromkeys(
        (call_models or {})[step.call_id] for step in own
        if step.call_id is not None and step.call_id in (call_models or {})))
    recorded = first.origin == StepOrigin.DATASET
    if first.origin == StepOrigin.BACKTRACK:
        place = next((index for index, candidate in enumerate(sampled)
                      if candidate.step_id == first.id), None)
        return BranchOrigin(BranchHow.BACKTRACK, first.number,
                            None if place is None else place + 1,
                            len(sampled) or None, models=models)
    if first.origin == StepOrigin.EDIT:
        return BranchOrigin(BranchHow.REWRITE, first.number, models=models)
    versions = tree.siblings(first.id)
    if first.model_branch_id is not None:  # several models side by side
        own = [step for step in versions if step.model_branch_id == first.model_branch_id]
        if own[0].id == first.id and len(own) < len(versions):
            return BranchOrigin(BranchHow.MODEL, first.number, recorded=recorded,
                                models=models)
        versions = own  # another model's thought is no version of this one
    how = BranchHow.ORIGINAL if versions[0].id == first.id else BranchHow.VERSION
    return BranchOrigin(how, first.number, recorded=recorded, models=models)


def one_sampling(candidates: Sequence[StoredCandidate], step_id: int) -> list[StoredCandidate]:
    """Of the candidates sampled for one thought (several backtracks may have sampled it),
    those sampled together with the one that became step `step_id` (stored in one
    transaction, they share their time)."""
    chosen = next((c for c in candidates if c.step_id == step_id), None)
    if chosen is None:
        return []
    return [c for c in candidates if c.created_at == chosen.created_at]


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
