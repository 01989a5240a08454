"""`bbm-tui import`: sessions made of dataset-format rows, to label them in the app."""

from __future__ import annotations

import argparse
import sys

from bbm_tui.cli.errors import EXIT_OK, given
from bbm_tui.cli.inputs import check_task, reasoning_cut
from bbm_tui.cli.phrases import traces
from bbm_tui.core.annotation.export import import_rows
from bbm_tui.core.dataset import TraceRow, read_input_rows, rows_with_tasks
from bbm_tui.core.store import Store


def command(args: argparse.Namespace) -> int:
    batches: list[tuple[str, list[TraceRow]]] = []
    with given():
        check_task(args.task)
        for path in args.files:
            by_task: dict[str, list[TraceRow]] = {}
            rows = read_input_rows(path, args.dataset_format, reasoning_cut(args))
            for task, row in rows_with_tasks(path, args.task, rows):
                by_task.setdefault(task, []).append(row)
            batches.extend(by_task.items())
    imported = already = unlabelled = 0
    with Store.open() as store:
        for task, rows in batches:
            result = import_rows(store, task, rows, labelled=not args.unlabelled)
            imported += len(result.imported)
            already += len(result.already)
            unlabelled += result.unlabelled
    notes = []
    if unlabelled:
        notes.append(f"{unlabelled} of them unlabelled")
    if already:
        notes.append(f"{traces(already)} already saved (by `run` or an earlier import) "
                     "left as they were")
    note = f" ({'; '.join(notes)})" if notes else ""
    print(f"{imported} session{'' if imported == 1 else 's'} imported{note}", file=sys.stderr)
    return EXIT_OK
