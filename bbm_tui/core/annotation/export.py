"""Getting traces in and out of the store (docs/DESIGN.md §8).

Formats, one trace (the branch on show) per session:
- `jsonl`: the dataset's own rows (`input, steps, answer, target, mistake_index`), so a
  dataset file imported and exported again means exactly the same;
- `processbench`: ProcessBench rows, `label` = index of the first wrong step, -1 = none;
- `prm800k`: PRM800K-style per-step ratings (1 before the first mistake, -1 at it, rating
  stops there, as PRM800K's labellers did);
- `markdown`: for reading and sharing;
- `csv`: every annotator's label in force (and every flagged trace), with the time spent and
  whether a suggestion was seen (`export_csv`).

A session labelled through annotation queues (core/annotation/queue.py) exports the adjudicated
label, else the majority's of its annotators (a tie: unlabelled, it waits for adjudication).

Only labelled traces have a first-mistake label. An unlabelled one exports with no
`mistake_index` key at all (jsonl: `null` would say "no mistake"), as "not labelled"
(markdown), or is left out where the format needs a label (processbench, prm800k);
`ExportResult` counts both. A jsonl export of more than one task writes each row's `task`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bbm_tui.core.dataset import TraceRow, replacing
from bbm_tui.core.dataset.outfile import OutputFileError
from bbm_tui.core.store import SQLITE_HEADER, Label, Step, Store
from bbm_tui.core.tasks import Task, get_task
from bbm_tui.core.textsafe import one_line, printable
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.types import DEFAULT_ANNOTATOR, SessionSource

FORMATS = ("jsonl", "processbench", "prm800k", "markdown", "csv")


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

    @classmethod
    def of(cls, trace: TraceSession) -> LabelledTrace:
        number = trace.mistake_number
        return cls(
            session_id=trace.id,
            name=trace.session.name,
            task=trace.session.task,
            model=trace.session.model,
            input=trace.session.input,
            steps=trace.texts,
            answer=trace.answer,
            target=trace.session.target,
            labelled=number is not None or trace.no_mistake,
            mistake_index=None if number is None else number - 1,
            created_at=trace.session.created_at,
            alternatives=alternatives_of(trace),
            task_spec=trace.task,
        )

    @property
    def task_found(self) -> Task:
        return self.task_spec or get_task(self.task)

    @property
    def question(self) -> str:
        """The question as its generation prompt showed it."""
        return self.task_found.question(self.input)

    @property
    def correct(self) -> bool | None:
        if self.target is None:
            return None
        return self.task_found.is_correct(self.answer, self.target)


@dataclass(frozen=True)
class Alternative:
    """Another version of a thought: a step on another branch, or a sample backtracking
    drew and no branch took. `rating` as PRM800K rates (1 right, -1 the first mistake) from
    the label of a branch it is on, None where no label covers it."""

    text: str
    rating: int | None
    source: str  # "branch" or "sample"


def alternatives_of(trace: TraceSession) -> tuple[tuple[Alternative, ...], ...]:
    """For each thought on show, its other versions with their ratings where a branch
    through them is labelled (the session's own annotator's labels)."""
    if len(trace.tree) == len(trace.steps):
        return ()  # one branch and nothing sampled beyond it: the common case, no reads
    labels = trace.store.label_history(trace.id, trace.annotator)
    found = []
    for step in trace.steps:
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


def load_traces(store: Store, session_ids: Sequence[int] | None) -> list[LabelledTrace]:
    """The given sessions (all of them when None), oldest first. A session labelled by an
    annotator other than the app's own user, or adjudicated, takes the consensus label."""
    from bbm_tui.core.annotation.adjudication import consensus, store_labels

    if session_ids is None:
        session_ids = sorted(summary.session.id for summary in store.sessions())
    labels = store_labels(store)
    agreed = consensus(labels)
    queued = {label.session_id for label in labels.labels
              if label.annotator != DEFAULT_ANNOTATOR}
    spent: dict[int, float] = {}
    for work in store.all_queue_work():
        spent[work.session_id] = spent.get(work.session_id, 0.0) + work.time_spent_s
    traces = []
    for session_id in session_ids:
        trace = LabelledTrace.of(TraceSession.load(store, session_id))
        if session_id in queued:
            labeler = ", ".join(sorted({label.annotator for label in labels.labels
                                        if label.session_id == session_id}))
            trace = replace(trace, labelled=session_id in agreed,
                            mistake_index=agreed.get(session_id), labeler=labeler)
        if session_id in spent:
            trace = replace(trace, time_spent_s=spent[session_id])
        traces.append(trace)
    return traces


def check_not_a_database(path: Path) -> None:
    """Even with --force an export never replaces an SQLite file: it may be a session store
    of another BBM_TUI_HOME, or a copy kept as a backup. (Call after the path is known to
    be a regular file or absent: reading a FIFO would wait.)"""
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
    if fmt not in FORMATS or fmt == "csv":
        raise ValueError(f"unknown export format {fmt!r}; known: {', '.join(FORMATS)}")
    result = ExportResult()
    pieces: list[str] = []
    traces = list(traces)
    with_task = len({trace.task for trace in traces}) > 1
    for trace in traces:
        piece = _render(trace, fmt, with_task)
        if piece is None:
            result.skipped += 1
            continue
        pieces.append(piece)
        result.written += 1
        result.unlabelled += not trace.labelled
    with replacing(out_path) as out:
        out.write("".join(pieces))
    return result


def _render(trace: LabelledTrace, fmt: str, with_task: bool = False) -> str | None:
    if fmt == "jsonl":
        return dataset_row(trace, with_task).to_line() + "\n"
    if fmt == "markdown":
        return markdown(trace)
    if not trace.labelled:
        return None
    row = processbench_row(trace) if fmt == "processbench" else prm800k_row(trace)
    return json.dumps(row, allow_nan=False) + "\n"


def dataset_row(trace: LabelledTrace, with_task: bool = False) -> TraceRow:
    return TraceRow(
        input=trace.input,
        steps=list(trace.steps),
        answer=trace.answer,
        target=trace.target or "",
        mistake_index=trace.mistake_index,
        extra={"task": trace.task} if with_task else {},
        labelled=trace.labelled,
    )


def processbench_row(trace: LabelledTrace) -> dict[str, Any]:
    return {
        "id": f"{trace.task}-{trace.session_id}",
        "generator": trace.model,
        "problem": trace.question,
        "steps": list(trace.steps),
        "final_answer_correct": trace.correct,
        "label": -1 if trace.mistake_index is None else trace.mistake_index,
    }


def prm800k_finish_reason(trace: LabelledTrace) -> str:
    """What PRM800K means by it: `found_error` at a step rated -1; `solution` only when every
    step is right and the answer is correct; a trace with no wrong step that does not reach the
    target (no answer, or a wrong one) is `give_up`, the labeller's way out in PRM800K."""
    if trace.mistake_index is not None:
        return "found_error"
    return "solution" if trace.correct else "give_up"


def _timestamp(seconds: float | None) -> str | None:
    """PRM800K's timestamp form (ISO 8601, microseconds), in UTC."""
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, UTC).replace(tzinfo=None).isoformat(
        timespec="microseconds")


def prm800k_row(trace: LabelledTrace) -> dict[str, Any]:
    rated = trace.steps if trace.mistake_index is None else trace.steps[: trace.mistake_index + 1]
    steps = [
        {
            # The thought on show first (chosen unless it is the mistake), then its other
            # versions: samples and other branches, rated where a label covers them.
            "completions": [
                {"text": text, "rating": -1 if index == trace.mistake_index else 1,
                 "flagged": None},
                *({"text": alt.text, "rating": alt.rating, "flagged": None,
                   "source": alt.source}
                  for alt in (trace.alternatives[index]
                              if index < len(trace.alternatives) else ())),
            ],
            "human_completion": None,
            "chosen_completion": None if index == trace.mistake_index else 0,
        }
        for index, text in enumerate(rated)
    ]
    return {
        "labeler": trace.labeler,
        "timestamp": _timestamp(trace.created_at),
        "is_quality_control_question": False,
        "is_initial_screening_question": False,
        "question": {
            "problem": trace.question,
            "ground_truth_answer": trace.target,
        },
        "label": {
            "steps": steps,
            # PRM800K counts milliseconds.
            "total_time": (None if trace.time_spent_s is None
                           else round(trace.time_spent_s * 1000)),
            "finish_reason": prm800k_finish_reason(trace),
        },
        "generation": None,
        "bbm_tui": {"task": trace.task, "model": trace.model, "session_id": trace.session_id},
    }


def markdown(trace: LabelledTrace) -> str:
    lines = [f"## {_md_line(one_line(trace.name))}", ""]
    lines.append(f"- task: {trace.task}")
    lines.append(f"- model: `{_md_code(trace.model)}`")
    if trace.target is not None:
        lines.append(f"- target: `{_md_code(trace.target)}`")
    answer = "—" if trace.answer is None else f"`{_md_code(trace.answer)}`"
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
    """Text in a code span: one line (a newline could start a block), no backquote, never
    empty ("``" would be two backquotes, not an empty span)."""
    return one_line(text).replace("`", "'") or " "


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
    if fmt == "csv":
        return export_csv(store, session_ids, out_path)
    return export(load_traces(store, session_ids), out_path, fmt)


# ---------------------------------------------------------------------------- csv

CSV_COLUMNS = ("session_id", "name", "task", "annotator", "status", "mistake_index",
               "time_spent_s", "assisted", "labelled_at", "flag_reason", "note")


def export_csv(store: Store, session_ids: Sequence[int] | None, out_path: Path) -> ExportResult:
    """One row per annotator's label in force (the adjudicated ones under "(adjudicated)"),
    and one per flagged trace: `mistake_index` empty means "no mistake" on a labelled row."""
    import csv

    wanted = None if session_ids is None else set(session_ids)
    work = {(item.session_id, item.annotator): item for item in store.all_queue_work()}
    sessions = {summary.session.id: summary.session for summary in store.sessions()}
    rows: list[list[object]] = []
    for label in store.annotator_labels():
        if wanted is not None and label.session_id not in wanted:
            continue
        session = sessions[label.session_id]
        done = work.get((label.session_id, label.annotator))
        rows.append([
            label.session_id, session.name, session.task, label.annotator, "labelled",
            "" if label.mistake_index is None else label.mistake_index,
            "" if done is None else f"{done.time_spent_s:.1f}", int(label.assisted),
            _timestamp(label.created_at), "", "",
        ])
    for (session_id, annotator), item in sorted(work.items()):
        if item.status != "flagged" or (wanted is not None and session_id not in wanted):
            continue
        session = sessions[session_id]
        rows.append([session_id, session.name, session.task, annotator, "flagged", "",
                     f"{item.time_spent_s:.1f}", int(item.assisted),
                     _timestamp(item.updated_at), item.flag_reason or "", item.note or ""])
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
        model = model if isinstance(model, str) and model else "dataset"
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
        if row.steps:
            trace.load_recorded(list(row.steps))
        if labelled and row.labelled and row.mistake_index is not None:
            trace.flag_mistake(row.mistake_index + 1)
        elif labelled and row.labelled and row.steps:
            trace.mark_no_mistake()
        else:
            result.unlabelled += 1
        result.imported.append(trace.id)
    return result


def _saved_trace(store: Store, task: str, row: TraceRow, model: str) -> int | None:
    for found in store.sessions_of_question(task=task, input=row.input, model=model):
        if found.source in (SessionSource.RUN, SessionSource.IMPORT) and (
            TraceSession.load(store, found.id).texts == list(row.steps)
        ):
            return found.id
    return None
