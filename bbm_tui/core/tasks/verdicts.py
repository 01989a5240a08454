"""A verifier's word on one step (docs/DESIGN.md §12): correct, mistaken with a reason, or cannot
judge.

The kind is the project's shared `Verdict` (types.py), so a verifier speaks the same language as
the paper's finders: CORRECT ("Yes"), MISTAKEN ("No"), CANNOT_JUDGE ("?"). Reasons are shown to
users: plain, specific and short.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bbm_tui.core.records import Verdict


@dataclass(frozen=True)
class StepVerdict:
    index: int  # 0-based, like the dataset's mistake_index
    kind: Verdict
    reason: str = ""

    @property
    def mistaken(self) -> bool:
        return self.kind is Verdict.MISTAKEN


def correct(index: int, reason: str = "") -> StepVerdict:
    return StepVerdict(index, Verdict.CORRECT, reason)


def mistaken(index: int, reason: str) -> StepVerdict:
    return StepVerdict(index, Verdict.MISTAKEN, reason)


def cannot_judge(index: int, reason: str) -> StepVerdict:
    return StepVerdict(index, Verdict.CANNOT_JUDGE, reason)


def first_mistaken(verdicts: Sequence[StepVerdict]) -> StepVerdict | None:
    """The first mistaken step: the verifier's answer for the trace (None: no mistake found;
    steps it cannot judge do not count as mistakes)."""
    return next((verdict for verdict in verdicts if verdict.mistaken), None)


class QuestionError(ValueError):
    """A question a task's logic cannot read (not one of the task's forms)."""


class Judgement(Exception):
    """Raised inside a task's step checker to end the check of one step with a verdict kind
    and reason; the checker's caller turns it into a StepVerdict."""

    def __init__(self, kind: Verdict, reason: str) -> None:
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def wrong(reason: str) -> Judgement:
    return Judgement(Verdict.MISTAKEN, reason)


def unknown(reason: str) -> Judgement:
    return Judgement(Verdict.CANNOT_JUDGE, reason)


# The verifiers read a step in time linear in its length (~1 s for 160 KB at worst); the
# dataset's longest step has 2,568 characters, and a row's line may hold 16 MiB.
MAX_VERIFIED_STEP = 200_000


def judge_steps(state: object, steps: Sequence[str],
                check_step: Callable[[Any, str], None]) -> list[StepVerdict]:
    """Run a task's step checker over a trace: each step judged against the question and
    the steps before it as written. The checker updates `state` with what the step claims
    before it raises, so the steps after a mistake are judged, and continued, from the trace
    as it stands."""
    verdicts = []
    for index, step in enumerate(steps):
        if len(step) > MAX_VERIFIED_STEP:
            # What it claims is unread, so the steps after it have nothing to build on.
            verdicts.append(cannot_judge(index, f"too long to verify ({len(step):,} "
                                         f"characters; the verifiers read steps of up to "
                                         f"{MAX_VERIFIED_STEP:,})"))
            verdicts.extend(cannot_judge(later, "follows a step too long to verify")
                            for later in range(index + 1, len(steps)))
            break
        try:
            check_step(state, step)
        except Judgement as judgement:
            verdicts.append(StepVerdict(index, judgement.kind, judgement.reason))
        else:
            verdicts.append(correct(index))
    return verdicts
