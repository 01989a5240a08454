"""What a set of dataset-format files holds, for `bbm-tui stats` and the app's dataset view:
the per-task counts and histograms (the paper's Table 2 and where the first mistakes are), and,
for the files the batch commands write, their scores: a `find` PREDS file's location accuracy
(Table 4) and a `backtrack` OUT file's change in accuracy (Table 6), computed as the commands
compute them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bbm_tui.core.batch.backtrack import paper_table_6
from bbm_tui.core.batch.find import (
    paper_figures,
    paper_figures_for_tasks,
    paper_models,
    paper_tables,
    scoring_group,
)
from bbm_tui.core.dataset import DatasetError, TraceRow, rows_with_tasks
from bbm_tui.core.dataset.formats import read_dataset
from bbm_tui.core.judging.metrics import (
    BacktrackDeltas,
    BacktrackOutcome,
    Judged,
    Report,
    backtrack_deltas,
    dataset_stats,
    judged_from_row,
    report,
)
from bbm_tui.core.tasks import get_task


@dataclass
class FileSummary:
    """`stats`: dataset_stats's result (with each file's format); `finder`: the scores of the
    rows that carry a finder's prediction (None: no row does), with the methods and models
    that made them; `backtrack`: the deltas of the rows that carry a backtracked answer."""

    paths: list[Path]
    stats: dict[str, Any]
    traces: int
    finder: Report | None = None
    methods: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)
    backtrack: dict[str, BacktrackDeltas] | None = None

    @property
    def method(self) -> str | None:
        """The finder's method when the predictions are all one method's."""
        return self.methods[0] if len(self.methods) == 1 else None

    def paper_models(self) -> list[str]:
        """The paper's models that have location accuracies for this finder's method."""
        method = self.method
        if method is None:
            return []
        return [model for model in paper_models()
                if any(method in methods for methods in
                       paper_tables()["table_4_location_accuracy"][model].values())]

    def paper_finder(self, model: str) -> dict[str, dict[str, float]]:
        if not self.method:
            return {}
        figures = paper_figures(model, self.method)
        # Beside the files' tasks, as `find --paper` prints it.
        return paper_figures_for_tasks(figures, self.finder.tasks if self.finder else ())


def summarize(paths: Sequence[Path], task: str | None = None,
              fmt: str | None = None) -> FileSummary:
    """Read the files (any format; a bad line raises DatasetError naming file and line) and
    count them as `bbm-tui stats` does; score the predictions and backtracked answers in
    them as `find` and `backtrack` score theirs."""
    rows_by_task: dict[str, list[TraceRow]] = {}
    files: dict[str, list[tuple[str, TraceRow]]] = {}
    formats: dict[str, str] = {}
    judged: dict[str, list[Judged]] = {}
    outcomes: dict[str, list[BacktrackOutcome]] = {}
    methods: list[str] = []
    models: list[str] = []
    for path in paths:
        found = read_dataset(path, fmt)
        formats[str(path)] = found.format.name
        for name, row in _rows_with_tasks(Path(path), task, found.traces):
            rows_by_task.setdefault(name, []).append(row)
            files.setdefault(str(path), []).append((name, row))
            if "predicted_mistake_index" in row.extra:
                _keep(methods, row.extra.get("method"))
                _keep(models, row.extra.get("model"))
                if row.labelled:  # as `find` scores: against the label, so labelled only
                    judged.setdefault(scoring_group(name, row, Path(path)), []).append(
                        judged_from_row(row, name))
            if "new_correct" in row.extra:
                outcomes.setdefault(name, []).append(BacktrackOutcome(
                    was_correct=get_task(name).is_correct(row.answer, row.target),
                    now_correct=bool(row.extra["new_correct"])))
    stats = dataset_stats(rows_by_task, files)
    for name, figures in stats["files"].items():
        figures["format"] = formats[name]
    return FileSummary(
        paths=list(map(Path, paths)), stats=stats,
        traces=sum(len(rows) for rows in rows_by_task.values()),
        finder=report(judged) if judged else None, methods=methods, models=models,
        backtrack={name: backtrack_deltas(items) for name, items in outcomes.items()}
        if outcomes else None)


def _rows_with_tasks(path: Path, task: str | None,
                     rows: list[TraceRow]) -> list[tuple[str, TraceRow]]:
    """Each row with its task, as every command tells it; for a file that does not say (a
    PREDS file of `find` over several of the bundled files), each row's task by its content
    when every row is one of the bundled dataset's traces."""
    try:
        return list(rows_with_tasks(path, task, rows))
    except DatasetError:
        from bbm_tui.core.annotation.queue import trace_key
        from bbm_tui.core.annotation.report import bundled_index

        index = bundled_index()
        known = [index.get(trace_key(row.input, row.steps)) for row in rows]
        if not rows or any(found is None for found in known):
            raise
        return [(found[0], row) for found, row in zip(known, rows, strict=True) if found]


def _keep(names: list[str], value: object) -> None:
    if isinstance(value, str) and value not in names:
        names.append(value)


def paper_backtracking() -> dict[str, dict[str, dict[str, float]]]:
    """Table 6's figures for both of its location kinds, gold and random."""
    return {key: paper_table_6(key) for key in ("mistake_location", "random_location")}
