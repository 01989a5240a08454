"""The dataset's JSONL format: `input, steps, answer, target, mistake_index` (docs/DESIGN.md §2).

Reading is strict and every problem names the file and the line, so a bad file gets a clear
message instead of a traceback. Extra keys (the `model` and `latency_s` that `run` adds, or a
finder's predictions) are kept in order and written back.

Labels: `"mistake_index": N` is the first mistake (0-based) and `"mistake_index": null` means
"no mistake", as in the paper's files. A row with no `mistake_index` key is unlabelled: nobody
has said yet (what `run` writes, and what `export` writes for a session nobody labelled).
A row may carry its `task` (files that mix tasks); it wins over the file's.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from bbm_tui.core.errors import UserError
from bbm_tui.core.resources import dataset_dir
from bbm_tui.core.tasks import TASK_NAMES, Task, get_task, task_names
from bbm_tui.core.types import MAX_QUESTION_CHARS

if TYPE_CHECKING:
    from bbm_tui.core.dataset.formats import StepCut

DATASET_KEYS = ("input", "steps", "answer", "target", "mistake_index")
# Every row has these; `mistake_index` is there only when the row is labelled.
REQUIRED_KEYS = ("input", "steps", "answer", "target")
# The keys of a question for `run`: only `input` is needed.
QUESTION_KEYS = ("input", "target")
# Keys a `run` input may hold that `run` does not use (it writes its own).
TRACE_ONLY_KEYS = ("steps", "answer", "mistake_index")
# The order four of the five files write their keys in (dyck_languages puts steps after
# answer); rows read from a file keep that file's order, so they write back byte for byte.
DEFAULT_KEY_ORDER = ("input", "steps", "target", "answer", "mistake_index")


class DatasetError(UserError, ValueError):
    """A problem with a dataset file, located by file and (where there is one) line:
    `reason` is the problem, `message` the located sentence."""

    title = "A problem with a dataset file"

    def __init__(self, path: Path | str, reason: str, line: int | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.reason = reason
        where = f"{self.path}:{line}" if line is not None else f"{self.path}"
        super().__init__(f"{where}: {reason}")


@dataclass
class TraceRow:
    input: str
    steps: list[str]
    answer: str | None
    target: str
    mistake_index: int | None
    extra: dict[str, Any] = field(default_factory=dict)
    key_order: tuple[str, ...] = field(default=DEFAULT_KEY_ORDER, compare=False)
    # False: nobody has labelled the trace; the row is written with no `mistake_index` key
    # (`mistake_index` is then None and means nothing).
    labelled: bool = True

    @property
    def task(self) -> str | None:
        """The row's own task, in files that mix tasks (checked when the row was read)."""
        task = self.extra.get("task")
        return task if isinstance(task, str) else None

    def to_json(self) -> dict[str, Any]:
        values: dict[str, Any] = {
            "input": self.input,
            "steps": list(self.steps),
            "answer": self.answer,
            "target": self.target,
            **({"mistake_index": self.mistake_index} if self.labelled else {}),
            **self.extra,
        }
        row = {key: values.pop(key) for key in self.key_order if key in values}
        row.update(values)
        return row

    def to_line(self) -> str:
        # json.dumps' defaults (ASCII escapes, ", " and ": ") are the dataset's own bytes.
        return json.dumps(self.to_json(), allow_nan=False)


def row_from_json(obj: object, path: Path | str, line: int) -> TraceRow:
    """Validate one decoded JSON value as a dataset row."""
    if not isinstance(obj, dict):
        raise DatasetError(path, f"expected a JSON object, found {type(obj).__name__}", line)
    missing = [key for key in REQUIRED_KEYS if key not in obj]
    if missing:
        raise DatasetError(path, f"missing key(s): {', '.join(missing)}", line)
    _check_row_task(obj, path, line)
    _expect(obj, "input", str, path, line)
    _expect(obj, "target", str, path, line)
    _check_length(obj, path, line)
    steps = obj["steps"]
    if not isinstance(steps, list) or not _all_strings(steps):
        raise DatasetError(path, "'steps' must be a list of strings", line)
    answer = obj["answer"]
    if answer is not None and not isinstance(answer, str):
        raise DatasetError(path, "'answer' must be a string or null", line)
    labelled = "mistake_index" in obj
    mistake_index = obj.get("mistake_index")
    if mistake_index is not None:
        if isinstance(mistake_index, bool) or not isinstance(mistake_index, int):
            raise DatasetError(path, "'mistake_index' must be an integer or null", line)
        if not 0 <= mistake_index < len(steps):
            raise DatasetError(
                path,
                f"'mistake_index' {mistake_index} is outside the {len(steps)} steps "
                "(it is 0-based)",
                line,
            )
    _expect_unicode(obj, path, line)
    extra = {key: value for key, value in obj.items() if key not in DATASET_KEYS}
    return TraceRow(
        obj["input"], steps, answer, obj["target"], mistake_index, extra, tuple(obj), labelled
    )


def question_from_json(obj: object, path: Path | str, line: int) -> tuple[TraceRow, list[str]]:
    """One question for `run`: `input`, and `target` if known ("" when not). A dataset row
    is a question too; its `steps`, `answer` and `mistake_index` are not used, and are named
    in the second value so the command can say so. Other keys are kept (a `dataset_index`, a
    row's `task`)."""
    if not isinstance(obj, dict):
        raise DatasetError(path, f"expected a JSON object, found {type(obj).__name__}", line)
    if "input" not in obj:
        raise DatasetError(path, "missing key: input (the question)", line)
    _expect(obj, "input", str, path, line)
    target = obj.get("target", "")
    if not isinstance(target, str):
        raise DatasetError(path, "'target' must be a string", line)
    _check_length({"input": obj["input"], "target": target}, path, line)
    _check_row_task(obj, path, line)
    # Text that is not Unicode is refused even where run does not use it: the file is bad.
    steps = obj.get("steps")
    answer = obj.get("answer")
    _expect_unicode({"input": obj["input"], "target": target,
                     "answer": answer if isinstance(answer, str) else None,
                     "steps": [step for step in steps if isinstance(step, str)]
                     if isinstance(steps, list) else []}, path, line)
    ignored = [key for key in TRACE_ONLY_KEYS if key in obj]
    extra = {key: value for key, value in obj.items()
             if key not in QUESTION_KEYS and key not in TRACE_ONLY_KEYS}
    order = tuple(key for key in DEFAULT_KEY_ORDER if key != "mistake_index") + tuple(extra)
    row = TraceRow(obj["input"], [], None, target, None, extra, order, labelled=False)
    return row, ignored


def _check_length(obj: dict, path: Path | str, line: int) -> None:
    for key in ("input", "target"):
        if len(obj[key]) > MAX_QUESTION_CHARS:
            raise DatasetError(path, f"{key!r} is {len(obj[key]):,} characters long; bbm-tui "
                               f"takes questions and targets of up to {MAX_QUESTION_CHARS:,}",
                               line)


def _check_row_task(obj: dict, path: Path | str, line: int) -> None:
    if "task" not in obj:
        return
    task = obj["task"]
    if not isinstance(task, str) or task not in task_names():
        raise DatasetError(
            path, f"unknown task {task!r} in the row's 'task'; known tasks: "
            f"{', '.join(task_names())} (a task of your own: --task-file FILE.toml, or its "
            "file in the config folder's tasks/)", line,
        )


_SURROGATE = re.compile("[\ud800-\udfff]")


def _expect_unicode(obj: dict, path: Path | str, line: int) -> None:
    """JSON can spell a lone UTF-16 surrogate ("\\ud800" with no partner); that is not text
    any UTF-8 file, store or terminal can hold, so the row is refused where it is read."""
    texts = [obj["input"], obj["target"], obj["answer"] or "", *obj["steps"]]
    try:  # the common case, at C speed: every text encodes (no lone surrogate anywhere)
        "".join(texts).encode("utf-8")
        return
    except UnicodeEncodeError:
        pass
    fields = [("input", obj["input"]), ("target", obj["target"]), ("answer", obj["answer"])]
    fields += [(f"steps[{index}]", step) for index, step in enumerate(obj["steps"])]
    for name, value in fields:
        found = _SURROGATE.search(value) if isinstance(value, str) else None
        if found:
            raise DatasetError(
                path,
                f"{name!r} is not valid Unicode text: a lone surrogate "
                f"\\u{ord(found.group(0)):04x} at character {found.start() + 1} "
                "(a \\u escape of a surrogate must come in a pair)",
                line,
            )


def _all_strings(values: list) -> bool:
    """Whether every value is a string, checked by joining them: at C speed, half the time
    of `all(isinstance(...))` over 10,000 rows' steps (JSON gives no str subclasses)."""
    try:
        "".join(values)
    except TypeError:
        return False
    return True


def _expect(obj: dict, key: str, kind: type, path: Path | str, line: int) -> None:
    if not isinstance(obj[key], kind):
        raise DatasetError(path, f"{key!r} must be a {kind.__name__}", line)


# The longest line of the bundled dataset is about 15 KB; a "line" past this is not a row.
MAX_LINE_BYTES = 16 * 2**20
_READ_CHUNK = 1 << 20


def check_regular_file(path: Path | str, *, missing_ok: bool = False) -> None:
    """Refuse what is not a regular file before opening it: reading /dev/zero or a FIFO
    never ends, and writing /dev/full fails only after the work is done."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if missing_ok:
            return
        raise DatasetError(path, "no such file") from None
    except OSError as error:
        raise DatasetError(path, f"cannot use it: {error.strerror}") from None
    if stat.S_ISDIR(mode):
        raise DatasetError(path, "is a directory, not a JSONL file")
    if not stat.S_ISREG(mode):
        kind = "a FIFO (named pipe)" if stat.S_ISFIFO(mode) else (
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file")
        raise DatasetError(path, f"is {kind}, not a regular file")


def iter_jsonl(path: Path | str) -> Iterator[tuple[int, object]]:
    """(line number, decoded value) for every non-blank line, with errors naming the line.
    Only regular files are read, a line at a time, none longer than MAX_LINE_BYTES."""
    path = Path(path)
    check_regular_file(path)
    try:
        # Non-blocking, so a FIFO swapped in since the check cannot hang the open; fstat
        # then sees what was really opened.
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise DatasetError(path, "is a directory, not a JSONL file") from None
    except OSError as error:
        raise DatasetError(path, f"cannot read: {error.strerror}") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise DatasetError(path, "is not a regular file")
    with os.fdopen(descriptor, "rb") as handle:
        for number, line_bytes in _raw_lines(handle, path):
            if not line_bytes.strip():
                continue
            try:
                text = line_bytes.decode("utf-8")
            except UnicodeDecodeError as error:
                raise DatasetError(
                    path, f"not UTF-8 text (byte {error.start + 1} of the line)", number
                ) from None
            yield number, json_value(text, path, number)


class _NotANumber(ValueError):
    def __init__(self, constant: str) -> None:
        super().__init__(constant)
        self.constant = constant


def _refuse_constant(constant: str) -> Any:
    raise _NotANumber(constant)


class _OutOfRange(ValueError):
    """A JSON number Python cannot hold as it was meant: past the float range (`1e400` reads
    as infinity, which the NaN/Infinity guard never saw), or an integer of more digits than
    Python converts (4,300: its guard against quadratic conversion)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# Python's own limit on the digits of an integer read from text (sys.get_int_max_str_digits).
MAX_INT_DIGITS = 4300


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise _OutOfRange(f"{shown} is past the range of a number (it would read as "
                          "infinity)")
    return value


def _bounded_int(text: str) -> int:
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS:
        raise _OutOfRange(f"an integer of {digits:,} digits is past what a number may have "
                          f"({MAX_INT_DIGITS:,} digits)")
    return int(text)


def standard_decoder() -> json.JSONDecoder:
    """A JSON decoder for what files hold: no NaN or Infinity, no number past the float range,
    no integer Python will not convert; each refused with an error a reader turns into a
    message naming the file and line (`number_problem`)."""
    return json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float,
                            parse_int=_bounded_int)


def number_problem(error: ValueError) -> str | None:
    """What is wrong with a number, for an error `standard_decoder` raised (None: another)."""
    if isinstance(error, _NotANumber):
        return f"{error.constant} is not a JSON number (standard JSON has no NaN or Infinity)"
    if isinstance(error, _OutOfRange):
        return error.reason
    return None


# One decoder for every line: json.loads with an option builds a new one each call, a tenth
# of reading 10,000 rows (bench/annotate_queue.py).
_STANDARD_JSON = standard_decoder()


def json_value(text: str, path: Path | str, line: int) -> Any:
    """One line of a JSONL file, decoded as standard JSON: Python's reader also takes NaN and
    Infinity, which no standard reader does (and what a command copies from the row into its
    own files would not be JSON either). Nesting deeper than the reader can follow is a bad
    line like any other, not a crash."""
    try:
        return _STANDARD_JSON.decode(text)
    except json.JSONDecodeError as error:
        raise DatasetError(
            path, f"malformed JSON: {error.msg} (column {error.colno})", line
        ) from None
    except (_NotANumber, _OutOfRange) as error:
        raise DatasetError(path, number_problem(error) or str(error), line) from None
    except RecursionError:
        raise DatasetError(path, "nested too deeply to read (not a dataset row)", line) from None


def _raw_lines(handle, path: Path) -> Iterator[tuple[int, bytes]]:
    first = handle.read(_READ_CHUNK)
    if first.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DatasetError(
            path, "is UTF-16 text (it starts with a UTF-16 byte-order mark); JSONL files are "
            "UTF-8: save it as UTF-8", 1,
        )
    if first.startswith(b"\xef\xbb\xbf"):  # the UTF-8 byte-order mark some editors write
        first = first[3:]
    pending = first
    number = 0
    while True:
        lines = pending.split(b"\n")
        pending = lines.pop()
        for line in lines:
            number += 1
            yield number, line
        if len(pending) > MAX_LINE_BYTES:
            raise DatasetError(
                path, f"a line longer than {MAX_LINE_BYTES // 2**20} MiB (not a dataset row)",
                number + 1,
            )
        chunk = handle.read(_READ_CHUNK)
        if not chunk:
            break
        pending += chunk
    if pending:
        yield number + 1, pending


def read_rows(path: Path | str) -> list[TraceRow]:
    return [row_from_json(obj, path, number) for number, obj in iter_jsonl(path)]


@dataclass
class Questions:
    """The questions of one `run` input file; `ignored` counts the rows whose `steps`,
    `answer` or `mistake_index` were set aside (a dataset file given as questions)."""

    rows: list[TraceRow]
    ignored: int = 0


def read_questions(path: Path | str) -> Questions:
    found = Questions([])
    for number, obj in iter_jsonl(path):
        row, ignored = question_from_json(obj, path, number)
        found.rows.append(row)
        found.ignored += bool(ignored)
    if not found.rows:
        raise DatasetError(path, "holds no traces (the file is empty)")
    return found


def read_input_rows(path: Path | str, fmt: str | None = None,
                    cut: StepCut | None = None) -> list[TraceRow]:
    """The traces of a file given to a command to work on, in the BBM dataset's format or any
    of the field's (`fmt`, else told by the keys of its first row: core/dataset/formats/). One
    with no rows at all is an error (an empty input is far more often a mistake than a
    dataset). A reasoning written elsewhere is cut into steps by `cut` (the command's
    `--split`)."""
    from bbm_tui.core.dataset.formats import read_dataset

    return read_dataset(path, fmt, cut=cut).traces


def task_from_path(path: Path | str) -> str:
    """A dataset file named after its task (`word_sorting.jsonl`) says which task it holds."""
    stem = Path(path).name.split(".")[0]
    if stem in task_names():
        return stem
    raise DatasetError(
        path,
        "cannot tell which task this file holds: pass --task, or name the file after its task "
        f"({', '.join(name + '.jsonl' for name in task_names())})",
    )


def resolve_task(path: Path | str, task: str | None) -> str:
    if task is not None:
        get_task(task)
        return task
    return task_from_path(path)


def rows_with_tasks(
    path: Path | str, task: str | None, rows: Iterable[TraceRow]
) -> Iterator[tuple[str, TraceRow]]:
    """Each row with its task: the row's own `task`, else `task`, else for a row read from one
    of the field's formats the task named after it (`processbench`, ...), else the file's name
    (asked only when a row has no task of its own)."""
    from bbm_tui.core.dataset.formats import origin_format

    file_task: str | None = None
    for row in rows:
        if row.task is not None:
            yield row.task, row
            continue
        if task is None:
            fmt = origin_format(row)
            if fmt is not None:
                yield fmt, row
                continue
        if file_task is None:
            file_task = resolve_task(path, task)
        yield file_task, row


def limited_per_task(pairs: Iterable[tuple[str, TraceRow]], limit: int | None
                     ) -> Iterator[tuple[str, TraceRow]]:
    """`rows_with_tasks`'s pairs, at most `limit` rows of each task (all: None)."""
    taken: dict[str, int] = {}
    for row_task, row in pairs:
        if limit is not None and taken.get(row_task, 0) >= limit:
            continue
        taken[row_task] = taken.get(row_task, 0) + 1
        yield row_task, row


def write_rows(path: Path | str, rows: Iterable[TraceRow]) -> None:
    """Write a whole JSONL file atomically (a temporary file renamed over the target)."""
    with replacing(Path(path)) as out:
        for row in rows:
            out.write(row.to_line() + "\n")


def is_standard_output(path: Path | str) -> bool:
    """`-` as the file a command writes means standard output, for every command."""
    return str(path) == "-"


@contextmanager
def replacing(path: Path) -> Iterator[TextIO]:
    """A file written whole into a temporary file, then renamed over `path`: a reader never
    sees half of it, and a failure leaves `path` as it was. The temporary file gets a fresh
    name (never an existing file, such as someone's `.NAME.tmp`), only its owner can read it
    (exports may hold private text), and it is removed if anything fails. `-` is standard
    output, written as it comes."""
    if is_standard_output(path):
        yield sys.stdout
        sys.stdout.flush()
        return
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(temporary)
        raise


@cache
def bundled_rows(task_name: str) -> tuple[TraceRow, ...]:
    """The dataset shipped with the app, for the replay model and the question picker."""
    return tuple(read_rows(bundled_path(task_name)))


def bundled_path(task_name: str) -> Path:
    """The paper's dataset file of one of its tasks; a task of one's own has none."""
    if not get_task(task_name).is_paper:
        raise DatasetError(
            task_name, "a task of your own has no bundled dataset: give its questions in a "
            "file (--input FILE.jsonl, or `questions` in its task file)")
    return dataset_dir() / f"{task_name}.jsonl"


def questions_file(task: Task | str) -> Path | None:
    """The file the app lists a task's questions from: the paper's dataset file for the
    paper's five, a task of one's own's `questions` file (None where it names none)."""
    found = get_task(task)
    return bundled_path(found.name) if found.is_paper else found.questions_path


def question_rows(task: Task | str) -> tuple[TraceRow, ...]:
    """The questions the app lists for a task: the paper's dataset for the paper's five; for
    a task of one's own, the rows of its `questions` file (dataset rows, or rows of `input`
    and `target` only), none where it names no file."""
    found = get_task(task)
    if found.is_paper:
        return bundled_rows(found.name)
    if found.questions_path is None:
        return ()
    rows = []
    for number, obj in iter_jsonl(found.questions_path):
        if isinstance(obj, dict) and "steps" in obj:
            rows.append(row_from_json(obj, found.questions_path, number))
        else:
            rows.append(question_from_json(obj, found.questions_path, number)[0])
    return tuple(rows)


def all_bundled() -> Sequence[tuple[str, tuple[TraceRow, ...]]]:
    return [(name, bundled_rows(name)) for name in TASK_NAMES]
