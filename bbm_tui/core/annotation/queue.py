"""An annotation queue (docs/DESIGN.md §11): one annotator working through the traces of
dataset files with the paper's protocol or PRM800K's per-step one (protocol.py).

A queued trace becomes a session (source "annotate") the first time anyone works on it, found
again by its content (`trace_key`: the question and the steps), so two annotators of one file
label the same sessions, and quitting and reopening the file resumes where each left off. Each
annotator's judgements, status, time and flags are committed on every action (store v6,
`annotation_work`); a submitted trace's label goes to `labels` with the annotator and whether
a suggestion was seen first, and with the per-step protocol every thought's rating and the
finish reason (store v12); a note written on the trace goes with its label.

A row without a `mistake_index` key is unlabelled: it has no gold label. A row whose
`mistake_index` is null says "no mistake".
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.reasonings import thinking_of
from bbm_tui.core.dataset import TraceRow, rows_with_tasks
from bbm_tui.core.dataset.formats import (
    StepCut,
    origin_of,
    read_dataset,
    trace_digest,
    with_digest,
)
from bbm_tui.core.generation.cuts import step_cut
from bbm_tui.core.records import FlagReason, WorkStatus
from bbm_tui.core.store import QueueWork, Store
from bbm_tui.core.tasks import get_task
from bbm_tui.core.trace.session import recorded_steps, stored_definition
from bbm_tui.core.types import ADJUDICATOR, RECORDED_MODEL, VERIFIER_MODEL

# How far back the estimate to finish looks: the mean of the latest submitted traces.
_RECENT = 50


def trace_key(input: str, steps: Sequence[str]) -> str:
    """A trace's identity across files, annotators and runs: its question and its steps."""
    return trace_digest(input, steps)


@dataclass
class QueuedTrace:
    """One row of a queued file."""

    path: Path
    line: int
    task: str
    row: TraceRow
    has_gold: bool
    _key: str | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        """`trace_key` of the row, worked out when first asked for: opening a file that no
        one has worked on needs none but the first trace's (AnnotationQueue.index does the
        rest after the first screen)."""
        if self._key is None:
            self._key = trace_key(self.row.input, self.row.steps)
        return self._key

    @property
    def gold(self) -> int | None:
        """The file's label (only meaningful when `has_gold`)."""
        return self.row.mistake_index

    @property
    def name(self) -> str:
        return f"{self.path.name}:{self.line}"

    @property
    def model_prediction(self) -> int | str | None:
        """A finder's prediction carried by the row (a `find` output), or "" when none."""
        if "predicted_mistake_index" not in self.row.extra:
            return ""
        value = self.row.extra["predicted_mistake_index"]
        return value if value is None or isinstance(value, int) else ""


def read_labelled_rows(path: Path, fmt: str | None = None) -> list[tuple[int, TraceRow, bool]]:
    """(line, row, whether the row carries a label) for every row of a dataset file, in the
    BBM dataset's format or any of the field's (`fmt`, else told by its first row's keys); a
    BBM row without `mistake_index` is read as unlabelled (and written back without the key).
    Bad input names the file and line (DatasetError)."""
    return [(number, row, row.labelled) for number, row in read_dataset(path, fmt).rows]


def read_queue_file(path: Path, task: str | None = None, fmt: str | None = None,
                    cut: StepCut | None = None) -> list[QueuedTrace]:
    """Every row of a dataset file as a queued trace, under the row's own `task`, else
    `task`, else its format's (`processbench`, ...), else the file's name (as every command
    reads it). A reasoning written elsewhere is cut into steps by `cut` (by paragraph
    unless told: the app's "Annotate files" has no --split)."""
    with collector_paused():
        found = read_dataset(path, fmt, cut=cut or step_cut()).rows
        tasks = rows_with_tasks(path, task, (row for _number, row in found))
        return [QueuedTrace(path, number, row_task, row, row.labelled)
                for (number, row), (row_task, _row) in zip(found, tasks, strict=True)]


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cycle collector held off while a file's rows are built. Every row adds a few
    containers that live on, so the collector's passes, each walking more of them, found
    nothing and took a third of the time of reading 10,000 traces (bench/annotate_queue.py).
    Reference counting still frees what is dropped; the collector resumes afterwards."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


class FinishedElsewhere(protocol.ProtocolError):
    """The trace on show was submitted or flagged in another window of the same annotator:
    nothing was done here, and the queue has moved on to the next unfinished trace."""


@dataclass(frozen=True)
class Progress:
    done: int
    flagged: int
    skipped: int
    total: int
    mean_s: float | None  # seconds per submitted trace, over the latest ones
    remaining_s: float | None  # the estimate to finish the open traces

    @property
    def finished(self) -> int:
        return self.done + self.flagged


@dataclass(frozen=True)
class Submitted:
    """What submitting a trace gave: the label, and the file's gold label when it has one."""

    trace: QueuedTrace
    mistake_index: int | None
    has_gold: bool
    gold: int | None
    finish_reason: str | None = None

    @property
    def agrees(self) -> bool | None:
        return self.gold == self.mistake_index if self.has_gold else None


@dataclass(frozen=True)
class Suggestion:
    """What a judge says of the trace, shown only when asked for."""

    source: str  # "verifier" or the model's name
    mistake_index: int | None
    reason: str = ""


class AnnotationQueue:
    """One annotator's queue over some files' traces, in file order."""

    def __init__(self, store: Store, annotator: str, traces: list[QueuedTrace],
                 clock: Callable[[], float] = time.monotonic,
                 protocol_name: str = protocol.PAPER) -> None:
        if not annotator or annotator == ADJUDICATOR:
            raise ValueError(f"not an annotator's name: {annotator!r}")
        if protocol_name not in protocol.PROTOCOLS:
            raise ValueError(f"unknown protocol {protocol_name!r}")
        self.protocol = protocol_name
        self.store = store
        self.annotator = annotator
        self.traces = traces
        self._clock = clock
        self._sessions: dict[str, int] = {}
        self._work: dict[str, QueueWork] = {}
        self._load_work()
        self._step_ids: dict[int, list[int]] = {}
        # Traces submitted or flagged in this sitting, latest last, so that undo can reopen
        # them (a flag moves on to the next trace, and the queue has no key to go back).
        self._history: list[int] = []
        # Counted once, then again only when a trace's status changes (not on every key).
        self._progress: Progress | None = None
        self.position = self.first_unfinished() or 0
        self._opened_at = self._clock()

    def _load_work(self) -> None:
        """Every trace's session and this annotator's work on it, as the store has them."""
        self._sessions = self.store.queue_links()
        by_session = self.store.queue_work(self.annotator)
        # An annotator who has worked on nothing needs no trace's key to start.
        self._work = {
            trace.key: by_session[self._sessions[trace.key]]
            for trace in self.traces
            if trace.key in self._sessions and self._sessions[trace.key] in by_session
        } if by_session else {}
        self._progress = None

    def _sync(self) -> None:
        """Before each action: the trace on show as the store has it now. Another window of
        the same annotator (`bbm-tui serve` runs one app per browser) may have judged,
        submitted or flagged it since this one read it; a trace finished there is left here
        for the next unfinished one (FinishedElsewhere), with every trace's work read again."""
        trace = self.current
        session_id, stored = self.store.queued_work(trace.key, self.annotator)
        if session_id is None:
            return
        self._sessions[trace.key] = session_id
        if stored is None:
            return
        before = self._work.get(trace.key)
        finished = (WorkStatus.DONE, WorkStatus.FLAGGED)
        if stored.status in finished and (before is None or before.status != stored.status):
            self._finished_elsewhere()
        if before is None or before.status != stored.status:
            self._progress = None
        # The time this window has banked on it is kept with the other's.
        spent = before.time_spent_s if before is not None else 0.0
        self._work[trace.key] = replace(stored,
                                        time_spent_s=max(stored.time_spent_s, spent))

    def _finished_elsewhere(self) -> None:
        self._load_work()
        self._opened_at = self._clock()
        following = self.first_unfinished(self.position)
        if following is not None:
            self.position = following
        raise FinishedElsewhere("That trace was finished in another window of yours; here "
                                "is your next one.")

    @classmethod
    def open(cls, store: Store, paths: Sequence[Path], annotator: str,
             task: str | None = None, protocol_name: str = protocol.PAPER) -> AnnotationQueue:
        traces: list[QueuedTrace] = []
        for path in paths:
            traces.extend(read_queue_file(Path(path), task))
        return cls(store, annotator, traces, protocol_name=protocol_name)

    @property
    def per_step(self) -> bool:
        return self.protocol == protocol.PER_STEP

    # -- reading

    @property
    def current(self) -> QueuedTrace:
        return self.traces[self.position]

    def work(self, index: int | None = None) -> QueueWork:
        trace = self.traces[self.position if index is None else index]
        found = self._work.get(trace.key)
        if found is not None:
            return found
        return QueueWork(self._sessions.get(trace.key, 0), self.annotator)

    @property
    def judged(self) -> str:
        return self.work().judged

    @property
    def status(self) -> WorkStatus:
        return WorkStatus(self.work().status)

    @property
    def complete(self) -> bool:
        return protocol.complete(self.judged, len(self.current.row.steps), self.protocol)

    @property
    def unlocked(self) -> int | None:
        if self.status is not WorkStatus.OPEN and self.status is not WorkStatus.SKIPPED:
            return None
        return protocol.unlocked(self.judged, len(self.current.row.steps), self.protocol)

    def session_id(self, index: int | None = None) -> int | None:
        trace = self.traces[self.position if index is None else index]
        return self._sessions.get(trace.key)

    def first_unfinished(self, after: int = -1) -> int | None:
        """The next trace to work on after `after` (wrapping round): an open one first, then
        the skipped ones; None when every trace is submitted or flagged."""
        count = len(self.traces)
        order = [(after + 1 + offset) % count for offset in range(count)]
        for wanted in (WorkStatus.OPEN, WorkStatus.SKIPPED):
            for index in order:
                if self.work(index).status == wanted:
                    return index
        return None

    def progress(self) -> Progress:
        if self._progress is None:
            self._progress = self._count_progress()
        return self._progress

    def index(self) -> None:
        """Work out every trace's key ahead of need (in a thread, while the first trace is
        read), so that counting the progress after the first judgement is quick."""
        for trace in self.traces:
            _ = trace.key

    def _count_progress(self) -> Progress:
        done = flagged = skipped = 0
        times: list[tuple[float, float]] = []
        if not self._work:  # nothing done yet: no trace's key needed
            return Progress(0, 0, 0, len(self.traces), None, None)
        for trace in self.traces:
            work = self._work.get(trace.key)
            if work is None:
                continue
            if work.status == WorkStatus.DONE:
                done += 1
                times.append((work.updated_at, work.time_spent_s))
            elif work.status == WorkStatus.FLAGGED:
                flagged += 1
            elif work.status == WorkStatus.SKIPPED:
                skipped += 1
        recent = [spent for _at, spent in sorted(times)[-_RECENT:]]
        mean = sum(recent) / len(recent) if recent else None
        left = len(self.traces) - done - flagged
        return Progress(done, flagged, skipped, len(self.traces), mean,
                        None if mean is None else mean * left)

    # -- acting (each commits at once)

    def go_to(self, index: int) -> None:
        self._bank_time()
        self.position = index % len(self.traces)

    def judge(self, correct: bool) -> None:
        """Judge the unlocked thought (per-step: rate it good or bad); the next one unlocks."""
        self.rate(1 if correct else -1)

    def rate(self, rating: int) -> None:
        """Rate the unlocked thought +1, 0 (per-step only) or -1; the next one unlocks."""
        self._sync()
        if self.unlocked is None:
            raise protocol.ProtocolError("nothing to judge here: the trace is complete, "
                                         "submitted or flagged")
        # Banked with the judgement, so that quitting mid-trace keeps the time spent on it.
        work = self._bank_time()
        self._save(replace(work, judged=protocol.rate(work.judged, len(self.current.row.steps),
                                                      rating, self.protocol)))

    def set_note(self, note: str) -> None:
        """A note on the trace on show (why its first mistake is one): it goes with the label
        when the trace is submitted."""
        self._sync()
        work = self._bank_time()
        if work.status in (WorkStatus.DONE, WorkStatus.FLAGGED):
            raise protocol.ProtocolError("undo first: the trace is submitted or flagged")
        self._save(replace(work, note=note.strip() or None))

    def undo(self) -> bool:
        """Withdraw the latest judgement of the trace on show; on a trace with none, reopen the
        trace submitted or flagged last in this sitting: a submitted one with its label
        withdrawn and its last judgement undone, a flagged one unflagged. False when there is
        nothing to undo."""
        self._sync()
        work = self._bank_time()
        if work.status == WorkStatus.DONE:
            self._withdraw(self.position)
            work = self.work()
        if work.status == WorkStatus.FLAGGED:
            self._save(replace(work, status=WorkStatus.OPEN, flag_reason=None, note=None))
            return True
        if work.judged:
            self._save(replace(work, judged=protocol.undo(work.judged)))
            return True
        while self._history:
            index = self._history.pop()
            status = self.work(index).status
            if status not in (WorkStatus.DONE, WorkStatus.FLAGGED):
                continue  # reopened since (by undo on the trace itself)
            self.go_to(index)
            work = self.work()
            if status == WorkStatus.FLAGGED:
                self._save(replace(work, status=WorkStatus.OPEN, flag_reason=None, note=None))
                return True
            self._withdraw(index)
            work = self.work()
            self._save(replace(work, judged=protocol.undo(work.judged)))
            return True
        return False

    def _withdraw(self, index: int) -> None:
        session_id = self.session_id(index)
        if session_id is not None:
            self.store.undo_label(session_id, self.annotator)
        self._save(replace(self.work(index), status=WorkStatus.OPEN), index)

    def submit(self) -> Submitted:
        """Record the label of the complete trace on show and move to the next unfinished
        one (the position stays when none is left)."""
        self._sync()
        if not self.complete or self.status in (WorkStatus.DONE, WorkStatus.FLAGGED):
            raise protocol.ProtocolError("the trace is not complete: judge every thought up "
                                         "to the first incorrect one")
        trace = self.current
        work = self._bank_time()
        session_id = self._ensure_session(self.position)
        mistake = protocol.location(work.judged)
        step_ids = self._steps_of(session_id)
        finish = protocol.finish_reason(work.judged) if self.per_step else None
        work = replace(work, session_id=session_id, annotator=self.annotator)
        label = self.store.submit_work(
            work, None if mistake is None else step_ids[mistake],
            step_ids[-1] if step_ids else None,
            ratings=protocol.ratings(work.judged) if self.per_step else None,
            finish_reason=finish,
        )
        if label is None:  # submitted meanwhile in another window: its label stands alone
            self._finished_elsewhere()
        self._progress = None
        self._work[trace.key] = replace(work, status=WorkStatus.DONE, updated_at=time.time())
        self._history.append(self.position)
        self._advance()
        return Submitted(trace, mistake, trace.has_gold, trace.gold if trace.has_gold else None,
                         finish)

    def skip(self) -> None:
        """Put the trace off: the queue comes back to it when nothing else is left."""
        self._sync()
        work = self._bank_time()
        if work.status == WorkStatus.OPEN:
            self._save(replace(work, status=WorkStatus.SKIPPED))
        self._advance()

    def flag(self, reason: FlagReason, note: str = "") -> None:
        """Set the trace aside, unlabelled, with why (per-step: PRM800K's bad_problem or
        give_up; the ratings made so far are kept)."""
        self._sync()
        work = self._bank_time()
        if work.status == WorkStatus.DONE:
            self._withdraw(self.position)
            work = self.work()
        self._save(replace(work, status=WorkStatus.FLAGGED, flag_reason=str(reason),
                           note=note or None))
        self._history.append(self.position)
        self._advance()

    def suggestions(self) -> list[Suggestion]:
        """The verifier's first mistake (and a finder's, when the row carries one). Asking
        marks the trace's label as assisted."""
        from bbm_tui.core.tasks.verify import LOGIC, first_mistake

        trace = self.current
        found: list[Suggestion] = []
        if trace.task in LOGIC:
            verdict = first_mistake(trace.task, trace.row.input, trace.row.steps)
            found.append(Suggestion(VERIFIER_MODEL, verdict.index if verdict else None,
                                    verdict.reason if verdict else "no mistake found"))
        predicted = trace.model_prediction
        if not isinstance(predicted, str):  # "" when the row carries none
            model = trace.row.extra.get("model")
            found.append(Suggestion(model if isinstance(model, str) and model else "model",
                                    predicted))
        self._save(replace(self.work(), assisted=True))
        return found

    # -- the rest

    def _advance(self) -> None:
        following = self.first_unfinished(self.position)
        if following is not None:
            self.go_to(following)

    def _bank_time(self) -> QueueWork:
        """Add the seconds since the trace came on screen (or the last banking) to its work,
        saved once the trace has a session."""
        now = self._clock()
        spent, self._opened_at = now - self._opened_at, now
        work = self.work()
        work = replace(work, time_spent_s=work.time_spent_s + spent)
        self._work[self.current.key] = work
        return work

    def _ensure_session(self, index: int) -> int:
        trace = self.traces[index]
        session_id = self._sessions.get(trace.key)
        if session_id is None:
            model = trace.row.extra.get("model")
            task = get_task(trace.task)
            session_id = self.store.create_queued_session(
                trace.key, has_gold=trace.has_gold, task=trace.task, input=trace.row.input,
                target=trace.row.target,
                model=model if isinstance(model, str) and model else RECORDED_MODEL,
                name=trace.name,
                gold_mistake_index=trace.gold if trace.has_gold else None,
                steps=recorded_steps(task, trace.row.steps, trace.row.answer),
                task_definition=stored_definition(task),
                reasoning=thinking_of(trace.row),
            )
            origin = origin_of(trace.row)
            if origin is not None:  # a row of the field's formats: written back as it came
                self.store.set_origin(session_id, with_digest(
                    origin, trace.row.input, trace.row.steps, trace.key))
            self._sessions[trace.key] = session_id
        return session_id

    def _steps_of(self, session_id: int) -> list[int]:
        if session_id not in self._step_ids:
            self._step_ids[session_id] = self.store.step_ids(session_id)
        return self._step_ids[session_id]

    def _save(self, work: QueueWork, index: int | None = None) -> None:
        index = self.position if index is None else index
        session_id = self._ensure_session(index)
        work = replace(work, session_id=session_id, annotator=self.annotator,
                       updated_at=time.time())
        self.store.save_work(work)
        before = self._work.get(self.traces[index].key)
        if before is None or before.status != work.status:
            self._progress = None
        self._work[self.traces[index].key] = work


def question_text(trace: QueuedTrace) -> str:
    """The question as the paper formats it for the task."""
    return get_task(trace.task).question(trace.row.input)


@dataclass(frozen=True)
class AnnotatorProgress:
    """How far one annotator is through a team's queue (`bbm-tui serve`'s lead sees it)."""

    annotator: str
    done: int
    flagged: int
    total: int


def team_progress(store: Store, traces: Sequence[QueuedTrace]) -> list[AnnotatorProgress]:
    """Every annotator who has worked on these traces, by name: traces submitted and flagged
    of all of them (as the store has it now; blocking)."""
    links = store.queue_links()
    sessions = {links[trace.key] for trace in traces if trace.key in links}
    counts: dict[str, list[int]] = {}
    for work in store.all_queue_work():
        if work.session_id not in sessions:
            continue
        done_flagged = counts.setdefault(work.annotator, [0, 0])
        if work.status == WorkStatus.DONE:
            done_flagged[0] += 1
        elif work.status == WorkStatus.FLAGGED:
            done_flagged[1] += 1
    return [AnnotatorProgress(name, done, flagged, len(traces))
            for name, (done, flagged) in sorted(counts.items())]
