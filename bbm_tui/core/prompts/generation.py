"""Generation prompts (docs/DESIGN.md §3): the paper's 3-shot prompts, byte for byte."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from bbm_tui.core.prompts.thoughts import format_thoughts, label
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import get_task


@cache
def generation_prompt(task_name: str) -> str:
    """The few-shot prompt of a task, exactly as shipped (no trailing newline)."""
    get_task(task_name)
    path = prompts_dir() / "generation_prompts" / f"{task_name}_prompt.txt"
    return path.read_bytes().decode("utf-8")


def next_step_prompt(task_name: str, input_text: str, steps: Sequence[str]) -> str:
    """The prompt text that asks for step k+1 after steps s1..sk."""
    question = get_task(task_name).question(input_text)
    return (
        generation_prompt(task_name)
        + "\n\n"
        + question
        + "\n"
        + format_thoughts(steps)
        + label(len(steps) + 1)
    )
