"""A session's steps as a tree (docs/DESIGN.md §5, §8): backtracking and hand edits fork a branch
at a thought; nothing is ever overwritten. Pure: built from the store's step records, it knows
children, the path from the root to a leaf, siblings, forks and the difference between two
branches, and nothing else."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from bbm_tui.core.store import Step


@dataclass(frozen=True)
class BranchDiff:
    """Two branches side by side: the steps they share (from the root), then each one's own."""

    shared: tuple[Step, ...]
    left: tuple[Step, ...]
    right: tuple[Step, ...]

    @property
    def fork_number(self) -> int:
        """The number of the first thought where the branches part (1 when from the start)."""
        return len(self.shared) + 1

    @property
    def alike(self) -> int:
        """How many thoughts from the first read the same on both: those shared, then those
        each branch has of its own word for word (two models' traces share no step, yet
        their first thoughts can be the same words). The thought after them is where the
        traces part, as the side-by-side screen says (side_by_side.first_difference)."""
        count = len(self.shared)
        for left, right in zip(self.left, self.right, strict=False):
            if left.text != right.text:
                break
            count += 1
        return count


class StepTree:
    def __init__(self, steps: Iterable[Step] = ()) -> None:
        self._steps: dict[int, Step] = {}
        self._children: dict[int | None, list[int]] = {}
        for step in sorted(steps, key=lambda s: s.id):
            self.add(step)

    def add(self, step: Step) -> None:
        """A new step under its parent (ids grow, so children stay in the order they came)."""
        self._steps[step.id] = step
        self._children.setdefault(step.parent_id, []).append(step.id)

    def __contains__(self, step_id: object) -> bool:
        return step_id in self._steps

    def __len__(self) -> int:
        return len(self._steps)

    def step(self, step_id: int) -> Step:
        return self._steps[step_id]

    def children(self, step_id: int | None) -> list[Step]:
        """The steps under `step_id` (None: the first thoughts), oldest first."""
        return [self._steps[child] for child in self._children.get(step_id, [])]

    def siblings(self, step_id: int) -> list[Step]:
        """`step_id` and the other steps under its parent: the alternatives at its thought."""
        return self.children(self._steps[step_id].parent_id)

    def path(self, leaf_id: int | None) -> list[Step]:
        """The steps from the root to `leaf_id`, in order (empty for None)."""
        path: list[Step] = []
        current = leaf_id
        while current is not None and current in self._steps:
            step = self._steps[current]
            path.append(step)
            current = step.parent_id
        path.reverse()
        return path

    def leaves(self) -> list[Step]:
        """The ends of every branch, oldest first."""
        return [step for step_id, step in self._steps.items()
                if not self._children.get(step_id)]

    def newest_leaf_under(self, step_id: int) -> Step:
        """The most recent end of a branch that goes through `step_id` (itself if a leaf):
        where moving to an alternative thought takes the person. Ids grow with time."""
        leaves: list[int] = []
        stack = [step_id]
        while stack:
            current = stack.pop()
            children = self._children.get(current, [])
            if not children:
                leaves.append(current)
            stack.extend(children)
        return self._steps[max(leaves)]

    def diff(self, left_leaf: int, right_leaf: int) -> BranchDiff:
        left, right = self.path(left_leaf), self.path(right_leaf)
        shared = 0
        while shared < min(len(left), len(right)) and left[shared].id == right[shared].id:
            shared += 1
        return BranchDiff(tuple(left[:shared]), tuple(left[shared:]), tuple(right[shared:]))

    def branch_points(self) -> list[Step]:
        """The steps with more than one child (and the root, if it has several first
        thoughts, as None's children are not a step)."""
        return [self._steps[step_id] for step_id, children in self._children.items()
                if step_id is not None and len(children) > 1]
