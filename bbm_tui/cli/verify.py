"""`bbm-tui verify`: the task verifiers (no model) over labelled traces, and every trace where
the verifier's first mistake and the label's differ."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bbm_tui.cli.errors import EXIT_OK, given
from bbm_tui.cli.inputs import check_task
from bbm_tui.cli.phrases import traces
from bbm_tui.cli.tables import Column, TextTable
from bbm_tui.core.dataset import TraceRow, read_input_rows, rows_with_tasks
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.core.tasks.verify import disagreements
from bbm_tui.core.textsafe import one_line


def command(args: argparse.Namespace) -> int:
    found: dict[str, dict] = {}
    with given():
        check_task(args.task)
        for path in args.files:
            by_task: dict[str, list[TraceRow]] = {}
            rows = read_input_rows(path, args.dataset_format)
            for task, row in rows_with_tasks(path, args.task, rows):
                by_task.setdefault(task, []).append(row)
            for task, task_rows in by_task.items():
                _verify(found.setdefault(task, {"traces": 0, "agree": 0, "disagreements": []}),
                        path, task, task_rows)
    ordered = {task: found[task] for task in TASK_NAMES if task in found}
    if args.json:
        print(json.dumps({"tasks": ordered}, indent=2, allow_nan=False))
    else:
        print_report(ordered)
    return EXIT_OK


def _verify(entry: dict, path: Path, task: str, rows: list[TraceRow]) -> None:
    """One file's labelled rows of one task, counted into `entry`, with each disagreement
    (its row numbered in the file's rows of that task, 0-based)."""
    labelled = [row for row in rows if row.labelled]
    numbers = [index for index, row in enumerate(rows) if row.labelled]
    missed = disagreements(task, labelled)
    entry["traces"] += len(labelled)
    entry["agree"] += len(labelled) - len(missed)
    entry["disagreements"] += [
        {"file": str(path), "row": numbers[d.row], "gold": d.gold,
         "verifier": d.verifier, "step": d.step, "reason": d.reason}
        for d in missed
    ]


def print_report(found: dict[str, dict]) -> None:
    from bbm_tui.cli.drawing import print_table  # rich: only to print a table, not --json

    for task, entry in found.items():
        share = 100.0 * entry["agree"] / entry["traces"] if entry["traces"] else 0.0
        # The reason is the report's point: whole (it wraps); a long step is cut.
        table = TextTable(
            f"{task}: the verifier agrees with the label on {entry['agree']} of "
            f"{traces(entry['traces'])} ({share:.1f}%)",
            [Column("file"), Column("row", number=True), Column("label"),
             Column("verifier"), Column("step", cut=80), Column("reason")])
        for item in entry["disagreements"]:
            table.add_row(one_line(Path(item["file"]).name), str(item["row"]),
                          _thought_or_none(item["gold"]), _thought_or_none(item["verifier"]),
                          one_line(item["step"]), one_line(item["reason"]))
        print_table(table)


def _thought_or_none(index: int | None) -> str:
    return "no mistake" if index is None else f"Thought {index + 1}"
