"""`bbm-tui stats`: per-task counts of dataset-format files (the paper's Table 2), per file,
and where the first mistakes are."""

from __future__ import annotations

import argparse
import json

from bbm_tui.cli.errors import EXIT_OK, given
from bbm_tui.cli.inputs import check_task
from bbm_tui.cli.tables import Column, TextTable
from bbm_tui.core.dataset import TraceRow, rows_with_tasks
from bbm_tui.core.dataset.formats import read_dataset
from bbm_tui.core.judging.metrics import dataset_stats
from bbm_tui.core.tasks import task_order

# The figures' columns: the key, and its header.
COLUMNS = (("traces", "traces"), ("correct", "correct"),
           ("with_mistake", "with mistake"), ("without_mistake", "without"),
           ("unlabelled", "unlabelled"), ("mean_steps", "mean steps"))
# The histogram's columns: Thought 1 to 10 apart, the rest together.
HISTOGRAM_WIDTH = 10


def command(args: argparse.Namespace) -> int:
    rows_by_task: dict[str, list[TraceRow]] = {}
    files: dict[str, list[tuple[str, TraceRow]]] = {}
    formats: dict[str, str] = {}
    with given():
        check_task(args.task)
        for path in args.files:
            found = read_dataset(path, args.dataset_format)
            formats[str(path)] = found.format.name
            for task, row in rows_with_tasks(path, args.task, found.traces):
                rows_by_task.setdefault(task, []).append(row)
                files.setdefault(str(path), []).append((task, row))
    result = dataset_stats(rows_by_task, files)
    for name, figures in result["files"].items():
        figures["format"] = formats[name]
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
    else:
        print_stats(result)
    return EXIT_OK


def print_stats(result: dict) -> None:
    from bbm_tui.cli.drawing import print_table  # rich: only to print a table, not --json

    show_unlabelled = result["overall"]["unlabelled"] > 0
    columns = [(key, header) for key, header in COLUMNS
               if key != "unlabelled" or show_unlabelled]
    table = TextTable("Traces per task (the paper's Table 2)",
                      [Column("task"), *(Column(header, number=True) for _key, header in columns)])
    in_order = sorted(result["tasks"].items(), key=lambda item: task_order(item[0]))
    rows = [*in_order, ("overall", result["overall"])]
    for name, figures in rows:
        table.add_row(name, *(_cell(figures, key) for key, _ in columns),
                      section=name == "overall" and len(rows) > 1)
    print_table(table)
    by_file = TextTable("Traces per file", [
        Column("file"), Column("format"),
        *(Column(header, number=True) for _key, header in columns)])
    for name, figures in result["files"].items():
        by_file.add_row(name, figures["format"], *(_cell(figures, key) for key, _ in columns))
    print_table(by_file)
    print_table(_histogram(result["mistake_index_histogram"], in_order))


def _cell(figures: dict, key: str) -> str:
    return f"{figures[key]:.2f}" if key == "mean_steps" else str(figures[key])


def _histogram(histogram: dict, tasks: list) -> TextTable:
    """Where the first mistakes are, per task: how many traces at each thought."""
    table = TextTable("First mistake at thought N (traces labelled with a mistake)", [
        Column("task"), *(Column(str(number), number=True, label=f"Thought {number}:")
                          for number in range(1, HISTOGRAM_WIDTH + 1)),
        Column(f"{HISTOGRAM_WIDTH + 1}+", number=True,
               label=f"Thought {HISTOGRAM_WIDTH + 1} on:")])
    rows = [(name, histogram["tasks"][name]) for name, _ in tasks]
    for name, counts in [*rows, ("overall", histogram["overall"])]:
        cells = [str(counts.get(str(index), 0)) for index in range(HISTOGRAM_WIDTH)]
        later = sum(count for index, count in counts.items() if int(index) >= HISTOGRAM_WIDTH)
        table.add_row(name, *cells, str(later), section=name == "overall" and len(rows) > 0)
    return table
