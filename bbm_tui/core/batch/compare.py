"""`bbm-tui compare OUT.jsonl`: the models of a `run --model A --model B` side by side
(docs/DESIGN.md §15), from the rows alone.

Per task and model: the traces, how many answered, the accuracy over those with a target
(the task's own comparison, as the app's ✓/✗), the mean number of thoughts, the tokens and
cost the rows say their calls took (`usage`; a row without it, or with a call of unknown
price, makes the cost unknown rather than low). Then the questions where the models' answers
part (by the task's comparison: "(B)" and "(B)." are one answer), each with every model's
answer and the first thought at which their traces differ.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bbm_tui.core.batch.run import run_row
from bbm_tui.core.dataset import DatasetError, TraceRow, iter_jsonl, rows_with_tasks
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.trace.side_by_side import first_difference


@dataclass
class ModelFigures:
    """One model on one task."""

    task: str
    model: str
    traces: int = 0
    answered: int = 0
    with_target: int = 0
    correct: int = 0
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    # Rows whose usage is not known (written before rows carried it), and rows with a call
    # of unknown price: the tokens, or the cost, are then at least the sums.
    without_usage: int = 0
    unpriced: int = 0
    latency_s: float = 0.0

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.with_target if self.with_target else None

    @property
    def mean_steps(self) -> float | None:
        return self.steps / self.traces if self.traces else None

    @property
    def cost_known(self) -> bool:
        return not self.unpriced and not self.without_usage

    def add(self, row: TraceRow, task: Task) -> None:
        self.traces += 1
        self.steps += len(row.steps)
        self.answered += row.answer is not None
        if row.target:
            self.with_target += 1
            self.correct += row.answer is not None and task.is_correct(row.answer, row.target)
        self.latency_s += _figure(row.extra.get("latency_s")) or 0.0
        usage = row.extra.get("usage")
        if not isinstance(usage, dict) or any(
                _absurd(usage.get(key)) for key in ("prompt_tokens", "completion_tokens", "cost")):
            # None, or figures no call could have (past the float range): unknown, said so
            self.without_usage += 1
            return
        self.prompt_tokens += int(_figure(usage.get("prompt_tokens")) or 0)
        self.completion_tokens += int(_figure(usage.get("completion_tokens")) or 0)
        cost = _figure(usage.get("cost"))
        self.cost += cost or 0.0
        if cost is None or _figure(usage.get("unpriced_calls")):
            self.unpriced += 1  # a call of unknown price: the cost is at least this

    def as_json(self) -> dict[str, Any]:
        return {
            "task": self.task, "model": self.model, "traces": self.traces,
            "answered": self.answered, "with_target": self.with_target,
            "correct": self.correct, "accuracy": self.accuracy, "mean_steps": self.mean_steps,
            "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
            "cost": self.cost if self.cost_known else None,
            "cost_at_least": self.cost, "rows_without_usage": self.without_usage,
            "rows_with_unpriced_calls": self.unpriced, "latency_s": self.latency_s,
        }


@dataclass(frozen=True)
class ModelAnswer:
    model: str
    answer: str | None
    correct: bool | None  # None: no target to compare with
    steps: int


@dataclass(frozen=True)
class Parting:
    """A question the models answer differently: each model's answer, and the first thought
    at which their traces differ."""

    task: str
    input: str
    where: str  # "#3" (the bundled dataset's row), "row 4" (of the input file), or ""
    answers: tuple[ModelAnswer, ...]
    first_difference: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "task": self.task, "input": self.input, "where": self.where,
            "answers": [{"model": a.model, "answer": a.answer, "correct": a.correct,
                         "steps": a.steps} for a in self.answers],
            "first_difference": self.first_difference,
        }


@dataclass
class Comparison:
    models: list[ModelFigures] = field(default_factory=list)
    partings: list[Parting] = field(default_factory=list)
    # Questions that more than one model answered (the ones compared for partings).
    questions_compared: int = 0

    def as_json(self) -> dict[str, Any]:
        return {"models": [figures.as_json() for figures in self.models],
                "questions_compared": self.questions_compared,
                "partings": [parting.as_json() for parting in self.partings]}


def read_run_rows(paths: Sequence[Path], task: str | None = None
                  ) -> list[tuple[str, TraceRow]]:
    """The rows of `run` output files, each with its task (the row's own, else `task`, else
    the file's name); a line that is not one names its file and line (DatasetError)."""
    found: list[tuple[str, TraceRow]] = []
    for path in paths:
        rows = [run_row(value, path, number) for number, value in iter_jsonl(path)]
        found.extend(rows_with_tasks(path, task, rows))
    return found


def compare_rows(rows: Sequence[tuple[str, TraceRow]]) -> Comparison:
    """The comparison of `run` rows (task, row): figures per task and model in the order
    they first appear, then the questions whose answers part, in the rows' order. A model's
    second row of one question (two files of one run) counts once: its first."""
    figures: dict[tuple[str, str], ModelFigures] = {}
    questions: dict[tuple[str, str], dict[str, TraceRow]] = {}
    for task_name, row in rows:
        model = str(row.extra.get("model"))
        answers = questions.setdefault((task_name, row.input), {})
        if model in answers:
            continue
        answers[model] = row
        task = get_task(task_name)
        figures.setdefault((task_name, model), ModelFigures(task_name, model)).add(row, task)
    comparison = Comparison(models=list(figures.values()))
    for (task_name, question), by_model in questions.items():
        if len(by_model) < 2:
            continue
        comparison.questions_compared += 1
        task = get_task(task_name)
        if _one_answer(task, [row.answer for row in by_model.values()]):
            continue
        answers = tuple(
            ModelAnswer(model, row.answer,
                        None if not row.target else row.answer is not None
                        and task.is_correct(row.answer, row.target), len(row.steps))
            for model, row in by_model.items())
        first = next(iter(by_model.values()))
        comparison.partings.append(Parting(
            task_name, question, _where(first), answers,
            first_difference([row.steps for row in by_model.values()])))
    return comparison


def compare_files(paths: Sequence[Path], task: str | None = None) -> Comparison:
    rows = read_run_rows(paths, task)
    if not rows:
        raise DatasetError(paths[0], "holds no rows to compare")
    return compare_rows(rows)


def _one_answer(task: Task, answers: list[str | None]) -> bool:
    """Whether the answers are one (Task.same_answer: never one read as a pattern)."""
    return all(task.same_answer(answers[0], other) for other in answers[1:])


def _where(row: TraceRow) -> str:
    index = row.extra.get("dataset_index")
    if isinstance(index, int) and not isinstance(index, bool):
        return f"#{index}"
    index = row.extra.get("source_index")
    if isinstance(index, int) and not isinstance(index, bool):
        return f"row {index + 1}"
    return ""


# More tokens than any row's calls could take, or dollars than they could cost: a row that
# says so holds no usage a sum can use (and 10**400 is past the float range).
_MOST_A_ROW_SAYS = 1e15


def _figure(value: object) -> float | None:
    """A count or cost a row gives (None: none, or not one a call could have)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and not _absurd(value) \
            and value >= 0:
        return float(value)
    return None


def _absurd(value: object) -> bool:
    """A number no call's usage could be: past the float range, infinite, NaN, or huge."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return not -_MOST_A_ROW_SAYS <= value <= _MOST_A_ROW_SAYS  # NaN too
