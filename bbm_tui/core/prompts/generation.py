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
    """The same prompt in the pieces a provider's prompt cache can key on (core/llm/caching.py),
    each a slice of it: the task's prompt (the same for every step of every trace), the
    question with the first label, then for each thought so far what the model wrote after
    its label, the line break and the next label. So the prompt for step k+1 is the prompt
    for step k and one piece more, and a cache written up to the end of one step's prompt is
    read whole by the next. Joined, exactly `next_step_prompt`:

        PROMPT + "\n\n" + question + "\n" + "Thought 1:" + " s1\nThought 2:" + ...
        + " sk\nThought {k+1}:"
    """
    found = get_task(task)
    question = "\n\n" + found.question(input_text) + "\n" + label(1)
    continuations = tuple(_continuation(number, step)
                          for number, step in enumerate(steps, start=1))
    return (found.prompt, question, *continuations)


def _continuation(number: int, step: str) -> str:
    """What Thought `number` adds to the prompt after its label: " text\nThought {number+1}:"."""
    return thought_line(number, step)[len(label(number)):] + "\n" + label(number + 1)
