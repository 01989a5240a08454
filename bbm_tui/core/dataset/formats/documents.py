"""The rows of a dataset file, whatever its shape, each with the line it starts on.

The field publishes its datasets in four shapes: JSON Lines (PRM800K, Math-Shepherd, PRMBench,
TRL's, ours), one JSON array of rows (ProcessBench's and MR-GSM8K's `.json` files),
MR-BEN's object of arrays keyed by question (`{"<Question_UUID>": [row, row, row], ...}`),
and CSV with a header (DeltaBench's `.csv`: a file named so, or whose header names a column
only such a file has). A file is JSON Lines when its first line is a whole JSON object on its
own (and not MR-BEN's object written on one line); otherwise it is one JSON document. Rows of
a document (or a CSV file) are read one at a time from their place in the text, so a bad row
is named by the line it starts on.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bbm_tui.core.dataset import (
    DatasetError,
    _refuse_constant,
    check_regular_file,
    iter_jsonl,
    number_problem,
    standard_decoder,
)

# A whole-document file is read into memory at once: the field's largest (Math-Shepherd's
# JSON Lines aside, which stream) are a few MB; past this it is not a dataset.
MAX_DOCUMENT_BYTES = 1 << 30
_WHITESPACE = " \t\r\n"


def iter_rows(path: Path | str) -> Iterator[tuple[int, object]]:
    """(line, decoded row) for every row of the file, in order: JSON rows, or a CSV file's
    (DeltaBench's), each a dict by its header's names."""
    path = Path(path)
    if _is_csv(path):
        yield from _csv_rows(path)
    elif _is_document(path):
        yield from _document_rows(path)
    else:
        yield from iter_jsonl(path)


# A CSV file is told by its name, or by a header naming a column only a CSV dataset has
# (DeltaBench's), so that a JSON file is never read as one.
CSV_SUFFIX = ".csv"
CSV_HEADER_MARKS = (b"sections_content",)
# A CSV cell can hold a whole reasoning (DeltaBench's are up to a few hundred thousand
# characters); past this it is not a dataset's.
MAX_CSV_FIELD_CHARS = 1 << 26


def _is_csv(path: Path) -> bool:
    check_regular_file(path)
    if path.suffix.lower() == CSV_SUFFIX:
        return True
    try:
        with path.open("rb") as handle:
            first_line = handle.readline(1 << 16)
    except OSError as error:
        raise DatasetError(path, f"cannot read: {error.strerror}") from None
    start = first_line.lstrip(b"\xef\xbb\xbf").lstrip()
    return not start.startswith((b"{", b"[")) and any(
        mark in first_line for mark in CSV_HEADER_MARKS)


def _csv_rows(path: Path) -> Iterator[tuple[int, object]]:
    """The rows of a CSV file with a header, each with the line it starts on (a cell may
    hold line breaks, inside quotes). Blank rows are skipped; a row with more cells than
    the header has names, or a cell too long, is named by its line."""
    text = _read_text(path)
    csv.field_size_limit(max(csv.field_size_limit(), MAX_CSV_FIELD_CHARS))
    lines = io.StringIO(text, newline="")
    reader = csv.reader(lines, strict=True)
    try:
        header = next(reader, None)
    except csv.Error as error:
        raise DatasetError(path, f"malformed CSV: {error}", 1) from None
    if header is None:
        return
    header[0] = header[0].removeprefix("\ufeff")
    names = [name.strip() for name in header]
    line = reader.line_num + 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            raise DatasetError(path, f"malformed CSV: {error}", line) from None
        if any(cell.strip() for cell in cells):
            if len(cells) > len(names):
                raise DatasetError(path, f"a CSV row of {len(cells)} cells, under a header "
                                   f"of {len(names)} names", line)
            yield line, dict(zip(names, cells, strict=False))
        line = reader.line_num + 1


def _is_document(path: Path) -> bool:
    check_regular_file(path)
    try:
        with path.open("rb") as handle:
            head = handle.read(1 << 16)
            start = head.lstrip(b"\xef\xbb\xbf").lstrip()
            if start.startswith(b"["):
                return True
            if not start.startswith(b"{"):
                return False
            first_line = start.split(b"\n", 1)[0]
            if len(first_line) == len(start) and len(head) == 1 << 16:
                first_line += handle.readline()  # a long first line: read it whole
    except OSError as error:
        raise DatasetError(path, f"cannot read: {error.strerror}") from None
    try:
        value = json.loads(first_line.decode("utf-8"), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return True  # not a whole value on one line: a document written over many lines
    return _keyed_by_question(value)


def _keyed_by_question(value: object) -> bool:
    """MR-BEN's shape: every value an array of rows."""
    return (isinstance(value, dict) and bool(value)
            and all(isinstance(item, list) for item in value.values()))


def _document_rows(path: Path) -> Iterator[tuple[int, object]]:
    text = _read_text(path)
    reader = _Reader(path, text)
    position = reader.skip(0)
    if text.startswith("[", position):
        yield from reader.array(position)
    elif text.startswith("{", position):
        value, _end = reader.value(position)
        if not _keyed_by_question(value):  # one row, written over many lines
            yield reader.line(position), value
        else:
            yield from reader.keyed_arrays(position)
    else:
        raise DatasetError(path, "not JSON: a dataset file holds JSON rows", reader.line(position))
    trailing = reader.skip(reader.end)
    if trailing < len(text):
        raise DatasetError(path, "more after the end of the JSON document (two documents "
                           "in one file?)", reader.line(trailing))


def _read_text(path: Path) -> str:
    check_regular_file(path)
    try:
        size = path.stat().st_size
        if size > MAX_DOCUMENT_BYTES:
            raise DatasetError(path, f"a JSON document of {size} bytes (more than "
                               f"{MAX_DOCUMENT_BYTES >> 30} GiB): write it as JSON Lines")
        raw = path.read_bytes()
    except OSError as error:
        raise DatasetError(path, f"cannot read: {error.strerror}") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise DatasetError(path, "is UTF-16 text (it starts with a UTF-16 byte-order mark); "
                           "save it as UTF-8", 1)
    try:
        return raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise DatasetError(path, "not UTF-8 text", line) from None


class _Reader:
    """Walks one JSON document, decoding one row at a time from where it starts."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.text = text
        self.end = 0
        self._decoder = standard_decoder()
        self._counted_to = 0
        self._lines_before = 0

    def line(self, position: int) -> int:
        """The 1-based line of `position` (positions are asked for in increasing order)."""
        if position < self._counted_to:
            return self.text.count("\n", 0, position) + 1
        self._lines_before += self.text.count("\n", self._counted_to, position)
        self._counted_to = position
        return self._lines_before + 1

    def skip(self, position: int) -> int:
        while position < len(self.text) and self.text[position] in _WHITESPACE:
            position += 1
        return position

    def value(self, position: int) -> tuple[Any, int]:
        try:
            value, end = self._decoder.raw_decode(self.text, position)
        except json.JSONDecodeError as error:
            raise DatasetError(self.path, f"malformed JSON: {error.msg} (column {error.colno})",
                               error.lineno) from None
        except ValueError as error:  # NaN, Infinity, 1e400, a 5,000-digit integer: refused
            # as the JSON Lines reader does
            raise DatasetError(self.path, number_problem(error) or str(error),
                               self.line(position)) from None
        except RecursionError:
            raise DatasetError(self.path, "nested too deeply to read (not a dataset row)",
                               self.line(position)) from None
        self.end = end
        return value, end

    def expect(self, position: int, wanted: str, what: str) -> int:
        position = self.skip(position)
        if not self.text.startswith(wanted, position):
            found = self.text[position:position + 1] or "the end of the file"
            raise DatasetError(self.path, f"malformed JSON: expected {what}, found {found!r}",
                               self.line(min(position, len(self.text))))
        return position + len(wanted)

    def array(self, position: int) -> Iterator[tuple[int, object]]:
        """The rows of the array that starts at `position`."""
        position = self.expect(position, "[", "'['")
        position = self.skip(position)
        if self.text.startswith("]", position):
            self.end = position + 1
            return
        while True:
            position = self.skip(position)
            line = self.line(position)
            value, position = self.value(position)
            yield line, value
            position = self.skip(position)
            if self.text.startswith("]", position):
                self.end = position + 1
                return
            position = self.expect(position, ",", "',' or ']' after a row")

    def keyed_arrays(self, position: int) -> Iterator[tuple[int, object]]:
        """The rows of every array of an object of arrays (MR-BEN's files), in order."""
        position = self.expect(position, "{", "'{'")
        while True:
            position = self.skip(position)
            if self.text.startswith("}", position):
                self.end = position + 1
                return
            _key, position = self.value(position)
            position = self.expect(position, ":", "':' after a key")
            yield from self.array(position)
            position = self.skip(self.end)
            if self.text.startswith("}", position):
                self.end = position + 1
                return
            position = self.expect(position, ",", "',' or '}' after an array")
