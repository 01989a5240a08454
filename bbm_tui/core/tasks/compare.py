"""How a task's answer is compared with its target (a task file's `compare` key).

- `exact`: equal once both are stripped: the paper's rule, and its five tasks'.
- `number`: the first number of each, equal as numbers, after `$`, thousands commas, units
  and a trailing `.` are set aside, as GSM8K-style graders do: `1,000` = `1000`, `$5` = `5`,
  `5.0` = `5`, `18 apples.` = `18`, `1/2` = `0.5`; `-3` is not `3`. Where either side holds no
  number, the exact rule decides.
- `choice`: a multiple-choice letter, however the model writes it: `(B)`, `B`, `b)`,
  `B. Paris`, `Option B`, `**B**` all answer `(B)`. Where the target holds no letter, the
  exact rule decides.
- `regex:PATTERN`: the stripped answer must match all of PATTERN, in which `{target}` stands
  for the row's target, itself read as a regular expression; plain `regex` is
  `regex:{target}` (the target is the pattern). A target that is not a valid pattern
  matches nothing. Every match has a time limit (core/patterns.py): one that runs out is an
  error naming the pattern, never a hang.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from bbm_tui.core.patterns import PatternError, check_pattern, fullmatch

EXACT = "exact"
NUMBER = "number"
CHOICE = "choice"
REGEX = "regex"
TARGET_FIELD = "{target}"
COMPARISONS = (EXACT, NUMBER, CHOICE, f"{REGEX}:PATTERN")


class CompareError(ValueError):
    """A `compare` value that is not one of the comparisons, or a bad pattern."""


@dataclass(frozen=True)
class Comparison:
    """A parsed `compare` value: its kind and, for `regex`, the pattern."""

    kind: str
    pattern: str = ""

    def matches(self, answer: str, target: str, where: str = "the comparison") -> bool:
        """Whether `answer` answers `target`; `where` names the comparison's file in the
        message of a pattern that runs out of time (PatternTimeout)."""
        if self.kind == NUMBER:
            return numbers_match(answer, target)
        if self.kind == CHOICE:
            return choices_match(answer, target)
        if self.kind == REGEX:
            return regex_matches(self.pattern, answer, target, where)
        return exact_match(answer, target)


def parse_compare(text: str) -> Comparison:
    """`exact`, `number`, `choice`, `regex` or `regex:PATTERN`; CompareError otherwise."""
    if text in (EXACT, NUMBER, CHOICE):
        return Comparison(text)
    if text == REGEX:
        return Comparison(REGEX, TARGET_FIELD)
    if text.startswith(f"{REGEX}:"):
        pattern = text[len(REGEX) + 1:]
        if not pattern:
            raise CompareError("'regex:' needs a pattern after the colon (or plain 'regex': "
                               "the target is the pattern)")
        # The target is not known here: an empty group stands in for it.
        try:
            check_pattern(pattern.replace(TARGET_FIELD, "(?:)"))
        except PatternError as error:
            raise CompareError(f"not a valid regular expression: {error}") from None
        return Comparison(REGEX, pattern)
    raise CompareError(f"unknown comparison {text!r} (one of: {', '.join(COMPARISONS)})")


def exact_match(answer: str, target: str) -> bool:
    """The paper's rule: equal once both are stripped (two tracking rows store their answer
    with a leading space)."""
    return answer.strip() == target.strip()


# --------------------------------------------------------------------------- number

# A thousands comma sits between a digit and three digits that end the group.
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
# A sign counts only where it is not a hyphen inside a word ("COVID-19" is 19).
_NUMBER_TEXT = re.compile(r"(?<![\w.])[-+]?(?:\d+(?:\.\d+)?(?:/\d+)?|\.\d+)|\d+(?:\.\d+)?")
_MINUS_SIGNS = str.maketrans({"\u2212": "-", "\u2013": "-", "\u2014": "-"})


def first_number(text: str) -> Fraction | None:
    """The first number in `text`, exactly (a decimal or a fraction), None where there is none."""
    cleaned = _THOUSANDS.sub("", text.translate(_MINUS_SIGNS).replace("$", ""))
    found = _NUMBER_TEXT.search(cleaned)
    if found is None:
        return None
    try:
        return Fraction(found.group(0))
    except (ValueError, ZeroDivisionError):
        return None


def numbers_match(answer: str, target: str) -> bool:
    ours, theirs = first_number(answer), first_number(target)
    if ours is None or theirs is None:
        return exact_match(answer, target)
    return ours == theirs


# --------------------------------------------------------------------------- choice

_DRESSING = re.compile(r"[*_`\"'“”]")
_IN_BRACKETS = re.compile(r"[(\[]\s*([A-Za-z])\s*[)\]]")
_BARE_LETTER = re.compile(
    r"(?:(?:option|choice|answer)\s*:?\s*)?([A-Za-z])(?:\s*[.):]\s*.*)?", re.IGNORECASE | re.DOTALL
)


def choice_letter(text: str) -> str | None:
    """The letter a multiple-choice answer names, upper case; None where it names none."""
    text = _DRESSING.sub("", text).strip()
    found = _IN_BRACKETS.search(text)
    if found is None:
        found = _BARE_LETTER.fullmatch(text)
    return found.group(1).upper() if found else None


def choices_match(answer: str, target: str) -> bool:
    theirs = choice_letter(target)
    if theirs is None:
        return exact_match(answer, target)
    return choice_letter(answer) == theirs


# --------------------------------------------------------------------------- regex


def regex_matches(pattern: str, answer: str, target: str, where: str = "the comparison") -> bool:
    """Whether the stripped answer matches all of `pattern` with `{target}` replaced (a target
    that makes no valid pattern matches nothing); PatternTimeout when the match runs out of
    time."""
    full = pattern.replace(TARGET_FIELD, target)
    try:
        check_pattern(full)
    except PatternError:
        return False
    return fullmatch(full, answer.strip(), where) is not None
