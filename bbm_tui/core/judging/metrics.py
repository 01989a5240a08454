"""The paper's numbers: dataset counts (Table 2) and mistake-finding scores (Tables 4, 5, 9).

Pure functions over plain values, so the batch command, the app and the tests share them.
Accuracies are percentages. A task's "overall" score is the unweighted mean of the tasks'
scores, as in the paper's Table 4 (Dyck has 986 traces, the others 300: weighting by traces
would let it dominate).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.dataset.formats import answer_correct
from bbm_tui.core.tasks import Task, get_task, is_correct

# --------------------------------------------------------------------------- Table 2


@dataclass(frozen=True)
class TaskStats:
    traces: int
    correct: int
    with_mistake: int
    without_mistake: int
    mean_steps: float
    # Rows nobody has labelled: neither "with" nor "without" a mistake.
    unlabelled: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["mean_steps"] = round(self.mean_steps, 2)
        return data


def task_stats(rows: Sequence[TraceRow], task: Task | str | None = None) -> TaskStats:
    """Counts for one task's traces; "correct" by the task's comparison (the paper's exact
    match, tasks.is_correct, when no task is given), or for a trace of the field's with no
    target, as its format says."""
    labelled = [row for row in rows if row.labelled]
    with_mistake = sum(row.mistake_index is not None for row in labelled)
    steps = sum(len(row.steps) for row in rows)
    if task is None:
        correct = sum(is_correct(row.answer, row.target) for row in rows)
    else:
        name = get_task(task).name
        correct = sum(answer_correct(row, name) for row in rows)
    return TaskStats(
        traces=len(rows),
        correct=correct,
        with_mistake=with_mistake,
        without_mistake=len(labelled) - with_mistake,
        mean_steps=steps / len(rows) if rows else 0.0,
        unlabelled=len(rows) - len(labelled),
    )


def dataset_stats(rows_by_task: Mapping[str, Sequence[TraceRow]],
                  files: Mapping[str, Sequence[tuple[str, TraceRow]]] | None = None,
                  ) -> dict[str, Any]:
    """Table 2 as JSON-ready data: `{"tasks": {TASK: {"traces", "correct", "with_mistake",
    "without_mistake", "mean_steps", "unlabelled"}}, "overall": {...}}`, mean steps rounded to
    2 places as in the paper. Overall counts are summed and its mean steps is over all traces
    (counts, unlike accuracies, add up across tasks); each trace is correct by its own task's
    rule. With `files` (each file's rows with their tasks), the same figures per file under
    `"files"`; and where the first mistakes are, `"mistake_index_histogram"`: `{"tasks":
    {TASK: {INDEX: count}}, "files": {FILE: {...}}, "overall": {...}}`, by 0-based
    `mistake_index`, over the traces labelled with a mistake; `"mistake_position_histogram"`
    the same traces by where in the trace the first mistake is (`mistake_position_histogram`),
    and `"steps_histogram"` every trace by its number of steps, in the same shape."""
    tasks = {name: task_stats(rows, name) for name, rows in rows_by_task.items()}
    everything = [row for rows in rows_by_task.values() for row in rows]
    overall = replace(task_stats(everything),
                      correct=sum(stats.correct for stats in tasks.values()))
    result: dict[str, Any] = {
        "tasks": {name: stats.to_json() for name, stats in tasks.items()},
        "overall": overall.to_json(),
    }
    if files is not None:
        result["files"] = {name: _file_stats(rows).to_json() for name, rows in files.items()}
        for key, count in (("mistake_index_histogram", mistake_histogram),
                           ("mistake_position_histogram", mistake_position_histogram),
                           ("steps_histogram", steps_histogram)):
            result[key] = {
                "tasks": {name: count(rows) for name, rows in rows_by_task.items()},
                "files": {name: count([row for _task, row in rows])
                          for name, rows in files.items()},
                "overall": count(everything),
            }
    return result


def _file_stats(rows: Sequence[tuple[str, TraceRow]]) -> TaskStats:
    """One file's figures, each trace correct by its own task's rule."""
    by_task: dict[str, list[TraceRow]] = {}
    for task, row in rows:
        by_task.setdefault(task, []).append(row)
    counted = [task_stats(found, task) for task, found in by_task.items()]
    return replace(task_stats([row for _task, row in rows]),
                   correct=sum(stats.correct for stats in counted))


def mistake_histogram(rows: Sequence[TraceRow]) -> dict[str, int]:
    """How many traces have their first mistake at each 0-based index, in order (JSON keys:
    the index as text); traces with no mistake, and unlabelled ones, are not counted."""
    counts: dict[int, int] = {}
    for row in rows:
        if row.labelled and row.mistake_index is not None:
            counts[row.mistake_index] = counts.get(row.mistake_index, 0) + 1
    return {str(index): counts[index] for index in sorted(counts)}


# Where in a trace the first mistake is, in fifths: Thought k of n is at k/n of the trace, so
# Thought 1 of 5 is in the first fifth and the last thought always in the last.
POSITION_BINS = 5


def mistake_position_histogram(rows: Sequence[TraceRow]) -> list[int]:
    """How many traces labelled with a mistake have it in each fifth of the trace: Thought k of
    n (k = mistake_index + 1) counts in fifth ceil(5k/n), computed in whole numbers so that a
    thought on a boundary (Thought 2 of 10: 20%) is never put in the next fifth by rounding."""
    counts = [0] * POSITION_BINS
    for row in rows:
        if not (row.labelled and row.mistake_index is not None and row.steps):
            continue
        number = min(row.mistake_index + 1, len(row.steps))
        fifth = (POSITION_BINS * number + len(row.steps) - 1) // len(row.steps)
        counts[fifth - 1] += 1
    return counts


def steps_histogram(rows: Sequence[TraceRow]) -> dict[str, int]:
    """How many traces have each number of steps, in order (JSON keys: the count as text)."""
    counts: dict[int, int] = {}
    for row in rows:
        counts[len(row.steps)] = counts.get(len(row.steps), 0) + 1
    return {str(steps): counts[steps] for steps in sorted(counts)}


# --------------------------------------------------------------------------- Tables 4, 5, 9


@dataclass(frozen=True)
class Judged:
    """One trace as a finder saw it.

    `predicted` is the 0-based index of the first mistake the finder named, None for "no
    mistake"; when `parsed` is False the answer said nothing usable and `predicted` is ignored:
    it counts as wrong whatever the gold label.
    """

    gold: int | None
    predicted: int | None
    parsed: bool = True
    answer_correct: bool = False

    @property
    def right(self) -> bool:
        return self.parsed and self.predicted == self.gold

    @property
    def predicts_correct_answer(self) -> bool:
        """The paper's proxy for answer correctness: no mistake found means a correct answer.
        An unparseable answer is counted wrong here too: it predicts the opposite of the truth."""
        if not self.parsed:
            return not self.answer_correct
        return self.predicted is None


@dataclass(frozen=True)
class Scores:
    n: int
    accuracy: float | None
    accuracy_with_mistake: float | None
    accuracy_without_mistake: float | None
    processbench_f1: float | None
    answer_weighted_f1: float | None
    unparseable: int

    def to_json(self, digits: int = 2) -> dict[str, Any]:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, float):
                data[key] = round(value, digits)
        return data


@dataclass(frozen=True)
class Report:
    tasks: dict[str, Scores]
    overall: Scores

    def to_json(self, digits: int = 2) -> dict[str, Any]:
        return {
            "tasks": {name: scores.to_json(digits) for name, scores in self.tasks.items()},
            "overall": self.overall.to_json(digits),
        }


def percent(hits: int, total: int) -> float | None:
    return 100.0 * hits / total if total else None


def harmonic_mean(a: float | None, b: float | None) -> float | None:
    """ProcessBench's F1: the harmonic mean of the two split accuracies (0 when either is 0)."""
    if a is None or b is None:
        return None
    return 0.0 if a + b == 0 else 2 * a * b / (a + b)


def weighted_f1(truth: Sequence[bool], predicted: Sequence[bool]) -> float | None:
    """F1 of each class weighted by its support (scikit-learn's average="weighted"), in
    percent; a class never predicted and never true contributes nothing."""
    if not truth:
        return None
    total = 0.0
    for label in (True, False):
        support = sum(t == label for t in truth)
        if support == 0:
            continue
        hits = sum(t == label and p == label for t, p in zip(truth, predicted, strict=True))
        guessed = sum(p == label for p in predicted)
        f1 = 2 * hits / (support + guessed) if support + guessed else 0.0
        total += f1 * support
    return 100.0 * total / len(truth)


def score(judged: Sequence[Judged]) -> Scores:
    """Scores of one task's traces."""
    with_mistake = [j for j in judged if j.gold is not None]
    without_mistake = [j for j in judged if j.gold is None]
    with_accuracy = percent(sum(j.right for j in with_mistake), len(with_mistake))
    without_accuracy = percent(sum(j.right for j in without_mistake), len(without_mistake))
    return Scores(
        n=len(judged),
        accuracy=percent(sum(j.right for j in judged), len(judged)),
        accuracy_with_mistake=with_accuracy,
        accuracy_without_mistake=without_accuracy,
        processbench_f1=harmonic_mean(with_accuracy, without_accuracy),
        answer_weighted_f1=weighted_f1(
            [j.answer_correct for j in judged], [j.predicts_correct_answer for j in judged]
        ),
        unparseable=sum(not j.parsed for j in judged),
    )


def mean_of_tasks(scores: Iterable[Scores]) -> Scores:
    """The paper's "overall": each score the unweighted mean over the tasks that have it;
    counts (n, unparseable) are summed."""
    scores = list(scores)

    def mean(name: str) -> float | None:
        values = [getattr(s, name) for s in scores if getattr(s, name) is not None]
        return sum(values) / len(values) if values else None

    return Scores(
        n=sum(s.n for s in scores),
        accuracy=mean("accuracy"),
        accuracy_with_mistake=mean("accuracy_with_mistake"),
        accuracy_without_mistake=mean("accuracy_without_mistake"),
        processbench_f1=mean("processbench_f1"),
        answer_weighted_f1=mean("answer_weighted_f1"),
        unparseable=sum(s.unparseable for s in scores),
    )


def report(judged_by_task: Mapping[str, Sequence[Judged]]) -> Report:
    tasks = {name: score(judged) for name, judged in judged_by_task.items()}
    return Report(tasks, mean_of_tasks(tasks.values()))


def judged_from_row(row: TraceRow, task: Task | str | None = None) -> Judged:
    """A PREDS line (the input row plus `predicted_mistake_index` and `parsed`) as Judged;
    its answer is correct by `task`'s comparison (the paper's when none is given)."""
    correct = is_correct if task is None else get_task(task).is_correct
    return Judged(
        gold=row.mistake_index,
        predicted=row.extra.get("predicted_mistake_index"),
        parsed=bool(row.extra.get("parsed", False)),
        answer_correct=correct(row.answer, row.target),
    )


# --------------------------------------------------------------------------- Table 6


@dataclass(frozen=True)
class BacktrackOutcome:
    """One trace before and after backtracking (an unchanged trace counts too: the paper's
    figures are over every trace of the subset)."""

    was_correct: bool
    now_correct: bool


@dataclass(frozen=True)
class BacktrackDeltas:
    n: int
    n_correct: int
    n_incorrect: int
    # Percentage points: accuracy after minus accuracy before, on the traces whose answer
    # was correct (before: 100%) and on those whose answer was not (before: 0%).
    delta_accuracy_correct: float | None
    delta_accuracy_incorrect: float | None

    def to_json(self, digits: int = 2) -> dict[str, Any]:
        data = asdict(self)
        for key, value in data.items():
            if isinstance(value, float):
                data[key] = round(value, digits)
        return data


def backtrack_deltas(outcomes: Sequence[BacktrackOutcome]) -> BacktrackDeltas:
    """The paper's Table 6 for one task: Δaccuracy✓ and Δaccuracy✗."""
    correct = [o for o in outcomes if o.was_correct]
    incorrect = [o for o in outcomes if not o.was_correct]
    still = percent(sum(o.now_correct for o in correct), len(correct))
    fixed = percent(sum(o.now_correct for o in incorrect), len(incorrect))
    return BacktrackDeltas(
        n=len(outcomes),
        n_correct=len(correct),
        n_incorrect=len(incorrect),
        delta_accuracy_correct=None if still is None else still - 100.0,
        delta_accuracy_incorrect=fixed,
    )
