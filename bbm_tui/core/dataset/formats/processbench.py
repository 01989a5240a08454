"""ProcessBench (Zheng et al. 2024; github.com/QwenLM/ProcessBench, its README's "Data Usage"):
`id`, `generator`, `problem`, `steps`, `final_answer_correct`, and `label`, the index of the
earliest wrong step, 0-based, -1 when every step is right. The published files are JSON
arrays (`gsm8k.json`, ...); `export` writes JSON Lines, which ProcessBench's loader reads too.
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, OutTrace, ordered, origin_keys
from bbm_tui.core.dataset.formats.positions import (
    from_processbench,
    rest,
    text,
    texts,
    to_processbench,
)

NAME = "processbench"
KEYS = ("id", "generator", "problem", "steps", "final_answer_correct", "label")


def read(row: dict[str, Any]) -> FieldRow:
    steps = texts(row, "steps")
    labelled = "label" in row
    mistake = from_processbench(row["label"], len(steps)) if labelled else None
    return FieldRow(text(row, "problem"), steps, "", labelled, mistake,
                    rest(row, "problem", "steps", "label"))


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled:
        return None  # ProcessBench has no way to say "not labelled"
    carried = trace.carried(NAME)
    same = trace.same_trace(NAME)
    row = {
        **carried,
        "id": carried.get("id", trace.name),
        "generator": carried["generator"] if same and "generator" in carried else trace.model,
        "problem": trace.question or trace.input,
        "steps": list(trace.steps),
        "final_answer_correct": (carried["final_answer_correct"]
                                 if same and "final_answer_correct" in carried
                                 else trace.correct),
        "label": to_processbench(trace.mistake_index),
    }
    return ordered(row, origin_keys(trace, NAME, KEYS))
