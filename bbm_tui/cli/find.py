"""`bbm-tui find`: a mistake-finding method over dataset-format files, scored with the
paper's metrics (and beside the paper's own figures with --paper)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bbm_tui.cli.batch import (
    BatchCommand,
    calls_detail,
    check_batch_options,
    drive_batch,
    print_batch_notes,
    print_errors,
    shard_of,
    spend,
)
from bbm_tui.cli.errors import EXIT_FAILURE, EXIT_OK, given
from bbm_tui.cli.inputs import check_json_beside, check_task, config_of
from bbm_tui.cli.phrases import percent, to_stdout, traces, where
from bbm_tui.cli.plots import print_charts
from bbm_tui.cli.tables import Column, TextTable
from bbm_tui.core.batch.find import (
    FindOutcome,
    FindProgress,
    find_batch,
    jobs_from_files,
    paper_figures,
    paper_figures_for_tasks,
    paper_overall_tasks,
)
from bbm_tui.core.judging.judges import get_judge
from bbm_tui.core.judging.metrics import Report
from bbm_tui.core.store import default_path
from bbm_tui.core.tasks import task_order

# The scores' columns: the metric, and its header.
COLUMNS = (
    ("accuracy", "accuracy"),
    ("accuracy_with_mistake", "with mistake"),
    ("accuracy_without_mistake", "without"),
    ("processbench_f1", "PB F1"),
    ("answer_weighted_f1", "answer F1"),
)


def command(args: argparse.Namespace) -> int:
    check_batch_options(args)
    check_json_beside(args.json, args.out, "--out")
    config = config_of(args)
    with given():
        check_task(args.task)
        paper = paper_figures(args.paper, args.method) if args.paper else None
        jobs = jobs_from_files(args.input, args.task, args.method, args.limit,
                               args.dataset_format)
        spec = get_judge(args.method).spec(config.model_spec())
        shard = shard_of(args)
    batch = BatchCommand[FindOutcome](
        "find", args.out, not args.no_progress, find_detail, print_summary,
        progress_of=lambda outcome: outcome.progress)
    # find writes no sessions: the store's path is only there to refuse it as PREDS.
    outcome = drive_batch(batch, lambda on_progress: find_batch(
        jobs, args.method, spec, args.out, concurrency=args.concurrency, rpm=args.rpm,
        settings=config.finder_settings(), judge_all=args.all_steps,
        on_progress=on_progress, store_path=default_path(), inputs=args.input, shard=shard,
        processes=args.processes,
    ))
    if paper is not None:
        paper = paper_figures_for_tasks(paper, outcome.report.tasks)
    if outcome.unlabelled:
        print(f"{traces(outcome.unlabelled)} left out of the scores: unlabelled (no "
              "mistake_index key), so there is nothing to score them against; their "
              f"predictions are in {where(args.out)}", file=sys.stderr)
    if args.json:
        scores = outcome.report.to_json()
        scores["unlabelled_left_out"] = outcome.unlabelled
        scores["usage"] = outcome.progress.usage_json()
        if paper is not None:
            # Beside ours, in the same shape: {task or "overall": {metric: percent}}; a task
            # or metric the paper does not report is absent.
            scores["paper"] = {"model": args.paper,
                               "tasks": {k: v for k, v in paper.items() if k != "overall"},
                               "overall": paper.get("overall", {}),
                               # The tasks the paper's overall is the mean over.
                               "overall_tasks": paper_overall_tasks(paper, outcome.report.tasks)}
        print(json.dumps(scores, indent=2, allow_nan=False))
    else:
        to_stderr = to_stdout(args.out)
        print_scores(outcome.report, args, paper, to_stderr=to_stderr)
        print_charts(args, lambda charts: [charts.finder_chart(
            outcome.report, paper, args.paper or "", _finder_name(args))], to_stderr=to_stderr)
    return EXIT_FAILURE if outcome.progress.failed else EXIT_OK


def find_detail(progress: FindProgress) -> str:
    """Beside the bar: calls and the cost, and a call being made again ("retry 2 of 4
    (timed out)")."""
    retrying = progress.retry_note()
    return calls_detail(progress) + (f" · {retrying}" if retrying else "")


def print_summary(out: Path, progress: FindProgress, stopped: bool = False) -> None:
    print_batch_notes(out, progress)
    how = "stopped: " if stopped else ""
    print(
        f"{how}{traces(progress.done)} judged into {where(out)}, {progress.skipped} already "
        f"there, {progress.failed} failed; {spend(progress)}",
        file=sys.stderr,
    )
    print_errors(progress.errors)


def print_scores(report: Report, args: argparse.Namespace, paper: dict | None, *,
                 to_stderr: bool = False) -> None:
    from bbm_tui.cli.drawing import print_table  # rich: only to print a table, not --json

    who = _finder_name(args)
    columns = [Column("task"), Column("n", number=True)]
    for metric, header in COLUMNS:
        columns.append(Column(header, number=True))
        if paper is not None and metric != "processbench_f1":
            columns.append(Column("paper", number=True, style="dim", beside=True))
    columns.append(Column("unparseable", number=True))
    table = TextTable(f"{args.method} by {who}: first-mistake location", columns,
                      caption=_paper_caption(args, paper))
    # A ProcessBench file is scored per subset ("processbench/gsm8k"): by task, then name.
    tasks = sorted(report.tasks.items(),
                   key=lambda item: (task_order(item[0].split("/")[0]), item[0]))
    rows = [*tasks, ("overall", report.overall)]
    for name, scores in rows:
        cells = [name, str(scores.n)]
        for metric, _ in COLUMNS:
            cells.append(percent(getattr(scores, metric)))
            if paper is not None and metric != "processbench_f1":
                cells.append(percent(paper.get(name, {}).get(metric)))
        cells.append(str(scores.unparseable))
        # With no task judged (every trace failed, or --limit 0) "overall" is the only row.
        table.add_row(*cells, section=len(rows) > 1 and name == "overall")
    print_table(table, to_stderr=to_stderr)


def _finder_name(args: argparse.Namespace) -> str:
    return get_judge(args.method).who or args.model or "the configured model"


def _paper_caption(args: argparse.Namespace, paper: dict | None) -> str | None:
    if paper is None:
        return None
    if not paper:
        return f"The paper reports no figures for {args.method} by {args.paper}."
    return f"paper: {args.paper}, Tables 4, 9 and 5 (its Dyck figures: a 592-trace sample)"
