"""`bbm-tui run`: generate traces headless into a JSONL file in the dataset's format."""

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
from bbm_tui.cli.errors import EXIT_FAILURE, EXIT_OK, UsageError, given, note
from bbm_tui.cli.inputs import check_task, config_of, model_specs
from bbm_tui.cli.phrases import count, traces, where
from bbm_tui.core import llm
from bbm_tui.core.batch.run import (
    RunJob,
    RunProgress,
    for_models,
    jobs_from_bundled,
    jobs_from_files,
    run_batch,
)
from bbm_tui.core.dataset import bundled_path
from bbm_tui.core.generation.thinking import thinking_settings
from bbm_tui.core.tasks import TASK_NAMES, get_task
from bbm_tui.core.types import StepperSettings

RUN_WITHOUT_LOGPROBS = ("log-probabilities: none from this provider; the steps are stored "
                        "without them")


def command(args: argparse.Namespace) -> int:
    check_batch_options(args)
    config = config_of(args)
    specs = model_specs(args, config)
    if config.logprobs and any(spec.mode != "chat" for spec in specs):
        raise UsageError("log-probabilities are recorded in chat mode only (litellm drops "
                         "them from streamed text completions): use --mode chat, or leave out "
                         "--logprobs (or the config's `logprobs`)")
    with given():
        check_task(args.task)
        jobs, notes = _jobs(args)
        spec = specs[0]
        if len(specs) > 1:  # every question on each model, a row per model
            jobs = for_models(jobs, specs)
        settings = config.stepper_settings(args.step_limit)
        check_thinking_refusals(specs, settings)
        shard = shard_of(args)
        if config.logprobs and not all(llm.gives_logprobs(spec) for spec in specs):
            notes = [*notes, RUN_WITHOUT_LOGPROBS]
    inputs = list(args.input or []) + ([_dataset_file(args.task)] if args.dataset else [])

    def report(out: Path, progress: RunProgress, stopped: bool) -> None:
        print_summary(out, progress, stopped)
        if args.json:
            print_json(out, progress, stopped)

    batch = BatchCommand[RunProgress](
        "run", args.out, not args.no_progress, steps_detail, report,
        progress_of=lambda progress: progress)
    with batch_store() as store:
        progress = drive_batch(batch, lambda on_progress: run_batch(
            jobs, spec, store, args.out, concurrency=args.concurrency, settings=settings,
            on_progress=on_progress, inputs=inputs, notes=notes, processes=args.processes,
            shard=shard, reuse_sessions=args.reuse_sessions, new_out=args.new_out,
            on_moved_aside=_say_moved_aside))
    return EXIT_FAILURE if progress.failed else EXIT_OK


def check_thinking_refusals(specs: list[llm.ModelSpec], settings: StepperSettings) -> None:
    """A parameter a thinking model's provider refuses (a temperature other than 1 on
    Anthropic, ...) stops the run before any call, with the sentence saying which and why,
    rather than failing every row."""
    for spec in specs:
        if spec.mode == "thinking":
            refusal = llm.thinking_refusal(spec, settings.call, thinking_settings(settings))
            if refusal is not None:
                raise UsageError(refusal)


def _say_moved_aside(out: Path, aside: Path) -> None:
    note(f"{out} was moved aside to {aside} (--new-out), with its unfinished traces; "
         f"{out} starts over")


def _jobs(args: argparse.Namespace) -> tuple[list[RunJob], list[str]]:
    """The questions to run, and notes on them (e.g. rows listed twice)."""
    if not args.dataset:
        questions = jobs_from_files(args.input, args.task, args.limit)
        return questions.jobs, questions.notes()
    if args.task is None:
        raise UsageError("--dataset needs --task (a run writes one task per OUT file): "
                         + ", ".join(TASK_NAMES))
    task = get_task(args.task)
    if task.is_paper:
        return jobs_from_bundled(args.task, args.limit), []
    if task.questions_path is None:
        raise UsageError(f"--dataset: {task.name!r} is a task of your own and its file names "
                         "no `questions`; give them with --input FILE.jsonl")
    # Its own file of questions stands for the dataset.
    questions = jobs_from_files([task.questions_path], task.name, args.limit)
    return questions.jobs, questions.notes()


def _dataset_file(task_name: str) -> Path:
    """What `run --dataset` reads: the paper's file of the task, or a task of one's own's
    `questions` file."""
    task = get_task(task_name)
    return bundled_path(task_name) if task.is_paper or task.questions_path is None else (
        task.questions_path)


def print_summary(out: Path, progress: RunProgress, stopped: bool = False) -> None:
    print_batch_notes(out, progress)
    print_impossible_logprobs(progress.impossible_logprobs, "step")
    how = "stopped: " if stopped else ""
    print(
        f"{how}{traces(progress.done)} written to {where(out)}, {progress.skipped} already "
        f"there, {progress.failed} failed; {count(progress.steps, 'step')}, {spend(progress)}",
        file=sys.stderr,
    )
    print_errors(progress.errors)


def print_json(out: Path, progress: RunProgress, stopped: bool = False) -> None:
    """--json: what was done, on standard output, as one object."""
    print(json.dumps({
        "out": str(out), "written": progress.done, "already_there": progress.skipped,
        "failed": progress.failed, "steps": progress.steps, "stopped": stopped,
        "usage": progress.usage_json(), "notes": list(progress.notes),
        "errors": list(progress.errors),
    }, indent=2, allow_nan=False))
