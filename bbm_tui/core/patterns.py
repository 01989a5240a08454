"""Regular expressions a user supplies (a task file's `answer_regex`, the pattern of its
`regex` comparison, a row's target read as one), matched with a time limit.

Python's `re` matches in C and can backtrack for ever on a pattern such as `^(a|a)*$`: no
Ctrl+C or SIGTERM reaches the interpreter meanwhile (issue 33: `run` spun 11.5 minutes at full
CPU and every later command that met the step hung the same way). The `regex` package, in its
`re`-compatible mode (VERSION0), takes a timeout per match; a match that runs out raises
PatternTimeout, which names the pattern and where it came from. The patterns bbm-tui writes
itself stay on `re`.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from bbm_tui.core.errors import UserError

# A sane pattern matches one thought in microseconds; one second is far beyond any of them and
# short enough that a stuck match ends a command promptly (the package checks the clock as it
# backtracks, so a match ends within about two seconds of starting).
MATCH_SECONDS = 1.0
# What a message quotes of a pattern (a pattern is user text; messages stay readable).
_QUOTED = 200


class PatternError(ValueError):
    """A pattern that does not compile; the message is the package's reason."""


class PatternTimeout(UserError, ValueError):
    """A match that ran out of time: the pattern, where it comes from (a file and its key)
    and how long the text was."""

    title = "A regular expression took too long"

    def __init__(self, pattern: str, where: str, text_length: int) -> None:
        self.pattern = pattern
        self.where = where
        shown = pattern if len(pattern) <= _QUOTED else pattern[:_QUOTED] + "..."
        super().__init__(
            f"{where}: the regular expression {shown!r} took more than {MATCH_SECONDS:g} s to "
            f"match a text of {text_length:,} characters and was stopped; nested repeats "
            "such as (a+)+ or (a|a)* backtrack without end: simplify the pattern")


# Bounded: a `regex` comparison compiles each row's target.
@lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The pattern compiled as Python's `re` would read it; PatternError when it is not one
    (with `re`'s reason: the syntax users know is Python's)."""
    # Imported here: the package takes ~10 ms to import, and the app's start (which reads the
    # tasks) matches no user pattern before its first frame (bench/first_frame.py).
    import regex

    try:
        re.compile(pattern)
        return regex.compile(pattern, regex.VERSION0)
    except (re.error, regex.error, ValueError, OverflowError, RecursionError) as error:
        raise PatternError(str(error)) from None


def check_pattern(pattern: str) -> None:
    """PatternError when `pattern` does not compile."""
    compiled(pattern)


def search(pattern: str, text: str, where: str) -> Any:
    """`pattern`'s first match in `text` (None: none); PatternTimeout past MATCH_SECONDS."""
    try:
        return compiled(pattern).search(text, timeout=MATCH_SECONDS)
    except TimeoutError:
        raise PatternTimeout(pattern, where, len(text)) from None


def fullmatch(pattern: str, text: str, where: str) -> Any:
    """Whether `pattern` matches all of `text` (its match, None: no); PatternTimeout past
    MATCH_SECONDS."""
    try:
        return compiled(pattern).fullmatch(text, timeout=MATCH_SECONDS)
    except TimeoutError:
        raise PatternTimeout(pattern, where, len(text)) from None
