"""`bbm-tui export`: the store's sessions as dataset JSONL, the field's formats, Markdown, or
a CSV of every annotator's labels."""

from __future__ import annotations

import argparse
import sys

from bbm_tui.cli.errors import EXIT_OK, CommandError
from bbm_tui.cli.inputs import check_replaced_output
from bbm_tui.cli.phrases import count, traces, where
from bbm_tui.core.annotation.export import ExportResult, export_from_store
from bbm_tui.core.store import Store


def command(args: argparse.Namespace) -> int:
    check_replaced_output(args.out, args.force)
    with Store.open() as store:
        try:
            result = export_from_store(store, args.format, args.out, args.session)
        except OSError as error:
            raise CommandError(f"{args.out}: cannot write: {error.strerror}") from error
    print(f"{_written(args, result)} written to {where(args.out)}{_notes(args, result)}",
          file=sys.stderr)
    return EXIT_OK


def _written(args: argparse.Namespace, result: ExportResult) -> str:
    what = {"dpo": "preference pair", "csv-steps": "label"}.get(args.format)
    return count(result.written, what) if what else traces(result.written)


def _notes(args: argparse.Namespace, result: ExportResult) -> str:
    notes = []
    if result.unlabelled:
        notes.append(f"{result.unlabelled} of them unlabelled (no mistake_index key)"
                     if args.format == "jsonl" else f"{result.unlabelled} of them unlabelled")
    if result.why_none:
        notes.append(result.why_none)
    if result.skipped:
        notes.append(f"{traces(result.skipped)} left out: unlabelled, and {args.format} "
                     "needs a label")
    return f" ({'; '.join(notes)})" if notes else ""
