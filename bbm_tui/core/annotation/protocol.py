"""The paper's labelling protocol (docs/DESIGN.md §11, the annotation guidelines): each thought
is judged correct or incorrect in order; the next one unlocks after a judgement; a trace is
complete when every thought is correct or the last one judged is incorrect (the rest stay
greyed, unjudged).

The judgements of one trace are a string, one character a thought in order: CORRECT or
INCORRECT. Pure functions, so the queue, the screen and the tests share one reading of it.
"""

from __future__ import annotations

CORRECT = "+"
INCORRECT = "-"


class ProtocolError(ValueError):
    """A judgement the protocol does not allow (a complete trace, a thought not unlocked)."""


def complete(judged: str, steps: int) -> bool:
    """All thoughts correct, or the last judged one incorrect. A trace with no thoughts is
    complete at once (nothing to judge: "no mistake")."""
    return judged.endswith(INCORRECT) or len(judged) >= steps


def unlocked(judged: str, steps: int) -> int | None:
    """The 0-based index of the thought to judge next, or None when the trace is complete."""
    return None if complete(judged, steps) else len(judged)


def judge(judged: str, steps: int, correct: bool) -> str:
    """The judgements after judging the unlocked thought."""
    if complete(judged, steps):
        raise ProtocolError("the trace is complete: undo to change a judgement")
    return judged + (CORRECT if correct else INCORRECT)


def undo(judged: str) -> str:
    return judged[:-1]


def location(judged: str) -> int | None:
    """The first mistake's 0-based index (None: no mistake)."""
    index = judged.find(INCORRECT)
    return None if index < 0 else index


def judged_for(mistake_index: int | None, steps: int) -> str:
    """The judgements that give a label (to script the protocol, or reopen a label)."""
    if mistake_index is None:
        return CORRECT * steps
    return CORRECT * mistake_index + INCORRECT
