"""Generation prompts (docs/DESIGN.md §3): the paper's 3-shot prompts, byte for byte."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

from bbm_tui.core.prompts.thoughts import label, thought_line
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
    return "".join(next_step_parts(task_name, input_text, steps))


def next_step_parts(task_name: str, input_text: str, steps: Sequence[str]) -> tuple[str, ...]:
    """The same prompt in the pieces a provider's prompt cache can key on (core/llm/caching.py):
    the task's prompt (the same for every step of every trace), the question, each thought so
    far, and the label that asks for the next. Joined, exactly `next_step_prompt`:

        PROMPT + "\n\n" + question + "\n" + "Thought 1: s1\n" + ... + "Thought {k+1}:"
    """
    question = get_task(task_name).question(input_text)
    thoughts = tuple(thought_line(number, step) + "\n"
                     for number, step in enumerate(steps, start=1))
    return (generation_prompt(task_name), "\n\n" + question + "\n", *thoughts,
            label(len(steps) + 1))
