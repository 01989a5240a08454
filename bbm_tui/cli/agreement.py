"""`bbm-tui agreement`: agreement between annotators (Krippendorff's alpha, Cohen's kappa,
agreement with gold) over the store's labels or over files, and the majority's labels."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from bbm_tui.cli.errors import EXIT_OK, CommandError, given
from bbm_tui.cli.errors import note as say_note
from bbm_tui.cli.inputs import check_json_beside, check_replaced_output
from bbm_tui.cli.phrases import count, to_stdout, traces, where
from bbm_tui.cli.plots import print_charts
from bbm_tui.core.annotation import report
from bbm_tui.core.annotation.report import AppLabelsLeftOut
from bbm_tui.core.store import Store


def command(args: argparse.Namespace) -> int:
    check_json_beside(args.json, args.consensus, "--consensus")
    if args.consensus is not None:
        check_replaced_output(args.consensus, args.force, inputs=args.files,
                              command="agreement --consensus", flag="--consensus file")
    if args.files:
        with given():
            data = report.from_files(args.files, args.gold, args.dataset_format)
    else:
        with Store.open() as store:
            data = report.from_store(store, app_labels=args.app_labels)
    for note in data.notes:
        say_note(note)
    if data.app_left_out.total:
        # The consensus is the annotators'; a session's own label is in every export.
        export = ("; `export` writes each session with its own label"
                  if args.consensus is not None else "")
        say_note(f"{_app_labels_left_out(data.app_left_out)} are left out (no annotator "
                 "labelled those sessions); --app-labels counts them as the annotator \"app\""
                 f"{export}")
    result = report.report_json(data)
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        # With the consensus rows on standard output, the report goes beside them.
        to_stderr = to_stdout(args.consensus)
        print_agreement(result, len(data.labels), sys.stderr if to_stderr else sys.stdout)
        print_charts(args, lambda charts: [charts.kappa_matrix(result),
                                           *filter(None, [charts.alpha_chart(result)])],
                     to_stderr=to_stderr)
    if args.consensus is not None:
        try:
            labelled, unlabelled = report.write_consensus(data, args.consensus)
        except OSError as error:
            raise CommandError(f"{args.consensus}: cannot write: {error.strerror}") from error
        note = f", {unlabelled} without a majority (unlabelled)" if unlabelled else ""
        print(f"{traces(labelled)} with the consensus label written to "
              f"{where(args.consensus)}{note}", file=sys.stderr)
    return EXIT_OK


def _app_labels_left_out(left_out: AppLabelsLeftOut) -> str:
    """Where the session labels agreement left out came from, said as the user gave them."""
    parts = []
    if left_out.imported:
        parts.append(f"{traces(left_out.imported)} brought in by `import`")
    if left_out.main_screen:
        parts.append(f"{traces(left_out.main_screen)} labelled on the app's main screen")
    return "the labels of " + " and ".join(parts)


def print_agreement(result: dict, annotators: int, stream: TextIO) -> None:
    def figure(value: float | None, digits: int = 3) -> str:
        return "—" if value is None else f"{value:.{digits}f}"

    def percent(value: float | None) -> str:
        return "—" if value is None else f"{value:.1f}%"

    undefined = result["undefined"]
    lines = [f"annotators: {annotators}; traces labelled by two or more: {result['n']}"]
    alpha = figure(result["krippendorff_alpha"])
    if "krippendorff_alpha" in undefined:
        alpha = f"undefined: {undefined['krippendorff_alpha']}"
        if result["raw_agreement"] is not None:
            alpha += (f", so chance agreement is total; raw agreement "
                      f"{percent(result['raw_agreement'])} over {traces(result['n'])}")
    lines.append(f"Krippendorff's alpha (nominal): {alpha}")
    for pair, kappa in result["cohen_kappa"].items():
        shown = figure(kappa)
        if pair in undefined:
            shown = f"undefined: {undefined[pair]}"
            raw = result["cohen_raw_agreement"].get(pair)
            if raw is not None:
                shown += f"; raw agreement {percent(raw)}"
        lines.append(f"Cohen's kappa {pair.replace('|', ' / ')}: {shown}")
    for name, value in result["gold_agreement"].items():
        lines.append(f"agreement with gold, {name}: {percent(value)}")
    for task, figures in result.get("per_task", {}).items():
        lines.append(f"alpha, {task}: {figure(figures['krippendorff_alpha'])} "
                     f"(paper: {figure(figures['paper_krippendorff_alpha'])})")
    rated = result.get("step_ratings")
    if rated is not None:
        lines.append(f"Krippendorff's alpha over step ratings (-1/0/+1): nominal "
                     f"{figure(rated['krippendorff_alpha_nominal'])}, interval "
                     f"{figure(rated['krippendorff_alpha_interval'])} "
                     f"({count(rated['n_steps'], 'step')} of {traces(rated['n_traces'])} "
                     "rated by two annotators or more)")
    print("\n".join(lines), file=stream)
