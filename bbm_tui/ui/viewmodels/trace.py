"""What the main screen shows, computed from the session and nothing else (no widgets): each
thought's status under the label, the label, a finder run as shown, the agreement between
the person and the model, the dataset's gold label. Pure functions and records, so that
they are tested without an app."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from textual.content import Content

from bbm_tui.core.judging.judges import JUDGES
from bbm_tui.core.records import FinderEnd, TraceEnd, Verdict
from bbm_tui.core.store import FinderRun
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.types import VERIFY
from bbm_tui.ui.text import (
    GLYPH_MISTAKE,
    GLYPH_OK,
    GLYPH_UNPARSED,
    MUTED,
    safe_line,
    styled,
    thoughts,
)

# A thought's status under the person's label.
Status = Literal["plain", "ok", "mistake", "after"]
# A mistake finder's verdict on one thought: "yes" (correct), "no" (incorrect), "unparsed" (an
# answer that says neither), "first" (a trace-level finder named it the first mistake),
# "pending" (being judged now).
Judgement = Literal["yes", "no", "unparsed", "first", "pending"]

FINISH_MESSAGES = {
    TraceEnd.STEP_LIMIT: "Stopped at the step limit ({limit}) without an answer.",
    TraceEnd.EMPTY: "The model returned nothing more: the trace ends here, without an answer.",
    TraceEnd.TRUNCATED: "Thought {number} was cut at the token limit; the run stopped so you "
                        "can look.",
}


def question_text(task: Task | str, input_text: str) -> str:
    """The question as the model sees it, minus the "Q: " that only marks it in the prompt."""
    text = get_task(task).question(input_text)
    return text[3:] if text.startswith("Q: ") else text


def no_mistake_covers(trace: TraceSession) -> int | None:
    """How many thoughts a "no mistake" label was given on (None: no such label). A label is
    for the steps it saw: fewer than the trace has now means the label is stale."""
    if not trace.no_mistake or trace.label is None:
        return None
    return trace.place_of(trace.label.leaf_step_id) or len(trace.steps)


@dataclass(frozen=True)
class Statuses(Sequence[Status]):
    """The glyph of each thought under the current label (the paper's protocol: steps before
    the first mistake are correct, the rest are not judged), worked out for a thought when
    asked: the screen asks for the few on show, of a trace that may have 10^5."""

    count: int
    mistake: int | None = None  # the flagged first mistake's number
    covered: int | None = None  # a "no mistake" label's: how many thoughts it saw

    def __len__(self) -> int:
        return self.count

    @overload
    def __getitem__(self, index: int) -> Status: ...

    @overload
    def __getitem__(self, index: slice) -> list[Status]: ...

    def __getitem__(self, index: int | slice) -> Status | list[Status]:
        if isinstance(index, slice):
            return [self[number] for number in range(*index.indices(self.count))]
        if not -self.count <= index < self.count:
            raise IndexError(index)
        return self._of(index % self.count + 1)

    def _of(self, number: int) -> Status:
        if self.mistake is not None:
            return "ok" if number < self.mistake else (
                "mistake" if number == self.mistake else "after")
        if self.covered is not None:
            # A "no mistake" verdict covers the steps there were when it was given.
            return "ok" if number <= self.covered else "plain"
        return "plain"


def statuses(trace: TraceSession) -> Statuses:
    """Each thought's status under the current label, in order (see `Statuses`)."""
    count = len(trace.steps)
    mistake = trace.mistake_number
    if mistake is not None:
        return Statuses(count, mistake=mistake)
    return Statuses(count, covered=no_mistake_covers(trace))


def describe_label(trace: TraceSession) -> Content:
    mistake = trace.mistake_number
    if mistake is not None:
        return Content.assemble(
            ("Label: ", "bold"), (f"{GLYPH_MISTAKE} first mistake in Thought {mistake}",
                                  "$text-error"),
        )
    covered = no_mistake_covers(trace)
    if covered is not None and covered < len(trace.steps):
        which = "Thought 1" if covered == 1 else f"Thoughts 1-{covered}"
        more = len(trace.steps) - covered
        written = "1 more was written" if more == 1 else f"{more} more were written"
        return Content.assemble(
            ("Label: ", "bold"), (f"{GLYPH_OK} no mistake in {which} only", "$text-warning"),
            (f" (stale: given before {written}; label again)", MUTED),
        )
    if covered is not None:
        return Content.assemble(("Label: ", "bold"), (f"{GLYPH_OK} no mistake", "$text-success"))
    return Content.assemble(("Label: ", "bold"), ("not labelled yet", MUTED))


# -- a mistake finder's run, as shown

_JUDGEMENTS: dict[str, Judgement] = {Verdict.CORRECT: "yes", Verdict.MISTAKEN: "no"}

FinderState = Literal["running", "finished", "stopped", "failed"]


@dataclass
class FinderShown:
    """A finder run as the screen shows it: read from the store on resume (or after a run is
    stopped), built from the run's events as they arrive otherwise (each verdict is saved
    before its event comes, so both ways show the same)."""

    method: str
    model: str
    judge_all: bool = False
    leaf_step_id: int | None = None
    # Step-level: thought number -> (verdict "Yes"/"No" or None when unparseable, raw answer).
    verdicts: dict[int, tuple[str | None, str]] = field(default_factory=dict)
    # Trace-level: the one answer, verbatim.
    trace_raw: str | None = None
    state: FinderState = "running"
    mistake_number: int | None = None
    parsed: bool | None = None
    error: str | None = None

    @classmethod
    def of_run(cls, run: FinderRun) -> FinderShown:
        # A run with no result and no record of how it ended was cut short by its process
        # dying: as good as stopped.
        state: FinderState = ("finished" if run.finished
                              else "failed" if run.ended == FinderEnd.FAILED else "stopped")
        shown = cls(run.method, run.model, bool(run.params.get("judge_all")), run.leaf_step_id,
                    state=state, mistake_number=run.mistake_number, parsed=run.parsed,
                    error=run.error)
        for verdict in run.verdicts:
            if verdict.step_number is None:
                shown.trace_raw = verdict.raw
            else:
                shown.verdicts[verdict.step_number] = (verdict.verdict, verdict.raw)
        return shown

    @property
    def step_level(self) -> bool:
        judge = JUDGES.get(self.method)  # None: a run by a judge this version does not have
        return judge.step_level if judge is not None else bool(self.verdicts)

    @property
    def cot(self) -> bool:
        judge = JUDGES.get(self.method)
        return judge is not None and judge.cot

    @property
    def has_result(self) -> bool:
        return self.state == "finished" and self.parsed is not None

    @property
    def next_number(self) -> int:
        """The thought a step-level run is judging now."""
        return max(self.verdicts, default=0) + 1

    def judgements(self, count: int) -> dict[int, tuple[Judgement, str | None]]:
        """The mark (and raw answer) for each judged thought of a trace of `count` thoughts."""
        marks: dict[int, tuple[Judgement, str | None]] = {}
        if self.step_level:
            for number, (verdict, raw) in self.verdicts.items():
                judgement = _JUDGEMENTS.get(verdict or "", "unparsed")
                marks[number] = (judgement, raw)
            if self.state == "running" and self.next_number <= count:
                marks[self.next_number] = ("pending", None)
        elif self.has_result and self.parsed and self.mistake_number is not None:
            marks[self.mistake_number] = ("first", None)
        return {number: mark for number, mark in marks.items() if number <= count}

    def verdict_text(self) -> str:
        """The run's conclusion in a few words, as the model said it."""
        if not self.has_result:
            return "no result"
        if not self.parsed:
            return "unparseable"
        if self.mistake_number is None:
            return "no mistake"
        return f"first mistake in Thought {self.mistake_number}"


def finder_who(shown: FinderShown) -> str:
    """Who judged: the task verifier is a program, not a model ("Model says" misled)."""
    return "Verifier" if shown.method == VERIFY else "Model"


def finder_source(shown: FinderShown) -> str:
    """`direct-step · replay/bbm`: which method and which model."""
    return f"{shown.method} · {one_line(shown.model, 40)}"


# How much of a failed finder's reason its pane shows.
FINDER_ERROR_SHOWN = 100


def error_cut(error: str) -> bool:
    """Whether the pane cuts this reason (and the messages screen must show it whole)."""
    return len(one_line(error)) > FINDER_ERROR_SHOWN


def describe_finder(shown: FinderShown, trace: TraceSession) -> Content:
    """The finder's verdict for the question pane, with the method and model under it."""
    line = Content.assemble((f"{finder_who(shown)}: ", "bold"))
    count = len(shown.verdicts)
    answers = f"{count} answer{'s' if count != 1 else ''}"
    if shown.state == "running":
        doing = (f"judging Thought {shown.next_number}…" if shown.step_level
                 else "reading the whole trace…")
        line = line.append(styled(doing, "$accent"))
    elif shown.state in ("stopped", "failed"):
        what = "stopped" if shown.state == "stopped" else "failed"
        after = f" after {answers}" if shown.step_level and count else ""
        line = line.append(styled(f"{what}{after}: no result", "$text-warning"))
        if shown.error:
            # The pane keeps to a line or two; the whole reason is in the messages screen
            # (question_pane keeps it there), and the pane says so when it cuts it.
            cut = error_cut(shown.error)
            line = line.append(styled(" (", MUTED)).append(
                safe_line(shown.error, FINDER_ERROR_SHOWN).stylize(MUTED)).append(
                styled(") (whole in messages, M)" if cut else ")", MUTED))
    elif not shown.parsed:
        line = line.append(styled(f"{GLYPH_UNPARSED} unparseable", "bold $text-warning"))
        if shown.step_level:
            unparsed = [n for n, (verdict, _) in sorted(shown.verdicts.items()) if verdict is None]
            if unparsed:
                line = line.append(styled(f" answer on Thought {unparsed[0]}", "$text-warning"))
        elif shown.trace_raw is not None:
            line = line.append(styled(": ", "$text-warning")).append(
                safe_line(shown.trace_raw, 120))
    elif shown.mistake_number is None:
        line = line.append(styled(f"{GLYPH_OK} no mistake", "$text-success"))
    else:
        line = line.append(styled(f"{GLYPH_MISTAKE} first mistake in Thought "
                                  f"{shown.mistake_number}", "$text-error"))
    where = finder_source(shown)
    if shown.step_level and shown.judge_all:
        where += " · every step"
    leaf = trace.place_of(shown.leaf_step_id)
    if shown.leaf_step_id is not None and leaf is None:
        where += " · on another branch"
    elif leaf is not None and leaf < len(trace.steps):
        where += f" · on Thoughts 1–{leaf}"
    return line.append("\n").append(styled(f"({where})", MUTED))


def describe_agreement(shown: FinderShown | None, trace: TraceSession) -> Content | None:
    """The person's flag beside the model's, and whether they agree; None before a result."""
    if shown is None or not shown.has_result:
        return None
    you_number = trace.mistake_number
    if you_number is not None:
        you = f"Thought {you_number}"
    elif trace.no_mistake:
        you = "no mistake"
    else:
        you = None
    if not shown.parsed:
        model = "unparseable"
    elif shown.mistake_number is None:
        model = "no mistake"
    else:
        model = f"Thought {shown.mistake_number}"
    # Every run of one style ends with its space, none starts with one (librsvg drops the
    # leading spaces of a run when it draws a screenshot).
    line = Content.assemble(("You: ", "bold"))
    line = line.append(styled("not labelled yet ", MUTED) if you is None else Content(f"{you} "))
    line = line.append(styled("· ", MUTED)).append(styled(f"{finder_who(shown)}: ", "bold"))
    line = line.append(model)
    if you is None or not shown.parsed:
        return line
    # The verdict first: in a narrow pane the line wraps, and its glyph stays with its word.
    agree = shown.mistake_number == you_number
    verdict = (styled(f"agree {GLYPH_OK} ", "bold $text-success") if agree
               else styled(f"disagree {GLYPH_MISTAKE} ", "bold $text-error"))
    return verdict.append(styled("· ", MUTED)).append(line)


def agreement_words(shown: FinderShown, trace: TraceSession,
                    key_for: Callable[[str], str]) -> str:
    """The agreement for the status line, as a sentence; `key_for` names the key bound to a
    binding id (ui/keys.py), for the hint."""
    if not shown.has_result:
        return ""
    if trace.mistake_number is None and not trace.no_mistake:
        return (f"You have not labelled the trace yet ({key_for('flag_mistake')} flags the "
                f"first mistake, {key_for('no_mistake')} says none).")
    if not shown.parsed:
        return "Its answer could not be read, so it cannot agree with your label."
    yours = (f"Thought {trace.mistake_number}" if trace.mistake_number is not None
             else "no mistake")
    agree = trace.mistake_number == shown.mistake_number
    return f"You said {yours}: {'you agree' if agree else 'you disagree'}."


def describe_gold(trace: TraceSession, recorded: list[str] | None) -> Content:
    """The dataset's gold label, and whether it is about the trace on show: `recorded` is the
    dataset's trace for this question (None when the question is not the dataset's)."""
    session = trace.session
    line = Content.assemble(("Gold: ", "bold"))
    if session.dataset_index is None or recorded is None:
        return line.append(styled("none (not a question of the dataset)", MUTED))
    gold = session.gold_mistake_index
    if gold is None:
        line = line.append(styled(f"{GLYPH_OK} no mistake", "$text-success"))
    else:
        line = line.append(styled(f"{GLYPH_MISTAKE} first mistake in Thought {gold + 1}",
                                  "$text-error"))
    # A thought past the recorded ones is all it takes to tell (not 10^5 of them read).
    texts = [step.text for step in trace.steps[:len(recorded) + 1]]
    if texts == recorded:
        return line
    if recorded[: len(texts)] == texts:
        written = "1 is" if len(texts) == 1 else f"{len(texts)} are"
        note = f"for the dataset's {thoughts(len(recorded))}; {written} written so far"
    else:
        differs = next((i for i, (a, b) in enumerate(zip(texts, recorded, strict=False), 1)
                        if a != b), min(len(texts), len(recorded)) + 1)
        note = (f"for the dataset's recorded trace; this one departs from it at Thought "
                f"{differs}")
    return line.append("\n").append(styled(f"({note})", MUTED))


