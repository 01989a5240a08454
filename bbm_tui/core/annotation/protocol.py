"""The labelling protocols (docs/DESIGN.md §11).

The paper's (its annotation guidelines): each thought is judged correct or incorrect in order;
the next one unlocks after a judgement; a trace is complete when every thought is correct or
the last one judged is incorrect (the rest stay greyed, unjudged).

PRM800K's (`per-step`, Lightman et al. 2023; Potato's `per_step`): every thought is rated in
order, good (+1), neutral (0: not wrong, but no progress either) or bad (-1), to the end, bad
ones included; the trace is complete when every thought is rated. The first -1 is the trace's
first mistake, so agreement, adjudication and exports read either protocol's labels alike. A
labelling finishes as PRM800K's did: `solution` (every thought rated, none bad),
`found_error` (every thought rated, one bad or more), `bad_problem` (the question is broken)
or `give_up` (the labeller is stuck); the last two set the trace aside, unlabelled, with the
ratings made so far kept.

The judgements of one trace are a string, one character a thought in order: CORRECT,
NEUTRAL (per-step only) or INCORRECT. Pure functions, so the queue, the screen and the tests
share one reading of it.
"""

from __future__ import annotations

CORRECT = "+"
NEUTRAL = "0"
INCORRECT = "-"

PAPER = "paper"
PER_STEP = "per-step"
PROTOCOLS = (PAPER, PER_STEP)

# PRM800K's finish reasons; the first two end a complete trace, the last two set one aside.
SOLUTION = "solution"
FOUND_ERROR = "found_error"
BAD_PROBLEM = "bad_problem"
GIVE_UP = "give_up"
FINISH_REASONS = (SOLUTION, FOUND_ERROR, BAD_PROBLEM, GIVE_UP)

_RATING_OF = {CORRECT: 1, NEUTRAL: 0, INCORRECT: -1}
_MARK_OF = {rating: mark for mark, rating in _RATING_OF.items()}


class ProtocolError(ValueError):
    """A judgement the protocol does not allow (a complete trace, a thought not unlocked)."""


def complete(judged: str, steps: int, protocol: str = PAPER) -> bool:
    """The paper's: all thoughts correct, or the last judged one incorrect; per-step: every
    thought rated. A trace with no thoughts is complete at once (nothing to judge: "no
    mistake")."""
    if protocol == PER_STEP:
        return len(judged) >= steps
    return judged.endswith(INCORRECT) or len(judged) >= steps


def unlocked(judged: str, steps: int, protocol: str = PAPER) -> int | None:
    """The 0-based index of the thought to judge next, or None when the trace is complete."""
    return None if complete(judged, steps, protocol) else len(judged)


def judge(judged: str, steps: int, correct: bool, protocol: str = PAPER) -> str:
    """The judgements after judging the unlocked thought correct (per-step: good) or not
    (bad)."""
    return rate(judged, steps, 1 if correct else -1, protocol)


def rate(judged: str, steps: int, rating: int, protocol: str = PER_STEP) -> str:
    """The judgements after rating the unlocked thought +1, 0 (per-step only) or -1."""
    if complete(judged, steps, protocol):
        raise ProtocolError("the trace is complete: undo to change a judgement")
    if rating not in _MARK_OF or (rating == 0 and protocol != PER_STEP):
        raise ProtocolError("the paper's protocol has no neutral rating")
    return judged + _MARK_OF[rating]


def ratings(judged: str) -> list[int]:
    """The judgements as PRM800K's ratings (+1, 0, -1)."""
    return [_RATING_OF[mark] for mark in judged if mark in _RATING_OF]


def finish_reason(judged: str) -> str:
    """How a complete per-step labelling finishes: `found_error` with a bad thought, else
    `solution`."""
    return FOUND_ERROR if INCORRECT in judged else SOLUTION


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


def judged_from(values: list[int]) -> str:
    """Ratings (+1, 0, -1) as judgements."""
    return "".join(_MARK_OF[value] for value in values)
