"""`bbm-tui compare OUT.jsonl`: the models of `run --model A --model B` side by side (per task
and model: traces, accuracy, mean steps, tokens and cost; the questions whose answers part,
with the first thought at which the traces differ), from the rows alone
(core/batch/compare.py)."""

from __future__ import annotations

import argparse
import json

from bbm_tui.cli.errors import EXIT_OK, given
from bbm_tui.cli.inputs import check_task
from bbm_tui.cli.phrases import count
from bbm_tui.cli.tables import Column, TextTable
from bbm_tui.core.accounting import format_cost
from bbm_tui.core.batch.compare import Comparison, compare_files
from bbm_tui.core.textsafe import one_line


def command(args: argparse.Namespace) -> int:
    with given():
        check_task(args.task)
        comparison = compare_files(args.files, args.task)
    if args.json:
        print(json.dumps(comparison.as_json(), ensure_ascii=False, allow_nan=False))
        return EXIT_OK
    print_comparison(comparison)
    return EXIT_OK


def print_comparison(comparison: Comparison) -> None:
    from bbm_tui.cli.drawing import print_table  # rich: only to print a table, not --json

    table = TextTable("Models side by side", [
        Column("task"), Column("model"), Column("traces", number=True),
        Column("accuracy", number=True), Column("mean steps", number=True),
        Column("tokens in", number=True), Column("tokens out", number=True),
        Column("cost", number=True)])
    notes: list[str] = []
    for figures in comparison.models:
        accuracy = ("—" if figures.accuracy is None else
                    f"{figures.accuracy:.1%} ({figures.correct}/{figures.with_target})")
        cost = format_cost(figures.cost) if figures.cost_known else (
            f"≥{format_cost(figures.cost)}" if figures.cost else "unknown")
        if figures.without_usage:
            notes.append(f"{figures.model} on {figures.task}: "
                         f"{count(figures.without_usage, 'row')} without usage (written "
                         "before rows carried it, or with figures no call could have, past "
                         "the range of a number): its tokens and cost are at least these")
        elif figures.unpriced:
            notes.append(f"{figures.model} on {figures.task}: a call of unknown price in "
                         f"{count(figures.unpriced, 'row')}: its cost is at least this")
        table.add_row(one_line(figures.task), one_line(figures.model, 60),
                      str(figures.traces), accuracy,
                      "—" if figures.mean_steps is None else f"{figures.mean_steps:.1f}",
                      f"{figures.prompt_tokens:,}", f"{figures.completion_tokens:,}", cost)
    print_table(table)
    for note in notes:
        print(f"note: {note}")
    compared = comparison.questions_compared
    if not compared:
        print("No question was answered by more than one model.")
        return
    partings = comparison.partings
    print(f"\nThe answers part on {len(partings)} of {count(compared, 'question')} "
          "answered by more than one model:" if partings else
          f"\nThe answers agree on all {count(compared, 'question')} answered by more than "
          "one model.")
    for parting in partings:
        where = f" {parting.where}" if parting.where else ""
        print(f"\n{parting.task}{where}: {one_line(parting.input, 70)}")
        for answer in parting.answers:
            mark = {True: " ✓", False: " ✗", None: ""}[answer.correct]
            said = "no answer" if answer.answer is None else one_line(answer.answer, 40)
            print(f"  {one_line(answer.model, 40)}: {said}{mark} "
                  f"({count(answer.steps, 'thought')})")
        if parting.first_difference is not None:
            print(f"  the traces part at Thought {parting.first_difference}")
