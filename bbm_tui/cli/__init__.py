"""The command line: the TUI by default, and the headless batch commands.

This package's `__init__` holds the parser and the table of commands; each command is a
module of its own (`bbm_tui.cli.run`, ...) with a `command(args)` that does it, imported only
once the command is known. Only the standard library is imported here at module level (and
the leaves `errors` needs), so that `bbm-tui` paints its first frame fast, `bbm-tui --help`
prints at once and `bbm-tui stats` never pays for litellm or Textual.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import os
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from bbm_tui import __version__
from bbm_tui.cli.errors import (
    EXIT_OK,
    Stopped,
    UsageError,
    say_bug,
    say_interrupted,
    say_problem,
    wants_traceback,
)
from bbm_tui.cli.plots import add_plot_option, plot_refusal
from bbm_tui.core.errors import UserError

if TYPE_CHECKING:
    # What add_subparsers returns (argparse names its class only privately).
    Commands: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]

# The most models the app shows side by side (core/trace/side_by_side.py's MAX_MODELS, not
# imported: the command line's start imports no more than it needs).
MAX_SIDE_BY_SIDE = 4

# Each command's module under bbm_tui.cli (None: no command, the app); its `command(args)`
# does the command and returns the exit code.
COMMANDS: dict[str | None, str] = {
    None: "app",
    "run": "run",
    "stats": "stats",
    "find": "find",
    "backtrack": "backtrack",
    "anchors": "anchors",
    "verify": "verify",
    "sessions": "sessions",
    "export": "export",
    "annotate": "annotate",
    "adjudicate": "adjudicate",
    "agreement": "agreement",
    "import": "importer",
    "compare": "compare",
    "merge": "merge",
    "serve": "serve",
    "served-app": "served",
    "users": "users",
}


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    collecting = gc.isenabled()
    # The cycle collector is off while the command line, the config and the task table are
    # read, and for the app (no command) until its first frame is on screen (ui/run.py turns
    # it back on): its passes over what they make, which all lives as long as the process,
    # cost ~7 ms of the app's start (bench/first_frame.py). A command has it back before it
    # runs; whatever ends here (--help, a usage error) leaves it as it was found.
    gc.disable()
    try:
        return _command(argv, collecting)
    finally:
        if collecting:
            gc.enable()


def _command(argv: list[str], collecting: bool) -> int:
    args = build_parser(argv).parse_args(argv)
    if args.command is not None and collecting:
        gc.enable()
    try:
        # Imported once the command is known (--help and a typo end above, without them):
        # each brings the parts of the core it needs, and only the app brings Textual.
        from bbm_tui.cli.inputs import use_task_files

        use_task_files(args)
        refusal = plot_refusal(args)
        if refusal is not None:
            raise UsageError(refusal)
        command = importlib.import_module(f"bbm_tui.cli.{COMMANDS[args.command]}")
        return command.command(args)
    except UserError as error:  # a bad file, task, option, config or store: said, not raised
        return say_problem(error)
    except (Stopped, KeyboardInterrupt) as stop:
        return say_interrupted(stop)
    except BrokenPipeError:  # `bbm-tui sessions | head`: the reader has had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as error:  # a bug: say so in one line unless asked for the traceback
        if wants_traceback():
            raise
        return say_bug(error)


# ---------------------------------------------------------------------------- the parser

class _MainParser(argparse.ArgumentParser):
    """The epilog (tasks, where the files are) is built only when help is asked for: it
    imports the store and config modules, which opening the app need not wait for here."""

    def format_help(self) -> str:
        self.epilog = _epilog()
        return super().format_help()


def _epilog() -> str:
    from bbm_tui.core.config import CONFIG_KEYS, config_path, tasks_folder
    from bbm_tui.core.store import default_path
    from bbm_tui.core.tasks import TASK_NAMES
    from bbm_tui.core.tasks.files import load_task_folder

    # Help is printed before the command reads the tasks: it reads the folder itself.
    yours = ", ".join(task.name for task in load_task_folder(tasks_folder()).tasks) or "none yet"
    config_keys = textwrap.fill(
        f"{', '.join(CONFIG_KEYS)} and a [keymap]; never API keys (BBM_TUI_CONFIG moves it)",
        width=88, initial_indent=" " * 13, subsequent_indent=" " * 13)
    return f"""tasks: {", ".join(TASK_NAMES)}
your tasks: {yours} (task files: {tasks_folder()}/*.toml, or --task-file)

files:
  sessions   {default_path()}
             every session, step, label and finder run (SQLite; BBM_TUI_HOME moves it)
  config     {config_path()}
{config_keys}
  JSONL      the dataset's rows: input, steps, answer, target, mistake_index (0-based; null
             = no mistake; no key = unlabelled), optionally task; what run, find, backtrack,
             stats, import and export read and write. The field's step-level formats are read
             too (processbench, prm800k, mr-gsm8k, mr-ben, math-shepherd, prmbench, trl: told
             by the first row's keys, or --format) and written by export; a thinking
             model's reasoning written elsewhere is read by import and annotate (reasoning:
             question, reasoning or <think>…</think>, answer, target; deltabench: its CSV),
             cut into steps by --split

offline models: replay/bbm (the bundled dataset), solver/bbm (writes steps for four
tasks), solver/thinking (a thinking model for the five tasks: --mode thinking),
simulated/rm-X (a reward model right with probability X)

`bbm-tui COMMAND --help` for each command."""


def build_parser(argv: Sequence[str] = ()) -> argparse.ArgumentParser:
    """The whole command line. `argv` only says which command's heavier parts to build: the
    methods `find` takes are read from the judges, whose import the app's first frame need
    not wait for when `find` is not the command; with `argv` empty (the app, nothing else
    asked), the main options only."""
    parser = _MainParser(
        prog="bbm-tui",
        description="Step through chain-of-thought traces the way BIG-Bench Mistake made them. "
        "With no command, opens the app.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"bbm-tui {__version__}")
    _add_model_options(parser, several=f"with --task and --question, the models side by "
                       f"side, at most {MAX_SIDE_BY_SIDE}")
    _add_thinking_options(parser)
    _add_temperature_option(parser)
    parser.add_argument("--chat-template", metavar="FILE.jinja",
                        help="thinking mode: the model's own chat template (Jinja), for `b` "
                        "on a thinking trace on vLLM (/v1/completions) or Ollama (raw); "
                        "llama-server applies its own")
    _add_logprobs_option(parser)
    parser.add_argument("--task", help="start a new session on this task")
    _add_task_file_option(parser, on_command=False)
    parser.add_argument(
        "--question", type=int, metavar="N",
        help="with --task: start on question N (0-based) of the bundled dataset",
    )
    parser.add_argument("--session", type=int, metavar="ID", help="resume session ID")
    if not argv:
        # `bbm-tui` alone opens the app: nothing on the line can name a command, mistype one
        # or ask for help, so the commands are not added at all (even as names and help
        # lines, they took ~2 ms of the app's start: bench/first_frame.py).
        parser.set_defaults(command=None)
        return parser
    # The commands' own help leaves out the main help's epilog (the tasks, the files), which
    # their formatter would run together into one paragraph.
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     parser_class=argparse.ArgumentParser)
    if not any(name in argv for name in COMMANDS if name is not None):
        # No command named (the app opens): each command is its name and help line, what the
        # main help and a mistyped command show, without its options; building them all took
        # ~10 ms of the app's start (bench/first_frame.py).
        commands = cast("Commands", _CommandNames(commands))

    _add_run_parser(commands)
    _add_compare_parser(commands)
    _add_stats_parser(commands)
    _add_find_parser(commands, with_methods="find" in argv)
    _add_backtrack_parser(commands)
    _add_anchors_parser(commands)
    _add_verify_parser(commands)
    _add_sessions_parser(commands)
    _add_export_parser(commands, with_formats="export" in argv)
    _add_annotate_parser(commands)
    _add_adjudicate_parser(commands)
    _add_agreement_parser(commands)
    _add_import_parser(commands)
    _add_merge_parser(commands)
    _add_serve_parsers(commands)
    _add_format_option(commands, argv)
    add_plot_option(commands)
    return parser


class _CommandNames:
    """Stands in for the subparsers when no command is named: each command is added with its
    help line only, and what would be added to it goes nowhere (`_Unbuilt`)."""

    def __init__(self, commands: Commands) -> None:
        self._commands = commands
        self.choices = commands.choices

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        # `help` present (even None) lists the command in the main help; absent, it is hidden.
        shown = {"help": kwargs["help"]} if "help" in kwargs else {}
        self._commands.add_parser(name, **shown)
        return _Unbuilt()


class _Unbuilt:
    """A command's parser that is never used: every call on it (add_argument, a group, its
    own subparsers) does nothing and returns it."""

    def __getattr__(self, _name: str) -> Any:
        return self._ignore

    def _ignore(self, *_args: Any, **_kwargs: Any) -> _Unbuilt:
        return self


def _add_run_parser(commands: Commands) -> None:
    run = commands.add_parser(
        "run", help="generate traces headless into a JSONL file in the dataset's format",
        description="Generate traces headless. Rows already in OUT are skipped (resume); a "
        "trace cut short goes on in the session this run made for OUT with the same "
        "settings, never in another run's (unless --reuse-sessions).",
    )
    _add_model_options(run, several="every question runs on each, a row per model")
    _add_thinking_options(run)
    _add_temperature_option(run)
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
    _add_processes_option(run)
    run.add_argument("--step-limit", type=int, metavar="N", help="at most N steps per trace")
    _add_scale_options(run, one_call=True)
    run.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    run.add_argument("--reuse-sessions", action="store_true",
                     help="take a question's trace from any earlier run's session of it by "
                     "the same model (another OUT, other settings), said with how many and "
                     "when they were made; by default a run goes on only with its own")
    run.add_argument("--new-out", action="store_true",
                     help="start OUT over: a file already there (say, one written with "
                     "another version of the task file, which a resume refuses) is moved "
                     "aside to OUT.old (OUT.old.2, ...: never over a file), named on stderr")
    run.add_argument("--json", action="store_true",
                     help="print what was done (traces, steps, tokens, cost) as one JSON object")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_compare_parser(commands: Commands) -> None:
    compare = commands.add_parser(
        "compare", help="the models of `run --model A --model B` side by side: accuracy, "
        "steps, tokens and cost per task and model, and where their answers part",
        description="Per task and model: traces, accuracy (over rows with a target), mean "
        "steps, tokens and cost; then each question whose answers part, with every model's "
        "answer and the first thought at which their traces differ.")
    compare.add_argument("files", type=Path, nargs="+", metavar="OUT.jsonl",
                         help="what `bbm-tui run` wrote (one run's rows may be in several)")
    compare.add_argument("--task", help="the task of rows without one (else the file's name)")
    _add_task_file_option(compare)
    compare.add_argument("--json", action="store_true", help="print one JSON object")


def _add_stats_parser(commands: Commands) -> None:
    stats = commands.add_parser(
        "stats", help="per-task counts of dataset-format files (the paper's Table 2)",
    )
    stats.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    stats.add_argument("--task", help="the task of every file (else from each file's name)")
    _add_task_file_option(stats)
    stats.add_argument("--json", action="store_true", help="print one JSON object")


def _add_find_parser(commands: Commands, *, with_methods: bool = True) -> None:
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
    _add_processes_option(find)
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



def _add_backtrack_parser(commands: Commands) -> None:
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
    _add_processes_option(backtrack)
    backtrack.add_argument("--limit", type=int, metavar="N", help="at most N traces per task")
    _add_scale_options(backtrack, one_call=True)
    _add_resampling_options(backtrack)
    backtrack.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    backtrack.add_argument("--json", action="store_true",
                           help='print {"tasks": {TASK: {"n", "delta_accuracy_correct", '
                           '"delta_accuracy_incorrect"}}} (percentage points)')
    backtrack.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_anchors_parser(commands: Commands) -> None:
    anchors = commands.add_parser(
        "anchors", help="each step's importance in thinking traces (Thought Anchors' "
        "resampling), from rollouts that go on from prefixes of the reasoning",
        description="For each step i of each thinking trace (rows of `run --mode thinking` or "
        "`import`, with their raw reasoning), M rollouts that resample step i and go on to "
        "the answer, and M that keep it (those that resample step i+1): per step the answer "
        "distribution, accuracy kept and resampled (importance = kept - resampled) and the "
        "KL between the answers of resamples that differ in meaning and those that keep it. "
        "Needs a server that goes on from a raw prompt (llama-server; vLLM or Ollama with "
        "--chat-template). Rollouts already in OUT are skipped (resume); the per-step rows "
        "go to OUT's NAME.steps.jsonl.",
    )
    _add_model_options(anchors)
    anchors.add_argument("--input", type=Path, nargs="+", required=True, metavar="FILE.jsonl",
                         help="thinking traces (with `reasoning` and `split`)")
    anchors.add_argument("--task", help="the task of every file (else from each row or "
                         "file name)")
    _add_task_file_option(anchors)
    anchors.add_argument("--rollouts", type=int, required=True, metavar="M",
                         help="rollouts from each prefix")
    anchors.add_argument("--embedding-model", metavar="MODEL",
                         help="judge meaning by this embedding model (litellm; cosine < 0.8 "
                         "differs); else by word overlap, named as such in the output")
    anchors.add_argument("--embedding-api-base", metavar="URL",
                         help="the embedding model's server")
    anchors.add_argument("--concurrency", type=int, default=16, metavar="K",
                         help="rollouts at once (default 16)")
    anchors.add_argument("--limit", type=int, metavar="N", help="at most N traces per task")
    anchors.add_argument("--yes", action="store_true",
                         help="start without asking, however many calls")
    _add_pace_option(anchors)
    _add_scale_options(anchors, one_call=False)
    _add_resampling_options(anchors, samples=False)
    anchors.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl",
                         help="the rollouts, one a line")
    anchors.add_argument("--json", action="store_true",
                         help="print each trace's steps with their figures as JSON")
    anchors.add_argument("--no-progress", action="store_true", help="no progress bar")


def _add_verify_parser(commands: Commands) -> None:
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



def _add_sessions_parser(commands: Commands) -> None:
    sessions = commands.add_parser("sessions", help="list the saved sessions")
    sessions.add_argument("--json", action="store_true", help="one JSON object per line")


def _add_export_parser(commands: Commands, *, with_formats: bool = True) -> None:
    export = commands.add_parser(
        "export", help="export sessions: dataset JSONL, ProcessBench, PRM800K, Markdown, or a CSV "
        "of every annotator's labels",
    )
    export.add_argument("--session", type=int, nargs="+", metavar="ID",
                        help="the sessions to export (default: all)")
    # The formats are checked only when `export` is the command: their module brings the
    # dataset formats and the trace session, which the app's first frame need not wait for.
    export.add_argument("--format", choices=_export_formats() if with_formats else None,
                        default="jsonl",
                        metavar="FORMAT",
                        help="jsonl (the BBM dataset's rows; the default), processbench, "
                        "prm800k, mr-gsm8k, mr-ben, math-shepherd, prmbench, trl (stepwise "
                        "supervision), dpo (preference pairs from branches), markdown, csv "
                        "(every annotator's label), csv-steps (every step's rating)")
    export.add_argument("--out", type=Path, required=True, metavar="FILE")
    export.add_argument("--force", action="store_true",
                        help="replace FILE if it exists (never the session store)")
    _add_task_file_option(export)


def _add_annotate_parser(commands: Commands) -> None:
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
    _add_reasoning_split_option(annotate)
    _add_task_file_option(annotate)


def _add_adjudicate_parser(commands: Commands) -> None:
    adjudicate = commands.add_parser(
        "adjudicate", help="settle the traces the annotators disagree on (in the app)")
    _add_task_file_option(adjudicate)


def _add_agreement_parser(commands: Commands) -> None:
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


def _add_import_parser(commands: Commands) -> None:
    importer = commands.add_parser(
        "import", help="make sessions of dataset-format rows, to label them in the app",
    )
    importer.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    importer.add_argument("--task", help="the task of every file (else from each file's name)")
    _add_reasoning_split_option(importer)
    _add_task_file_option(importer)
    importer.add_argument("--unlabelled", action="store_true",
                          help="ignore every mistake_index: import every trace unlabelled "
                          "(rows with no mistake_index key are unlabelled anyway)")


def _add_merge_parser(commands: Commands) -> None:
    merge = commands.add_parser(
        "merge", help="join the OUT files of `--shard I/N` runs into what one machine writes",
        description="Rows in the input's order, each once. Nothing is written when two "
        "different rows claim one input row (a conflict, named), when the files are shares "
        "of different batches (another input, task definition or model), when one is still "
        "being written, or when no file holds a row of one of the shards.",
    )
    merge.add_argument("files", type=Path, nargs="+", metavar="OUT.jsonl")
    merge.add_argument("--out", type=Path, required=True, metavar="MERGED.jsonl",
                       help="a new file (written 0600), or - for standard output")
    merge.add_argument("--allow-missing", action="store_true",
                       help="write the partial file when no file holds a row of some shard "
                       "(said, and the exit is still 0)")


def _add_serve_parsers(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve", help="serve the annotation queue to a team's browsers, with a sign-in",
        description="Serve the annotation queue over FILEs to browsers (one app process per "
        "browser, through textual-serve), behind a sign-in (users from `bbm-tui users add`). "
        "An annotator labels their own queue into the store; a lead sees the agreement, "
        "every annotator's progress and the adjudication. For a team on a network, put it "
        "behind a TLS reverse proxy (docs/serve.md, Serving to a browser).")
    serve.add_argument("--annotate", type=Path, nargs="+", required=True, metavar="FILE.jsonl",
                       help="the dataset-format files to label")
    serve.add_argument("--host", default="127.0.0.1",
                       help="the address to listen on (default 127.0.0.1: this machine only)")
    serve.add_argument("--port", type=int, default=8000, help="default 8000")
    serve.add_argument("--users", type=Path, metavar="FILE",
                       help="the users file (default: users.json in the data folder)")
    serve.add_argument("--trusted-proxy", action="append", metavar="ADDRESS",
                       help="a reverse proxy's address whose X-Forwarded-Proto and "
                       "X-Forwarded-For are believed (again for more; default 127.0.0.1 "
                       "and ::1)")
    _add_queue_options(serve)
    served = commands.add_parser("served-app")  # no help: started by `serve`, not typed
    served.add_argument("files", type=Path, nargs="+")
    _add_queue_options(served)
    users = commands.add_parser("users", help="who may sign in to `bbm-tui serve`")
    actions = users.add_subparsers(dest="users_action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="add a user (or set their role and password): the "
                             "password is asked twice on a terminal, else read as one line of "
                             "standard input; only a salted hash (scrypt) is kept")
    add.add_argument("name", metavar="NAME")
    add.add_argument("--role", choices=("annotator", "lead"), required=True,
                     help="annotator: their own queue; lead: agreement, progress, "
                     "adjudication")
    add.add_argument("--users", type=Path, metavar="FILE",
                     help="the users file (default: users.json in the data folder); "
                     "written 0600")


def _add_queue_options(parser: argparse.ArgumentParser) -> None:
    """The annotation queue's own options (as `annotate` takes them)."""
    parser.add_argument("--task", help="the task of every file (else from each file's name)")
    parser.add_argument("--protocol", choices=("paper", "per-step"), default="paper",
                        help="paper (the default) or PRM800K's per-step")
    _add_reasoning_split_option(parser)
    _add_task_file_option(parser)


def _add_reasoning_split_option(parser: argparse.ArgumentParser) -> None:
    """--split: how a reasoning written elsewhere (the reasoning and deltabench formats) is
    cut into steps."""
    from bbm_tui.core.types import DEFAULT_SPLIT_RULE, SplitRule

    parser.add_argument(
        "--split", choices=[rule.value for rule in SplitRule], default=DEFAULT_SPLIT_RULE.value,
        help="how a thinking model's reasoning in the files (--format reasoning or "
        "deltabench) is cut into steps: paragraph (a step ends at each blank line; the "
        "default), sentence, or line")


# The commands that read dataset files: each takes BBM rows or any of the field's formats.
DATASET_READERS = ("stats", "find", "backtrack", "anchors", "verify", "annotate", "import",
                   "agreement", "serve", "served-app")


def _add_format_option(commands: Commands, argv: Sequence[str]) -> None:
    """`--format` on every command that reads dataset files (added here, once for all). The
    formats are imported only when such a command is named (its choices are checked only
    then): opening the app need not wait for them (bench/first_frame.py)."""
    if not any(name in argv for name in DATASET_READERS):
        for name in DATASET_READERS:
            commands.choices[name].add_argument("--format", dest="dataset_format")
        return
    from bbm_tui.core.dataset.formats import READ_FORMATS

    for name in DATASET_READERS:
        commands.choices[name].add_argument(
            "--format", dest="dataset_format", choices=(*READ_FORMATS, "jsonl"),
            metavar="FORMAT", help="the files' format: " + ", ".join(READ_FORMATS) + " "
            "(default: told by each file's first row; bbm, or jsonl, is the BBM dataset's)")


def _export_formats() -> tuple[str, ...]:
    from bbm_tui.core.annotation.export import FORMATS

    return FORMATS


def _add_model_options(parser: argparse.ArgumentParser, *, several: str = "") -> None:
    """--model, --api-base, --mode; with `several` (what another model does, for the help),
    each may be given again, once for each model (models side by side), or --api-base and
    --mode once for all of them."""
    action = "append" if several else "store"
    again = f" (again for another model: {several})" if several else ""
    each = "; once for all the models, or once for each in order" if several else ""
    parser.add_argument("--model", action=action,
                        help="litellm model string (default: the config's, else replay/bbm, "
                        f"the offline replay of the bundled dataset){again}")
    parser.add_argument("--api-base", action=action,
                        help=f"base URL of an OpenAI-compatible server or proxy{each}")
    parser.add_argument("--mode", choices=("chat", "completion", "thinking"), action=action,
                        help="chat (prompt as one user message), text completion, or "
                        "thinking (one call a trace: a thinking model's reasoning cut into "
                        f"steps){each}")
    parser.add_argument("--router", metavar="FILE.yaml",
                        help="a litellm Router model_list (the LiteLLM proxy's): --model then "
                        "names one of its model groups, spread over its deployments "
                        "(--router '': none, whatever the config's `router`)")


def _add_thinking_options(parser: argparse.ArgumentParser) -> None:
    """--split, --thinking-effort, --thinking-budget: thinking mode's (docs/DESIGN.md §16)."""
    parser.add_argument("--split", choices=("paragraph", "sentence", "line"),
                        help="thinking mode: how the reasoning is cut into steps: at each "
                        "blank line (paragraph, the default), after each sentence, or at "
                        "each line")
    parser.add_argument("--thinking-effort", choices=("low", "medium", "high"),
                        help="thinking mode: how long the model thinks, where the provider "
                        "takes an effort (OpenAI's, Gemini's, Ollama's gpt-oss)")
    parser.add_argument("--thinking-budget", type=int, metavar="TOKENS",
                        help="thinking mode: tokens the model may think, where the provider "
                        "takes a budget (Anthropic: at least 1024; Gemini)")


def _add_temperature_option(parser: argparse.ArgumentParser) -> None:
    """--temperature: generation's (its own dest: backtrack's and anchors' --temperature is
    their samples')."""
    parser.add_argument("--temperature", type=float, metavar="T", dest="generation_temperature",
                        help="generation's temperature, 0 to 2 (else the config's "
                        "`temperature`; unset: the paper's 0 step at a time, and the "
                        "provider's default on a thinking call)")


def _add_resampling_options(parser: argparse.ArgumentParser, *, samples: bool = True) -> None:
    """Resampling a thinking step from a prefix of its reasoning (issue 35): on a server that
    takes a raw prompt (llama-server, vLLM's /v1/completions, Ollama)."""
    if samples:
        parser.add_argument("--samples", type=int, default=8, metavar="N",
                            help="--mode thinking: samples of the step (default 8, the "
                            "paper's)")
    parser.add_argument("--temperature", type=float, default=1.0, metavar="T",
                        help="--mode thinking: the samples' temperature (default 1; Thought "
                        "Anchors' 0.6)")
    parser.add_argument("--top-p", type=float, metavar="P",
                        help="--mode thinking: the samples' top-p (the server's default "
                        "unless given; Thought Anchors' 0.95)")
    parser.add_argument("--chat-template", type=Path, metavar="FILE.jinja",
                        help="--mode thinking: the model's own chat template (Jinja), applied "
                        "here and sent to /v1/completions (vLLM) or Ollama's raw /api/generate; "
                        "without it, llama-server applies its own (/apply-template)")


def _add_processes_option(command: argparse.ArgumentParser) -> None:
    command.add_argument("--processes", type=int, default=1, metavar="P",
                         help="share the K traces out to P processes (default 1): for a fast "
                         "local server, where one process's CPU is the limit; each process "
                         "imports litellm first (a few seconds)")


def _add_scale_options(parser: argparse.ArgumentParser, *, one_call: bool) -> None:
    """--shard on the batch commands; --one-call where steps are generated."""
    parser.add_argument("--shard", metavar="I/N",
                        help="this machine is I of N sharing the input: it does its fixed "
                        "share (join the N OUT files with `bbm-tui merge`)")
    if one_call:
        parser.add_argument("--one-call", action=argparse.BooleanOptionalAction, default=None,
                            help="one streamed call for many steps, each line taken while it "
                            "begins with its Thought label (not the paper's one call a step); "
                            "--no-one-call: one call a step whatever the config's `one_call`")


def _add_pace_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--pace", type=float, default=0.0, metavar="TPS",
                        help="tokens a second the offline models (replay/bbm, solver/bbm) "
                        "stream at (default 0: at full speed; the app's pace is 30)")


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
