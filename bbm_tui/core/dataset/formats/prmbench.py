"""PRMBench (Song et al. 2025; github.com/ssmisya/PRMBench, docs/data_format.md):
`original_question`, `modified_question` (the one evaluated), `original_process`,
`modified_process` (the steps evaluated, each beginning with its own number: `"3. ..."`),
`modified_steps`, `error_steps` (the steps that hold an error, 1-based), `reason`, `idx`,
`question`, `classification` (the kind of error: circular, counterfactual, ...).

The trace is the modified question and process; the steps' own numbers are set aside while
they count 1, 2, 3... (the trace numbers its thoughts itself) and put back on the way out. The
first mistake is the smallest error step (a trace may hold several; `[]`: none). Written back
unchanged, every error step is kept.
"""

from __future__ import annotations

import re
from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, OutTrace, ordered, origin_keys
from bbm_tui.core.dataset.formats.positions import (
    from_error_steps,
    rest,
    text,
    texts,
    to_error_steps,
)

NAME = "prmbench"
KEYS = ("original_question", "modified_question", "original_process", "modified_process",
        "modified_steps", "error_steps", "reason", "idx", "question", "classification")
_NUMBER = re.compile(r"(\d{1,18})\.\s+")


def read(row: dict[str, Any]) -> FieldRow:
    process = texts(row, "modified_process")
    numbered = bool(process) and all(
        (found := _NUMBER.match(step)) is not None and int(found.group(1)) == number
        for number, step in enumerate(process, start=1))
    steps = [_NUMBER.sub("", step, count=1) for step in process] if numbered else process
    labelled = "error_steps" in row
    mistake = from_error_steps(row["error_steps"], len(steps)) if labelled else None
    return FieldRow(text(row, "modified_question"), steps, "", labelled, mistake,
                    rest(row, "modified_question", "modified_process"),
                    layout={"numbered": numbered, "process": process})


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled:
        return None
    carried = trace.carried(NAME)
    layout = trace.layout(NAME)
    process = layout.get("process") or [
        f"{number}. {step}" for number, step in enumerate(trace.steps, start=1)]
    same_label = (trace.same_trace(NAME) and isinstance(carried.get("error_steps"), list)
                  and _smallest(carried["error_steps"]) == trace.mistake_index)
    question = trace.question or trace.input
    row = {
        **carried,
        "original_question": carried.get("original_question", question),
        "modified_question": trace.input,
        "modified_process": process,
        "error_steps": carried["error_steps"] if same_label else to_error_steps(
            trace.mistake_index),
        "reason": carried.get("reason", "") if same_label else "\n".join(trace.reasons),
        "idx": carried.get("idx", trace.name),
        "question": carried.get("question", question),
        "classification": carried.get("classification", ""),
    }
    return ordered(row, origin_keys(trace, NAME, KEYS))


def _smallest(steps: list) -> int | None:
    numbers = [step for step in steps if isinstance(step, int) and not isinstance(step, bool)]
    return min(numbers) - 1 if numbers else None
