"""The command line: the TUI by default, and the headless batch commands.

Only the standard library is imported here at module level, so that `bbm-tui` paints its
first frame fast and `bbm-tui stats` never pays for litellm or Textual.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bbm_tui import __version__

if TYPE_CHECKING:
    from bbm_tui.core.annotation.queue import QueuedTrace
    from bbm_tui.core.annotation.report import AppLabelsLeftOut

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class _MainParser(argparse.ArgumentParser):
    """The epilog (tasks, where the files are) is built only when help is asked for: it
    imports the store and config modules, which opening the app need not wait for here."""

    def format_help(self) -> str:
        self.epilog = _epilog()
        return super().format_help()


def _epilog() -> str:
    from bbm_tui.core.config import config_path, tasks_folder
    from bbm_tui.core.store import default_path
    from bbm_tui.core.tasks import TASK_NAMES
    from bbm_tui.core.tasks.files import load_task_folder

    # Help is printed before the command reads the tasks: it reads the folder itself.
    yours = ", ".join(task.name for task in load_task_folder(tasks_folder()).tasks) or "none yet"
    return f"""tasks: {", ".join(TASK_NAMES)}
your tasks: {yours} (task files: {tasks_folder()}/*.toml, or --task-file)

files:
  sessions   {default_path()}
             every session, step, label and finder run (SQLite; BBM_TUI_HOME moves it)
  config     {config_path()}
             model, api_base, mode, step_limit, max_tokens, logprobs, timeout,
             step_timeout, verify_live and a [keymap]; never API keys (BBM_TUI_CONFIG moves it)
  JSONL      the dataset's rows: input, steps, answer, target, mistake_index (0-based; null
             = no mistake; no key = unlabelled), optionally task; what run, find, backtrack,
             stats, import and export read and write. The field's step-level formats are read
             too (processbench, prm800k, mr-gsm8k, mr-ben, math-shepherd, prmbench, trl: told
             by the first row's keys, or --format) and written by export

offline models: replay/bbm (the bundled dataset), solver/bbm (writes steps for four
tasks), simulated/rm-X (a reward model right with probability X)

`bbm-tui COMMAND --help` for each command."""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The whole command line. `argv` only says which command's heavier parts to build: the
    methods `find` takes are read from the judges, whose import the app's first frame need
    not wait for when `find` is not the command."""
    parser = _MainParser(
        prog="bbm-tui",
        description="Step through chain-of-thought traces the way BIG-Bench Mistake made them. "
        "With no command, opens the app.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bbm-tui {__version__}")
    _add_model_options(parser)
    _add_logprobs_option(parser)
    parser.add_argument("--task", help="start a new session on this task")
    _add_task_file_option(parser, on_command=False)
    parser.add_argument(
        "--question", type=int, metavar="N",
        help="with --task: start on question N (0-based) of the bundled dataset",
    )
    parser.add_argument("--session", type=int, metavar="ID", help="resume session ID")
    # The commands' own help leaves out the main help's epilog (the tasks, the files), which
    # their formatter would run together into one paragraph.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     parser_class=argparse.ArgumentParser)

    run = commands.add_parser(
        "run", help="generate traces headless into a JSONL file in the dataset's format",
        description="Generate traces headless. Rows already in OUT are skipped (resume).",
    )
    _add_model_options(run)
    _add_pace_option(run)
    _add_logprobs_option(run)
    run.add_argument("--task", help="the task (else taken from each input file's name)")
    _add_task_file_option(run)
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", type=Path, nargs="+", metavar="FILE.jsonl",
                        help="dataset-format files whose questions to run")
    source.add_argument("--dataset", action="store_true",
                        help="run the bundled dataset's questions (of --task, or of all tasks)")
    run.add_argument("--limit", type=int, metavar="N", help="at most N questions per task")
    run.add_argument("--concurrency", type=int, default=4, metavar="K",
                     help="traces generated at once (default 4)")
    run.add_argument("--processes", type=int, default=1, metavar="P",
                     help="share the K traces out to P processes (default 1): for a fast "
                     "local server, where one process's CPU is the limit; each process "
                     "imports litellm first (a few seconds)")
    run.add_argument("--step-limit", type=int, metavar="N", help="at most N steps per trace")
    _add_scale_options(run, one_call=True)
    run.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    run.add_argument("--json", action="store_true",
                     help="print what was done (traces, steps, tokens, cost) as one JSON object")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    stats = commands.add_parser(
        "stats", help="per-task counts of dataset-format files (the paper's Table 2)",
    )
    stats.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    stats.add_argument("--task", help="the task of every file (else from each file's name)")
    _add_task_file_option(stats)
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    _add_find_parser(commands, with_methods="find" in argv)
    _add_backtrack_parser(commands)
    _add_verify_parser(commands)
    sessions = commands.add_parser("sessions", help="list the saved sessions")
    sessions.add_argument("--json", action="store_true", help="one JSON object per line")

    export = commands.add_parser(
        "export", help="export sessions: dataset JSONL, ProcessBench, PRM800K, Markdown, or a CSV "
        "of every annotator's labels",
    )
    export.add_argument("--session", type=int, nargs="+", metavar="ID",
                        help="the sessions to export (default: all)")
    export.add_argument("--format", choices=_export_formats(), default="jsonl",
                        metavar="FORMAT",
                        help="jsonl (the BBM dataset's rows; the default), processbench, "
                        "prm800k, mr-gsm8k, mr-ben, math-shepherd, prmbench, trl (stepwise "
                        "supervision), dpo (preference pairs from branches), markdown, csv "
                        "(every annotator's label), csv-steps (every step's rating)")
    export.add_argument("--out", type=Path, required=True, metavar="FILE")
    export.add_argument("--force", action="store_true",
                        help="replace FILE if it exists (never the session store)")
    _add_task_file_option(export)

    annotate = commands.add_parser(
        "annotate", help="label dataset files with the paper's protocol or PRM800K's "
        "per-step one, as one annotator (resumes where they left off)",
    )
    annotate.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    annotate.add_argument("--annotator", required=True, metavar="NAME",
                          help="who is labelling (labels are kept per annotator)")
    annotate.add_argument("--task", help="the task of every file (else from each file's name)")
    annotate.add_argument("--protocol", choices=("paper", "per-step"), default="paper",
                          help="paper: each thought correct or not up to the first mistake "
                          "(the default); per-step: PRM800K's, every thought rated good, "
                          "neutral or bad to the end, with its finish reason")
    _add_task_file_option(annotate)
    adjudicate = commands.add_parser(
        "adjudicate", help="settle the traces the annotators disagree on (in the app)")
    _add_task_file_option(adjudicate)
    agreement = commands.add_parser(
        "agreement", help="agreement between annotators: Krippendorff's alpha, Cohen's kappa, "
        "agreement with gold; --consensus writes the majority's labels",
        description="Over the store's labels, or over FILES (dataset format, one per "
        "annotator, each annotator named by the file's name).",
    )
    agreement.add_argument("files", type=Path, nargs="*", metavar="FILE.jsonl")
    agreement.add_argument("--gold", type=Path, metavar="FILE.jsonl",
                           help="gold labels (default: the bundled dataset's, for its traces)")
    agreement.add_argument("--json", action="store_true", help="print one JSON object")
    agreement.add_argument("--consensus", type=Path, metavar="OUT.jsonl",
                           help="write every trace with the majority's label (adjudicated "
                           "first, over the store); a tie is left unlabelled")
    agreement.add_argument("--force", action="store_true", help="replace OUT if it exists")
    agreement.add_argument("--app-labels", action="store_true",
                           help="over the store, count the sessions' own labels too (given "
                           "on the app's main screen with x or c, or brought in by `import`), "
                           "as the annotator \"app\" (left out otherwise: no annotator "
                           "labels those sessions)")

    importer = commands.add_parser(
        "import", help="make sessions of dataset-format rows, to label them in the app",
    )
    importer.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    importer.add_argument("--task", help="the task of every file (else from each file's name)")
    _add_task_file_option(importer)
    importer.add_argument("--unlabelled", action="store_true",
                          help="ignore every mistake_index: import every trace unlabelled "
                          "(rows with no mistake_index key are unlabelled anyway)")
    merge = commands.add_parser(
        "merge", help="join the OUT files of `--shard I/N` runs into what one machine writes",
        description="Rows in the input's order, each once; two different rows for one input "
        "row are a conflict, named, and nothing is written.",
    )
    merge.add_argument("files", type=Path, nargs="+", metavar="OUT.jsonl")
    merge.add_argument("--out", type=Path, required=True, metavar="MERGED.jsonl")
    _add_format_option(commands)
    from bbm_tui.cli_plots import add_plot_option

    add_plot_option(commands)
    return parser


# The commands that read dataset files: each takes BBM rows or any of the field's formats.
DATASET_READERS = ("stats", "find", "backtrack", "verify", "annotate", "import", "agreement")


def _add_format_option(commands: Any) -> None:
    """`--format` on every command that reads dataset files (added here, once for all)."""
    from bbm_tui.core.dataset.formats import READ_FORMATS

    for name in DATASET_READERS:
        commands.choices[name].add_argument(
            "--format", dest="dataset_format", choices=(*READ_FORMATS, "jsonl"),
            metavar="FORMAT", help="the files' format: " + ", ".join(READ_FORMATS) + " "
            "(default: told by each file's first row; bbm, or jsonl, is the BBM dataset's)")


def _export_formats() -> tuple[str, ...]:
    from bbm_tui.core.annotation.export import FORMATS

    return FORMATS


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="litellm model string (default: the config's, "
                        "else replay/bbm, the offline replay of the bundled dataset)")
    parser.add_argument("--api-base", help="base URL of an OpenAI-compatible server or proxy")
    parser.add_argument("--mode", choices=("chat", "completion"),
                        help="chat (prompt as one user message) or text completion")
    parser.add_argument("--router", metavar="FILE.yaml",
                        help="a litellm Router model_list (the LiteLLM proxy's): --model then "
                        "names one of its model groups, spread over its deployments")


def _add_scale_options(parser: argparse.ArgumentParser, *, one_call: bool) -> None:
    """--shard on the batch commands; --one-call where steps are generated."""
    parser.add_argument("--shard", metavar="I/N",
                        help="this machine is I of N sharing the input: it does its fixed "
                        "share (join the N OUT files with `bbm-tui merge`)")
    if one_call:
        parser.add_argument("--one-call", action="store_true", default=None,
                            help="one streamed call for many steps, each line taken while it "
                            "begins with its Thought label (not the paper's one call a step; "
                            "the config's `one_call`)")


def _add_pace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pace", type=float, default=0.0, metavar="TPS",
                        help="tokens a second the offline models (replay/bbm, solver/bbm) "
                        "stream at (default 0: at full speed; the app's pace is 30)")


def _use_pace(args: argparse.Namespace) -> str | None:
    """Set the offline models' pace for this command (and its processes); a problem, or None."""
    if not args.pace >= 0:  # also NaN
        return "--pace must be 0 (full speed) or more tokens a second"
    from bbm_tui.core import llm

    llm.set_batch_replay_pace(args.pace)
    return None


def _add_task_file_option(parser: argparse.ArgumentParser, *, on_command: bool = True) -> None:
    """`--task-file FILE.toml`, on the app and on every command that reads or writes a task's
    traces. A command's own leaves the app's value alone when it is not given (argparse would
    otherwise put the command's default over it)."""
    parser.add_argument(
        "--task-file", type=Path, action="append", dest="task_files", metavar="FILE.toml",
        default=argparse.SUPPRESS if on_command else None,
        help="a task of your own (again for more); the tasks in the config folder's tasks/ "
        "are read too; with one and no --task, it is the task")


def _add_logprobs_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logprobs", action="store_true", default=None,
                        help="record each step's log-probabilities (chat mode; the config's "
                        "`logprobs` otherwise)")


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    try:
        refused = _use_task_files(args)
        if refused is not None:
            return refused
        from bbm_tui.cli_plots import plot_refusal

        refusal = plot_refusal(args)
        if refusal is not None:
            return fail(refusal, EXIT_USAGE)
        if args.command is None:
            return _open_app(args)
        if args.command == "run":
            return run_command(args)
        if args.command == "stats":
            return stats_command(args)
        if args.command == "sessions":
            return sessions_command(args)
        if args.command == "export":
            return export_command(args)
        if args.command == "import":
            return import_command(args)
        if args.command == "find":
            return find_command(args)
        if args.command == "backtrack":
            return backtrack_command(args)
        if args.command == "verify":
            return verify_command(args)
        if args.command == "annotate":
            return annotate_command(args)
        if args.command == "adjudicate":
            return adjudicate_command(args)
        if args.command == "agreement":
            return agreement_command(args)
        if args.command == "merge":
            return merge_command(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `bbm-tui sessions | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:  # a bug: say so in one line unless asked for the traceback
        from bbm_tui.core.store import StoreError

        if isinstance(error, StoreError):  # the disk, the folder, the file: not a bug
            return fail(str(error))
        if os.environ.get("BBM_TUI_DEBUG"):
            raise
        return fail(
            f"internal error: {type(error).__name__}: {error} "
            "(set BBM_TUI_DEBUG=1 for the traceback, and please report it)"
        )
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def _open_app(args: argparse.Namespace, annotate: Any = None) -> int:
    config = _load_config_or_none(args)
    if config is None:
        return EXIT_USAGE
    from bbm_tui.core.store import StoreError, preflight

    try:
        # Said here, on stderr, it stays on screen after the app; the app's own dialog is for
        # what only opening the store finds.
        preflight()
    except StoreError as error:
        return fail(str(error))
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the app would wait for keys that never come.
        return fail(
            "the app needs a terminal (stdin and stdout); for headless work use "
            "`bbm-tui run`, `find`, `sessions`, `export` or `import`",
            EXIT_USAGE,
        )
    _tolerate_bad_terminal_input()
    # The collector stays off until the first frame is on screen (run_app turns it back on):
    # importing Textual and building the first screen make objects that live as long as the
    # app, and walking them over and over cost a tenth of a second of the start here.
    gc.disable()
    from bbm_tui.ui.app import run_app

    # Typed next to --session, these win over that session's own settings (resumed_spec).
    given = frozenset(name for name in ("model", "api_base", "mode")
                      if getattr(args, name) is not None)
    problems = getattr(args, "task_problems", [])
    if annotate is not None:
        return run_app(config, annotate=annotate, task_problems=problems)
    return run_app(config, task=args.task, question=args.question, session_id=args.session,
                   model_given=given, task_problems=problems)


def annotate_command(args: argparse.Namespace) -> int:
    """Read the files first (a bad line is named here, on stderr), then open the queue."""
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.tasks import UnknownTaskError
    from bbm_tui.core.types import ADJUDICATOR

    annotator = " ".join(args.annotator.split())
    if not annotator or annotator == ADJUDICATOR:
        return fail(f"--annotator: {args.annotator!r} is not a name an annotator can have",
                    EXIT_USAGE)
    try:
        _check_task(args.task)
        traces = read_annotation_files(args.files, args.task, args.dataset_format)
    except (DatasetError, UnknownTaskError) as error:
        return fail(str(error), EXIT_USAGE)
    from bbm_tui.ui.app import AnnotateRequest

    return _open_app(args, AnnotateRequest(annotator, traces, protocol=args.protocol))


def read_annotation_files(files: list[Path], task: str | None,
                          fmt: str | None = None) -> list[QueuedTrace]:
    """The traces of `bbm-tui annotate`'s files, kept until the process ends. They are then
    frozen out of the cycle collector's sight (gc.freeze): its full passes while the app
    starts walked every row again, a tenth of opening 10,000 traces (bench/annotate_queue.py)."""
    import gc

    from bbm_tui.core.annotation.queue import read_queue_file

    traces = [trace for path in files for trace in read_queue_file(path, task, fmt)]
    gc.freeze()
    return traces


def adjudicate_command(args: argparse.Namespace) -> int:
    from bbm_tui.ui.app import AnnotateRequest

    return _open_app(args, AnnotateRequest("", adjudicate=True))


def _tolerate_bad_terminal_input() -> None:
    """Textual's input thread decodes what the terminal sends as strict UTF-8, so one byte
    that is not UTF-8 (a Latin-1 terminal, an 8-bit Meta key, pasted binary) raised
    UnicodeDecodeError, killed the input thread and ended the app with a traceback (Textual
    issue #6456, open). Decode with replacement instead: such a byte arrives as U+FFFD."""
    import codecs
    from functools import partial

    try:
        from textual.drivers import linux_driver
    except ImportError:  # Windows: its driver reads keys, not bytes
        return

    def lenient(encoding: str):
        return partial(codecs.getincrementaldecoder(encoding), errors="replace")

    # The name the driver imported from codecs, replaced in its module (Textual exports it not).
    linux_driver.getincrementaldecoder = lenient  # pyright: ignore[reportPrivateImportUsage]


# ---------------------------------------------------------------------------- shared

def fail(message: str, code: int = EXIT_FAILURE) -> int:
    """One clear line on stderr; never a traceback, never a key. Untrusted parts are made
    printable."""
    from bbm_tui.core.redact import redact
    from bbm_tui.core.textsafe import printable

    print(f"bbm-tui: {printable(redact(message))}", file=sys.stderr)
    return code


def _json_beside_rows(json_wanted: bool, out: Path | None, option: str) -> str | None:
    """--json prints one object to standard output: not where the rows go already."""
    if json_wanted and _to_stdout(out):
        return (f"--json and {option} - would both write to standard output: give {option} "
                "a file, or leave out --json (the table then goes to standard error)")
    return None


def _to_stdout(path: Path | None) -> bool:
    """The command writes its file to standard output (`-`): its report then goes to
    standard error, so that what it writes stays whole."""
    from bbm_tui.core.dataset import is_standard_output

    return path is not None and is_standard_output(path)


def _where(path: Path) -> str:
    """A written file as a message names it."""
    return "standard output" if _to_stdout(path) else str(path)


def _os_problem(error: OSError, path: Path) -> str:
    """E.g. "outdir: cannot use it: Is a directory", for a file a command reads and writes."""
    return f"{error.filename or path}: cannot use it: {error.strerror or error}"


def _load_config_or_none(args: argparse.Namespace):  # -> Config | None
    from bbm_tui.core.config import ConfigError, load_config

    try:
        config = load_config().with_overrides(
            model=args.model, api_base=args.api_base, mode=args.mode,
            logprobs=getattr(args, "logprobs", None), router=getattr(args, "router", None),
            one_call=getattr(args, "one_call", None),
        )
    except ConfigError as error:
        fail(str(error))
        return None
    if config.router is not None:
        from bbm_tui.core.llm.router import RouterFileError, read_router_file

        try:
            groups = read_router_file(config.router).groups
        except RouterFileError as error:
            fail(str(error))
            return None
        if config.model not in groups:
            fail(f"{config.router} has no model group {config.model!r}: give --model one of "
                 f"{', '.join(groups)}")
            return None
    return config


def _use_task_files(args: argparse.Namespace) -> int | None:
    """Read the user's tasks (the config folder's tasks/, then every --task-file) so that
    every command and the app know them by name. A named file that does not load stops the
    command (exit code 2); a folder's file that does not load is named, on stderr (the app
    shows it too), and the other tasks load. With one --task-file and no --task, that task
    is the one meant."""
    from bbm_tui.core.config import tasks_folder
    from bbm_tui.core.tasks import use_tasks
    from bbm_tui.core.tasks.files import TaskFileError, load_user_tasks

    named = getattr(args, "task_files", None) or []
    try:
        loaded = load_user_tasks(tasks_folder(), named)
    except TaskFileError as error:
        return fail(str(error), EXIT_USAGE)
    args.task_problems = [str(problem) for problem in loaded.problems]
    for problem in args.task_problems:
        fail(f"{problem} (that task is left out; the others load)")
    use_tasks(loaded.tasks)
    if len(named) == 1 and getattr(args, "task", None) is None and hasattr(args, "task"):
        args.task = loaded.tasks[-1].name
    return None


def _check_task(name: str | None) -> None:
    if name is not None:
        from bbm_tui.core.tasks import get_task

        get_task(name)


# ---------------------------------------------------------------------------- many machines

def _shard(args: argparse.Namespace):  # -> Shard | None; raises ShardError (a ValueError)
    from bbm_tui.core.batch.shard import Shard

    return Shard.parse(args.shard) if args.shard else None


def merge_command(args: argparse.Namespace) -> int:
    from bbm_tui.core.batch.shard import ShardError, merge_outputs
    from bbm_tui.core.dataset import DatasetError

    try:
        merged = merge_outputs(args.files, args.out)
    except (ShardError, DatasetError) as error:
        return fail(str(error), EXIT_USAGE)
    except OSError as error:
        return fail(_os_problem(error, args.out), EXIT_USAGE)
    shards = ", ".join(merged.shards) or "none"
    print(f"{merged.rows} rows from {len(args.files)} files (shards {shards}) written to "
          f"{args.out}" + (f"; {merged.duplicates} rows held twice, kept once"
                           if merged.duplicates else ""), file=sys.stderr)
    if merged.missing:
        fail(f"no file held a row of shard {', '.join(merged.missing)}: if that machine's "
             "run wrote rows, merge its file too (merging again replaces nothing: choose a "
             "new --out)")
    return EXIT_OK


# ---------------------------------------------------------------------------- run

def run_command(args: argparse.Namespace) -> int:
    import asyncio

    from bbm_tui.core import llm
    from bbm_tui.core.batch.run import jobs_from_bundled, jobs_from_files, run_batch
    from bbm_tui.core.batch.runner import BatchStop
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.store import Store, StoreError
    from bbm_tui.core.tasks import TASK_NAMES, UnknownTaskError, get_task

    if args.concurrency < 1:
        return fail("--concurrency must be at least 1", EXIT_USAGE)
    if args.limit is not None and args.limit < 0:
        return fail("--limit must be 0 or more", EXIT_USAGE)
    problem = _processes_problem(args) or _use_pace(args)
    if problem:
        return fail(problem, EXIT_USAGE)
    config = _load_config_or_none(args)
    if config is None:
        return EXIT_USAGE
    if config.logprobs and config.mode != "chat":
        return fail("log-probabilities are recorded in chat mode only (litellm drops them "
                    "from streamed text completions): use --mode chat, or leave out "
                    "--logprobs (or the config's `logprobs`)", EXIT_USAGE)
    try:
        _check_task(args.task)
        if args.dataset:
            if args.task is None:
                return fail(
                    "--dataset needs --task (a run writes one task per OUT file): "
                    + ", ".join(TASK_NAMES),
                    EXIT_USAGE,
                )
            task = get_task(args.task)
            if task.is_paper:
                jobs, notes = jobs_from_bundled(args.task, args.limit), []
            elif task.questions_path is None:
                return fail(f"--dataset: {task.name!r} is a task of your own and its file names "
                            "no `questions`; give them with --input FILE.jsonl", EXIT_USAGE)
            else:  # its own file of questions stands for the dataset
                questions = jobs_from_files([task.questions_path], task.name, args.limit)
                jobs, notes = questions.jobs, questions.notes()
        else:
            questions = jobs_from_files(args.input, args.task, args.limit)
            jobs, notes = questions.jobs, questions.notes()
        spec = config.model_spec()
        settings = config.stepper_settings(args.step_limit)
        shard = _shard(args)
        if config.logprobs and not llm.gives_logprobs(spec):
            notes = [*notes, RUN_WITHOUT_LOGPROBS]
        store = Store.open()
    except (DatasetError, UnknownTaskError, StoreError, ValueError) as error:
        return fail(str(error), EXIT_USAGE)
    inputs = list(args.input or []) + ([_dataset_file(args.task)] if args.dataset else [])
    latest = LatestProgress()
    try:
        with ProgressDisplay(not args.no_progress, _run_detail) as show:
            progress = asyncio.run(until_signalled(
                run_batch(jobs, spec, store, args.out, concurrency=args.concurrency,
                          settings=settings, on_progress=latest.keep(show), inputs=inputs,
                          notes=notes, processes=args.processes, shard=shard)
            ))
    except BatchStop as error:  # a missing key, an unknown model, a worker process that died
        return fail(f"run stopped: {error}")
    except DatasetError as error:
        return fail(str(error), EXIT_USAGE)
    except OSError as error:  # OUT is a folder, or in one that does not exist, or not ours
        return fail(_os_problem(error, args.out), EXIT_USAGE)
    except (Stopped, KeyboardInterrupt) as stop:
        if latest.progress is not None:
            _print_run_summary(args.out, latest.progress, stopped=True)
            if args.json:
                _print_run_json(args.out, latest.progress, stopped=True)
        return _stop_code(stop)
    finally:
        store.close()
    _print_run_summary(args.out, progress)
    if args.json:
        _print_run_json(args.out, progress)
    return EXIT_FAILURE if progress.failed else EXIT_OK


def _print_run_json(out: Path, progress: Any, stopped: bool = False) -> None:
    import json

    print(json.dumps({
        "out": str(out), "written": progress.done, "already_there": progress.skipped,
        "failed": progress.failed, "steps": progress.steps, "stopped": stopped,
        "usage": progress.usage_json(), "notes": list(progress.notes),
        "errors": list(progress.errors),
    }, indent=2))


def _dataset_file(task_name: str) -> Path:
    """What `run --dataset` reads: the paper's file of the task, or a task of one's own's
    `questions` file."""
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.tasks import get_task

    task = get_task(task_name)
    return bundled_path(task_name) if task.is_paper or task.questions_path is None else (
        task.questions_path)


def _print_run_summary(out: Path, progress: Any, stopped: bool = False) -> None:
    _print_batch_notes(out, progress)
    _print_impossible_logprobs(progress.impossible_logprobs, "step")
    how = "stopped: " if stopped else ""
    print(
        f"{how}{_traces(progress.done)} written to {_where(out)}, {progress.skipped} already "
        f"there, {progress.failed} failed; {_count(progress.steps, 'step')}, {_spend(progress)}",
        file=sys.stderr,
    )
    for message in progress.errors[:10]:
        fail(message)


def _spend(progress: Any) -> str:
    """"20 calls, 40,705 in / 36,678 cached / 400 out tokens, $0.0253": a batch's calls, as
    the app's title shows a session's ("~" on estimated counts, "cost unknown" never $0)."""
    from bbm_tui.core.accounting import UNKNOWN, format_tokens_in_out, format_total_cost

    tokens = format_tokens_in_out(progress.prompt_tokens, progress.cached_tokens,
                                  progress.completion_tokens, progress.estimated_calls > 0,
                                  progress.prompt_estimated_calls > 0)
    cost = format_total_cost(progress.cost, progress.calls, progress.unpriced_calls)
    return (f"{_count(progress.calls, 'call')}, {tokens} tokens, "
            f"{'cost unknown' if cost == UNKNOWN else cost}")


class Stopped(Exception):
    """SIGTERM or SIGHUP while a batch ran: it stopped as on Ctrl+C (each trace finished so far
    is written; the one in progress resumes next time)."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(f"stopped by signal {signal_number}")
        self.code = 128 + signal_number


async def until_signalled(work: Any) -> Any:
    """Await `work`, cancelling it on SIGTERM or SIGHUP and raising Stopped instead."""
    import asyncio
    import signal

    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    received: list[int] = []

    def stop(number: int) -> None:
        received.append(number)
        if task is not None:
            task.cancel()

    numbers = (signal.SIGTERM, signal.SIGHUP)
    for number in numbers:
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(number, stop, number)
    try:
        return await work
    except asyncio.CancelledError:
        if received:
            raise Stopped(received[0]) from None
        raise
    finally:
        for number in numbers:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(number)


def _stop_code(stop: BaseException) -> int:
    print("interrupted", file=sys.stderr)
    return stop.code if isinstance(stop, Stopped) else EXIT_INTERRUPTED


class LatestProgress:
    """The last progress a batch reported, for its summary when it is stopped."""

    def __init__(self) -> None:
        self.progress: Any = None

    def keep(self, show: Callable[[Any], None]) -> Callable[[Any], None]:
        def both(progress: Any) -> None:
            self.progress = progress
            show(progress)

        return both


RUN_WITHOUT_LOGPROBS = ("log-probabilities: none from this provider; the steps are stored "
                        "without them")


def _print_batch_notes(out: Path, progress: Any) -> None:
    """What a batch did besides its work: a repaired OUT, questions listed twice, calls whose
    cost is unknown."""
    from bbm_tui.core.accounting import unknown_cost_note

    if progress.mended:
        print(f"bbm-tui: {out}: {progress.mended}", file=sys.stderr)
    for note in progress.notes:
        print(f"bbm-tui: {note}", file=sys.stderr)
    if progress.unpriced_calls:
        print(f"bbm-tui: {unknown_cost_note(progress.unpriced_models, progress.unpriced_calls)}",
              file=sys.stderr)
    if progress.duplicates:
        print(f"bbm-tui: {progress.duplicates} duplicate(s) in the input were done once",
              file=sys.stderr)


def _print_impossible_logprobs(count: int, noun: str) -> None:
    if count:
        print(f"bbm-tui: {_count(count, noun)} came with log-probabilities no model could give "
              "(positive, NaN, infinite or out of range); "
              f"{'it was' if count == 1 else 'they were'} kept without log-probabilities "
              "(null in OUT)" + (", and never chosen by them" if noun == "sample" else ""),
              file=sys.stderr)


class ProgressDisplay:
    """A rich progress bar on stderr (a terminal only), fed by a batch's progress object:
    `detail(progress)` says what the bar shows beside the count."""

    def __init__(self, enabled: bool, detail: Callable[[Any], str]) -> None:
        self.enabled = enabled and sys.stderr.isatty()
        self.detail = detail
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> Callable[[Any], None]:
        if self.enabled:
            from rich.console import Console
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("traces"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[detail]}"), TimeElapsedColumn(),
                TimeRemainingColumn(), console=Console(stderr=True),
            )
            self._progress.__enter__()
            self._task = self._progress.add_task("traces", total=None, detail="")
        return self.update

    def update(self, progress: Any) -> None:
        if self._progress is None:
            return
        detail = self.detail(progress)
        if progress.failed:
            detail += f" · {progress.failed} failed"
        self._progress.update(
            self._task, total=progress.total,
            completed=progress.done + progress.skipped + progress.failed, detail=detail,
        )

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.__exit__(*exc)


def _run_detail(progress: Any) -> str:
    return f"{_count(progress.steps, 'step')} · {_running_cost(progress)}"


def _find_detail(progress: Any) -> str:
    return f"{_count(progress.calls, 'call')} · {_running_cost(progress)}"


def _running_cost(progress: Any) -> str:
    """The cost so far: "≥$…" once a call's price is unknown (a lower bound), "cost —" when
    none is known."""
    from bbm_tui.core.accounting import UNKNOWN, format_total_cost

    cost = format_total_cost(progress.cost, progress.calls, progress.unpriced_calls)
    return f"cost {cost}" if cost == UNKNOWN else cost


# ---------------------------------------------------------------------------- stats

def stats_command(args: argparse.Namespace) -> int:
    import json

    from bbm_tui.cli_plots import print_charts
    from bbm_tui.core.batch.summary import summarize
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.tasks import UnknownTaskError

    try:
        _check_task(args.task)
        result = summarize(args.files, args.task, args.dataset_format).stats
    except (DatasetError, UnknownTaskError) as error:
        return fail(str(error), EXIT_USAGE)
    if args.json:
        print(json.dumps(result, indent=2, allow_nan=False))
        return EXIT_OK
    _print_stats_table(result)
    print_charts(args, lambda charts: charts.stats_charts(result))
    return EXIT_OK


_STATS_COLUMNS = (("traces", "traces"), ("correct", "correct"),
                  ("with_mistake", "with mistake"), ("without_mistake", "without"),
                  ("unlabelled", "unlabelled"), ("mean_steps", "mean steps"))


def _print_stats_table(result: dict) -> None:
    from bbm_tui.cli_tables import Column, TextTable, print_table
    from bbm_tui.core.tasks import task_order

    show_unlabelled = result["overall"]["unlabelled"] > 0
    columns = [(key, header) for key, header in _STATS_COLUMNS
               if key != "unlabelled" or show_unlabelled]
    table = TextTable("Traces per task (the paper's Table 2)",
                      [Column("task"), *(Column(header, number=True) for _key, header in columns)])
    in_order = sorted(result["tasks"].items(), key=lambda item: task_order(item[0]))
    rows = [*in_order, ("overall", result["overall"])]
    for name, figures in rows:
        table.add_row(name, *(_stats_cell(figures, key) for key, _ in columns),
                      section=name == "overall" and len(rows) > 1)
    print_table(table)
    by_file = TextTable("Traces per file", [
        Column("file"), Column("format"),
        *(Column(header, number=True) for _key, header in columns)])
    for name, figures in result["files"].items():
        by_file.add_row(name, figures["format"], *(_stats_cell(figures, key)
                                                   for key, _ in columns))
    print_table(by_file)
    _print_histograms(result, in_order)


def _stats_cell(figures: dict, key: str) -> str:
    return f"{figures[key]:.2f}" if key == "mean_steps" else str(figures[key])


def _print_histograms(result: dict, tasks: list) -> None:
    """Where the first mistakes are, per task: how many traces at each thought, and in each
    fifth of the trace; and how long the traces are. The same numbers `--plot` draws."""
    from bbm_tui.core import charts

    for title, chart, label in (
        ("First mistake at thought N (traces labelled with a mistake)", charts.thought_chart,
         _thought_label),
        ("First mistake by place in the trace (Thought k of n at k/n; traces labelled with a "
         "mistake)", charts.position_chart, lambda category: f"at {category}:"),
        ("Trace lengths (steps; traces)", charts.lengths_chart,
         lambda category: f"{category} steps:"),
    ):
        _print_histogram(title, [(name, chart(result, name)) for name, _ in tasks],
                         chart(result, None), label)


def _thought_label(category: str) -> str:
    """What names a count in plain rows, where the column's header ("2", "11+") is too
    short to."""
    return f"Thought {category[:-1]} on:" if category.endswith("+") else f"Thought {category}:"


def _print_histogram(title: str, rows: list, overall: Any,
                     label: Callable[[str], str]) -> None:
    """A histogram's counts per task (each a one-series BarChart), then overall."""
    from bbm_tui.cli_tables import Column, TextTable, print_table

    table = TextTable(title, [Column("task"), *(
        Column(category, number=True, label=label(category))
        for category in overall.categories)])
    for name, chart in [*rows, ("overall", overall)]:
        table.add_row(name, *(str(int(count or 0)) for count in chart.series[0].values),
                      section=name == "overall" and len(rows) > 0)
    print_table(table)


# ---------------------------------------------------------------------------- find

def _add_find_parser(commands, *, with_methods: bool = True) -> None:
    methods: tuple[str, ...] | None = None
    if with_methods:
        from bbm_tui.core.judging.judges import JUDGE_NAMES

        methods = JUDGE_NAMES
    find = commands.add_parser(
        "find", help="run a mistake-finding method over dataset-format files, with the "
        "paper's metrics",
        description="Ask a model where the first mistake of each trace is, with one of the "
        "paper's methods, and score it against the gold labels. Traces already in PREDS are "
        "skipped (resume).",
    )
    _add_model_options(find)
    _add_pace_option(find)
    find.add_argument("--method", required=True, choices=methods,
                      help="the paper's direct-trace, direct-step, cot-step, cot-trace (word "
                      "sorting only); for a task without few-shot finding prompts "
                      "direct-trace-zero-shot and direct-step-zero-shot; critic (every task: "
                      "the earliest wrong thought in \\boxed{}); or verify (the paper's "
                      "tasks: the task verifiers, no model, no key)")
    find.add_argument("--input", type=Path, nargs="+", required=True, metavar="FILE.jsonl",
                      help="dataset-format files (their gold mistake_index is the truth)")
    find.add_argument("--task", help="the task of every file (else from each file's name)")
    _add_task_file_option(find)
    find.add_argument("--concurrency", type=int, default=4, metavar="K",
                      help="traces judged at once (default 4)")
    find.add_argument("--rpm", type=float, metavar="R", help="at most R model calls a minute")
    find.add_argument("--limit", type=int, metavar="N", help="at most N traces per task")
    find.add_argument("--all-steps", action="store_true",
                      help="step-level methods: judge every thought, not just up to the first No")
    _add_scale_options(find, one_call=False)
    find.add_argument("--out", type=Path, required=True, metavar="PREDS.jsonl")
    find.add_argument("--json", action="store_true", help="print the scores as one JSON object")
    find.add_argument("--paper", metavar="MODEL",
                      help="print the paper's figures for MODEL beside ours (e.g. gpt-4)")
    find.add_argument("--no-progress", action="store_true", help="no progress bar")


def find_command(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from bbm_tui.cli_plots import print_charts
    from bbm_tui.core.batch.find import FatalFindError, find_batch, jobs_from_files, paper_figures
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.judging.judges import get_judge
    from bbm_tui.core.store import default_path
    from bbm_tui.core.tasks import UnknownTaskError

    problem = (_find_usage_problem(args) or _use_pace(args)
               or _json_beside_rows(args.json, args.out, "--out"))
    if problem:
        return fail(problem, EXIT_USAGE)
    config = _load_config_or_none(args)
    if config is None:
        return EXIT_USAGE
    try:
        _check_task(args.task)
        paper = paper_figures(args.paper, args.method) if args.paper else None
        jobs = jobs_from_files(args.input, args.task, args.method, args.limit,
                               args.dataset_format)
        spec = get_judge(args.method).spec(config.model_spec())
        shard = _shard(args)
    except (DatasetError, UnknownTaskError, ValueError) as error:
        return fail(str(error), EXIT_USAGE)
    latest = LatestProgress()
    try:
        with ProgressDisplay(not args.no_progress, _find_detail) as show:
            outcome = asyncio.run(until_signalled(find_batch(
                jobs, args.method, spec, args.out, concurrency=args.concurrency, rpm=args.rpm,
                settings=config.finder_settings(), judge_all=args.all_steps,
                on_progress=latest.keep(show), store_path=default_path(), inputs=args.input,
                shard=shard,
            )))
    except (Stopped, KeyboardInterrupt) as stop:
        if latest.progress is not None:
            _print_find_summary(args.out, latest.progress, stopped=True)
        return _stop_code(stop)
    except FatalFindError as error:
        return fail(f"find stopped: {error}")
    except DatasetError as error:
        return fail(str(error), EXIT_USAGE)
    except OSError as error:  # PREDS is a folder, or in one that does not exist, or not ours
        return fail(_os_problem(error, args.out), EXIT_USAGE)
    progress = outcome.progress
    _print_find_summary(args.out, progress)
    if outcome.unlabelled:
        print(f"{_traces(outcome.unlabelled)} left out of the scores: unlabelled (no "
              "mistake_index key), so there is nothing to score them against; their "
              f"predictions are in {_where(args.out)}", file=sys.stderr)
    if args.json:
        scores = outcome.report.to_json()
        scores["unlabelled_left_out"] = outcome.unlabelled
        scores["usage"] = progress.usage_json()
        if paper is not None:
            # Beside ours, in the same shape: {task or "overall": {metric: percent}}; a task
            # or metric the paper does not report is absent.
            scores["paper"] = {"model": args.paper,
                               "tasks": {k: v for k, v in paper.items() if k != "overall"},
                               "overall": paper.get("overall", {})}
        print(json.dumps(scores, indent=2, allow_nan=False))
    else:
        to_stderr = _to_stdout(args.out)
        _print_find_table(outcome.report, args, paper, to_stderr=to_stderr)
        print_charts(args, lambda charts: [charts.finder_chart(
            outcome.report, paper, args.paper or "", _finder_name(args))], to_stderr=to_stderr)
    return EXIT_FAILURE if progress.failed else EXIT_OK


def _print_find_summary(out: Path, progress: Any, stopped: bool = False) -> None:
    _print_batch_notes(out, progress)
    how = "stopped: " if stopped else ""
    print(
        f"{how}{_traces(progress.done)} judged into {_where(out)}, {progress.skipped} already "
        f"there, {progress.failed} failed; {_spend(progress)}",
        file=sys.stderr,
    )
    for message in progress.errors[:10]:
        fail(message)


def _count(count: int, noun: str) -> str:
    """"1 trace", "2 traces": a count that reads right for one and for many."""
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _traces(count: int) -> str:
    return _count(count, "trace")


def _processes_problem(args: argparse.Namespace) -> str | None:
    if args.processes < 1:
        return "--processes must be at least 1"
    if args.processes > args.concurrency:
        return (f"--processes {args.processes} needs --concurrency {args.processes} or more "
                "(each process works at least one trace at a time)")
    return None


def _find_usage_problem(args: argparse.Namespace) -> str | None:
    if args.concurrency < 1:
        return "--concurrency must be at least 1"
    if args.limit is not None and args.limit < 0:
        return "--limit must be 0 or more"
    if getattr(args, "rpm", None) is not None and args.rpm <= 0:
        return "--rpm must be more than 0"
    return None


_FIND_COLUMNS = (
    ("accuracy", "accuracy"),
    ("accuracy_with_mistake", "with mistake"),
    ("accuracy_without_mistake", "without"),
    ("processbench_f1", "PB F1"),
    ("answer_weighted_f1", "answer F1"),
)


def _finder_name(args: argparse.Namespace) -> str:
    from bbm_tui.core.judging.judges import get_judge

    return get_judge(args.method).who or args.model or "the configured model"


def _print_find_table(report, args: argparse.Namespace, paper: dict | None, *,
                      to_stderr: bool = False) -> None:
    from bbm_tui.cli_tables import Column, TextTable, print_table
    from bbm_tui.core.judging.judges import get_judge
    from bbm_tui.core.tasks import task_order

    who = get_judge(args.method).who or args.model or "the configured model"
    columns = [Column("task"), Column("n", number=True)]
    for metric, header in _FIND_COLUMNS:
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
        for metric, _ in _FIND_COLUMNS:
            cells.append(_percent(getattr(scores, metric)))
            if paper is not None and metric != "processbench_f1":
                cells.append(_percent(paper.get(name, {}).get(metric)))
        cells.append(str(scores.unparseable))
        # With no task judged (every trace failed, or --limit 0) "overall" is the only row.
        table.add_row(*cells, section=len(rows) > 1 and name == "overall")
    print_table(table, to_stderr=to_stderr)


# ---------------------------------------------------------------------------- verify

def _add_verify_parser(commands) -> None:
    verify = commands.add_parser(
        "verify", help="check labelled traces with the task verifiers: where they and the "
        "gold label disagree",
        description="Run the task verifiers (no model) over dataset-format files and list "
        "every trace where the verifier's first mistake and the label's differ, by task, "
        "with the row (0-based), the step and the verifier's reason, so a person can see "
        "whether the label or the checker is wrong. Unlabelled rows are left out.",
    )
    verify.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    verify.add_argument("--report", action="store_true",
                        help="list the disagreements (the default and only report)")
    verify.add_argument("--task", help="the task of every file (else from each row or name)")
    _add_task_file_option(verify)
    verify.add_argument("--json", action="store_true",
                        help='one JSON object: {"tasks": {TASK: {"traces", "agree", '
                        '"disagreements": [{"file", "row", "gold", "verifier", "step", '
                        '"reason"}]}}}')


def verify_command(args: argparse.Namespace) -> int:
    import json

    from bbm_tui.core.dataset import DatasetError, read_input_rows, rows_with_tasks
    from bbm_tui.core.tasks import TASK_NAMES, UnknownTaskError
    from bbm_tui.core.tasks.verify import disagreements

    found: dict[str, dict] = {}
    try:
        _check_task(args.task)
        for path in args.files:
            by_task: dict[str, list] = {}
            rows = read_input_rows(path, args.dataset_format)
            for task, row in rows_with_tasks(path, args.task, rows):
                by_task.setdefault(task, []).append(row)
            for task, rows in by_task.items():
                labelled = [row for row in rows if row.labelled]
                numbers = [index for index, row in enumerate(rows) if row.labelled]
                entry = found.setdefault(task, {"traces": 0, "agree": 0, "disagreements": []})
                missed = disagreements(task, labelled)
                entry["traces"] += len(labelled)
                entry["agree"] += len(labelled) - len(missed)
                entry["disagreements"] += [
                    {"file": str(path), "row": numbers[d.row], "gold": d.gold,
                     "verifier": d.verifier, "step": d.step, "reason": d.reason}
                    for d in missed
                ]
    except (DatasetError, UnknownTaskError) as error:
        return fail(str(error), EXIT_USAGE)
    ordered = {task: found[task] for task in TASK_NAMES if task in found}
    if args.json:
        print(json.dumps({"tasks": ordered}, indent=2, allow_nan=False))
        return EXIT_OK
    _print_verify_report(ordered)
    return EXIT_OK


def _print_verify_report(found: dict[str, dict]) -> None:
    from bbm_tui.cli_tables import Column, TextTable, print_table
    from bbm_tui.core.textsafe import one_line

    for task, entry in found.items():
        share = 100.0 * entry["agree"] / entry["traces"] if entry["traces"] else 0.0
        # The reason is the report's point: whole (it wraps); a long step is cut.
        table = TextTable(
            f"{task}: the verifier agrees with the label on {entry['agree']} of "
            f"{_traces(entry['traces'])} ({share:.1f}%)",
            [Column("file"), Column("row", number=True), Column("label"),
             Column("verifier"), Column("step", cut=80), Column("reason")])
        for item in entry["disagreements"]:
            table.add_row(one_line(Path(item["file"]).name), str(item["row"]),
                          _thought_or_none(item["gold"]), _thought_or_none(item["verifier"]),
                          one_line(item["step"]), one_line(item["reason"]))
        print_table(table)


def _thought_or_none(index: int | None) -> str:
    return "no mistake" if index is None else f"Thought {index + 1}"


# ---------------------------------------------------------------------------- backtrack

def _add_backtrack_parser(commands) -> None:
    backtrack = commands.add_parser(
        "backtrack", help="backtrack traces from a mistake location (the paper's Table 6)",
        description="Resample each trace's Thought k at temperature 1 (8 samples), take the "
        "best sample that differs from the original and continue at temperature 0 (paper "
        "section 4). k is the gold label's, a seeded random step, a finder's prediction "
        "(PREDS of `bbm-tui find`) or a simulated reward model's (rm:X, right with "
        "probability X). Traces already in OUT are skipped (resume).",
    )
    _add_model_options(backtrack)
    _add_pace_option(backtrack)
    backtrack.add_argument("--input", type=Path, nargs="+", required=True, metavar="FILE.jsonl",
                           help="dataset-format files")
    backtrack.add_argument("--task", help="the task of every file (else from each row or "
                           "file name)")
    _add_task_file_option(backtrack)
    backtrack.add_argument("--locations", required=True, metavar="WHERE",
                           help="gold | random | finder:PREDS.jsonl | rm:X")
    backtrack.add_argument("--seed", type=int, default=0, help="for random and rm:X")
    backtrack.add_argument("--concurrency", type=int, default=4, metavar="K",
                           help="traces backtracked at once (default 4)")
    backtrack.add_argument("--processes", type=int, default=1, metavar="P",
                           help="share the K traces out to P processes (default 1): for a "
                           "fast local server, where one process's CPU is the limit; each "
                           "process imports litellm first (a few seconds)")
    backtrack.add_argument("--limit", type=int, metavar="N", help="at most N traces per task")
    _add_scale_options(backtrack, one_call=True)
    backtrack.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    backtrack.add_argument("--json", action="store_true",
                           help='print {"tasks": {TASK: {"n", "delta_accuracy_correct", '
                           '"delta_accuracy_incorrect"}}} (percentage points)')
    backtrack.add_argument("--no-progress", action="store_true", help="no progress bar")


def backtrack_command(args: argparse.Namespace) -> int:
    import asyncio
    import json

    from bbm_tui.cli_plots import print_charts
    from bbm_tui.core.batch.backtrack import (
        backtrack_batch,
        jobs_from_files,
        paper_table_6,
        parse_locations,
        to_json,
    )
    from bbm_tui.core.batch.runner import BatchStop
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.store import Store, StoreError
    from bbm_tui.core.tasks import UnknownTaskError

    problem = (_find_usage_problem(args) or _processes_problem(args) or _use_pace(args)
               or _json_beside_rows(args.json, args.out, "--out"))
    if problem:
        return fail(problem, EXIT_USAGE)
    config = _load_config_or_none(args)
    if config is None:
        return EXIT_USAGE
    try:
        _check_task(args.task)
        locations = parse_locations(args.locations, args.seed)
        jobs = jobs_from_files(args.input, args.task, locations, args.limit,
                               args.dataset_format)
        spec = config.model_spec()
        settings = config.stepper_settings(None)
        shard = _shard(args)
        store = Store.open()
    except (DatasetError, UnknownTaskError, StoreError, ValueError) as error:
        return fail(str(error), EXIT_USAGE)
    latest = LatestProgress()
    try:
        with ProgressDisplay(not args.no_progress, _run_detail) as show:
            result = asyncio.run(until_signalled(backtrack_batch(
                jobs, spec, store, args.out, concurrency=args.concurrency, settings=settings,
                on_progress=latest.keep(show), inputs=args.input, processes=args.processes,
                shard=shard,
            )))
    except (Stopped, KeyboardInterrupt) as stop:
        if latest.progress is not None:
            _print_backtrack_summary(args.out, latest.progress, stopped=True)
        return _stop_code(stop)
    except BatchStop as error:  # a missing key, an unknown model, a worker process that died
        return fail(f"backtrack stopped: {error}")
    except DatasetError as error:
        return fail(str(error), EXIT_USAGE)
    except OSError as error:
        return fail(_os_problem(error, args.out), EXIT_USAGE)
    finally:
        store.close()
    _print_backtrack_summary(args.out, result.progress)
    if args.json:
        print(json.dumps(to_json(result, locations), indent=2, allow_nan=False))
    else:
        to_stderr = _to_stdout(args.out)
        _print_backtrack_table(result, locations, to_stderr=to_stderr)
        print_charts(args, lambda charts: charts.backtrack_charts(
            result.tables, {locations.paper_key: paper_table_6(locations.paper_key)}
            if locations.paper_key else None), to_stderr=to_stderr)
    return EXIT_FAILURE if result.progress.failed else EXIT_OK


def _print_backtrack_summary(out: Path, progress: Any, stopped: bool = False) -> None:
    _print_batch_notes(out, progress)
    _print_impossible_logprobs(progress.impossible_logprobs, "sample")
    if progress.unlabelled:
        print(f"bbm-tui: {_traces(progress.unlabelled)} unlabelled: no gold location, kept as "
              "they are", file=sys.stderr)
    how = "stopped: " if stopped else ""
    print(f"{how}{_traces(progress.done)} written to {_where(out)}, {progress.skipped} "
          f"already there, {progress.failed} failed; {_count(progress.steps, 'step')}, "
          f"{_spend(progress)}", file=sys.stderr)
    for message in progress.errors[:10]:
        fail(message)


def _print_backtrack_table(result: Any, locations: Any, *, to_stderr: bool = False) -> None:
    from bbm_tui.cli_tables import Column, TextTable, print_table
    from bbm_tui.core.batch.backtrack import paper_table_6
    from bbm_tui.core.tasks import task_order

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
                 _signed(deltas.delta_accuracy_correct), str(deltas.n_incorrect),
                 _signed(deltas.delta_accuracy_incorrect)]
        if paper:
            figures = paper.get(task, {})
            cells += [_signed(figures.get("correct")), _signed(figures.get("incorrect"))]
        table.add_row(*cells)
    print_table(table, to_stderr=to_stderr)


def _signed(value: float | None) -> str:
    """"+2.50", "-1.25", and "+0.00" for no change, never "-0.00" (a figure below half a
    hundredth, or a negative zero, rounds to zero)."""
    if value is None:
        return "—"
    rounded = round(value, 2)
    return f"{rounded if rounded else 0.0:+.2f}"


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _paper_caption(args: argparse.Namespace, paper: dict | None) -> str | None:
    if paper is None:
        return None
    if not paper:
        return f"The paper reports no figures for {args.method} by {args.paper}."
    return f"paper: {args.paper}, Tables 4, 9 and 5 (its Dyck figures: a 592-trace sample)"


# ---------------------------------------------------------------------------- sessions

def _open_store():  # -> Store | None, after printing why not
    from bbm_tui.core.store import Store, StoreError

    try:
        return Store.open()
    except StoreError as error:
        fail(str(error))
        return None


def sessions_command(args: argparse.Namespace) -> int:
    import json

    from bbm_tui.core.accounting import format_total_cost
    from bbm_tui.core.textsafe import one_line

    store = _open_store()
    if store is None:
        return EXIT_FAILURE
    with store:
        summaries = store.sessions()
    for summary in summaries:
        session = summary.session
        if summary.label is None:
            label = "unlabelled"
        elif summary.mistake_number is not None:
            label = f"mistake at {summary.mistake_number}"
        elif summary.label.no_mistake:
            label = "no mistake"
        else:
            label = "other branch"  # the flagged mistake is on a branch not on show
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
            }, allow_nan=False))
        else:
            print(f"{session.id:>5}  {one_line(session.name, 40):<40}  {session.task:<26}"
                  f"{summary.steps:>4} {'step ' if summary.steps == 1 else 'steps'}  "
                  f"{label:<16} {cost:>9}  {one_line(session.model, 30)}")
    return EXIT_OK


def export_command(args: argparse.Namespace) -> int:
    from bbm_tui.core.annotation.export import check_not_a_database, export_from_store
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.dataset.outfile import check_not_replacing, check_output_path
    from bbm_tui.core.store import StoreError, default_path

    try:
        check_output_path(args.out, store_path=default_path())
        check_not_a_database(args.out)
        if not args.force:
            check_not_replacing(args.out)
    except DatasetError as error:
        return fail(str(error), EXIT_USAGE)
    store = _open_store()
    if store is None:
        return EXIT_FAILURE
    try:
        with store:
            result = export_from_store(store, args.format, args.out, args.session)
    except StoreError as error:
        return fail(str(error))
    except OSError as error:
        return fail(f"{args.out}: cannot write: {error.strerror}")
    notes = []
    if result.unlabelled:
        notes.append(f"{result.unlabelled} of them unlabelled (no mistake_index key)"
                     if args.format == "jsonl" else f"{result.unlabelled} of them unlabelled")
    if result.skipped:
        notes.append(f"{_traces(result.skipped)} left out: unlabelled, and {args.format} "
                     "needs a label")
    note = f" ({'; '.join(notes)})" if notes else ""
    what = {"dpo": "preference pair", "csv-steps": "label"}.get(args.format)
    written = _count(result.written, what) if what else _traces(result.written)
    print(f"{written} written to {_where(args.out)}{note}", file=sys.stderr)
    return EXIT_OK


def agreement_command(args: argparse.Namespace) -> int:
    import json

    from bbm_tui.cli_plots import print_charts
    from bbm_tui.core.annotation import report
    from bbm_tui.core.dataset import DatasetError
    from bbm_tui.core.store import StoreError

    problem = _json_beside_rows(args.json, args.consensus, "--consensus")
    if problem:
        return fail(problem, EXIT_USAGE)
    try:
        if args.consensus is not None:
            _check_replaced_output(args.consensus, args.force, inputs=args.files)
        if args.files:
            data = report.from_files(args.files, args.gold, args.dataset_format)
        else:
            store = _open_store()
            if store is None:
                return EXIT_FAILURE
            with store:
                data = report.from_store(store, app_labels=args.app_labels)
    except DatasetError as error:
        return fail(str(error), EXIT_USAGE)
    except StoreError as error:
        return fail(str(error))
    for note in data.notes:
        print(f"bbm-tui: {note}", file=sys.stderr)
    if data.app_left_out.total:
        # The consensus is the annotators'; a session's own label is in every export.
        export = ("; `export` writes each session with its own label"
                  if args.consensus is not None else "")
        print(f"bbm-tui: {_app_labels_left_out(data.app_left_out)} are left out (no annotator "
              "labelled those sessions); --app-labels counts them as the annotator \"app\""
              f"{export}", file=sys.stderr)
    result = report.report_json(data)
    if args.json:
        print(json.dumps(result, allow_nan=False))
    else:
        # With the consensus rows on standard output, the report goes beside them.
        to_stderr = _to_stdout(args.consensus)
        _print_agreement(result, len(data.labels), sys.stderr if to_stderr else sys.stdout)
        print_charts(args, lambda charts: [charts.kappa_matrix(result),
                                            *filter(None, [charts.alpha_chart(result)])],
                     to_stderr=to_stderr)
    if args.consensus is not None:
        try:
            labelled, unlabelled = report.write_consensus(data, args.consensus)
        except OSError as error:
            return fail(f"{args.consensus}: cannot write: {error.strerror}")
        note = f", {unlabelled} without a majority (unlabelled)" if unlabelled else ""
        print(f"{_traces(labelled)} with the consensus label written to "
              f"{_where(args.consensus)}{note}", file=sys.stderr)
    return EXIT_OK


def _app_labels_left_out(left_out: AppLabelsLeftOut) -> str:
    """Where the session labels agreement left out came from, said as the user gave them."""
    parts = []
    if left_out.imported:
        parts.append(f"{_traces(left_out.imported)} brought in by `import`")
    if left_out.main_screen:
        parts.append(f"{_traces(left_out.main_screen)} labelled on the app's main screen")
    return "the labels of " + " and ".join(parts)


def _check_replaced_output(path: Path, force: bool, inputs: Sequence[Path] = ()) -> None:
    """What every file written whole is checked for: not the store, an input, a database, a
    special file; not an existing file unless --force."""
    from bbm_tui.core.annotation.export import check_not_a_database
    from bbm_tui.core.dataset.outfile import check_not_replacing, check_output_path
    from bbm_tui.core.store import default_path

    check_output_path(path, store_path=default_path(), inputs=inputs)
    check_not_a_database(path)
    if not force:
        check_not_replacing(path)


def _print_agreement(result: dict, annotators: int, stream: TextIO) -> None:
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
                      f"{percent(result['raw_agreement'])} over {_traces(result['n'])}")
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
                     f"({_count(rated['n_steps'], 'step')} of {_traces(rated['n_traces'])} "
                     "rated by two annotators or more)")
    print("\n".join(lines), file=stream)


def import_command(args: argparse.Namespace) -> int:
    from bbm_tui.core.annotation.export import import_rows
    from bbm_tui.core.dataset import DatasetError, read_input_rows, rows_with_tasks
    from bbm_tui.core.tasks import UnknownTaskError

    try:
        _check_task(args.task)
        batches = []
        for path in args.files:
            by_task: dict[str, list] = {}
            rows = read_input_rows(path, args.dataset_format)
            for task, row in rows_with_tasks(path, args.task, rows):
                by_task.setdefault(task, []).append(row)
            batches.extend(by_task.items())
    except (DatasetError, UnknownTaskError) as error:
        return fail(str(error), EXIT_USAGE)
    store = _open_store()
    if store is None:
        return EXIT_FAILURE
    imported = already = unlabelled = 0
    with store:
        for task, rows in batches:
            result = import_rows(store, task, rows, labelled=not args.unlabelled)
            imported += len(result.imported)
            already += len(result.already)
            unlabelled += result.unlabelled
    notes = []
    if unlabelled:
        notes.append(f"{unlabelled} of them unlabelled")
    if already:
        notes.append(f"{_traces(already)} already saved (by `run` or an earlier import) "
                     "left as they were")
    note = f" ({'; '.join(notes)})" if notes else ""
    print(f"{imported} session{'' if imported == 1 else 's'} imported{note}", file=sys.stderr)
    return EXIT_OK
