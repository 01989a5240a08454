"""`bbm-tui sessions`: the saved sessions, one a line (or one JSON object a line)."""

from __future__ import annotations

import argparse
import json

from bbm_tui.cli.errors import EXIT_OK
from bbm_tui.core.accounting import format_total_cost
from bbm_tui.core.store import SessionSummary, Store
from bbm_tui.core.textsafe import one_line


def command(args: argparse.Namespace) -> int:
    with Store.open() as store:
        summaries = store.sessions()
    for summary in summaries:
        session = summary.session
        label = _label(summary)
        cost = format_total_cost(summary.cost, summary.calls, summary.unpriced_calls)
        if args.json:
            known = not (summary.calls and summary.unpriced_calls >= summary.calls)
            print(json.dumps({
                "id": session.id, "name": session.name, "task": session.task,
                "model": session.model, "steps": summary.steps, "label": label,
                "answer": summary.answer, "source": session.source, "calls": summary.calls,
                # None: no call's price is known; with unpriced_calls, a lower bound.
                "cost": round(summary.cost, 8) if known else None,
                "unpriced_calls": summary.unpriced_calls,
                # Several models side by side: each, in its column's order.
                **({"models": list(summary.models)} if summary.models else {}),
            }, allow_nan=False))
        else:
            print(f"{session.id:>5}  {one_line(session.name, 40):<40}  {session.task:<26}"
                  f"{summary.steps:>4} {'step ' if summary.steps == 1 else 'steps'}  "
                  f"{label:<16} {cost:>9}  {one_line(summary.model_names, 60)}")
    return EXIT_OK


def _label(summary: SessionSummary) -> str:
    if summary.label is None:
        return "unlabelled"
    if summary.mistake_number is not None:
        return f"mistake at {summary.mistake_number}"
    if summary.label.no_mistake:
        return "no mistake"
    return "other branch"  # the flagged mistake is on a branch not on show
