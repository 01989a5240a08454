"""Opening the app (no command, `annotate`, `adjudicate`): the checks said here, on stderr, so
that they stay on screen after it; then the app, which alone imports Textual."""

from __future__ import annotations

import argparse
import codecs
import gc
import sys
from functools import partial
from typing import TYPE_CHECKING

from bbm_tui.cli.errors import UsageError
from bbm_tui.cli.inputs import as_list, config_of, model_specs
from bbm_tui.core.store import preflight

if TYPE_CHECKING:
    from bbm_tui.ui.app import AnnotateRequest

# The most models the app shows side by side (core/trace/side_by_side.py's MAX_MODELS).
MAX_SIDE_BY_SIDE = 4


def command(args: argparse.Namespace) -> int:
    """`bbm-tui` with no command: the app, on a new session (--task, --question), a saved one
    (--session) or the start screen."""
    return open_app(args)


def open_app(args: argparse.Namespace, annotate: AnnotateRequest | None = None) -> int:
    config = config_of(args)
    # Several --model: the models side by side on --task's --question.
    models = model_specs(args, config) if len(as_list(getattr(args, "model", None))) > 1 \
        else []
    if len(models) > MAX_SIDE_BY_SIDE:
        raise UsageError(f"--model: at most {MAX_SIDE_BY_SIDE} models side by side")
    if models and (args.task is None or args.question is None):
        raise UsageError("several --model open side by side on a question: give --task and "
                         "--question too (or add models in the app: ctrl+o on the "
                         "new-session screen, m on a trace)")
    # Said here, on stderr, it stays on screen after the app; the app's own dialog is for
    # what only opening the store finds.
    preflight()
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # Without a terminal the app would wait for keys that never come.
        raise UsageError("the app needs a terminal (stdin and stdout); for headless work use "
                         "`bbm-tui run`, `find`, `sessions`, `export` or `import`")
    _tolerate_bad_terminal_input()
    # The collector stays off until the first frame is on screen (run_app turns it back on):
    # importing Textual and building the first screen make objects that live as long as the
    # app, and walking them over and over cost a tenth of a second of the start here. So the
    # app is imported only now.
    gc.disable()
    from bbm_tui.ui.run import run_app

    # Typed next to --session, these win over that session's own settings (resumed_spec).
    given = frozenset(name for name in ("model", "api_base", "mode")
                      if getattr(args, name) is not None)
    problems = getattr(args, "task_problems", [])
    if annotate is not None:
        return run_app(config, annotate=annotate, task_problems=problems)
    return run_app(config, task=args.task, question=args.question, session_id=args.session,
                   model_given=given, task_problems=problems, models=models)


def _tolerate_bad_terminal_input() -> None:
    """Textual's input thread decodes what the terminal sends as strict UTF-8, so one byte
    that is not UTF-8 (a Latin-1 terminal, an 8-bit Meta key, pasted binary) raised
    UnicodeDecodeError, killed the input thread and ended the app with a traceback (Textual
    issue #6456, open). Decode with replacement instead: such a byte arrives as U+FFFD."""
    try:
        from textual.drivers import linux_driver  # after the checks above: see open_app
    except ImportError:  # Windows: its driver reads keys, not bytes
        return

    def lenient(encoding: str):
        return partial(codecs.getincrementaldecoder(encoding), errors="replace")

    # The name the driver imported from codecs, replaced in its module (Textual exports it not).
    linux_driver.getincrementaldecoder = lenient  # pyright: ignore[reportPrivateImportUsage]
