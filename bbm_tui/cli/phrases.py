"""How the commands say counts, files and figures in their messages and tables."""

from __future__ import annotations

from pathlib import Path

from bbm_tui.core.dataset import is_standard_output


def count(number: int, noun: str) -> str:
    """"1 trace", "2 traces": a count that reads right for one and for many."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def traces(number: int) -> str:
    return count(number, "trace")


def to_stdout(path: Path | None) -> bool:
    """The command writes its file to standard output (`-`): its report then goes to
    standard error, so that what it writes stays whole."""
    return path is not None and is_standard_output(path)


def where(path: Path) -> str:
    """A written file as a message names it."""
    return "standard output" if to_stdout(path) else str(path)


def os_problem(error: OSError, path: Path) -> str:
    """E.g. "outdir: cannot use it: Is a directory", for a file a command reads and writes."""
    return f"{error.filename or path}: cannot use it: {error.strerror or error}"


def signed(value: float | None) -> str:
    """"+2.50", "-1.25", and "+0.00" for no change, never "-0.00" (a figure below half a
    hundredth, or a negative zero, rounds to zero)."""
    if value is None:
        return "—"
    rounded = round(value, 2)
    return f"{rounded if rounded else 0.0:+.2f}"


def percent(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"
