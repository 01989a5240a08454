"""MR-GSM8K (Zeng et al. 2023; github.com/dvlab-research/MR-GSM8K, its README's "Benchmark
Details" and scripts/eval_mr_gsm8k.py): `uuid`, `question`, `ground_truth_solution`,
`ground_truth_answer`, `model_output_steps` (a list of steps; one string of lines in some
releases), `model_output_answer_correctness`, `model_output_solution_correctness` (`correct`
or `wrong`), `model_output_solution_first_error_step` (1-based; `N/A` when not applicable),
`model_output_solution_first_error_reason`, `question_type` (`original`, `POT`, `reversed`).
The published file is one JSON array (its evaluation script `json.load`s it); so is ours.

A solution marked `correct` with no error step has no mistake; one marked `wrong` with no
error step is unlabelled (it says there is an error, not where).
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, OutTrace, ordered, origin_keys
from bbm_tui.core.dataset.formats.positions import (
    NOT_APPLICABLE,
    RowError,
    from_one_based,
    one_based_step,
    rest,
    text,
)

NAME = "mr-gsm8k"
STEPS = "model_output_steps"
ERROR_STEP = "model_output_solution_first_error_step"
ERROR_REASON = "model_output_solution_first_error_reason"
CORRECTNESS = "model_output_solution_correctness"
ANSWER_CORRECTNESS = "model_output_answer_correctness"
KEYS = ("uuid", "question", "ground_truth_solution", "ground_truth_answer", STEPS,
        ANSWER_CORRECTNESS, CORRECTNESS, ERROR_STEP, ERROR_REASON, "question_type")


def read(row: dict[str, Any]) -> FieldRow:
    steps, as_text = _steps(row[STEPS])
    correctness = row.get(CORRECTNESS)
    if correctness is not None and correctness not in ("correct", "wrong"):
        raise RowError(f"{CORRECTNESS!r} must be 'correct' or 'wrong', not {correctness!r}")
    mistake = from_one_based(one_based_step(row.get(ERROR_STEP), ERROR_STEP), len(steps),
                             ERROR_STEP)
    if mistake is not None and correctness == "correct":
        raise RowError(f"{CORRECTNESS!r} is 'correct' but {ERROR_STEP!r} names a step")
    labelled = mistake is not None or correctness == "correct"
    answer = row.get("ground_truth_answer", "")
    target = answer if isinstance(answer, str) else "" if answer is None else str(answer)
    return FieldRow(text(row, "question"), steps, target, labelled, mistake,
                    rest(row, "question", STEPS), layout={"steps_as_text": as_text})


def _steps(value: object) -> tuple[list[str], bool]:
    if isinstance(value, str):  # some releases: the solution as one text, a step a line
        return [line for line in value.split("\n") if line.strip()], True
    if isinstance(value, list) and all(isinstance(step, str) for step in value):
        return list(value), False
    raise RowError(f"{STEPS!r} must be a list of strings (or one string of lines)")


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled:
        return None  # MR-GSM8K has no way to say "not labelled"
    carried = trace.carried(NAME)
    same = trace.same_trace(NAME)
    mistake = trace.mistake_index
    kept_reason = same and carried.get(ERROR_STEP) is not None and _carried_index(
        carried, len(trace.steps)) == mistake
    steps: Any = list(trace.steps)
    if trace.layout(NAME).get("steps_as_text"):
        steps = "\n".join(trace.steps)
    row = {
        **carried,
        "uuid": carried.get("uuid", trace.name),
        "question": trace.input,
        "ground_truth_answer": (carried["ground_truth_answer"]
                                if "ground_truth_answer" in carried
                                and _same_answer(carried["ground_truth_answer"], trace.target)
                                else trace.target),
        STEPS: steps,
        ANSWER_CORRECTNESS: (carried[ANSWER_CORRECTNESS] if same and ANSWER_CORRECTNESS
                             in carried else _correctness(trace.correct)),
        CORRECTNESS: "correct" if mistake is None else "wrong",
        ERROR_STEP: carried[ERROR_STEP] if kept_reason else (
            NOT_APPLICABLE if mistake is None else mistake + 1),
        ERROR_REASON: carried[ERROR_REASON] if kept_reason else (
            NOT_APPLICABLE if mistake is None else "\n".join(trace.reasons)),
    }
    if "question_type" not in row:
        row["question_type"] = "original"
    return ordered(row, origin_keys(trace, NAME, KEYS))


def _carried_index(carried: dict[str, Any], steps: int) -> int | None:
    try:
        return from_one_based(one_based_step(carried.get(ERROR_STEP), ERROR_STEP), steps,
                              ERROR_STEP)
    except RowError:
        return None


def _same_answer(carried: object, target: str) -> bool:
    return (carried if isinstance(carried, str) else "" if carried is None
            else str(carried)) == target


def _correctness(correct: bool | None) -> str | None:
    return None if correct is None else "correct" if correct else "wrong"
