"""A session's steps as a tree (docs/DESIGN.md §5, §8): backtracking and hand edits fork a branch
at a thought; nothing is ever overwritten. `StepTree` is built in memory from the store's step
records; `StoredTree` asks the store each question (a session in the app: its 10^5 steps are
never all held, and its branch on show is a `Branch` of ids). Either knows children, the path
from the root to a leaf, siblings, forks and the difference between two branches, and nothing
else."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, overload

from bbm_tui.core.store import Step

if TYPE_CHECKING:
    from bbm_tui.core.store import Store


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


# A branch is read from the store this many steps at a time, and this many of those windows
# are kept: the thoughts pane shows 40 at most, and a key moves it by a window at most.
CHUNK = 64
CHUNKS_KEPT = 8


class Branch(Sequence[Step]):
    """The steps of one branch, root first, as a sequence like a list of them: held as their
    ids (8 bytes a step), each step read from the store when asked for, CHUNK at a time, the
    last CHUNKS_KEPT windows kept. A trace of 10^5 steps held whole as Python objects took
    101 MB and 1.6 s to load (bench/big_store.py); the app shows 40 of them at a time."""

    def __init__(self, store: Store, ids: array[int]) -> None:
        self._store = store
        self.ids = ids
        # Windows read lately, by their first index, oldest first (an LRU of CHUNKS_KEPT).
        self._chunks: dict[int, list[Step]] = {}

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, index: int) -> Step: ...

    @overload
    def __getitem__(self, index: slice) -> list[Step]: ...

    def __getitem__(self, index: int | slice) -> Step | list[Step]:
        if isinstance(index, slice):
            return [self._at(place) for place in range(*index.indices(len(self.ids)))]
        if index < 0:
            index += len(self.ids)
        if not 0 <= index < len(self.ids):
            raise IndexError("branch index out of range")
        return self._at(index)

    def __iter__(self) -> Iterator[Step]:
        for start in range(0, len(self.ids), CHUNK):
            yield from self._chunk(start)

    def __contains__(self, step: object) -> bool:
        if not isinstance(step, Step) or step.id not in self.ids:
            return False
        return self[self.ids.index(step.id)] == step

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Branch):
            return self.ids == other.ids
        if isinstance(other, list | tuple):
            return len(other) == len(self.ids) and list(self) == list(other)
        return NotImplemented

    def __hash__(self) -> int:
        # Equal to a list of the same steps, so unhashable as a list is.
        raise TypeError("unhashable type: 'Branch'")

    def __repr__(self) -> str:
        return f"Branch({len(self.ids)} steps)"

    def append(self, step: Step) -> None:
        """A new step at the end (saved in the store already)."""
        self.ids.append(step.id)
        start = (len(self.ids) - 1) // CHUNK * CHUNK
        chunk = self._chunks.get(start)
        if chunk is not None and len(chunk) == len(self.ids) - 1 - start:
            chunk.append(step)

    def _at(self, index: int) -> Step:
        start = index // CHUNK * CHUNK
        return self._chunk(start)[index - start]

    def _chunk(self, start: int) -> list[Step]:
        chunk = self._chunks.pop(start, None)
        if chunk is None or len(chunk) < min(CHUNK, len(self.ids) - start):
            chunk = self._store.steps_by_ids(self.ids[start:start + CHUNK])
            if len(self._chunks) >= CHUNKS_KEPT:
                del self._chunks[next(iter(self._chunks))]
        self._chunks[start] = chunk  # the newest, last
        return chunk


class StoredTree:
    """A session's step tree as StepTree answers it, each question a query to the store:
    no step is held in memory (a session of 10^5 steps opens as fast as a small one, issue
    36). The store is the tree: a step saved is in it at once (`add` has nothing to do)."""

    def __init__(self, store: Store, session_id: int) -> None:
        self._store = store
        self.session_id = session_id

    def add(self, step: Step) -> None:
        """Nothing to do: the step is in the store, so in the tree."""

    def in_memory(self) -> StepTree:
        """Every step of every branch read at once, as a StepTree: for a view of the whole
        tree (the branch tree), which would otherwise ask the store once a step."""
        return StepTree(self._store.steps_of(self.session_id))

    def __contains__(self, step_id: object) -> bool:
        return isinstance(step_id, int) and self._store.has_step(self.session_id, step_id)

    def __len__(self) -> int:
        return self._store.step_count(self.session_id)

    def step(self, step_id: int) -> Step:
        if step_id not in self:
            raise KeyError(step_id)
        return self._store.steps_by_ids([step_id])[0]

    def children(self, step_id: int | None) -> list[Step]:
        """The steps under `step_id` (None: the first thoughts), oldest first."""
        return self._store.step_children(self.session_id, step_id)

    def siblings(self, step_id: int) -> list[Step]:
        """`step_id` and the other steps under its parent: the alternatives at its thought."""
        return self.children(self.step(step_id).parent_id)

    def path(self, leaf_id: int | None) -> Branch:
        """The steps from the root to `leaf_id`, in order (empty for None)."""
        return Branch(self._store, self._store.branch_ids(self.session_id, leaf_id))

    def leaves(self) -> list[Step]:
        """The ends of every branch, oldest first."""
        return self._store.leaf_steps(self.session_id)

    def newest_leaf_under(self, step_id: int) -> Step:
        """The most recent end of a branch that goes through `step_id` (itself if a leaf)."""
        return self.step(self._store.newest_leaf_under(self.session_id, step_id))

    def diff(self, left_leaf: int, right_leaf: int) -> BranchDiff:
        left, right = self.path(left_leaf), self.path(right_leaf)
        shared = 0
        while shared < min(len(left), len(right)) and left.ids[shared] == right.ids[shared]:
            shared += 1
        return BranchDiff(tuple(left[:shared]), tuple(left[shared:]), tuple(right[shared:]))

    def branch_points(self) -> list[Step]:
        """The steps with more than one child."""
        return self._store.branch_point_steps(self.session_id)


# What the branch views read a tree through: the store's (a session) or one built in memory.
Tree = StepTree | StoredTree
