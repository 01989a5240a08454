"""The five BIG-Bench Mistake tasks and how their questions are written (docs/DESIGN.md §3)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One of the five tasks: its name, how its question is written, how it is scored."""

    name: str
    title: str
    multiple_choice: bool
    question_prefix: str

    def question(self, input_text: str) -> str:
        """The question line(s) that follow the few-shot prompt, exactly as the paper wrote them."""
        return self.question_prefix + input_text


TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            "word_sorting",
            "Word sorting",
            False,
            "Q: Sort the following words alphabetically: List: ",
        ),
        Task("tracking_shuffled_objects", "Tracking shuffled objects", True, "Q: "),
        # logical_deduction inputs already hold their own "Q:" line and the options.
        Task("logical_deduction", "Logical deduction", True, ""),
        Task("multistep_arithmetic", "Multistep arithmetic", False, "Q: "),
        Task(
            "dyck_languages",
            "Dyck languages",
            False,
            "Q: Complete the rest of the sequence, making sure that the parentheses are closed "
            "properly. Input: ",
        ),
    )
}

TASK_NAMES: tuple[str, ...] = tuple(TASKS)


class UnknownTaskError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"unknown task {name!r}; known tasks: {', '.join(TASK_NAMES)}")
        self.name = name


def get_task(name: str) -> Task:
    try:
        return TASKS[name]
    except KeyError:
        raise UnknownTaskError(name) from None


# The paper's answer regex, applied to one step at a time (a step is a single line).
ANSWER_RE = re.compile(r"(?<=[Tt]he answer is).*$")


def extract_answer(step: str) -> str | None:
    """The answer a step states, stripped, or None when the step states none."""
    match = ANSWER_RE.search(step)
    return match.group(0).strip() if match else None


def is_correct(answer: str | None, target: str) -> bool:
    """Correct means answer == target; both sides are stripped, as the paper's counts require
    (two tracking rows store their answer with a leading space)."""
    return answer is not None and answer.strip() == target.strip()
