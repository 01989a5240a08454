"""The prompt of a thinking trace (docs/DESIGN.md §16): one call a trace, the question and a
short instruction of ours (prompts/ours/thinking_instruction.txt) asking for a last line "So
the answer is …", which the task's answer rule reads. The model's thinking does the rest: no
few-shot prompt, no `Thought N:` labels."""

from __future__ import annotations

from functools import cache

from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import Task, get_task


@cache
def thinking_instruction() -> str:
    """Our instruction, as shipped (no trailing newline)."""
    return (prompts_dir() / "ours" / "thinking_instruction.txt").read_bytes().decode("utf-8")


def thinking_prompt(task: Task | str, input_text: str) -> str:
    """The one user message of a thinking call: the task's question, a blank line, ours."""
    return get_task(task).question(input_text) + "\n\n" + thinking_instruction()


def thinking_messages(task: Task | str, input_text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": thinking_prompt(task, input_text)}]


def question_of_thinking_prompt(prompt: str) -> str | None:
    """The question a thinking prompt asks (as the task writes it), or None: not one of ours."""
    ending = "\n\n" + thinking_instruction()
    return prompt[: -len(ending)] if prompt.endswith(ending) else None
