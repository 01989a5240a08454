"""Verifiers for the tasks whose steps a program can check (docs/DESIGN.md §12): one entry point
over the task modules, the first mistake, and the report of traces where a verifier and the gold
label disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Protocol

from bbm_tui.core.tasks import (
    FIELD_TASK_NAMES,
    UnknownTaskError,
    arithmetic,
    dyck,
    get_task,
    logical_deduction,
    tracking,
    word_sorting,
)
from bbm_tui.core.tasks.verdicts import (
    QuestionError,
    StepVerdict,
    cannot_judge,
    first_mistaken,
    judge_steps,
)

# Each module reads a question (`start`) and judges one step against the state the steps
# before it reached (`check_step`).
LOGIC: dict[str, ModuleType] = {
    "word_sorting": word_sorting,
    "tracking_shuffled_objects": tracking,
    "multistep_arithmetic": arithmetic,
    "dyck_languages": dyck,
    "logical_deduction": logical_deduction,
}


class NoVerifierError(UnknownTaskError):
    """A task of one's own: the verifiers know the paper's five tasks only."""

    def __init__(self, name: str) -> None:
        what = ("the task of a dataset format" if name in FIELD_TASK_NAMES
                else "a task of your own")
        super().__init__(name, f"the task verifiers check the paper's five tasks only, not "
                         f"{name!r} ({what}): use a model's method to find its mistakes")


def task_logic(task: str) -> ModuleType:
    get_task(task)  # an unknown name gets the tasks' own message
    try:
        return LOGIC[task]
    except KeyError:
        raise NoVerifierError(task) from None


def verify_trace(task: str, question_input: str, steps: Sequence[str]) -> list[StepVerdict]:
    """A verdict for each step: correct, mistaken with a reason, or cannot judge."""
    logic = task_logic(task)
    try:
        state = logic.start(question_input)
    except QuestionError as error:
        reason = f"cannot read the question: {error}"
        return [cannot_judge(index, reason) for index in range(len(steps))]
    return judge_steps(state, steps, logic.check_step)


def first_mistake(task: str, question_input: str, steps: Sequence[str]) -> StepVerdict | None:
    """The verifier's answer for a trace: its first mistaken step, or None."""
    return first_mistaken(verify_trace(task, question_input, steps))


@dataclass(frozen=True)
class Disagreement:
    """A trace where the verifier and the gold label put the first mistake apart."""

    task: str
    row: int  # 0-based line of the task's dataset file
    gold: int | None
    verifier: int | None
    step: str  # the step the verifier marks (or, where it finds none, the gold's)
    reason: str


class Labelled(Protocol):
    """What the report needs of a dataset row (the dataset's TraceRow is one)."""

    @property
    def input(self) -> str: ...

    @property
    def steps(self) -> Sequence[str]: ...

    @property
    def mistake_index(self) -> int | None: ...


def disagreements(task: str, rows: Iterable[Labelled]) -> list[Disagreement]:
    """Every row where the verifier's first mistake is not the gold label's, in order."""
    found = []
    for number, row in enumerate(rows):
        verdict = first_mistake(task, row.input, row.steps)
        predicted = verdict.index if verdict else None
        if predicted == row.mistake_index:
            continue
        shown = predicted if predicted is not None else row.mistake_index
        step = row.steps[shown] if shown is not None else ""
        reason = verdict.reason if verdict else "the verifier finds no mistake"
        found.append(Disagreement(task, number, row.mistake_index, predicted, step, reason))
    return found


@dataclass(frozen=True)
class Accuracy:
    task: str
    traces: int
    agree: int
    with_mistake: int  # gold says there is one
    agree_with_mistake: int
    without_mistake: int
    agree_without_mistake: int

    @property
    def percent(self) -> float:
        return 100.0 * self.agree / self.traces if self.traces else 0.0


def accuracy(task: str, rows: Sequence[Labelled]) -> Accuracy:
    """First-mistake location accuracy against the gold labels ("no mistake" included)."""
    missed = {d.row for d in disagreements(task, rows)}
    with_mistake = [i for i, row in enumerate(rows) if row.mistake_index is not None]
    without = [i for i, row in enumerate(rows) if row.mistake_index is None]
    return Accuracy(
        task,
        len(rows),
        len(rows) - len(missed),
        len(with_mistake),
        sum(i not in missed for i in with_mistake),
        len(without),
        sum(i not in missed for i in without),
    )
