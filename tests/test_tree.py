"""The session over a tree of steps (issue 9, item 5): new steps hang under the head; a fork
keeps the old branch; labels stay with the branch they were made on; the tree itself is pure
(children, path, siblings, leaves, diff)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Step, Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.trace.tree import StepTree
from bbm_tui.core.types import StepOrigin

TASK = "multistep_arithmetic"
ROW = bundled_rows(TASK)[0]


def step(step_id: int, parent: int | None, number: int, text: str = "") -> Step:
    return Step(step_id, 1, parent, number, text or f"s{step_id}", "model", None, False,
                float(step_id))


def test_the_pure_tree() -> None:
    #   1 ─ 2 ─ 3
    #     └ 4 ─ 5
    #     └ 6
    tree = StepTree([step(1, None, 1), step(2, 1, 2), step(3, 2, 3), step(4, 1, 2),
                     step(5, 4, 3), step(6, 1, 2)])
    assert [s.id for s in tree.children(None)] == [1]
    assert [s.id for s in tree.children(1)] == [2, 4, 6]
    assert [s.id for s in tree.siblings(4)] == [2, 4, 6]
    assert [s.id for s in tree.path(5)] == [1, 4, 5]
    assert [s.id for s in tree.leaves()] == [3, 5, 6]
    assert tree.newest_leaf_under(1).id == 6
    assert tree.newest_leaf_under(2).id == 3
    assert tree.newest_leaf_under(5).id == 5
    diff = tree.diff(3, 5)
    assert ([s.id for s in diff.shared], [s.id for s in diff.left], [s.id for s in diff.right]
            ) == ([1], [2, 3], [4, 5])
    assert diff.fork_number == 2
    assert tree.diff(3, 3).left == () and tree.diff(3, 3).fork_number == 4
    assert [s.id for s in tree.branch_points()] == [1]
    assert tree.path(None) == []


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "s.sqlite3") as opened:
        yield opened


async def test_a_fork_keeps_both_branches(store: Store) -> None:
    trace = TraceSession.create(store, NewTrace(TASK, ROW.input, ROW.target),
                                llm.ModelSpec("replay/bbm"))
    [e async for e in trace.generate(max_new_steps=3)]
    first = [s.id for s in trace.steps]
    assert trace.texts == ROW.steps[:3]
    trace.flag_mistake(2)
    # The person rewrites Thought 2 and goes on from it: a new branch; nothing overwritten.
    trace.fork_at(2)
    assert trace.texts == ROW.steps[:1] and trace.label is None  # not this branch's label
    edited = trace.append_typed("A = (-9 + 5) = -4, written again.", StepOrigin.EDIT)
    assert [s.id for s in trace.alternatives(2)] == [first[1], edited.id]
    assert len(trace.tree) == 4 and [s.id for s in trace.tree.path(first[2])] == first
    # Back to the first version of Thought 2: its branch, its newest end, its label.
    trace.switch_to(first[1])
    assert [s.id for s in trace.steps] == first
    assert trace.mistake_number == 2
    # All of it is in the store: reopened, the same head, the same tree.
    again = TraceSession.load(store, trace.id)
    assert [s.id for s in again.steps] == first and len(again.tree) == 4
    assert again.mistake_number == 2
    again.switch_to(edited.id)
    assert again.steps[-1].origin == "edit" and again.label is None
    reopened = TraceSession.load(store, trace.id)
    assert reopened.steps[-1].id == edited.id


async def test_new_steps_hang_under_the_head(store: Store) -> None:
    trace = TraceSession.create(store, NewTrace(TASK, ROW.input, ROW.target),
                                llm.ModelSpec("replay/bbm"))
    [e async for e in trace.generate(max_new_steps=2)]
    trace.fork_at(2)
    trace.append_typed("my own Thought 2")
    # The replay model knows no step after a thought it did not write: it says so, and the
    # branch keeps what was written.
    events = [e async for e in trace.generate(max_new_steps=1)]
    assert "cannot" in repr(events[-1]) or "invent" in repr(events[-1])
    assert [s.number for s in trace.steps] == [1, 2]
    assert trace.steps[1].parent_id == trace.steps[0].id
