"""Getting traces in and out of the store (docs/DESIGN.md §8, §14).

Formats, one trace (the branch on show) per session, and one per model where several models
answer one question side by side (each with its `model`):
- `jsonl`: the dataset's own rows (`input, steps, answer, target, mistake_index`), so a
  dataset file imported and exported again means exactly the same (a trace read from one of
  the field's formats keeps its `origin`);
- the field's step-level formats (core/dataset/formats/): `processbench` (`label`, -1 =
  none), `prm800k` (per-step ratings), `mr-gsm8k`, `mr-ben` (with the first mistake's
  rectified version from a backtracked or rewritten branch), `math-shepherd`, `prmbench`,
  `trl` (stepwise supervision); a trace read from one of them is written back in it with
  everything it carried;
- `dpo`: preference pairs from branches (`dpo_rows`);
- `markdown`: for reading and sharing;
- `csv`: every annotator's label in force (and every flagged trace), with the time spent and
  whether a suggestion was seen (`export_csv`); `csv-steps`: every rating of every step, one
  row an annotator's step (`export_step_csv`).

A session labelled through annotation queues (core/annotation/queue.py) exports the adjudicated
label, else the majority's of its annotators (a tie: unlabelled, it waits for adjudication),
with the ratings and notes of the annotators who chose that location.

Only labelled traces have a first-mistake label. An unlabelled one exports with no
`mistake_index` key at all (jsonl: `null` would say "no mistake"), as "not labelled"
(markdown), or is left out where the format needs a label; `ExportResult` counts both. A
jsonl export of more than one task writes each row's `task`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.reasonings import (
    cut_from_sentence,
    stored_thinking,
    thinking_keys,
    thinking_of,
)
from bbm_tui.core.dataset import TraceRow, is_standard_output, replacing
from bbm_tui.core.dataset.formats import (
    FORMATS as FIELD_FORMATS,
)
from bbm_tui.core.dataset.formats import (
    ORIGIN_KEY,
    RATINGS_KEY,
    READ_FORMATS,
    Alternative,
    OutTrace,
    document_text,
    origin_of,
    with_digest,
    write_rows,
)
from bbm_tui.core.dataset.formats.positions import ratings_for
from bbm_tui.core.dataset.formats.prm800k import finish_reason as prm800k_reason
from bbm_tui.core.dataset.outfile import OutputFileError
from bbm_tui.core.records import FlagReason, SessionSource, WorkStatus
from bbm_tui.core.store import (
    SQLITE_HEADER,
    AnnotatorLabel,
    Label,
    QueueWork,
    RecordedReasoning,
    Session,
    Step,
    Store,
)
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.textsafe import one_line, printable
from bbm_tui.core.trace.session import BranchLabel, NewTrace, TraceSession, session_task
from bbm_tui.core.types import DEFAULT_ANNOTATOR, RECORDED_MODEL, StepOrigin

# The field's formats a session can be written in (the BBM dataset's is `jsonl`).
STEP_FORMATS = tuple(name for name in READ_FORMATS if FIELD_FORMATS[name].writer is not None)
FORMATS = ("jsonl", *STEP_FORMATS, "dpo", "markdown", "csv", "csv-steps")
# Formats written by their own function, from the store rather than from traces.
_FROM_STORE = ("csv", "csv-steps", "dpo")


@dataclass(frozen=True)
class LabelledTrace:
    """One session's trace as the exports see it."""

    session_id: int
    name: str
    task: str
    model: str
    input: str
    steps: list[str]
    answer: str | None
    target: str | None
    labelled: bool
    mistake_index: int | None  # 0-based; None with labelled=True means "no mistake"
    created_at: float | None = None
    # Seconds the annotators spent on it in queues (None: not labelled in a queue).
    time_spent_s: float | None = None
    labeler: str = "bbm-tui"
    # Per thought of `steps`: its other versions (backtracking's samples, other branches).
    alternatives: tuple[tuple[Alternative, ...], ...] = ()
    # The task as the session was made with it (a task of one's own may have changed since);
    # None: the one `task` names now.
    task_spec: Task | None = None
    # What the row it was read from carried (one of the field's formats), if it was.
    origin: dict[str, Any] | None = None
    # The per-step protocol's ratings of `steps` (as far as rated) and finish reason.
    ratings: tuple[int, ...] = ()
    finish_reason: str | None = None
    # Why the first mistake is one (annotators' notes), and the first mistake as other
    # branches wrote it (backtracked or rewritten).
    reasons: tuple[str, ...] = ()
    rectified: tuple[str, ...] = ()
    # The branch the session shows; False for another labelled branch of the session, which
    # `branch_end`, the id of its last step, tells apart.
    on_show: bool = True
    branch_end: int | None = None
    # One model's branch of a session of several side by side: its column (1-based), so
    # that each model's row is told apart and says its model. None: a session of one model.
    model_column: int | None = None
    # A thinking trace's reasoning, whole, its kind ("summary" said so) and the rule its
    # steps were cut by: its row carries them as a thinking run's does.
    thinking: RecordedReasoning | None = None

    @classmethod
    def of(cls, trace: TraceSession) -> LabelledTrace:
        number = trace.mistake_number
        label = trace.label
        branch = trace.model_branch
        return cls(
            session_id=trace.id,
            name=trace.session.name,
            task=trace.session.task,
            model=branch.model if branch is not None else trace.session.model,
            model_column=branch.position + 1 if branch is not None else None,
            input=trace.session.input,
            steps=trace.texts,
            answer=trace.answer,
            target=trace.session.target,
            labelled=number is not None or trace.no_mistake,
            mistake_index=None if number is None else number - 1,
            created_at=trace.session.created_at,
            alternatives=alternatives_of(trace),
            task_spec=trace.task,
            ratings=(label.ratings or ()) if label is not None else (),
            finish_reason=label.finish_reason if label is not None else None,
            reasons=(label.note,) if label is not None and label.note else (),
            rectified=rectified_of(trace, trace.steps, number),
            thinking=stored_thinking(trace.store, trace.steps),
        )

    @classmethod
    def of_branch(cls, trace: TraceSession, branch: BranchLabel) -> LabelledTrace:
        """Another branch of the session, with its own label."""
        steps, label = branch.steps, branch.label
        number = None if branch.mistake_index is None else branch.mistake_index + 1
        return replace(
            cls.of(trace), steps=[step.text for step in steps],
            answer=next((step.answer for step in reversed(steps) if step.answer), None),
            labelled=True, mistake_index=branch.mistake_index,
            alternatives=alternatives_of(trace, steps), ratings=label.ratings or (),
            finish_reason=label.finish_reason, reasons=(label.note,) if label.note else (),
            rectified=rectified_of(trace, steps, number), on_show=False,
            branch_end=steps[-1].id if steps else None,
            thinking=stored_thinking(trace.store, list(steps)))

    @property
    def task_found(self) -> Task:
        return self.task_spec or get_task(self.task)

    @property
    def question(self) -> str:
        """The question as its generation prompt showed it."""
        return self.task_found.question(self.input)

    @property
    def correct(self) -> bool | None:
        if not self.target:  # no target (the field's formats): not known
            return None
        return self.task_found.is_correct(self.answer, self.target)

    def out_trace(self) -> OutTrace:
        """As the field's formats' writers see it."""
        return OutTrace(
            input=self.input, steps=tuple(self.steps), answer=self.answer,
            target=self.target or "", labelled=self.labelled,
            mistake_index=self.mistake_index if self.labelled else None, task=self.task,
            question=self.question, model=self.model,
            # Another branch of the session is told apart by the step it ends in.
            name=f"{self.task}-{self.session_id}" + (
                "" if self.model_column is None else f"-model-{self.model_column}") + (
                "" if self.on_show else f"-branch-{self.branch_end}"),
            ratings=tuple(self.ratings),
            finish_reason=self.finish_reason, origin=self.origin, correct=self.correct,
            reasons=self.reasons, rectified=self.rectified, labeler=self.labeler,
            timestamp=_timestamp(self.created_at),
            total_time_ms=None if self.time_spent_s is None else round(
                self.time_spent_s * 1000),
            alternatives=self.alternatives, session_id=self.session_id,
        )


def rectified_of(trace: TraceSession, steps: Sequence[Step], number: int | None
                 ) -> tuple[str, ...]:
    """The first mistake (Thought `number` of `steps`) as other branches wrote it: the
    versions of it that backtracking chose or a person rewrote."""
    if number is None or number > len(steps):
        return ()
    mistake = steps[number - 1]
    return tuple(dict.fromkeys(
        sibling.text for sibling in trace.tree.siblings(mistake.id)
        if sibling.id != mistake.id and sibling.text != mistake.text
        and sibling.origin in (StepOrigin.BACKTRACK, StepOrigin.EDIT)))


def alternatives_of(trace: TraceSession, steps: Sequence[Step] | None = None
                    ) -> tuple[tuple[Alternative, ...], ...]:
    """For each thought of `steps` (the branch on show by default), its other versions with
    their ratings where a branch through them is labelled (the session's own annotator's
    labels)."""
    steps = trace.steps if steps is None else steps
    if len(trace.tree) == len(steps):
        return ()  # one branch and nothing sampled beyond it: the common case, no reads
    labels = trace.store.label_history(trace.id, trace.annotator)
    found = []
    for step in steps:
        seen = {step.text}
        versions = []
        for sibling in trace.tree.siblings(step.id):
            if sibling.id != step.id and sibling.text not in seen:
                seen.add(sibling.text)
                versions.append(Alternative(sibling.text, _rating(trace, labels, sibling),
                                            "branch"))
        for sample in trace.store.candidates(trace.id, step.parent_id, step.number):
            if sample.step_id is None and sample.text.strip() and sample.text not in seen:
                seen.add(sample.text)
                versions.append(Alternative(sample.text, None, "sample"))
        found.append(tuple(versions))
    return tuple(found)


def _rating(trace: TraceSession, labels: Sequence[Label], step: Step) -> int | None:
    for label in labels:  # newest first: the label in force on a branch through `step`
        if label.leaf_step_id is None:
            continue
        path = [s.id for s in trace.tree.path(label.leaf_step_id)]
        if step.id not in path:
            continue
        if label.no_mistake:
            return 1
        mistake = label.mistake_index(path)
        if mistake is None:  # a flag off its own branch: it rates nothing
            return None
        place = path.index(step.id)
        return -1 if place == mistake else 1 if place < mistake else None
    return None


@dataclass
class ExportResult:
    written: int = 0
    skipped: int = 0  # left out: unlabelled, in a format that needs a label
    unlabelled: int = 0  # written without a label (jsonl, markdown)
    why_none: str = ""  # nothing written: why (dpo: what no session had)


def load_traces(store: Store, session_ids: Sequence[int] | None, *,
                flagged_branch: bool = False) -> list[LabelledTrace]:
    """The given sessions (all of them when None), oldest first. A session labelled by an
    annotator other than the app's own user, or adjudicated, takes the consensus label, with
    the ratings, finish reason and notes of the annotators who chose its location. With
    `flagged_branch`, a session whose branch on show has no label shows the branch its own
    user flagged a mistake on instead (backtracking moves on to a new branch; MR-BEN wants
    the mistaken one, with the new branch's version of the mistake)."""
    from bbm_tui.core.annotation.adjudication import consensus, store_labels

    if session_ids is None:
        session_ids = sorted(summary.session.id for summary in store.sessions())
    labels = store_labels(store)
    agreed = consensus(labels)
    queued = {label.session_id for label in labels.labels
              if label.annotator != DEFAULT_ANNOTATOR}
    spent: dict[int, float] = {}
    set_aside: dict[int, QueueWork] = {}
    for work in store.all_queue_work():
        spent[work.session_id] = spent.get(work.session_id, 0.0) + work.time_spent_s
        if work.status == WorkStatus.FLAGGED and work.flag_reason in _FINISHED_AS:
            set_aside.setdefault(work.session_id, work)
    origins = store.origins()
    traces = []
    for session_id in session_ids:
        session = TraceSession.load(store, session_id)
        columns = [] if session_id in queued else _model_columns(store, session_id)
        trace = columns[0] if columns else (
            _flagged(session) if flagged_branch and session.label is None else None) \
            or LabelledTrace.of(session)
        # Several models side by side: each model's branch on show is a row of its own.
        others: list[LabelledTrace] = columns[1:]
        if session_id in queued:
            trace = _consensus(trace, [label for label in labels.labels
                                       if label.session_id == session_id], agreed)
        elif trace.on_show and not flagged_branch and not columns:
            # Every labelled branch is a row of its own: a flagged trace backtracked from
            # shows its new branch, and the flag is on the old one.
            others = [LabelledTrace.of_branch(session, branch)
                      for branch in session.labelled_branches() if not branch.on_show]
        if not trace.labelled and session_id in set_aside:
            work = set_aside[session_id]
            trace = replace(trace, ratings=tuple(protocol.ratings(work.judged)),
                            finish_reason=_FINISHED_AS[work.flag_reason or ""],
                            reasons=(work.note,) if work.note else ())
        for row in (trace, *others):
            if session_id in spent:
                row = replace(row, time_spent_s=spent[session_id])
            if session_id in origins:
                row = replace(row, origin=origins[session_id])
            traces.append(row)
    return traces


# A trace set aside in a queue, as PRM800K's labellers finished one they could not label.
# Looked up by the reason the store holds (text).
_FINISHED_AS: dict[str, str] = {FlagReason.BAD_PROBLEM: protocol.BAD_PROBLEM,
                                FlagReason.GIVE_UP: protocol.GIVE_UP}


def _consensus(trace: LabelledTrace, labels: list[AnnotatorLabel],
               agreed: dict[int, int | None]) -> LabelledTrace:
    labeler = ", ".join(sorted({label.annotator for label in labels}))
    if trace.session_id not in agreed:
        return replace(trace, labelled=False, mistake_index=None, labeler=labeler,
                       ratings=(), finish_reason=None, reasons=())
    location = agreed[trace.session_id]
    agreeing = sorted((label for label in labels if label.mistake_index == location),
                      key=lambda label: label.annotator)
    rated = next((label for label in agreeing if label.ratings is not None), None)
    return replace(
        trace, labelled=True, mistake_index=location, labeler=labeler,
        ratings=rated.ratings if rated is not None and rated.ratings is not None else (),
        finish_reason=rated.finish_reason if rated is not None else None,
        reasons=tuple(label.note for label in agreeing if label.note))


def _model_columns(store: Store, session_id: int) -> list[LabelledTrace]:
    """A session of several models side by side: each model's branch on show, with its own
    label and its model, in its column's order (none: a session of one model)."""
    if not store.model_branches(session_id):
        return []
    from bbm_tui.core.trace.side_by_side import SideBySide

    return [LabelledTrace.of(column) for column in SideBySide.load(store, session_id).columns]


def _flagged(trace: TraceSession) -> LabelledTrace | None:
    """The session as the branch its own user flagged a mistake on, if it has one."""
    for label in trace.store.label_history(trace.id, trace.annotator):
        if label.leaf_step_id is None or label.leaf_step_id not in trace.tree:
            continue
        path = trace.tree.path(label.leaf_step_id)
        index = label.mistake_index([step.id for step in path])
        if index is None:
            continue
        answer = next((step.answer for step in reversed(path) if step.answer), None)
        return replace(
            LabelledTrace.of(trace), steps=[step.text for step in path], answer=answer,
            labelled=True, mistake_index=index, ratings=label.ratings or (),
            finish_reason=label.finish_reason,
            reasons=(label.note,) if label.note else (),
            rectified=rectified_of(trace, path, index + 1), alternatives=())
    return None


def check_not_a_database(path: Path) -> None:
    """Even with --force an export never replaces an SQLite file: it may be a session store
    of another BBM_TUI_HOME, or a copy kept as a backup. (Call after the path is known to
    be a regular file or absent: reading a FIFO would wait.)"""
    if is_standard_output(path):
        return
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError:  # absent, or unreadable: the write itself will say what is wrong
        return
    if header == SQLITE_HEADER:
        raise OutputFileError(
            path, "is an SQLite database (a session store?); export never replaces one, even "
            "with --force: choose another --out"
        )


def export(traces: Iterable[LabelledTrace], out_path: Path, fmt: str) -> ExportResult:
    if fmt not in FORMATS or fmt in _FROM_STORE:
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    traces = list(traces)
    if fmt in STEP_FORMATS:
        result = ExportResult()
        rows = []
        for trace in traces:
            written, _ = write_rows(fmt, [trace.out_trace()])
            rows += written
            result.written += len(written)
            result.skipped += not written
            result.unlabelled += bool(written) and not trace.labelled
        with replacing(out_path) as out:
            out.write(document_text(FIELD_FORMATS[fmt], rows) if rows else "")
        return result
    result = ExportResult()
    pieces: list[str] = []
    with_task = len({trace.task for trace in traces}) > 1
    for trace in traces:
        if fmt == "jsonl":
            pieces.append(dataset_row(trace, with_task).to_line() + "\n")
        else:
            pieces.append(markdown(trace))
        result.written += 1
        result.unlabelled += not trace.labelled
    with replacing(out_path) as out:
        out.write("".join(pieces))
    return result


def dataset_row(trace: LabelledTrace, with_task: bool = False) -> TraceRow:
    extra: dict[str, Any] = {"task": trace.task} if with_task else {}
    if trace.model_column is not None:  # one of several models on the question
        extra["model"] = trace.model
    if trace.ratings:
        extra[RATINGS_KEY] = list(trace.ratings)
    if trace.origin is not None:
        extra[ORIGIN_KEY] = trace.origin
    if trace.thinking is not None:
        extra |= thinking_keys(trace.thinking)
    return TraceRow(
        input=trace.input,
        steps=list(trace.steps),
        answer=trace.answer,
        target=trace.target or "",
        mistake_index=trace.mistake_index,
        extra=extra,
        labelled=trace.labelled,
    )


def processbench_row(trace: LabelledTrace) -> dict[str, Any] | None:
    return write_rows("processbench", [trace.out_trace()])[0][0] if trace.labelled else None


def prm800k_row(trace: LabelledTrace) -> dict[str, Any] | None:
    rows = write_rows("prm800k", [trace.out_trace()])[0]
    return rows[0] if rows else None


def prm800k_finish_reason(trace: LabelledTrace) -> str:
    """PRM800K's finish reason for the trace (core/dataset/formats/prm800k.py)."""
    return prm800k_reason(trace.out_trace())


def _timestamp(seconds: float | None) -> str | None:
    """PRM800K's timestamp form (ISO 8601, microseconds), in UTC."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None).isoformat(
        timespec="microseconds")


def markdown(trace: LabelledTrace) -> str:
    title = one_line(trace.name) + ("" if trace.on_show else " (another branch)")
    lines = [f"## {_md_line(title)}", ""]
    lines.append(f"- task: {trace.task}")
    lines.append(f"- model: {_md_code(trace.model)}")
    if trace.target is not None:
        lines.append(f"- target: {_md_code(trace.target)}")
    if trace.thinking is not None:
        lines.append(f"- thoughts: {cut_from_sentence(trace.thinking)}")
    answer = "—" if trace.answer is None else _md_code(trace.answer)
    verdict = {True: " (correct)", False: " (wrong)", None: ""}[trace.correct]
    lines.append(f"- answer: {answer}{verdict}")
    if not trace.labelled:
        lines.append("- first mistake: not labelled")
    elif trace.mistake_index is None:
        lines.append("- first mistake: none")
    else:
        lines.append(f"- first mistake: Thought {trace.mistake_index + 1}")
    lines += ["", "**Question**", "", *_quoted(trace.input), "", "**Thoughts**", ""]
    for index, step in enumerate(trace.steps):
        mark = " ✗ **first mistake**" if index == trace.mistake_index else ""
        marker = f"{index + 1}. "
        lines.append(f"{marker}{_md_text(step, ' ' * len(marker))}{mark}")
    return "\n".join(lines) + "\n\n"


def _quoted(text: str) -> list[str]:
    return [f"> {_md_line(line)}" if line.strip() else ">"
            for line in printable(text).split("\n")]


# What Markdown (CommonMark, GitHub's tables, strikethrough and math, inline HTML and entities)
# could read as markup anywhere in a line; each gets a backslash.
_MD_SPECIAL = str.maketrans({c: f"\\{c}" for c in "\\`*_[]<>#|&~$"})
# What starts a block at the start of a line: a list item ("-", "+", "1." or "1)"), a setext
# heading's underline ("=", "-"). ">", "#", "`" and "~" are escaped everywhere already.
_MD_LINE_START = re.compile(r"([-+=])|(\d{1,9})([.)])")


def _md_line(line: str) -> str:
    """One line of literal text in Markdown (it has no newline and went through `printable`):
    every markup character escaped, and the start of the line defused (indentation would make
    a code block: the spaces become no-break spaces)."""
    body = line.lstrip(" ")
    indent = "\u00a0" * (len(line) - len(body))
    body = body.translate(_MD_SPECIAL)
    start = _MD_LINE_START.match(body)
    if start and start.group(1):  # "- x": "\- x"
        body = "\\" + body
    elif start:  # "1. x": "1\. x"
        body = f"{start.group(2)}\\{body[start.end(2):]}"
    return indent + body or "\u00a0"


def _md_text(text: str, indent: str) -> str:
    """Literal text as one list item: control characters and bidi overrides made visible (the
    file is safe to `cat`), markup escaped, each line break a hard break (a backslash) with the
    next line indented to stay inside the item. Blank lines at the end show nothing (and would
    leave the last break's backslash on show); a thought with no text says so."""
    lines = printable(text).split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    if not lines:
        return "(empty thought)"
    return f"\\\n{indent}".join(_md_line(line) for line in lines)


def _md_code(text: str) -> str:
    """Text as a code span, its backquotes kept (a model's answer may hold some): one line (a
    newline could start a block), fenced by one backquote more than its longest run of them,
    and padded with a space where it begins or ends with one (CommonMark strips one space
    each side); never empty ("``" would be two backquotes, not an empty span)."""
    line = one_line(text) or " "
    fence = "`" * (max((len(run) for run in re.findall(r"`+", line)), default=0) + 1)
    pad = " " if line.startswith("`") or line.endswith("`") else ""
    return f"{fence}{pad}{line}{pad}{fence}"


def export_file(store: Store, fmt: str, out_path: Path, *,
                session_ids: Sequence[int] | None = None, force: bool = False) -> ExportResult:
    """What `bbm-tui export` does, for the app: the same refusals (the store, a database, a
    special file, an existing file unless `force`: OutputFileError), then the file written
    whole."""
    from bbm_tui.core.dataset.outfile import check_not_replacing, check_output_path

    check_output_path(out_path, store_path=store.path)
    check_not_a_database(out_path)
    if not force:
        check_not_replacing(out_path)
    return export_from_store(store, fmt, out_path, session_ids)


def export_from_store(store: Store, fmt: str, out_path: Path,
                      session_ids: Sequence[int] | None = None) -> ExportResult:
    """Write the sessions (all of them when None) in `fmt`."""
    if fmt == "csv":
        return export_csv(store, session_ids, out_path)
    if fmt == "csv-steps":
        return export_step_csv(store, session_ids, out_path)
    if fmt == "dpo":
        return export_dpo(store, session_ids, out_path)
    return export(load_traces(store, session_ids, flagged_branch=fmt == "mr-ben"), out_path,
                  fmt)


# ---------------------------------------------------------------------------- csv

# Who a label of the app's own user (DEFAULT_ANNOTATOR) is credited to in the CSV exports: the
# label an import brought in, as the file had it, or one made in the app (the name agreement's
# --app-labels gives them).
IMPORTED_CREDIT = "imported"
APP_CREDIT = "app"


def label_credit(store: Store, session: Session, label: Label) -> str:
    """The annotator a CSV row names: an annotator's own name; for the app's own labels,
    "imported" for the label an imported file gave (its session's first), else "app" (they
    were all "me", whoever made them)."""
    if label.annotator != DEFAULT_ANNOTATOR:
        return label.annotator
    if session.source == SessionSource.IMPORT and label.id == store.first_label_id(session.id):
        return IMPORTED_CREDIT
    return APP_CREDIT


CSV_COLUMNS = ("session_id", "name", "task", "annotator", "status", "mistake_index",
               "time_spent_s", "assisted", "labelled_at", "flag_reason", "note", "branch",
               "model", "reasoning_kind")


def reasoning_kind_cell(store: Store, steps: Sequence[Step]) -> str:
    """A CSV row's `reasoning_kind`, as the JSONL rows name it: what a thinking trace's
    thoughts are cut from ("raw", "summary" said so, or "none": the answer), empty for a
    step-at-a-time trace (or a reasoning not stored whole, which the JSONL row leaves out)."""
    thinking = stored_thinking(store, list(steps))
    return "" if thinking is None else thinking.kind


def export_csv(store: Store, session_ids: Sequence[int] | None, out_path: Path) -> ExportResult:
    """One row per annotator's label in force (the adjudicated ones under "(adjudicated)"),
    and one per flagged trace: `mistake_index` empty means "no mistake" on a labelled row.
    The app's own labels are one row per labelled branch, as the jsonl export has them
    (`branch`: "on show", or "other" for another branch of the session). `model`: the
    model of the labelled trace (side by side, the model of the branch labelled; else the
    session's models); `reasoning_kind`: the labelled trace's, for a thinking trace."""
    import csv

    wanted = None if session_ids is None else set(session_ids)
    work = {(item.session_id, item.annotator): item for item in store.all_queue_work()}
    summaries = {summary.session.id: summary for summary in store.sessions()}
    sessions = {session_id: summary.session for session_id, summary in summaries.items()}
    rows: list[list[object]] = []
    for label in store.annotator_labels():
        if wanted is not None and label.session_id not in wanted:
            continue
        session = sessions[label.session_id]
        done = work.get((label.session_id, label.annotator))
        spent = "" if done is None else f"{done.time_spent_s:.1f}"
        models = summaries[label.session_id].model_names
        if label.annotator == DEFAULT_ANNOTATOR:
            branch_models = {branch.id: branch.model
                             for branch in store.model_branches(label.session_id)}
            for branch in TraceSession.load(store, label.session_id).labelled_branches():
                model = branch_models.get(branch.steps[-1].model_branch_id or 0, models) \
                    if branch.steps else models
                rows.append([
                    label.session_id, session.name, session.task,
                    label_credit(store, session, branch.label), "labelled",
                    "" if branch.mistake_index is None else branch.mistake_index,
                    spent, int(branch.label.assisted), _timestamp(branch.label.created_at),
                    "", "", "on show" if branch.on_show else "other", model,
                    reasoning_kind_cell(store, branch.steps),
                ])
            continue
        in_force = store.current_label(label.session_id, label.annotator)
        labelled = store.branch(label.session_id,
                                None if in_force is None else in_force.leaf_step_id)
        rows.append([
            label.session_id, session.name, session.task, label.annotator, "labelled",
            "" if label.mistake_index is None else label.mistake_index,
            spent, int(label.assisted), _timestamp(label.created_at), "", "", "on show",
            models, reasoning_kind_cell(store, labelled),
        ])
    for (session_id, annotator), item in sorted(work.items()):
        if item.status != "flagged" or (wanted is not None and session_id not in wanted):
            continue
        session = sessions[session_id]
        rows.append([session_id, session.name, session.task, annotator, "flagged", "",
                     f"{item.time_spent_s:.1f}", int(item.assisted),
                     _timestamp(item.updated_at), item.flag_reason or "", item.note or "",
                     "on show", summaries[session_id].model_names,
                     reasoning_kind_cell(store, store.branch(session_id))])
    with replacing(out_path) as out:
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        writer.writerows([[_csv_cell(value) for value in row] for row in rows])
    return ExportResult(written=len(rows))


def _csv_cell(value: object) -> object:
    """Text a spreadsheet would run as a formula (=, +, -, @ first) is kept as text."""
    if isinstance(value, str):
        value = one_line(value) if value else value
        if value[:1] in ("=", "+", "-", "@"):
            return "'" + value
    return value


STEP_CSV_COLUMNS = ("session_id", "name", "task", "annotator", "protocol", "thought",
                    "rating", "text", "mistake_index", "finish_reason", "labelled_at",
                    "reasoning_kind")


def export_step_csv(store: Store, session_ids: Sequence[int] | None,
                    out_path: Path) -> ExportResult:
    """One row per step an annotator's label in force rates: the per-step protocol's -1, 0 or
    +1; a first-mistake label's +1 up to its mistake and -1 at it (protocol
    "first-mistake": nothing is said of the steps after it). `mistake_index` empty means "no
    mistake"; `reasoning_kind` as in `export_csv`."""
    import csv

    wanted = None if session_ids is None else set(session_ids)
    sessions = {summary.session.id: summary.session for summary in store.sessions()}
    rows: list[list[object]] = []
    labels = 0
    for found in store.annotator_labels():
        if wanted is not None and found.session_id not in wanted:
            continue
        label = store.current_label(found.session_id, found.annotator)
        if label is None:
            continue
        steps = store.branch(found.session_id, label.leaf_step_id)
        if label.ratings is not None:
            protocol, ratings = "per-step", list(label.ratings)
        else:
            protocol = "first-mistake"
            ratings = ratings_for(found.mistake_index, len(steps))
        session = sessions[found.session_id]
        kind = reasoning_kind_cell(store, steps)
        labels += 1
        for number, rating in enumerate(ratings, start=1):
            rows.append([
                found.session_id, session.name, session.task,
                label_credit(store, session, label), protocol,
                number, rating, steps[number - 1].text if number <= len(steps) else "",
                "" if found.mistake_index is None else found.mistake_index,
                found.finish_reason or "", _timestamp(found.created_at), kind])
    with replacing(out_path) as out:
        writer = csv.writer(out)
        writer.writerow(STEP_CSV_COLUMNS)
        writer.writerows([[_csv_cell(value) for value in row] for row in rows])
    return ExportResult(written=labels)


# ---------------------------------------------------------------------------- dpo

@dataclass
class DpoFunnel:
    """How far the sessions got towards preference pairs, to say why there are none."""

    sessions: int = 0
    flagged: int = 0  # thoughts flagged as a first mistake
    versions: int = 0  # backtracked or rewritten versions of a flagged thought
    pairs: int = 0  # versions whose branch reached the right answer

    def why_none(self) -> str:
        if self.pairs:
            return ""
        if not self.sessions:
            return "the store has no sessions"
        if not self.flagged:
            return (f"none of the {traces_word(self.sessions)} has a thought flagged as the "
                    "first mistake (x in the app, or a finder's or verifier's run)")
        if not self.versions:
            return (f"{self.flagged} flagged thought(s), none with a backtracked or rewritten "
                    "version (b or w in the app, or `bbm-tui backtrack`)")
        return (f"{self.versions} backtracked or rewritten version(s) of a flagged thought, "
                "none whose branch reached the right answer (a pair needs one)")


def traces_word(number: int) -> str:
    return f"{number} session" if number == 1 else f"{number} sessions"


def dpo_rows(store: Store, session_ids: Sequence[int] | None,
             funnel: DpoFunnel | None = None) -> list[dict[str, Any]]:
    """Preference pairs from branches, in TRL's preference shape: where a person flagged a
    thought as the first mistake, or a finder or verifier did, and a backtracked or rewritten
    version of that thought went on to the right answer: `prompt` the question and the
    thoughts before it (as a generation prompt lists them), `chosen` the new version,
    `rejected` the flagged one."""
    from bbm_tui.core.prompts.thoughts import format_thoughts, label

    if session_ids is None:
        session_ids = sorted(summary.session.id for summary in store.sessions())
    funnel = funnel if funnel is not None else DpoFunnel()
    funnel.sessions = len(session_ids)
    rows: list[dict[str, Any]] = []
    for session_id in session_ids:
        trace = TraceSession.load(store, session_id)
        # A task of one's own is the definition the session keeps: its file need not be
        # loaded (or may have changed since).
        task, _ = session_task(store, trace.session)
        target = trace.session.target
        for mistake, flagged_by in _flagged_mistakes(trace).items():
            funnel.flagged += 1
            rejected = trace.tree.step(mistake)
            shared = [step.text for step in trace.tree.path(rejected.parent_id)]
            for version in trace.tree.siblings(mistake):
                if (version.id == mistake or version.text == rejected.text
                        or version.origin not in (StepOrigin.BACKTRACK, StepOrigin.EDIT)):
                    continue
                funnel.versions += 1
                branch = trace.tree.path(trace.tree.newest_leaf_under(version.id).id)
                answer = next((step.answer for step in reversed(branch) if step.answer), None)
                if not target or not task.is_correct(answer, target):
                    continue  # only a new branch that reached the right answer
                rows.append({
                    "prompt": task.question(trace.session.input) + "\n"
                    + format_thoughts(shared) + label(rejected.number),
                    "chosen": " " + version.text,
                    "rejected": " " + rejected.text,
                    "bbm_tui": {"session_id": session_id, "task": task.name,
                                "thought": rejected.number,
                                "flagged_by": sorted(flagged_by),
                                "chosen_origin": version.origin},
                })
    funnel.pairs = len(rows)
    return rows


def _flagged_mistakes(trace: TraceSession) -> dict[int, set[str]]:
    """Every step flagged as a first mistake, with who flagged it: annotators (their labels
    in force) and finders and verifiers (their finished runs)."""
    found: dict[int, set[str]] = {}
    annotators = {label.annotator for label in trace.store.labels(trace.id)}
    for annotator in annotators:
        for label in trace.store.label_history(trace.id, annotator):
            if label.mistake_step_id is not None and label.mistake_step_id in trace.tree:
                found.setdefault(label.mistake_step_id, set()).add(f"person:{annotator}")
    for run in trace.store.finder_runs(trace.id):
        if not run.finished or run.mistake_number is None or run.leaf_step_id is None:
            continue
        if run.leaf_step_id not in trace.tree:
            continue
        path = trace.tree.path(run.leaf_step_id)
        if run.mistake_number <= len(path):
            step = path[run.mistake_number - 1]
            found.setdefault(step.id, set()).add(f"{run.method}:{run.model}")
    return found


def export_dpo(store: Store, session_ids: Sequence[int] | None,
               out_path: Path) -> ExportResult:
    funnel = DpoFunnel()
    rows = dpo_rows(store, session_ids, funnel)
    with replacing(out_path) as out:
        out.write("".join(json.dumps(row, allow_nan=False) + "\n" for row in rows))
    return ExportResult(written=len(rows), why_none=funnel.why_none())


# ---------------------------------------------------------------------------- import

@dataclass
class ImportResult:
    imported: list[int]
    # Rows whose trace the store already holds (e.g. `run` saved it): not made twice.
    already: list[int]
    unlabelled: int = 0


def import_rows(
    store: Store, task: str, rows: Iterable[TraceRow], *, labelled: bool = True
) -> ImportResult:
    """Sessions holding dataset rows as recorded traces, so they can be labelled (again) in
    the app and exported. With `labelled`, a labelled row's mistake_index is its label (null
    = no mistake, as in the dataset) and a row with no mistake_index key comes in unlabelled;
    without, every row comes in unlabelled. A row's own `task` wins over `task`. A row whose
    trace the store already holds (the same task, question, model and thoughts, saved by
    `run` or an earlier import) is not made again."""
    from bbm_tui.core.llm import ModelSpec

    result = ImportResult([], [])
    for row in rows:
        row_task = row.task or task
        model = row.extra.get("model")
        model = model if isinstance(model, str) and model else RECORDED_MODEL
        existing = _saved_trace(store, row_task, row, model)
        if existing is not None:
            result.already.append(existing)
            continue
        trace = TraceSession.create(
            store,
            NewTrace(row_task, row.input, row.target,
                     gold_mistake_index=row.mistake_index if labelled else None),
            ModelSpec(model),
            source=SessionSource.IMPORT,
        )
        thinking = thinking_of(row)
        if row.steps and thinking is not None:
            _load_reasoning(store, trace, row, thinking, model)
        elif row.steps:
            trace.load_recorded(list(row.steps), row.answer)
        origin = origin_of(row)
        if origin is not None:
            store.set_origin(trace.id, with_digest(origin, row.input, row.steps))
        if labelled and row.labelled and row.mistake_index is not None:
            trace.flag_mistake(row.mistake_index + 1)
        elif labelled and row.labelled:
            # A trace with no thoughts keeps its label too (ProcessBench's -1 with no steps):
            # `stats` counts it labelled, and the export writes it back.
            trace.mark_no_mistake()
        else:
            result.unlabelled += 1
        result.imported.append(trace.id)
    return result


def _load_reasoning(store: Store, trace: TraceSession, row: TraceRow,
                    reasoning: RecordedReasoning, model: str) -> None:
    """A thinking trace written elsewhere, stored as a run stores one (store v17): its
    reasoning whole, and its steps a view of it cut by its rule, on show; re-cut later with
    no call."""
    stored = store.add_reasoning(trace.id, model, reasoning.kind)
    store.finish_reasoning(stored.id, text=reasoning.text, kind=reasoning.kind,
                           answer_text=reasoning.answer_text, reasoning_tokens=None)
    last = len(row.steps) - 1
    steps = [(text, row.answer if index == last else None)
             for index, text in enumerate(row.steps)]
    ids = store.add_view(trace.id, stored.id, reasoning.split, steps, str(StepOrigin.THINKING))
    store.set_head(trace.id, ids[-1])
    trace.reload()


def _saved_trace(store: Store, task: str, row: TraceRow, model: str) -> int | None:
    for found in store.sessions_of_question(task=task, input=row.input, model=model):
        if found.source in (SessionSource.RUN, SessionSource.IMPORT) and (
            TraceSession.load(store, found.id).texts == list(row.steps)
        ):
            return found.id
    return None
