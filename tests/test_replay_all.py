"""Replaying every bundled trace through the full stepper (the replay provider through
litellm) reproduces every row's steps and answer exactly.

33,303 steps at ~7 ms of litellm overhead each: about four minutes in one process, so the
rows are split across two processes (this machine has two cores). It is marked `slow`; the
whole suite (`scripts/test`, CI) runs it, `scripts/test -m "not slow"` leaves it out, and
`test_replay_sample` keeps a quick sample of every task in the everyday run.
"""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ProcessPoolExecutor

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


def replay_in_process(items: list[tuple[str, int]]) -> list[Mismatch]:
    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    return asyncio.run(replay_rows(items))


def all_items() -> list[tuple[str, int]]:
    return [(task, index) for task in TASK_NAMES for index in range(len(bundled_rows(task)))]


@pytest.mark.slow
def test_replay_every_bundled_trace() -> None:
    items = all_items()
    assert len(items) == 2186
    halves = [items[0::2], items[1::2]]
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(replay_in_process, halves))
    mismatches = [mismatch for result in results for mismatch in result]
    assert mismatches == []


async def test_replay_sample() -> None:
    """Every task's first rows plus the two special rows: dyck #538 has an empty thought in
    the middle, logical deduction #15 ends without an answer after 50 thoughts."""
    items = [(task, index) for task in TASK_NAMES for index in range(3)]
    items += [("dyck_languages", 538), ("logical_deduction", 15)]
    assert await replay_rows(items) == []
