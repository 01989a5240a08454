"""MR-BEN (Zeng et al. 2024; github.com/dvlab-research/Mr-Ben, its README's "Data Format" and
script/utils.py): `Question_UUID`, `Subject`, `Question`, `Options` (not in coding questions),
`Ground_Truth_Analysis`, `Ground_Truth_Answer`, `Ground_Truth_Answer_Modified` (the answer the
annotation is based on), `Sampled_Model`, `Model_Solution_Steps` (a list of `Step N: ...`
lines, with blank lines between them and a last `Solution: ...` line),
`Model_Solution_Correctness` (`correct` or `incorrect`), `Model_Solution_First_Error_Step`
(the `N` of its `Step N`, a string; `N/A`), `Model_Solution_Error_Reason` and
`Model_Solution_Rectified_First_Error_Step` (one text per annotator, or `N/A`). The published
files are objects of arrays keyed by `Question_UUID` (each question has three solutions);
ours are too.

The trace's question is the question and, for a multiple-choice one, its options; its steps
are the solution's lines, blank ones left out (and put back on the way out). Written from
sessions, the reasons are the annotators' notes and the rectified step is the first mistake
as another branch wrote it (backtracked or rewritten).
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, OutTrace, ordered, origin_keys
from bbm_tui.core.dataset.formats.positions import (
    NOT_APPLICABLE,
    RowError,
    from_step_label,
    one_based_step,
    rest,
    text,
    to_step_label,
)

NAME = "mr-ben"
STEPS = "Model_Solution_Steps"
CORRECTNESS = "Model_Solution_Correctness"
ERROR_STEP = "Model_Solution_First_Error_Step"
REASON = "Model_Solution_Error_Reason"
RECTIFIED = "Model_Solution_Rectified_First_Error_Step"
OPTIONS_HEADING = "\n\nOptions:\n"
KEYS = ("Question_UUID", "Subject", "Question", "Options", "Ground_Truth_Analysis",
        "Ground_Truth_Answer", "Ground_Truth_Answer_Modified", "Sampled_Model", STEPS,
        CORRECTNESS, ERROR_STEP, REASON, RECTIFIED)


def read(row: dict[str, Any]) -> FieldRow:
    raw = row[STEPS]
    if isinstance(raw, str):
        raw = raw.split("\n")
    if not isinstance(raw, list) or not all(isinstance(step, str) for step in raw):
        raise RowError(f"{STEPS!r} must be a list of strings")
    steps = [step for step in raw if step.strip()]
    correctness = row.get(CORRECTNESS)
    if correctness is not None and correctness not in ("correct", "incorrect"):
        raise RowError(f"{CORRECTNESS!r} must be 'correct' or 'incorrect', not "
                       f"{correctness!r}")
    mistake = from_step_label(one_based_step(row.get(ERROR_STEP), ERROR_STEP), steps,
                              ERROR_STEP)
    if mistake is not None and correctness == "correct":
        raise RowError(f"{CORRECTNESS!r} is 'correct' but {ERROR_STEP!r} names a step")
    options = row.get("Options")
    if options is not None and not isinstance(options, str):
        raise RowError("'Options' must be a string")
    question = text(row, "Question") + (OPTIONS_HEADING + options if options else "")
    target = row.get("Ground_Truth_Answer_Modified") or row.get("Ground_Truth_Answer") or ""
    fields = rest(row, STEPS)
    return FieldRow(question, steps, target if isinstance(target, str) else str(target),
                    mistake is not None or correctness == "correct", mistake, fields,
                    layout={"steps": raw})


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled:
        return None  # MR-BEN has no way to say "not labelled"
    carried = trace.carried(NAME)
    same = trace.same_trace(NAME)
    mistake = trace.mistake_index
    steps = trace.layout(NAME).get("steps", list(trace.steps))
    kept = same and _carried_index(carried, trace.steps) == mistake
    row = {
        **carried,
        "Question_UUID": carried.get("Question_UUID", trace.name),
        **_question(trace, carried),
        "Sampled_Model": carried["Sampled_Model"] if same and "Sampled_Model" in carried
        else trace.model,
        STEPS: steps,
        CORRECTNESS: "correct" if mistake is None else "incorrect",
        ERROR_STEP: to_step_label(mistake, trace.steps),
        REASON: _joined(carried.get(REASON) if kept else None, trace.reasons, mistake),
        RECTIFIED: _joined(carried.get(RECTIFIED) if kept else None, trace.rectified, mistake),
    }
    if "Ground_Truth_Answer" not in row:
        row["Ground_Truth_Answer"] = trace.target
    return ordered(row, origin_keys(trace, NAME, KEYS))


def _question(trace: OutTrace, carried: dict[str, Any]) -> dict[str, Any]:
    """`Question` and `Options` back apart: the carried ones while the text is theirs."""
    question, options = carried.get("Question"), carried.get("Options")
    if isinstance(question, str) and trace.input == question + (
            OPTIONS_HEADING + options if isinstance(options, str) and options else ""):
        return {"Question": question}
    return {"Question": trace.question or trace.input}


def _carried_index(carried: dict[str, Any], steps: tuple[str, ...]) -> int | None:
    try:
        return from_step_label(one_based_step(carried.get(ERROR_STEP), ERROR_STEP),
                               list(steps), ERROR_STEP)
    except RowError:
        return -1  # not a step of this trace: never "the same"


def _joined(carried: object, ours: tuple[str, ...], mistake: int | None) -> Any:
    """The annotators' texts the row carried (one each), then ours not among them; `N/A`
    with no mistake or no text at all."""
    if mistake is None and carried is None:
        return NOT_APPLICABLE
    if not ours:
        return NOT_APPLICABLE if carried is None else carried
    before = carried if isinstance(carried, list) else []
    return [*before, *(text for text in ours if text not in before)]
