"""Where each format puts the first mistake, read into ours and written back: the one place
that knows each format's index convention.

Ours (the BBM dataset's): `mistake_index`, the 0-based index of the first mistaken step; None
with the row labelled means "no mistake"; an unlabelled row has no label at all.

| format        | its label                                    | none                  |
|---------------|----------------------------------------------|-----------------------|
| ProcessBench  | `label`, 0-based                             | -1                    |
| PRM800K       | the first step whose chosen rating is -1     | `solution`, no -1     |
| MR-GSM8K      | `..._first_error_step`, 1-based              | `N/A` (and `correct`) |
| MR-BEN        | `..._First_Error_Step`, its `Step N` label   | `N/A` (and `correct`) |
| Math-Shepherd | the first `-` after a step                   | every step `+`        |
| PRMBench      | the smallest of `error_steps` (1-based)      | `[]`                  |
| TRL stepwise  | the first `false` of `labels`                | every label `true`    |

A value a reader cannot take raises RowError, with what is wrong in the format's own terms.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from bbm_tui.core.dataset import _all_strings

NOT_APPLICABLE = "N/A"
# PRM800K's ratings: +1 good, 0 neutral (not a mistake), -1 bad.
GOOD, NEUTRAL, BAD = 1, 0, -1
RATINGS = (GOOD, NEUTRAL, BAD)


class RowError(ValueError):
    """A row a format's reader cannot take: the message names the key and what is wrong."""


# The most digits a step number is read with: a longer one is no step of any trace (and
# Python converts at most 4,300 digits).
STEP_DIGITS = 18


def shown(value: object, limit: int = 60) -> str:
    """A value as a message quotes it: its repr, cut to `limit` characters (a 5,000-digit
    label, a megabyte of text, is named, not printed)."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


# --------------------------------------------------------------------------- ProcessBench

def from_processbench(label: object, steps: int) -> int | None:
    """`label`: the earliest wrong step, 0-based; -1 for none."""
    if isinstance(label, bool) or not isinstance(label, int):
        raise RowError(f"'label' must be a whole number (0-based, -1 = no mistake), not "
                       f"{shown(label)}")
    if label == -1:
        return None
    if not 0 <= label < steps:
        raise RowError(f"'label' {shown(label)} is outside the {steps} steps (0-based; -1 = "
                       "no mistake)")
    return label


def to_processbench(mistake_index: int | None) -> int:
    return -1 if mistake_index is None else mistake_index


# --------------------------------------------------------------------------- ratings

def first_bad(ratings: Sequence[int | None]) -> int | None:
    """The first step rated -1 (PRM800K, Math-Shepherd's `-`, TRL's `false`), else None."""
    for index, rating in enumerate(ratings):
        if rating == BAD:
            return index
    return None


def ratings_for(mistake_index: int | None, steps: int) -> list[int]:
    """The ratings a first-mistake label says: +1 up to the mistake and -1 at it (nothing is
    known after it); +1 on every step for "no mistake"."""
    if mistake_index is None:
        return [GOOD] * steps
    return [GOOD] * mistake_index + [BAD]


# --------------------------------------------------------------------------- MR-GSM8K, MR-BEN

def one_based_step(value: object, key: str) -> int | None:
    """A 1-based step number written as a number or a string of digits; None for `N/A` (or
    null, or an empty string)."""
    if value is None or (isinstance(value, str) and value.strip() in ("", NOT_APPLICABLE)):
        return None
    if isinstance(value, bool):
        raise RowError(f"{key!r} must be a step number or {NOT_APPLICABLE!r}, not "
                       f"{shown(value)}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().isdecimal():
        digits = value.strip()
        if len(digits) > STEP_DIGITS:
            raise RowError(f"{key!r} is a number of {len(digits):,} digits, past any step")
        number = int(digits)
    else:
        raise RowError(f"{key!r} must be a step number or {NOT_APPLICABLE!r}, not "
                       f"{shown(value)}")
    if number < 1:
        raise RowError(f"{key!r} {shown(number)} is not a step (steps count from 1)")
    return number


def from_one_based(number: int | None, steps: int, key: str) -> int | None:
    if number is None:
        return None
    if number > steps:
        raise RowError(f"{key!r} {shown(number)} is past the {steps} steps (they count from "
                       "1)")
    return number - 1


_STEP_LABEL = re.compile(rf"\s*step\s*(\d{{1,{STEP_DIGITS}}})\s*[:.]", re.IGNORECASE)


def step_label(text: str) -> int | None:
    """The N of a step that begins `Step N:` (MR-BEN's, Math-Shepherd's), else None."""
    found = _STEP_LABEL.match(text)
    return int(found.group(1)) if found else None


def from_step_label(number: int | None, steps: Sequence[str], key: str) -> int | None:
    """MR-BEN's first error step is the N of a `Step N:` step (its lists hold blank lines and
    a last `Solution:` line, so N is not the position): the step labelled N, else (a solution
    with no labels) the Nth step."""
    if number is None:
        return None
    for index, step in enumerate(steps):
        if step_label(step) == number:
            return index
    if any(step_label(step) is not None for step in steps):
        raise RowError(f"{key!r} {number}: no step is labelled 'Step {number}'")
    return from_one_based(number, len(steps), key)


def to_step_label(mistake_index: int | None, steps: Sequence[str]) -> str:
    """MR-BEN's way back: the mistaken step's own `Step N` label, else its position."""
    if mistake_index is None:
        return NOT_APPLICABLE
    return str(step_label(steps[mistake_index]) or mistake_index + 1)


# --------------------------------------------------------------------------- PRMBench

def from_error_steps(value: object, steps: int) -> int | None:
    """PRMBench's `error_steps`: the 1-based steps that hold an error; the first mistake is
    the smallest (the list is not always in order); an empty list is "no mistake"."""
    if not isinstance(value, list) or any(
            isinstance(item, bool) or not isinstance(item, int) for item in value):
        raise RowError(f"'error_steps' must be a list of step numbers, not {shown(value)}")
    if not value:
        return None
    for number in value:
        if not 1 <= number <= steps:
            raise RowError(f"'error_steps' holds {shown(number)}, outside the {steps} steps "
                           "(they count from 1)")
    return min(value) - 1


def to_error_steps(mistake_index: int | None) -> list[int]:
    return [] if mistake_index is None else [mistake_index + 1]


# --------------------------------------------------------------------------- values of a row

def text(row: dict, key: str, *, default: str | None = None) -> str:
    """A string field (`default` when the key is absent and one is given)."""
    if key not in row and default is not None:
        return default
    if key not in row:
        raise RowError(f"missing key {key!r}")
    value = row[key]
    if not isinstance(value, str):
        raise RowError(f"{key!r} must be a string, not {type(value).__name__}")
    return value


def texts(row: dict, key: str) -> list[str]:
    """A list of strings (a trace's steps)."""
    if key not in row:
        raise RowError(f"missing key {key!r}")
    value = row[key]
    if not isinstance(value, list) or not _all_strings(value):
        raise RowError(f"{key!r} must be a list of strings")
    return value


def rest(row: dict, *taken: str) -> dict:
    """The row's fields other than `taken` (what the trace says), in the row's order."""
    return {key: value for key, value in row.items() if key not in taken}
