"""Many machines: `--shard I/N` and `bbm-tui merge`.

Machine I of N takes the jobs whose key hashes to I (a fixed share, whatever the order of the
input's rows, whatever was done before a resume), so N machines that share only the input
file do the work once. Each writes its own OUT, where every row also says which shard wrote
it, its place among the batch's jobs (`shard`, `shard_row`: the row's place in what one
machine would write) and what the batch is a share of (`shard_of`: a digest of its whole
input, the digest of its task definitions, its models). `merge` joins the shards' OUTs into
exactly what one machine writes: those keys taken off, the rows in the jobs' order, each once.
Nothing is written when two different rows claim one place (a conflict, named with both files
and lines), when the files are shares of different batches (another input, task definition or
model), when a file is still being written (its run holds its lock), or when no file holds a
row of one of the N shares (unless the person asks for the partial file).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bbm_tui.core.dataset import (
    DatasetError,
    is_standard_output,
    number_problem,
    replacing,
    row_from_json,
    standard_decoder,
)
from bbm_tui.core.errors import UserError
from bbm_tui.core.readfile import kind_of

try:  # POSIX; elsewhere a shard still being written is not detected
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

SHARD_KEY = "shard"
PLACE_KEY = "shard_row"
OF_KEY = "shard_of"
_STANDARD = standard_decoder()
# At most 9 digits each: no split has more machines (and a 5,000-digit one is not converted).
_SHARD = re.compile(r"\s*(\d{1,9})\s*/\s*(\d{1,9})\s*")


class ShardError(UserError, ValueError):
    """A shard that cannot be, or shards that cannot be merged; the message says where."""

    title = "Cannot share the work out"


@dataclass(frozen=True)
class Shard:
    """Machine `index` (1-based) of `count`."""

    index: int
    count: int

    @classmethod
    def parse(cls, text: str) -> Shard:
        match = _SHARD.fullmatch(text)
        if match is None:
            shown = repr(text) if len(text) <= 40 else repr(text[:37]) + "..."
            raise ShardError(f"--shard takes I/N (this machine's number, then how many), "
                             f"not {shown}")
        index, count = int(match.group(1)), int(match.group(2))
        if not 1 <= index <= count:
            raise ShardError(f"--shard {index}/{count}: I must be from 1 to N")
        return cls(index, count)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def takes(self, key: Hashable) -> bool:
        """Whether this machine does the job with this key: by a hash of the key's text,
        the same on every machine and in every run (Python's own hash of a string is not)."""
        digest = hashlib.sha256(repr(key).encode("utf-8", "surrogatepass")).digest()
        return int.from_bytes(digest[:8], "big") % self.count == self.index - 1

    def tag(self, line: str, place: int, of: Mapping[str, Any] | None = None) -> str:
        """An OUT line with this shard, the row's place among the jobs and what the batch is
        a share of (`of`, see `batch_digest`) added at its end."""
        row = json.loads(line)
        row[SHARD_KEY] = str(self)
        row[PLACE_KEY] = place
        if of is not None:
            row[OF_KEY] = dict(of)
        return json.dumps(row, allow_nan=False)

    def check_rows(self, path: Path, rows: Sequence[object],
                   of: Mapping[str, Any] | None = None) -> None:
        """Refuse an OUT holding another shard's rows, rows written without --shard, or rows
        of a share of another batch (`of`: what this one is a share of)."""
        for number, extra in enumerate(_extras(rows), start=1):
            if extra.get(SHARD_KEY) != str(self):
                said = extra.get(SHARD_KEY)
                whose = (f"shard {said}'s" if said is not None
                         else "a row written without --shard")
                raise ShardError(f"{path}: row {number} is {whose}, not shard {self}'s: give "
                                 "each shard its own --out")
            said_of = extra.get(OF_KEY)
            if of is not None and said_of is not None and said_of != dict(of):
                raise ShardError(f"{path}: row {number} is a share of another batch "
                                 f"({_differences(said_of, dict(of))}): give this batch "
                                 "its own --out")


def batch_digest(keys: Sequence[Hashable]) -> str:
    """A short digest of a batch's whole input (every job's key, in order): two machines
    given the same input file (and task, and models) have the same one."""
    digest = hashlib.sha256()
    for key in keys:
        digest.update(repr(key).encode("utf-8", "surrogatepass") + b"\n")
    return digest.hexdigest()[:16]


def check_unsharded(path: Path, rows: Sequence[object]) -> None:
    """Refuse to go on with an OUT a shard wrote, without --shard."""
    for number, extra in enumerate(_extras(rows), start=1):
        if SHARD_KEY in extra:
            raise ShardError(f"{path}: row {number} was written by shard {extra[SHARD_KEY]} "
                             "(--shard): go on with the same --shard, or `bbm-tui merge` the "
                             "shards' files into one first")


def _extras(rows: Sequence[object]) -> list[dict]:
    return [getattr(row, "extra", {}) or {} for row in rows]


@dataclass
class Merged:
    rows: int = 0
    duplicates: int = 0  # rows two files both held, the same
    shards: list[str] = field(default_factory=list)  # the shards seen, as I/N
    missing: list[str] = field(default_factory=list)  # shards of N no file held a row of
    # Where the merged rows went: a file, or standard output (`-`).
    out: str = ""


@dataclass(frozen=True)
class _Held:
    path: Path
    line: int
    text: str  # the row as one machine writes it (the shard's keys taken off)


def merge_outputs(paths: Sequence[Path], out: Path, *, allow_missing: bool = False) -> Merged:
    """Join the shards' OUTs into `out` (a new file, or `-` for standard output; see the
    module's docstring). Raises ShardError or DatasetError (a line that is not a row), naming
    the file and line; then nothing is written. A shard no file holds a row of is refused too,
    unless `allow_missing` (the partial file is wanted: `Merged.missing` says which)."""
    _check_out(paths, out)
    held: dict[int, _Held] = {}
    merged = Merged(out=str(out))
    counts: dict[int, tuple[Path, int]] = {}
    batches: dict[str, tuple[Path, int]] = {}
    seen: set[str] = set()
    for path in paths:
        for number, row in _rows(path):
            parsed, place, of = _shard_keys(row, path, number)
            counts.setdefault(parsed.count, (path, number))
            batches.setdefault(json.dumps(of, sort_keys=True, allow_nan=False), (path, number))
            _check_one_batch(counts, batches)
            seen.add(str(parsed))
            text = json.dumps(row, allow_nan=False)
            before = held.get(place)
            if before is None:
                held[place] = _Held(path, number, text)
            elif before.text == text:
                merged.duplicates += 1
            else:
                raise ShardError(f"a conflict: {before.path}, line {before.line} and {path}, "
                                 f"line {number} hold different rows for the input's job "
                                 f"{place + 1}; nothing was written")
    merged.shards = sorted(seen, key=lambda text: int(text.split("/")[0]))
    if counts:
        [count] = counts
        merged.missing = [f"{index}/{count}" for index in range(1, count + 1)
                          if f"{index}/{count}" not in seen]
    if merged.missing and not allow_missing:
        raise ShardError(f"no file held a row of shard {', '.join(merged.missing)}: merge "
                         "that machine's file too (nothing was written), or pass "
                         "--allow-missing for the partial file")
    merged.rows = len(held)
    with replacing(out) as file:  # a fresh 0600 temporary (never through a link), renamed
        for place in sorted(held):
            file.write(held[place].text + "\n")
    return merged


def _check_out(paths: Sequence[Path], out: Path) -> None:
    if is_standard_output(out):
        return
    resolved = {path.resolve() for path in paths}
    if out.resolve() in resolved:
        raise ShardError(f"{out}: the merged file cannot be one of the shards' files")
    if out.exists() or out.is_symlink():
        raise ShardError(f"{out} already exists: merge writes a new file, and left it "
                         "untouched; choose another --out")


def _shard_keys(row: dict, path: Path, number: int) -> tuple[Shard, int, dict | None]:
    """A shard's row's own keys, taken off it: its shard, its place, what it is a share of
    (None: written before shards said)."""
    shard, place = row.pop(SHARD_KEY, None), row.pop(PLACE_KEY, None)
    of = row.pop(OF_KEY, None)
    if shard is None or place is None:
        raise ShardError(f"{path}, line {number}: not a row a --shard run wrote (no "
                         f"`{SHARD_KEY}` and `{PLACE_KEY}`)")
    if not isinstance(shard, str) or _SHARD.fullmatch(shard) is None or isinstance(place, bool) \
            or not isinstance(place, int) or place < 0:
        said = repr(shard) if len(repr(shard)) <= 40 else repr(shard)[:37] + "..."
        raise ShardError(f"{path}, line {number}: not a row a --shard run wrote (its "
                         f"`{SHARD_KEY}` {said} is not I/N, or its `{PLACE_KEY}` not a place)")
    try:
        parsed = Shard.parse(shard)
    except ShardError as error:
        raise ShardError(f"{path}, line {number}: {error.message}") from None
    if of is not None and not isinstance(of, dict):
        raise ShardError(f"{path}, line {number}: `{OF_KEY}` is not what a --shard run writes")
    return parsed, place, of


def _check_one_batch(counts: dict[int, tuple[Path, int]],
                     batches: dict[str, tuple[Path, int]]) -> None:
    """Refuse shares of different splits, or of different batches (another input, task
    definition or model), naming a line of each."""
    if len(counts) > 1:
        (first, (path, line)), (second, (other, other_line)) = list(counts.items())[:2]
        raise ShardError(f"the files come from different splits: {path}, line {line} is of "
                         f".../{first} and {other}, line {other_line} of .../{second}; nothing "
                         "was written")
    if len(batches) > 1:
        (first, (path, line)), (second, (other, other_line)) = list(batches.items())[:2]
        differ = _differences(json.loads(first), json.loads(second))
        raise ShardError(f"the files are shares of different batches ({differ}): {path}, "
                         f"line {line} and {other}, line {other_line}; nothing was written")


def _differences(first: dict | None, second: dict | None) -> str:
    if first is None or second is None:
        return "one written before shards said what they are shares of"
    names = {"input": "another input", "task": "another task definition", "model": "another model"}
    differ = [names.get(key, str(key)) for key in sorted(set(first) | set(second))
              if first.get(key) != second.get(key)]
    return ", ".join(differ) or "another batch"


def _rows(path: Path) -> list[tuple[int, dict]]:
    """Each line of a shard's OUT as a JSON object (checked as a dataset row), with its
    1-based line number; blank lines are passed over. Only a regular file is read, opened
    without blocking: a FIFO named as a shard blocked merge for ever, /dev/zero filled the
    memory (issue 33)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as error:
        raise ShardError(f"{path}: cannot read it ({error.strerror})") from None
    try:
        with os.fdopen(descriptor, "rb") as file:
            mode = os.fstat(descriptor).st_mode
            if not stat.S_ISREG(mode):
                raise DatasetError(path, f"is {kind_of(mode)}, not a regular file")
            _check_not_being_written(file.fileno(), path)
            text = file.read().decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ShardError(f"{path}: cannot read it ({error})") from None
    found = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = _STANDARD.decode(line)
        except json.JSONDecodeError:
            raise DatasetError(path, "not a JSON line (a run killed mid-write leaves one: go "
                               "on with that run to mend it)", number) from None
        except ValueError as error:  # NaN, 1e400, an integer of 5,000 digits
            raise DatasetError(path, number_problem(error) or str(error), number) from None
        except RecursionError:
            raise DatasetError(path, "nested too deeply to read (not a dataset row)",
                               number) from None
        row_from_json(value, path, number)
        found.append((number, value))
    return found


def _check_not_being_written(descriptor: int, path: Path) -> None:
    """A shard's run holds its OUT's lock (core/dataset/outfile.py) until it ends: a file
    still being written is not merged part way."""
    if fcntl is None:  # pragma: no cover
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        raise ShardError(f"{path}: a bbm-tui command is still writing it (it holds its lock); "
                         "merge once that run has finished; nothing was written") from None
    except OSError:  # a file system without locks: nothing to learn
        return
    fcntl.flock(descriptor, fcntl.LOCK_UN)
