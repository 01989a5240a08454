"""`bbm-tui anchors`: each step's importance in thinking traces (issue 35; Thought Anchors'
resampling and counterfactual importance), from rollouts that go on from prefixes of the raw
reasoning."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bbm_tui.cli.batch import (
    BatchCommand,
    check_batch_options,
    drive_batch,
    print_batch_notes,
    print_errors,
    shard_of,
    spend,
)
from bbm_tui.cli.errors import EXIT_FAILURE, EXIT_OK, UsageError, given
from bbm_tui.cli.inputs import check_json_beside, check_task, config_of, prefix_sampling
from bbm_tui.cli.phrases import count, to_stdout, where
from bbm_tui.core import llm
from bbm_tui.core.batch.anchors import (
    CONFIRM_ABOVE_CALLS,
    AnchorsProgress,
    AnchorsResult,
    AnchorsSettings,
    Plan,
    jobs_of,
    plan,
    steps_path,
    traces_from_files,
    write_steps,
)
from bbm_tui.core.errors import InvalidValue
from bbm_tui.core.judging.anchors import (
    COSINE_DIFFERENT_BELOW,
    WORD_OVERLAP,
    Similar,
    StepImportance,
    importance_bar,
    similar_by_words,
    top_anchors,
)
from bbm_tui.core.llm.prefix import prefix_refusal
from bbm_tui.core.textsafe import one_line

BAR_WIDTH = 20


def command(args: argparse.Namespace) -> int:
    check_batch_options(args)
    check_json_beside(args.json, args.out, "--out")
    config = config_of(args)
    with given():
        check_task(args.task)
        spec = config.model_spec()
        settings = anchors_settings(args, spec)
        traces = traces_from_files(args.input, args.task, args.limit, args.dataset_format)
        shard = shard_of(args)
    jobs = jobs_of(traces, settings.rollouts)
    confirm(plan(jobs, spec), args.yes)
    measure = (f"embedding {args.embedding_model} (cosine < {COSINE_DIFFERENT_BELOW})"
               if args.embedding_model else WORD_OVERLAP)
    batch = BatchCommand[AnchorsResult](
        "anchors", args.out, not args.no_progress, rollouts_detail, print_summary,
        progress_of=lambda result: result.progress)
    result = drive_batch(batch, lambda on_progress: anchors_batch_of(
        traces, spec, args, settings, on_progress, shard))
    write_steps(steps_path(args.out), result, measure)
    if args.json:
        print(json.dumps(to_json(result, measure), indent=2, allow_nan=False))
    else:
        print_importances(result, measure, to_stderr=to_stdout(args.out))
    return EXIT_FAILURE if result.progress.failed else EXIT_OK


def anchors_settings(args: argparse.Namespace, spec: llm.ModelSpec) -> AnchorsSettings:
    refusal = prefix_refusal(spec, args.chat_template)
    if refusal is not None:
        raise InvalidValue(refusal)
    if args.rollouts < 1:
        raise InvalidValue(f"--rollouts must be at least 1 (got {args.rollouts})")
    return AnchorsSettings(prefix_sampling(args, logprobs=False), args.rollouts,
                           args.chat_template)


def confirm(planned: Plan, yes: bool) -> None:
    """Say what the run will cost; above the limit, ask (or refuse where nobody can answer)."""
    cost = "cost unknown" if planned.cost is None else f"~${planned.cost:.2f}"
    said = (f"bbm-tui anchors: {count(planned.calls, 'call')} (rollouts OUT holds are "
            f"skipped), ~{planned.prompt_tokens:,} prompt and ~{planned.completion_tokens:,} "
            f"written tokens (estimated), {cost}")
    print(said, file=sys.stderr)
    if yes or planned.calls <= CONFIRM_ABOVE_CALLS:
        return
    if not sys.stdin.isatty():
        raise UsageError(f"{planned.calls} calls is more than {CONFIRM_ABOVE_CALLS}: add --yes "
                         "to go on")
    if input("Go on? [y/N] ").strip().lower() not in ("y", "yes"):
        raise UsageError("not started")


async def anchors_batch_of(traces: Any, spec: llm.ModelSpec, args: argparse.Namespace,
                           settings: AnchorsSettings, on_progress: Any,
                           shard: Any) -> AnchorsResult:
    from bbm_tui.core.batch.anchors import anchors_batch

    async def similar_for(texts: list[str]) -> Similar:
        if not args.embedding_model:
            return similar_by_words
        from bbm_tui.core.llm.embedding import similar_by_embedding

        embedder = llm.ModelSpec(args.embedding_model, api_base=args.embedding_api_base)
        return await similar_by_embedding(embedder, texts, COSINE_DIFFERENT_BELOW)

    return await anchors_batch(traces, spec, args.out, settings=settings,
                               similar_for=similar_for, concurrency=args.concurrency,
                               on_progress=on_progress, inputs=args.input, shard=shard)


def rollouts_detail(progress: AnchorsProgress) -> str:
    return f"{count(progress.calls, 'call')}, {spend(progress)}"


def print_summary(out: Path, progress: AnchorsProgress, stopped: bool = False) -> None:
    print_batch_notes(out, progress)
    how = "stopped: " if stopped else ""
    print(f"{how}{count(progress.done, 'rollout')} written to {where(out)}, "
          f"{progress.skipped} already there, {progress.failed} failed; {spend(progress)}",
          file=sys.stderr)
    print_errors(progress.errors)


def _figure(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:+.{digits}f}"


def bar(importance: float | None) -> str:
    return importance_bar(importance, BAR_WIDTH)


def print_importances(result: AnchorsResult, measure: str, *, to_stderr: bool) -> None:
    stream = sys.stderr if to_stderr else sys.stdout
    for trace in result.traces:
        print(f"{trace.task}: {one_line(trace.row.input, 70)}", file=stream)
        print(f"  {'step':>4}  {'importance':>10}  {'kept':>5}  {'resampled':>9}  {'KL':>5}  ",
              file=stream)
        for step in trace.steps:
            print(f"  {step.index + 1:>4}  {_figure(step.importance):>10}  "
                  f"{_percent(step.accuracy_kept):>5}  {_percent(step.accuracy_resampled):>9}  "
                  f"{_kl(step):>5}  {bar(step.importance)}", file=stream)
        anchors = top_anchors(trace.steps, 3)
        if anchors:
            print("  top anchors:", file=stream)
            for step in anchors:
                print(f"    {step.index + 1}. ({_figure(step.importance)}) "
                      f"{one_line(step.text, 100)}", file=stream)
    print(f"meaning judged by {measure}", file=stream)


def _percent(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _kl(step: StepImportance) -> str:
    return "–" if step.counterfactual_kl is None else f"{step.counterfactual_kl:.2f}"


def to_json(result: AnchorsResult, measure: str) -> dict[str, Any]:
    return {"traces": [{"task": trace.task, "input": trace.row.input,
                        "steps": [step.to_json() for step in trace.steps]}
                       for trace in result.traces],
            "meaning_by": measure, "usage": result.progress.usage_json()}
