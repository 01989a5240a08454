"""TRL's stepwise supervision (huggingface.co/docs/trl, "Dataset formats and types", the
stepwise supervision type; TRL's examples/datasets/prm800k.py and math_shepherd.py make such
datasets): `prompt`, `completions` (the steps) and `labels` (one boolean a step). The first
mistake is the first `false`; every `true` is "no mistake".

Written from ratings as TRL's own PRM800K conversion writes them: `true` for a step rated +1,
`false` otherwise (a neutral 0 too); a trace labelled only with its first mistake is written
up to it (nothing is known of the steps after it), as that conversion ends each example at its
first error.
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, OutTrace, ordered, origin_keys
from bbm_tui.core.dataset.formats.positions import (
    BAD,
    GOOD,
    RowError,
    first_bad,
    ratings_for,
    rest,
    texts,
)

NAME = "trl"


def read(row: dict[str, Any]) -> FieldRow:
    prompt = row["prompt"]
    if not isinstance(prompt, str):
        raise RowError("'prompt' must be a string (a conversational prompt, a list of "
                       "messages, is not a trace bbm-tui can show)")
    steps = texts(row, "completions")
    labels = row["labels"]
    if not isinstance(labels, list) or not all(isinstance(label, bool) for label in labels):
        raise RowError("'labels' must be a list of true/false, one a completion")
    if len(labels) != len(steps):
        raise RowError(f"'labels' has {len(labels)} values for {len(steps)} completions")
    ratings: list[int | None] = [GOOD if label else BAD for label in labels]
    return FieldRow(prompt, steps, "", True, first_bad(ratings),
                    rest(row, "prompt", "completions", "labels"), ratings)


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled and not trace.ratings:
        return None
    original = trace.origin_ratings(NAME)
    if original is not None and not trace.ratings:
        labels = [rating == GOOD for rating in original]
    elif trace.ratings and all(rating is not None for rating in trace.ratings):
        labels = [rating == GOOD for rating in trace.ratings]
    else:
        labels = [rating == GOOD for rating in ratings_for(trace.mistake_index,
                                                            len(trace.steps))]
    row = {
        **trace.carried(NAME),
        "prompt": trace.question or trace.input,
        "completions": list(trace.steps[:len(labels)]),
        "labels": labels,
    }
    return ordered(row, origin_keys(trace, NAME, ("prompt", "completions", "labels")))

