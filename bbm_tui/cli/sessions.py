"""`bbm-tui sessions`: the saved sessions, one a line (or one JSON object a line)."""

from __future__ import annotations

import argparse
import json

from bbm_tui.cli.errors import EXIT_OK
from bbm_tui.core.store import SessionSummary, Store
from bbm_tui.core.textsafe import one_line


def command(args: argparse.Namespace) -> int:
    with Store.open() as store:
        summaries = store.sessions()
    for summary in summaries:
        session = summary.session
        label = _label(summary)
        if args.json:
            print(json.dumps({
                "id": session.id, "name": session.name, "task": session.task,
                "model": session.model, "steps": summary.steps, "label": label,
                "answer": summary.answer, "source": session.source,
            }, allow_nan=False))
        else:
            print(f"{session.id:>5}  {one_line(session.name, 40):<40}  {session.task:<26}"
                  f"{summary.steps:>4} {'step ' if summary.steps == 1 else 'steps'}  "
                  f"{label:<16} {one_line(session.model, 30)}")
    return EXIT_OK


def _label(summary: SessionSummary) -> str:
    if summary.label is None:
        return "unlabelled"
    if summary.mistake_number is not None:
        return f"mistake at {summary.mistake_number}"
    if summary.label.no_mistake:
        return "no mistake"
    return "other branch"  # the flagged mistake is on a branch not on show
