"""PRM800K (Lightman et al. 2023, "Let's Verify Step by Step"; github.com/openai/prm800k, its
README's annotated line): `labeler`, `timestamp`, `generation`, `is_quality_control_question`,
`is_initial_screening_question`, `question` (`problem`, `ground_truth_solution`,
`ground_truth_answer`, and in phase 2 `pre_generated_steps`, `pre_generated_answer`,
`pre_generated_verifier_score`), and `label`: `steps` (each: `completions` of `text`, `rating`
-1/0/+1 and `flagged`; `human_completion`; `chosen_completion`, the index of the completion
the solution went on with, or null), `total_time` (milliseconds) and `finish_reason`
(`found_error`, `solution`, `bad_problem`, `give_up`).

The trace is the solution as labelled: at each step the chosen completion, else the labeller's
own (phase 1), else (the step the labelling stopped at) the completion rated -1. In phase 2
labelling stops at the first error, so the rest of the solution comes from
`pre_generated_steps`, unrated. The first mistake is the first step whose rating is -1; 0
(neutral) is not a mistake. With no -1, a `solution` finish says "no mistake" and any other
finish leaves the trace unlabelled.
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.dataset.formats import Alternative, FieldRow, OutTrace
from bbm_tui.core.dataset.formats.positions import (
    BAD,
    GOOD,
    RATINGS,
    RowError,
    first_bad,
    ratings_for,
    text,
)

NAME = "prm800k"
FINISH_REASONS = ("solution", "found_error", "bad_problem", "give_up")


def read(row: dict[str, Any]) -> FieldRow:
    question = row["question"]
    label = row["label"]
    if not isinstance(question, dict):
        raise RowError("'question' must be an object (with 'problem')")
    if not isinstance(label, dict):
        raise RowError("'label' must be an object (with 'steps')")
    problem = text(question, "problem")
    target = question.get("ground_truth_answer")
    if target is not None and not isinstance(target, str):
        raise RowError("'question.ground_truth_answer' must be a string or null")
    steps, ratings = _trajectory(label)
    finish = label.get("finish_reason")
    if finish is not None and finish not in FINISH_REASONS:
        raise RowError(f"'label.finish_reason' {finish!r} is not one of "
                       f"{', '.join(FINISH_REASONS)}")
    planned = question.get("pre_generated_steps")
    rated: list[int | None] = list(ratings)
    if (isinstance(planned, list) and all(isinstance(step, str) for step in planned)
            and planned[:len(steps)] == steps):
        rated += [None] * (len(planned) - len(steps))  # the rest of the solution, unrated
        steps = list(planned)
    mistake = first_bad(rated)
    labelled = mistake is not None or finish == "solution"
    return FieldRow(problem, steps, target or "", labelled, mistake, dict(row), rated)


def _trajectory(label: dict[str, Any]) -> tuple[list[str], list[int | None]]:
    """The solution as labelled, and each of its steps' ratings."""
    found = label.get("steps")
    if not isinstance(found, list):
        raise RowError("'label.steps' must be a list")
    steps: list[str] = []
    ratings: list[int | None] = []
    for number, step in enumerate(found, start=1):
        if not isinstance(step, dict):
            raise RowError(f"'label.steps' item {number} must be an object")
        completions = _completions(step, number)
        chosen = step.get("chosen_completion")
        human = step.get("human_completion")
        if chosen is not None:
            if isinstance(chosen, bool) or not isinstance(chosen, int) or not (
                    0 <= chosen < len(completions)):
                raise RowError(f"step {number}: 'chosen_completion' {chosen!r} is not one of "
                               f"its {len(completions)} completions")
            steps.append(completions[chosen]["text"])
            ratings.append(completions[chosen]["rating"])
        elif human is not None:
            # Phase 1: the labeller's own step, written where every completion was rated -1.
            written = human.get("text") if isinstance(human, dict) else human
            if not isinstance(written, str):
                raise RowError(f"step {number}: 'human_completion' has no text")
            steps.append(written)
            ratings.append(GOOD)
        elif completions:  # where the labelling stopped: the completion found wrong
            stopped = next((c for c in completions if c["rating"] == BAD), completions[0])
            steps.append(stopped["text"])
            ratings.append(stopped["rating"])
            break
        else:
            break
    return steps, ratings


def _completions(step: dict[str, Any], number: int) -> list[dict[str, Any]]:
    completions = step.get("completions") or []
    if not isinstance(completions, list):
        raise RowError(f"step {number}: 'completions' must be a list")
    for completion in completions:
        if not isinstance(completion, dict) or not isinstance(completion.get("text"), str):
            raise RowError(f"step {number}: each completion needs a 'text'")
        rating = completion.get("rating")
        if rating is not None and (isinstance(rating, bool) or rating not in RATINGS):
            raise RowError(f"step {number}: a rating must be -1, 0, 1 or null, not {rating!r}")
    return completions


def finish_reason(trace: OutTrace) -> str:
    """What PRM800K means by it: `found_error` at a step rated -1; `solution` when no step is
    wrong and the answer is not known to be wrong; a trace with no wrong step that does not
    reach the target is `give_up`, the labeller's way out in PRM800K."""
    if trace.finish_reason is not None:
        return trace.finish_reason
    if trace.mistake_index is not None:
        return "found_error"
    return "give_up" if trace.correct is False else "solution"


def write(trace: OutTrace) -> dict[str, Any] | None:
    if not trace.labelled and not trace.ratings and trace.finish_reason is None:
        # Nobody here has labelled it: a PRM800K row left so (`give_up`, `bad_problem`) goes
        # back as it was; any other has nothing to say.
        return trace.carried(NAME) if trace.same_trace(NAME) else None
    kept = _as_read(trace)
    if kept is not None:
        return kept
    reason = finish_reason(trace)
    if trace.ratings:
        ratings: list[int | None] = list(trace.ratings)
    elif trace.labelled:
        ratings = list(ratings_for(trace.mistake_index, len(trace.steps)))
    else:
        ratings = []
    return _built(trace, ratings, reason)


def _as_read(trace: OutTrace) -> dict[str, Any] | None:
    """The row as read, where the trace, its first mistake, its ratings and its finish are
    what it said."""
    carried = trace.carried(NAME)
    original = trace.origin_ratings(NAME)
    if not carried or original is None:
        return None
    label = carried.get("label")
    if not isinstance(label, dict):
        return None
    finish = label.get("finish_reason")
    if trace.finish_reason is not None and finish != trace.finish_reason:
        return None
    if trace.mistake_index is None and finish != "solution":
        return None  # read unlabelled (given up), labelled "no mistake" since
    if trace.ratings and list(trace.ratings) != original[:len(trace.ratings)]:
        return None
    return carried


def _built(trace: OutTrace, ratings: list[int | None], reason: str) -> dict[str, Any]:
    carried = trace.carried(NAME)
    stop_at_error = not trace.ratings and trace.mistake_index is not None
    steps = []
    for index, rating in enumerate(ratings):
        others = trace.alternatives[index] if index < len(trace.alternatives) else ()
        steps.append({
            # The thought on show first (chosen unless the labelling stopped at it), then its
            # other versions: samples and other branches, rated where a label covers them.
            "completions": [
                {"text": trace.steps[index], "rating": rating, "flagged": None},
                *(_alternative(alternative) for alternative in others),
            ],
            "human_completion": None,
            "chosen_completion": None if stop_at_error and rating == BAD else 0,
        })
    question = dict(carried.get("question") or {}) if trace.same_trace(NAME) else {}
    # The carried answer while it says what the target says (null where PRM800K has none).
    carried_answer = question.get("ground_truth_answer")
    kept = "ground_truth_answer" in question and (carried_answer or "") == trace.target
    question.update(problem=trace.question or trace.input,
                    ground_truth_answer=carried_answer if kept else trace.target)
    # Phase 2's way of holding the whole solution where the labels stop before its end.
    question.update(pre_generated_steps=list(trace.steps), pre_generated_answer=trace.answer)
    row: dict[str, Any] = {
        "labeler": trace.labeler,
        "timestamp": trace.timestamp,
        "generation": None,
        "is_quality_control_question": False,
        "is_initial_screening_question": False,
        "question": question,
        "label": {"steps": steps, "total_time": trace.total_time_ms, "finish_reason": reason},
    }
    if trace.session_id is not None:
        row["bbm_tui"] = {"task": trace.task, "model": trace.model,
                          "session_id": trace.session_id}
    return row


def _alternative(alternative: Alternative) -> dict[str, Any]:
    return {"text": alternative.text, "rating": alternative.rating, "flagged": None,
            "source": alternative.source}
