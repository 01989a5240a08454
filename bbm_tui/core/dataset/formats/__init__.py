"""The field's step-level datasets in and out (docs/DESIGN.md §14).

Each format maps to a trace in the BBM dataset's shape (`TraceRow`: question, steps, answer,
target, first mistake / none / unlabelled) and keeps what it carries beyond that in the row's
`origin` (the format's name and its other fields: ids, generators, ratings of every step, error
reasons, corrected steps...), so that a trace written back in its own format loses nothing.
Rows that came from a format carry `origin` through every file the commands write (a `find`
PREDS file, `export --format jsonl`), and sessions keep it in the store.

- `detect_format` is the one place that tells a format from the keys of a file's first row;
- `positions.py` is the one place that knows each format's index convention;
- one module a format (`processbench.py`, `prm800k.py`, ...) reads a row and writes one.

The questions of a format's file belong to the task named after the format (core/tasks:
`processbench`, `prm800k`, ...: zero-shot), unless `--task` names another.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bbm_tui.core.dataset import DatasetError, TraceRow, replacing, row_from_json
from bbm_tui.core.dataset.formats.positions import RowError
from bbm_tui.core.tasks import get_task

ORIGIN_KEY = "origin"
# A BBM row's per-step ratings (PRM800K's -1/0/+1), as `export --format jsonl` writes them.
RATINGS_KEY = "ratings"
BBM = "bbm"


# --------------------------------------------------------------------------- what a reader gives

@dataclass
class FieldRow:
    """One row of a format, read: the trace, and what the format carries beyond it."""

    question: str
    steps: list[str]
    target: str
    labelled: bool
    mistake_index: int | None
    # The row's other fields, as the format names them (written back as they were).
    fields: dict[str, Any]
    # Each step's rating where the format gives one (PRM800K's -1/0/+1, Math-Shepherd's +/-
    # as +1/-1, TRL's true/false as +1/-1); None for a step it does not rate.
    ratings: list[int | None] | None = None
    # What else the writer needs to put the row back as it was (blank lines, separators).
    layout: dict[str, Any] = field(default_factory=dict)
    # A thinking model's reasoning read from the row (the reasoning formats): the raw text
    # the steps were cut from, kept whole.
    thinking: ThinkingText | None = None


@dataclass(frozen=True)
class ThinkingText:
    """A reasoning written elsewhere, as read: the raw text, whole (the steps are a view of
    it, cut by `rule`), what kind it is, and the answer's text after it, where the row gives
    one (the answer is read from it by the task's rule)."""

    reasoning: str
    rule: str
    kind: str = "raw"
    answer_text: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"reasoning": self.reasoning, "split": self.rule, "reasoning_kind": self.kind,
                "answer_text": self.answer_text}


@dataclass(frozen=True)
class StepCut:
    """How a reasoning read from a file is cut into steps: the split rule's name and the cut
    itself (raw slices that join to the text; core/generation/splitting.py's `split_text`,
    handed down by the command that reads the file, which chose the rule)."""

    rule: str
    cut: Callable[[str], list[str]]

    def steps(self, reasoning: str) -> tuple[list[str], list[str]]:
        """(the raw slices, the steps as stored: each slice stripped)."""
        slices = self.cut(reasoning)
        return slices, [piece.strip() for piece in slices if piece.strip()]


@dataclass(frozen=True)
class Alternative:
    """Another version of a thought: a step on another branch, or a sample backtracking drew
    and no branch took (or a completion a PRM800K labeller rated). `rating` as PRM800K rates
    (1 right, -1 the first mistake), None where no label covers it."""

    text: str
    rating: int | None
    source: str  # "branch" or "sample"


@dataclass(frozen=True)
class OutTrace:
    """One trace as a writer sees it: the trace, its label, and where it came from."""

    input: str
    steps: tuple[str, ...]
    answer: str | None
    target: str
    labelled: bool
    mistake_index: int | None  # 0-based; None with labelled=True means "no mistake"
    task: str = ""
    # The question as the task writes it (the paper's five: "Q: ..."; the field's: as is).
    question: str = ""
    model: str = ""
    # An identifier for formats that need one, where the trace carries none of its own.
    name: str = ""
    # PRM800K's ratings of the steps, as far as rated (per-step labelling), else empty.
    ratings: tuple[int | None, ...] = ()
    finish_reason: str | None = None
    # `origin` of the row the trace was read from (None: made here).
    origin: Mapping[str, Any] | None = None
    # Whether the final answer is right (None: no target to tell).
    correct: bool | None = None
    # Why the first mistake is one (annotators' notes), and the first mistake rewritten (the
    # step at its place on another branch: backtracked or rewritten).
    reasons: tuple[str, ...] = ()
    rectified: tuple[str, ...] = ()
    # PRM800K's labeller, submission time and milliseconds spent, and each step's other
    # versions.
    labeler: str = "bbm-tui"
    timestamp: str | None = None
    total_time_ms: int | None = None
    alternatives: tuple[tuple[Alternative, ...], ...] = ()
    session_id: int | None = None

    def carried(self, fmt: str) -> dict[str, Any]:
        """The fields of the format the trace was read from, if it is `fmt`."""
        if self.origin and self.origin.get("format") == fmt:
            return dict(self.origin.get("fields") or {})
        return {}

    def same_trace(self, fmt: str) -> bool:
        """Read from `fmt`, with the question and steps it was read with: what the format
        said of the trace (its generator, whether its answer is right) still holds."""
        return (self.origin is not None and self.origin.get("format") == fmt
                and origin_matches(self.origin, self.input, self.steps))

    def layout(self, fmt: str) -> dict[str, Any]:
        """How the row was laid out (blank lines, separators), while its trace is as read."""
        if self.origin is not None and self.same_trace(fmt):
            return dict(self.origin.get("layout") or {})
        return {}

    def origin_ratings(self, fmt: str) -> list[int | None] | None:
        """The ratings the format gave, while the trace and its first mistake are as read."""
        if not self.same_trace(fmt) or self.origin is None:
            return None
        ratings = self.origin.get("ratings")
        if not isinstance(ratings, list):
            return None
        if self.labelled and _first_bad(ratings) != self.mistake_index:
            return None  # relabelled since: the ratings no longer say what the label says
        return list(ratings)


def _first_bad(ratings: Sequence[int | None]) -> int | None:
    from bbm_tui.core.dataset.formats.positions import first_bad

    return first_bad(ratings)


def trace_digest(input: str, steps: Sequence[str]) -> str:
    """A trace's identity: its question and its steps (each text with its length first, so
    that no two splits of the same characters collide)."""
    digest = hashlib.blake2b(digest_size=16)
    for text in (input, *steps):
        encoded = text.encode("utf-8", "surrogatepass")
        digest.update(b"%d:" % len(encoded))
        digest.update(encoded)
    return digest.hexdigest()


def origin_matches(origin: Mapping[str, Any], input: str, steps: Sequence[str]) -> bool:
    """Whether the trace is still the one the origin's row held: its digest, where kept (a
    session's, a written row's), says; a row just read is."""
    digest = origin.get("trace")
    return digest is None or digest == trace_digest(input, steps)


def with_digest(origin: Mapping[str, Any], input: str, steps: Sequence[str],
                digest: str | None = None) -> dict[str, Any]:
    """The origin with the digest of the trace it belongs to, to keep with it (a session's,
    or a row written out): a later version of the trace is then told from it."""
    return {**origin, "trace": digest or trace_digest(input, steps)}


def origin_of(row: TraceRow) -> dict[str, Any] | None:
    value = row.extra.get(ORIGIN_KEY)
    return value if isinstance(value, dict) and isinstance(value.get("format"), str) else None


def origin_format(row: TraceRow) -> str | None:
    """The format a row was read from (a BBM row from a `find` run over a ProcessBench file
    says so too), None for a BBM row of its own."""
    origin = origin_of(row)
    return origin["format"] if origin and origin["format"] in FORMATS else None


# Where a format says whether a trace's final answer is right, for traces with no target.
_CORRECTNESS = {"processbench": ("final_answer_correct", True),
                "mr-gsm8k": ("model_output_answer_correctness", "correct")}


def answer_correct(row: TraceRow, task: str) -> bool:
    """Whether the trace's answer is right: by its task's comparison with the target, else
    (no target) as its format says (ProcessBench's `final_answer_correct`, MR-GSM8K's
    `model_output_answer_correctness`), else not known to be."""
    if row.target:
        return get_task(task).is_correct(row.answer, row.target)
    origin = origin_of(row)
    if origin is None or not origin_matches(origin, row.input, row.steps):
        return False
    key, right = _CORRECTNESS.get(origin["format"], ("", None))
    return key != "" and (origin.get("fields") or {}).get(key) == right


def row_ratings(row: TraceRow) -> list[int | None] | None:
    """A row's step ratings: its format's (PRM800K, Math-Shepherd, TRL), else a BBM row's
    own `ratings` (what `export --format jsonl` writes for a per-step label)."""
    found = origin_ratings(row)
    origin = origin_of(row)
    if found is not None and origin is not None and origin_matches(origin, row.input, row.steps):
        return found
    own = row.extra.get(RATINGS_KEY)
    if isinstance(own, list) and all(
            value is None or (not isinstance(value, bool) and value in (-1, 0, 1))
            for value in own):
        return own
    return None


def origin_ratings(row: TraceRow) -> list[int | None] | None:
    origin = origin_of(row)
    ratings = origin.get("ratings") if origin else None
    return ratings if isinstance(ratings, list) else None


# --------------------------------------------------------------------------- the formats

Reader = Callable[[dict[str, Any]], FieldRow]
# The reasoning formats' readers: a row and how to cut its reasoning into steps.
CuttingReader = Callable[[dict[str, Any], StepCut], FieldRow]
Writer = Callable[[OutTrace], dict[str, Any] | None]


@dataclass(frozen=True)
class Format:
    """One format: how a file of it is recognised, read and written."""

    name: str
    title: str
    # Keys that, all present in a file's first row, say it is of this format.
    marks: tuple[str, ...]
    # How its files are written: "jsonl", "array" (one JSON array), or "by-question" (MR-BEN's
    # object of arrays keyed by `Question_UUID`).
    document: str = "jsonl"
    reader: Reader | None = None
    writer: Writer | None = None
    # A reasoning format: read by cutting its reasoning (in place of `reader`), recognised by
    # `detect` (in place of `marks`: its keys vary) where given.
    cutting_reader: CuttingReader | None = None
    detect: Callable[[dict[str, Any]], bool] | None = None

    @property
    def task(self) -> str:
        """The task its questions belong to unless --task says otherwise."""
        return self.name


# --------------------------------------------------------------------------- reading files

@dataclass
class DatasetFile:
    """The rows of one file, each with the line it starts on, and its format."""

    path: Path
    format: Format
    rows: list[tuple[int, TraceRow]]

    @property
    def traces(self) -> list[TraceRow]:
        return [row for _line, row in self.rows]


def read_dataset(path: Path | str, fmt: str | None = None, *,
                 allow_empty: bool = False, cut: StepCut | None = None) -> DatasetFile:
    """Every row of a dataset file in any format (named by `fmt`, else told by the keys of
    its first row), as traces. A bad row is one DatasetError naming the file, the line and
    the format. A reasoning format's rows are cut into steps by `cut` (the command's
    `--split`); a command that takes none cannot read them, and says so."""
    from bbm_tui.core.dataset.formats.documents import iter_rows

    path = Path(path)
    chosen = get_format(fmt) if fmt is not None else None
    rows: list[tuple[int, TraceRow]] = []
    values = iter_rows(path)
    if chosen is None:
        first = next(values, None)
        if first is not None:
            chosen = detect_format(first[1])
            if chosen is None:
                raise DatasetError(path, "cannot tell which dataset format this is: "
                                   f"{describe_keys(first[1])}; the formats: "
                                   f"{', '.join(READ_FORMATS)} (--format FORMAT says which)",
                                   first[0])
            values = itertools.chain([first], values)
    if chosen is not None and chosen.cutting_reader is not None and cut is None:
        raise DatasetError(path, f"holds {chosen.title} rows, whose reasoning is cut into "
                           "steps by a split rule: `import` or `annotate` reads them "
                           "(--split paragraph, sentence or line)")
    if chosen is not None and chosen.reader is None and chosen.cutting_reader is None:
        # the BBM dataset's rows: the fast path
        rows = [(line, row_from_json(value, path, line)) for line, value in values]
    elif chosen is not None:
        rows = [(line, read_row(chosen, value, path, line, cut)) for line, value in values]
    if not rows and not allow_empty:
        raise DatasetError(path, "holds no traces (the file is empty)")
    return DatasetFile(path, chosen or FORMATS[BBM], rows)


def read_row(found: Format, value: object, path: Path, line: int,
             cut: StepCut | None = None) -> TraceRow:
    if found.reader is None and found.cutting_reader is None:
        return row_from_json(value, path, line)
    if not isinstance(value, dict):
        raise DatasetError(path, f"{found.title} row: expected a JSON object, found "
                           f"{type(value).__name__}", line)
    missing = [key for key in found.marks if key not in value]
    try:
        if missing:
            raise RowError(f"missing key{'s' if len(missing) > 1 else ''} "
                           f"{', '.join(repr(key) for key in missing)}")
        read = _read_fields(found, value, cut)
    except RowError as error:
        raise DatasetError(path, f"{found.title} row: {error}", line) from None
    return _trace_row(found, value, read, path, line)


def _read_fields(found: Format, value: dict[str, Any], cut: StepCut | None) -> FieldRow:
    if found.cutting_reader is not None:
        if cut is None:
            raise RowError("a reasoning is cut into steps by a split rule, and none was given")
        return found.cutting_reader(value, cut)
    assert found.reader is not None
    return found.reader(value)


def _trace_row(found: Format, value: dict, read: FieldRow, path: Path, line: int) -> TraceRow:
    task = get_task(found.task)
    answer = next((stated for stated in map(task.extract_answer, reversed(read.steps))
                   if stated is not None), None)
    if read.thinking is not None and read.thinking.answer_text is not None:
        # A thinking trace's answer is in the text after its reasoning: as the task's rule
        # reads it, else (a bare "30") that text itself.
        answer_text = read.thinking.answer_text
        answer = task.extract_answer(answer_text) or answer_text.strip() or answer
    # No digest of the trace yet (`with_digest` adds it where the row is kept: a session):
    # a row just read is the trace it came with, and hashing 10,000 rows' text took a fifth
    # of opening them (bench/annotate_queue.py).
    origin: dict[str, Any] = {"format": found.name, "keys": _shared_keys(tuple(value)),
                              "fields": read.fields}
    if read.ratings is not None:
        origin["ratings"] = read.ratings
    if read.layout:
        origin["layout"] = read.layout
    extra: dict[str, Any] = {ORIGIN_KEY: origin}
    if read.thinking is not None:
        # In the keys a thinking run's rows carry: `import` stores the reasoning whole with
        # the session (store v17) and the steps as a view of it, as a run's.
        extra |= read.thinking.to_json() | {"mode": "thinking"}
    row = TraceRow(read.question, read.steps, answer, read.target, read.mistake_index,
                   extra, labelled=read.labelled)
    _check_text(row, found, path, line)
    return row


_KEY_ORDERS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _shared_keys(keys: tuple[str, ...]) -> tuple[str, ...]:
    """One tuple for every row with the same keys in the same order (all of a file's, as a
    rule): 10,000 rows hold one, not 10,000 lists."""
    return _KEY_ORDERS.setdefault(keys, keys)


def _check_text(row: TraceRow, found: Format, path: Path, line: int) -> None:
    """Text that is not Unicode (a lone surrogate from a \\u escape) is refused here, as the
    BBM reader refuses it: no store or terminal can hold it."""
    try:
        "".join([row.input, row.target, *row.steps]).encode("utf-8")
    except UnicodeEncodeError:
        raise DatasetError(path, f"{found.title} row: text that is not valid Unicode (a lone "
                           "surrogate: a \\u escape of a surrogate must come in a pair)",
                           line) from None


# --------------------------------------------------------------------------- writing files

def write_rows(fmt: str, traces: Iterable[OutTrace]) -> tuple[list[dict[str, Any]], int]:
    """The rows of `traces` in `fmt`, and how many it left out (a trace the format cannot
    express: unlabelled, for one that needs a label)."""
    found = get_format(fmt)
    if found.writer is None:
        raise ValueError(f"{found.title} rows are written by the export itself")
    rows, skipped = [], 0
    for trace in traces:
        row = found.writer(trace)
        if row is None:
            skipped += 1
        else:
            rows.append(row)
    return rows, skipped


def write_document(path: Path, fmt: str, rows: Sequence[dict[str, Any]]) -> None:
    """A whole file of rows, in the shape the format's own tools read (written through a
    temporary file: a reader never sees half of it)."""
    found = get_format(fmt)
    with replacing(path) as out:
        out.write(document_text(found, rows))


def document_text(found: Format, rows: Sequence[dict[str, Any]]) -> str:
    if found.document == "array":
        return json.dumps(list(rows), indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    if found.document == "by-question":
        grouped: dict[str, list[dict[str, Any]]] = {}
        for row in rows:
            grouped.setdefault(str(row.get("Question_UUID", "")), []).append(row)
        return json.dumps(grouped, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    return "".join(json.dumps(row, allow_nan=False) + "\n" for row in rows)


def ordered(row: dict[str, Any], keys: Sequence[str]) -> dict[str, Any]:
    """`row` with its keys in `keys`' order (the order the file had), new keys after."""
    result = {key: row[key] for key in keys if key in row}
    result.update((key, value) for key, value in row.items() if key not in result)
    return result


def origin_keys(trace: OutTrace, fmt: str, default: Sequence[str]) -> list[str]:
    if trace.origin and trace.origin.get("format") == fmt:
        keys = trace.origin.get("keys")
        if isinstance(keys, list | tuple):
            return [str(key) for key in keys]
    return list(default)


def out_trace(row: TraceRow, task: str, **more: Any) -> OutTrace:
    """A row read from a file as a writer sees it (its origin kept)."""
    found = get_task(task)
    target = row.target
    return OutTrace(
        input=row.input, steps=tuple(row.steps), answer=row.answer, target=target,
        labelled=row.labelled, mistake_index=row.mistake_index if row.labelled else None,
        task=found.name, question=found.question(row.input),
        origin=origin_of(row),
        correct=found.is_correct(row.answer, target) if target else None,
        **more,
    )


# --------------------------------------------------------------------------- the registry

def _registry() -> dict[str, Format]:
    from bbm_tui.core.dataset.formats import (
        deltabench,
        math_shepherd,
        mr_ben,
        mr_gsm8k,
        prm800k,
        prmbench,
        processbench,
        reasoning,
        trl,
    )

    # In the order detection tries them: the most telling keys first.
    formats = (
        Format("mr-ben", "MR-BEN", ("Question", "Model_Solution_Steps"), "by-question",
               mr_ben.read, mr_ben.write),
        Format("mr-gsm8k", "MR-GSM8K", ("question", "model_output_steps"), "array",
               mr_gsm8k.read, mr_gsm8k.write),
        Format("prmbench", "PRMBench", ("modified_question", "modified_process"), "jsonl",
               prmbench.read, prmbench.write),
        Format("trl", "TRL stepwise", ("prompt", "completions", "labels"), "jsonl",
               trl.read, trl.write),
        Format("prm800k", "PRM800K", ("question", "label"), "jsonl",
               prm800k.read, prm800k.write),
        Format("processbench", "ProcessBench", ("problem", "steps"), "jsonl",
               processbench.read, processbench.write),
        Format("math-shepherd", "Math-Shepherd", ("input", "label"), "jsonl",
               math_shepherd.read, math_shepherd.write),
        Format("deltabench", "DeltaBench", deltabench.KEYS, "csv",
               cutting_reader=deltabench.read),
        Format(BBM, "BBM", ("input", "steps")),
        Format("reasoning", "Reasoning", (), "jsonl", cutting_reader=reasoning.read,
               detect=reasoning.detect),
    )
    return {found.name: found for found in formats}


FORMATS: dict[str, Format] = _registry()
# What `--format` takes when reading; "jsonl" is the BBM dataset's own, as `export` names it.
READ_FORMATS: tuple[str, ...] = (BBM, "processbench", "prm800k", "mr-gsm8k", "mr-ben",
                                  "math-shepherd", "prmbench", "trl", "reasoning",
                                  "deltabench")
FORMAT_ALIASES = {"jsonl": BBM}


def get_format(name: str) -> Format:
    name = FORMAT_ALIASES.get(name, name)
    if name not in FORMATS:
        raise ValueError(f"unknown format {name!r}; the formats: {', '.join(READ_FORMATS)}")
    return FORMATS[name]


def detect_format(row: object) -> Format | None:
    """The format a file's first row is in, from its keys; None when no format fits."""
    if not isinstance(row, dict):
        return None
    for found in FORMATS.values():
        if found.detect is not None:
            if found.detect(row):
                return found
        elif all(key in row for key in found.marks):
            return found
    return None


def describe_keys(row: object) -> str:
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    keys = list(row)
    shown = ", ".join(repr(key) for key in keys[:8]) + (", ..." if len(keys) > 8 else "")
    return f"its keys are {shown or 'none'}"
