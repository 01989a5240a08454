"""Math-Shepherd (Wang et al. 2024; huggingface.co/datasets/peiyi9979/Math-Shepherd, its card's
"Data Instance"): `input`, the problem and its step-by-step solution with the step tag `ки`
after each step; `label`, the same text with each tag replaced by `+` (the step can still
reach the right answer) or `-`; and `task` (`GSM8K` or `MATH`).

The tag is found by reading `input` and `label` side by side: where `input` has `ки` and
`label` a `+` or `-`, that is a step's end; where both have `ки`, it is text of the step (a
Russian word in a problem, say). The problem ends where the first step begins: at its
`Step 1:`, else after its first `?` (as TRL's conversion of the dataset splits it). The first
mistake is the first `-`; the labels after it (Math-Shepherd labels every step) are kept as
ratings and written back. A trace labelled only with its first mistake is written up to it:
nothing is known of the steps after it.
"""

from __future__ import annotations

import re
from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, OutTrace, ordered, origin_keys
from bbm_tui.core.dataset.formats.positions import (
    BAD,
    GOOD,
    RowError,
    first_bad,
    ratings_for,
    rest,
    text,
)

NAME = "math-shepherd"
TAG = "ки"
SIGNS = {"+": GOOD, "-": BAD}
_FIRST_STEP = re.compile(r"[Ss]tep 1:")


def read(row: dict[str, Any]) -> FieldRow:
    source, labels = text(row, "input"), text(row, "label")
    pieces, signs = _split(source, labels)
    if not signs:
        raise RowError(f"'input' has no step tag ({TAG}) that 'label' marks + or -")
    question, lead = _question(pieces[0])
    steps, layout = [], {"lead": [lead], "trail": [], "tail": pieces[-1]}
    for number, piece in enumerate(pieces[:-1]):
        body = piece if number else piece[len(question) + len(lead):]
        if number:
            stripped = body.lstrip()
            layout["lead"].append(body[:len(body) - len(stripped)])
            body = stripped
        step = body.rstrip()
        layout["trail"].append(body[len(step):])
        steps.append(step)
    ratings = [SIGNS[sign] for sign in signs]
    mistake = first_bad(ratings)
    return FieldRow(question, steps, "", True, mistake, rest(row, "input", "label"),
                    list(ratings), layout)


def _split(source: str, labels: str) -> tuple[list[str], list[str]]:
    """`input` cut at its step tags (the text before each tag, then what follows the last),
    and each tag's sign from `label`."""
    pieces: list[str] = []
    signs: list[str] = []
    start = i = j = 0
    while i < len(source):
        if source.startswith(TAG, i) and j < len(labels) and labels[j] in SIGNS:
            pieces.append(source[start:i])
            signs.append(labels[j])
            i += len(TAG)
            j += 1
            start = i
        elif j < len(labels) and source[i] == labels[j]:
            i += 1
            j += 1
        else:
            raise RowError(f"'label' is not 'input' with its step tags marked: they part at "
                           f"character {i + 1} of 'input'")
    if j != len(labels):
        raise RowError("'label' runs on past the end of 'input'")
    pieces.append(source[start:])
    return pieces, signs


def _question(first: str) -> tuple[str, str]:
    """The problem and the whitespace between it and the first step."""
    found = _FIRST_STEP.search(first)
    if found is not None:
        end = found.start()
    elif "?" in first:
        end = first.index("?") + 1
    else:
        raise RowError("cannot tell where the problem ends: no 'Step 1:' and no '?' before "
                       "the first step tag")
    question = first[:end].rstrip()
    rest_of = first[len(question):]
    return question, rest_of[:len(rest_of) - len(rest_of.lstrip())]


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled and not trace.ratings:
        return None
    ratings = _ratings(trace)
    layout = trace.layout(NAME)
    lead = layout.get("lead") or [" "] + ["\n"] * len(trace.steps)
    trail = layout.get("trail") or [" "] * len(trace.steps)
    tail = layout.get("tail", "")
    source, labels = [trace.input], [trace.input]
    for index, rating in enumerate(ratings):
        piece = lead[index] + trace.steps[index] + trail[index]
        source.append(piece + TAG)
        labels.append(piece + ("-" if rating == BAD else "+"))
    if len(ratings) == len(trace.steps):
        source.append(tail)
        labels.append(tail)
    row = {**trace.carried(NAME), "input": "".join(source), "label": "".join(labels)}
    return ordered(row, origin_keys(trace, NAME, ("input", "label", "task")))


def _ratings(trace: OutTrace) -> list[int | None]:
    """A sign for every step there is one for: the format's own, the per-step ratings (0,
    neutral, is `+`: no error), else the first-mistake label's (up to the mistake)."""
    original = trace.origin_ratings(NAME)
    if original is not None and not trace.ratings:
        return original
    rated = [rating for rating in trace.ratings if rating is not None] if trace.ratings else []
    if rated and len(rated) == len(trace.ratings):
        return list(trace.ratings)
    return list(ratings_for(trace.mistake_index, len(trace.steps)))
