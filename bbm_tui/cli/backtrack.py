"""`bbm-tui backtrack`: traces backtracked from a mistake location, and the change in
accuracy it makes (the paper's Table 6)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bbm_tui.cli.batch import (
    BatchCommand,
    batch_store,
    check_batch_options,
    drive_batch,
    print_batch_notes,
    print_errors,
    print_impossible_logprobs,
    shard_of,
    spend,
    steps_detail,
)
from bbm_tui.cli.errors import EXIT_FAILURE, EXIT_OK, given, note
from bbm_tui.cli.inputs import check_json_beside, check_task, config_of, prefix_sampling
from bbm_tui.cli.phrases import count, signed, to_stdout, traces, where
from bbm_tui.cli.plots import print_charts
from bbm_tui.cli.tables import Column, TextTable
from bbm_tui.core import llm
from bbm_tui.core.batch.backtrack import (
    BacktrackProgress,
    BacktrackResult,
    Locations,
    backtrack_batch,
    jobs_from_files,
    paper_table_6,
    parse_locations,
    to_json,
)
from bbm_tui.core.batch.backtrack_thinking import (
    ThinkingBacktrackSettings,
    backtrack_thinking_batch,
)
from bbm_tui.core.errors import InvalidValue
from bbm_tui.core.llm.prefix import prefix_refusal
from bbm_tui.core.tasks import task_order


def command(args: argparse.Namespace) -> int:
    check_batch_options(args)
    check_json_beside(args.json, args.out, "--out")
    config = config_of(args)
    with given():
        check_task(args.task)
        locations = parse_locations(args.locations, args.seed)
        jobs = jobs_from_files(args.input, args.task, locations, args.limit,
                               args.dataset_format)
        spec = config.model_spec()
        settings = config.stepper_settings(None)
        shard = shard_of(args)
    batch = BatchCommand[BacktrackResult](
        "backtrack", args.out, not args.no_progress, steps_detail, print_summary,
        progress_of=lambda result: result.progress)
    if spec.mode == "thinking":
        with given():
            thinking = thinking_settings(args, spec)
        with batch_store() as store:
            result = drive_batch(batch, lambda on_progress: backtrack_thinking_batch(
                jobs, spec, args.out, settings=thinking, concurrency=args.concurrency,
                on_progress=on_progress, inputs=args.input, shard=shard, store=store))
    else:
        with batch_store() as store:
            result = drive_batch(batch, lambda on_progress: backtrack_batch(
                jobs, spec, store, args.out, concurrency=args.concurrency, settings=settings,
                on_progress=on_progress, inputs=args.input, processes=args.processes,
                shard=shard,
            ))
    if args.json:
        print(json.dumps(to_json(result, locations), indent=2, allow_nan=False))
    else:
        to_stderr = to_stdout(args.out)
        print_deltas(result, locations, to_stderr=to_stderr)
        print_charts(args, lambda charts: charts.backtrack_charts(
            result.tables, {locations.paper_key: paper_table_6(locations.paper_key)}
            if locations.paper_key else None, spec.model), to_stderr=to_stderr)
    return EXIT_FAILURE if result.progress.failed else EXIT_OK


def thinking_settings(args: argparse.Namespace,
                      spec: llm.ModelSpec) -> ThinkingBacktrackSettings:
    """--samples, --temperature, --top-p, --chat-template; refused before any call where the
    model cannot go on from a prefix of its reasoning. Raises InvalidValue."""
    refusal = prefix_refusal(spec, args.chat_template)
    if refusal is not None:
        raise InvalidValue(f"--mode thinking: {refusal}")
    if args.processes > 1:
        raise InvalidValue("--processes is for the paper's traces; with --mode thinking the "
                           "calls are light for the client: raise --concurrency instead")
    if args.samples < 1:
        raise InvalidValue(f"--samples must be at least 1 (got {args.samples})")
    return ThinkingBacktrackSettings(prefix_sampling(args), args.samples, args.chat_template)


def print_summary(out: Path, progress: BacktrackProgress, stopped: bool = False) -> None:
    print_batch_notes(out, progress)
    print_impossible_logprobs(progress.impossible_logprobs, "sample")
    if progress.unlabelled:
        note(f"{traces(progress.unlabelled)} unlabelled: no gold location, kept as they are")
    how = "stopped: " if stopped else ""
    print(f"{how}{traces(progress.done)} written to {where(out)}, {progress.skipped} "
          f"already there, {progress.failed} failed; {count(progress.steps, 'step')}, "
          f"{spend(progress)}", file=sys.stderr)
    print_errors(progress.errors)


def print_deltas(result: BacktrackResult, locations: Locations, *,
                 to_stderr: bool = False) -> None:
    from bbm_tui.cli.drawing import print_table  # rich: only to print a table, not --json

    paper = paper_table_6(locations.paper_key)
    columns = [Column("task"), *(Column(header, number=True) for header in (
        "n", "answer was right", "Δ accuracy", "answer was wrong", "Δ accuracy"))]
    if paper:
        columns += [Column("paper Δ✓", number=True, style="dim"),
                    Column("paper Δ✗", number=True, style="dim")]
    table = TextTable(f"Backtracking from {locations.kind} locations: change in accuracy "
                      "(percentage points; the paper's Table 6)", columns,
                      caption="paper: PaLM 2 Unicorn" if paper else None)
    for task, deltas in sorted(result.tables.items(), key=lambda i: task_order(i[0])):
        cells = [task, str(deltas.n), str(deltas.n_correct),
                 signed(deltas.delta_accuracy_correct), str(deltas.n_incorrect),
                 signed(deltas.delta_accuracy_incorrect)]
        if paper:
            figures = paper.get(task, {})
            cells += [signed(figures.get("correct")), signed(figures.get("incorrect"))]
        table.add_row(*cells)
    print_table(table, to_stderr=to_stderr)
