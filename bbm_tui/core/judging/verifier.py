"""The task verifiers as a judge (docs/DESIGN.md §12): the same result as the
paper's methods (`finders.FindResult`), with no model and no call, so `find`, the app and
the store take `verify` as they take the paper's methods. The verifiers themselves (one per
task, in the dataset's phrasing) are in core/tasks/.

A step the verifier cannot read is "cannot judge", never a mistake; the first mistaken step
is the trace's answer, None when it finds none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence

from bbm_tui.core.judging.finders import (
    NO_THOUGHTS,
    FindEvent,
    FindFinished,
    FindResult,
    StepJudged,
)
from bbm_tui.core.records import Verdict
from bbm_tui.core.tasks.verdicts import StepVerdict
from bbm_tui.core.tasks.verify import verify_trace
from bbm_tui.core.types import VERIFIER_MODEL, VERIFY

# A trace of at most this many thoughts verifies in under 3 ms on the 2-CPU machine (the
# slowest of the bundled ones: bench/verify_speed.py), less than a frame, so it runs on the
# event loop; a longer one goes to a thread. The hop costs as much as a short trace's
# verification, which halved `find --method verify`'s throughput when every trace took it.
INLINE_STEPS = 20

_WORDS = {Verdict.CORRECT: "correct", Verdict.MISTAKEN: "mistaken",
          Verdict.CANNOT_JUDGE: "cannot judge"}


def verdict_line(verdict: StepVerdict) -> str:
    """One step's verdict as `raw` keeps it: 'Thought 3: mistaken: 'chill' starts with c'."""
    line = f"Thought {verdict.index + 1}: {_WORDS[verdict.kind]}"
    return f"{line}: {verdict.reason}" if verdict.reason else line


def verify(task: str, input_text: str, steps: Sequence[str]) -> tuple[FindResult,
                                                                       list[StepVerdict]]:
    """The verifier's answer for a trace and its verdict on every step."""
    verdicts = verify_trace(task, input_text, steps)
    first = next((v.index for v in verdicts if v.kind is Verdict.MISTAKEN), None)
    result = FindResult(VERIFY, VERIFIER_MODEL, first, True,
                        [verdict_line(v) for v in verdicts])
    return result, verdicts


async def verify_events(task: str, input_text: str,
                        steps: Sequence[str]) -> AsyncIterator[FindEvent]:
    """verify() as a finder's events: one StepJudged per step (True correct, False mistaken,
    None cannot judge; no call), then FindFinished. A long trace is verified in a thread, so
    that the app's event loop is never held for more than a few milliseconds. Raises
    ValueError for a trace with no thoughts, as the finders do."""
    if not steps:
        raise ValueError(NO_THOUGHTS)
    if len(steps) <= INLINE_STEPS:
        result, verdicts = verify(task, input_text, steps)
    else:
        result, verdicts = await asyncio.to_thread(verify, task, input_text, steps)
    for verdict in verdicts:
        correct = {Verdict.CORRECT: True, Verdict.MISTAKEN: False}.get(verdict.kind)
        yield StepJudged(verdict.index + 1, correct, verdict_line(verdict), None)
    yield FindFinished(result)
