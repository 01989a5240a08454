"""The command line: the TUI by default, and the headless batch commands.

Only the standard library is imported here at module level, so that `bbm-tui` paints its
first frame fast and `bbm-tui stats` never pays for litellm or Textual.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from bbm_tui import __version__

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bbm-tui",
        description="Step through chain-of-thought traces the way BIG-Bench Mistake made them. "
        "With no command, opens the app.",
    )
    parser.add_argument("--version", action="version", version=f"bbm-tui {__version__}")
    _add_model_options(parser)
    parser.add_argument("--task", help="start a new session on this task")
    parser.add_argument(
        "--question", type=int, metavar="N",
        help="with --task: start on question N (0-based) of the bundled dataset",
    )
    parser.add_argument("--session", type=int, metavar="ID", help="resume session ID")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser(
        "run", help="generate traces headless into a JSONL file in the dataset's format",
        description="Generate traces headless. Rows already in OUT are skipped (resume).",
    )
    _add_model_options(run)
    run.add_argument("--task", help="the task (else taken from each input file's name)")
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument("--input", type=Path, nargs="+", metavar="FILE.jsonl",
                        help="dataset-format files whose questions to run")
    source.add_argument("--dataset", action="store_true",
                        help="run the bundled dataset's questions (of --task, or of all tasks)")
    run.add_argument("--limit", type=int, metavar="N", help="at most N questions per task")
    run.add_argument("--concurrency", type=int, default=4, metavar="K",
                     help="traces generated at once (default 4)")
    run.add_argument("--step-limit", type=int, metavar="N", help="at most N steps per trace")
    run.add_argument("--out", type=Path, required=True, metavar="OUT.jsonl")
    run.add_argument("--no-progress", action="store_true", help="no progress bar")

    stats = commands.add_parser(
        "stats", help="per-task counts of dataset-format files (the paper's Table 2)",
    )
    stats.add_argument("files", type=Path, nargs="+", metavar="FILE.jsonl")
    stats.add_argument("--task", help="the task of every file (else from each file's name)")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def _add_model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", help="litellm model string (default: the config's, "
                        "else replay/bbm, the offline replay of the bundled dataset)")
    parser.add_argument("--api-base", help="base URL of an OpenAI-compatible server or proxy")
    parser.add_argument("--mode", choices=("chat", "completion"),
                        help="chat (prompt as one user message) or text completion")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command is None:
            return _open_app(args)
        if args.command == "run":
            from bbm_tui.commands.run import run_command

            return run_command(args)
        if args.command == "stats":
            from bbm_tui.commands.stats import stats_command

            return stats_command(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE


def _open_app(args: argparse.Namespace) -> int:
    from bbm_tui.core.config import ConfigError, load_config

    try:
        config = load_config().with_overrides(
            model=args.model, api_base=args.api_base, mode=args.mode
        )
    except ConfigError as error:
        print(f"bbm-tui: {error}", file=sys.stderr)
        return EXIT_USAGE
    from bbm_tui.ui.app import run_app

    return run_app(config, task=args.task, question=args.question, session_id=args.session)
