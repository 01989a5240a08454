"""Replaying every bundled trace through the full stepper (the replay provider through
litellm) reproduces every row's steps and answer exactly.

33,303 steps at ~4-6 ms of litellm's CPU each: a few minutes in one process. So the rows are
replayed eight at a time (litellm's threads wait less), in parts that the test run's workers
(pytest-xdist, scripts/test) take side by side. The parts are marked `slow`; the whole suite
(`scripts/test`, CI) runs them, `scripts/test -m "not slow"` leaves them out, and
`test_replay_sample` keeps a quick sample of every task in the everyday run.
"""

from __future__ import annotations

import asyncio

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import StepFailed, StepFinished, TraceFinished, run_steps
from bbm_tui.core.tasks import TASK_NAMES

Mismatch = tuple[str, int, str]


async def replay_rows(items: list[tuple[str, int]]) -> list[Mismatch]:
    mismatches: list[Mismatch] = []
    for task, index in items:
        row = bundled_rows(task)[index]
        steps: list[str] = []
        answer: str | None = None
        reason = "no end"
        async for event in run_steps(task, row.input, llm.ModelSpec("replay/bbm"),
                                     target=row.target):
            if isinstance(event, StepFinished):
                steps.append(event.text)
            elif isinstance(event, TraceFinished):
                answer, reason = event.answer, event.reason
            elif isinstance(event, StepFailed):
                mismatches.append((task, index, f"error: {event.error}"))
        expected_answer = row.answer.strip() if row.answer is not None else None
        if steps != row.steps:
            mismatches.append((task, index, f"steps differ ({len(steps)} vs {len(row.steps)})"))
        elif answer != expected_answer:
            mismatches.append((task, index, f"answer {answer!r} != {expected_answer!r}"))
        elif (reason == "answer") != (row.answer is not None):
            mismatches.append((task, index, f"ended by {reason}"))
    return mismatches


async def replay_at_once(items: list[tuple[str, int]], at_once: int) -> list[Mismatch]:
    """replay_rows over `at_once` shares of the items, side by side in one event loop."""
    shares = [items[first::at_once] for first in range(at_once)]
    results = await asyncio.gather(*(replay_rows(share) for share in shares))
    return [mismatch for result in results for mismatch in result]


def all_items() -> list[tuple[str, int]]:
    return [(task, index) for task in TASK_NAMES for index in range(len(bundled_rows(task)))]


PARTS = 8


@pytest.mark.slow
@pytest.mark.parametrize("part", range(PARTS))
async def test_replay_every_bundled_trace(part: int) -> None:
    """Part k replays rows k, k + PARTS, k + 2 * PARTS, ...: the parts, each row once."""
    items = all_items()
    assert len(items) == 2186
    assert await replay_at_once(items[part::PARTS], at_once=8) == []


async def test_replay_sample() -> None:
    """Every task's first rows plus the two special rows: dyck #538 has an empty thought in
    the middle, logical deduction #15 ends without an answer after 50 thoughts."""
    items = [(task, index) for task in TASK_NAMES for index in range(3)]
    items += [("dyck_languages", 538), ("logical_deduction", 15)]
    assert await replay_rows(items) == []
