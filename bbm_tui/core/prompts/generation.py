"""Generation prompts (docs/DESIGN.md §3): the task's prompt (for the paper's five, their 3-shot
prompts byte for byte; for a task of one's own, its few-shot prompt or our zero-shot
instruction), then a blank line, the question and the thoughts so far."""

from __future__ import annotations

from collections.abc import Sequence

from bbm_tui.core.prompts.thoughts import format_thoughts, label
from bbm_tui.core.tasks import Task, get_task


def generation_prompt(task: Task | str) -> str:
    """The text every generation prompt of a task begins with, exactly as shipped or written
    (no trailing newline)."""
    return get_task(task).prompt


def next_step_prompt(task: Task | str, input_text: str, steps: Sequence[str]) -> str:
    """The prompt text that asks for step k+1 after steps s1..sk."""
    found = get_task(task)
    return (
        found.prompt
        + "\n\n"
        + found.question(input_text)
        + "\n"
        + format_thoughts(steps)
        + label(len(steps) + 1)
    )
