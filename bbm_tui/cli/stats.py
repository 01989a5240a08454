"""`bbm-tui stats`: per-task counts of dataset-format files (the paper's Table 2), per file,
where the first mistakes are and how long the traces are (and, with --plot, their charts)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from bbm_tui.cli.errors import EXIT_OK, given
from bbm_tui.cli.inputs import check_task
from bbm_tui.cli.plots import print_charts
from bbm_tui.cli.tables import Column, TextTable
from bbm_tui.core import charts
from bbm_tui.core.batch.summary import summarize
from bbm_tui.core.tasks import task_order

# The figures' columns: the key, and its header.
COLUMNS = (("traces", "traces"), ("correct", "correct"),
           ("with_mistake", "with mistake"), ("without_mistake", "without"),
           ("unlabelled", "unlabelled"), ("mean_steps", "mean steps"))


def command(args: argparse.Namespace) -> int:
    with given():
        check_task(args.task)
        result = summarize(args.files, args.task, args.dataset_format).stats
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
        return EXIT_OK
    print_stats(result)
    print_charts(args, lambda chart_data: chart_data.stats_charts(result))
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
    for table in _histograms(result, in_order):
        print_table(table)


def _cell(figures: dict, key: str) -> str:
    return f"{figures[key]:.2f}" if key == "mean_steps" else str(figures[key])


def _histograms(result: dict, tasks: list) -> list[TextTable]:
    """Where the first mistakes are, per task: how many traces at each thought, and in each
    fifth of the trace; and how long the traces are. The same numbers `--plot` draws."""
    return [
        _histogram(title, [(name, chart(result, name)) for name, _ in tasks],
                   chart(result, None), label)
        for title, chart, label in (
            ("First mistake at thought N (traces labelled with a mistake)",
             charts.thought_chart, _thought_label),
            ("First mistake by place in the trace (Thought k of n at k/n; traces labelled "
             "with a mistake)", charts.position_chart, lambda category: f"at {category}:"),
            ("Trace lengths (steps; traces)", charts.lengths_chart,
             lambda category: f"{category} steps:"),
        )
    ]


def _thought_label(category: str) -> str:
    """What names a count in plain rows, where the column's header ("2", "11+") is too
    short to."""
    return f"Thought {category[:-1]} on:" if category.endswith("+") else f"Thought {category}:"


def _histogram(title: str, rows: list, overall: Any, label: Callable[[str], str]) -> TextTable:
    """A histogram's counts per task (each a one-series BarChart), then overall."""
    table = TextTable(title, [Column("task"), *(
        Column(category, number=True, label=label(category))
        for category in overall.categories)])
    for name, chart in [*rows, ("overall", overall)]:
        table.add_row(name, *(str(int(count or 0)) for count in chart.series[0].values),
                      section=name == "overall" and len(rows) > 0)
    return table
