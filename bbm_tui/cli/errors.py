"""Where a problem becomes what a person reads: one line on stderr, `bbm-tui: ...`, and the
exit code. Every error a person can act on shares one base (`UserError`: the core's for a bad
file, task, config or store, and the commands' own below), so `main` says them all with one
arm; anything else is a bug, said in one line too unless BBM_TUI_DEBUG asks for the
traceback.

Only the standard library and the core's leaves are imported here: `main` needs this module
before it knows the command."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from bbm_tui.core.errors import UserError
from bbm_tui.core.textsafe import printable

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class CommandError(UserError):
    """A command stops: `message` is said on stderr, `code` is the exit code."""

    title = "The command stopped"

    def __init__(self, message: str, code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.code = code


class UsageError(CommandError):
    """What was given (an option, a file, a task, the config) cannot be used: exit code 2."""

    title = "Cannot use what was given"

    def __init__(self, message: str) -> None:
        super().__init__(message, EXIT_USAGE)


@contextmanager
def given() -> Iterator[None]:
    """Around the reading of what the person gave: the files, the task, the options' values,
    the config. Whatever is wrong with it is theirs to fix, so any problem found there is a
    usage error (exit code 2), whichever part of the core found it."""
    try:
        yield
    except CommandError:
        raise
    except UserError as error:
        raise UsageError(error.message) from error


class Stopped(Exception):
    """SIGTERM or SIGHUP while a batch ran: it stopped as on Ctrl+C (each trace finished so far
    is written; the one in progress resumes next time)."""

    def __init__(self, signal_number: int) -> None:
        super().__init__(f"stopped by signal {signal_number}")
        self.code = 128 + signal_number


def fail(message: str, code: int = EXIT_FAILURE) -> int:
    """One clear line on stderr; never a traceback, never a key. Untrusted parts are made
    printable."""
    from bbm_tui.core.redact import redact  # here: not on the way to the app's first frame

    print(f"bbm-tui: {printable(redact(message))}", file=sys.stderr)
    return code


def note(message: str) -> None:
    """A line of information on stderr (a chart left out, who served the calls): said as
    "note: …", not "bbm-tui: …", which is how a problem is said (issue 34, item 13)."""
    from bbm_tui.core.redact import redact

    print(f"note: {printable(redact(message))}", file=sys.stderr)


def say_problem(error: UserError) -> int:
    """The one place a problem a person can act on is said: its message, and the exit code
    (2 for what they gave, else 1)."""
    return fail(error.message, error.code if isinstance(error, CommandError) else EXIT_FAILURE)


def say_interrupted(stop: BaseException) -> int:
    """Ctrl+C (130), or SIGTERM / SIGHUP (128 + the signal's number)."""
    print("interrupted", file=sys.stderr)
    return stop.code if isinstance(stop, Stopped) else EXIT_INTERRUPTED


def wants_traceback() -> bool:
    """BBM_TUI_DEBUG is set: a bug is raised with its traceback, not said in one line."""
    return bool(os.environ.get("BBM_TUI_DEBUG"))


def say_bug(error: Exception) -> int:
    """A bug, in one line (no traceback: it may hold what should stay private)."""
    return fail(
        f"internal error: {type(error).__name__}: {error} "
        "(set BBM_TUI_DEBUG=1 for the traceback, and please report it)"
    )
