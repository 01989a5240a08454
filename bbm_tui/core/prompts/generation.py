"""Generation prompts (docs/DESIGN.md §3): the task's prompt (for the paper's five, their 3-shot
prompts byte for byte; for a task of one's own, its few-shot prompt or our zero-shot
instruction), then a blank line, the question and the thoughts so far."""

from __future__ import annotations

from collections.abc import Sequence

from bbm_tui.core.prompts.thoughts import label, thought_line
from bbm_tui.core.tasks import Task, get_task


def generation_prompt(task: Task | str) -> str:
    """The text every generation prompt of a task begins with, exactly as shipped or written
    (no trailing newline)."""
    return get_task(task).prompt


def next_step_prompt(task: Task | str, input_text: str, steps: Sequence[str]) -> str:
    """The prompt text that asks for step k+1 after steps s1..sk."""
    return "".join(next_step_parts(task, input_text, steps))


def next_step_parts(task: Task | str, input_text: str, steps: Sequence[str]
                    ) -> tuple[str, ...]:
    """The same prompt in the pieces a provider's prompt cache can key on (core/llm/caching.py):
    the task's prompt (the same for every step of every trace), the question, each thought so
    far, and the label that asks for the next. Joined, exactly `next_step_prompt`:

        PROMPT + "\n\n" + question + "\n" + "Thought 1: s1\n" + ... + "Thought {k+1}:"
    """
    found = get_task(task)
    thoughts = tuple(thought_line(number, step) + "\n"
                     for number, step in enumerate(steps, start=1))
    return (found.prompt, "\n\n" + found.question(input_text) + "\n", *thoughts,
            label(len(steps) + 1))
