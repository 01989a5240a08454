"""Many machines: `--shard I/N` and `bbm-tui merge`.

Machine I of N takes the jobs whose key hashes to I (a fixed share, whatever the order of the
input's rows, whatever was done before a resume), so N machines that share only the input
file do the work once. Each writes its own OUT, where every row also says which shard wrote
it and its place among the batch's jobs (`shard`, `shard_row`: the row's place in what one
machine would write). `merge` joins the shards' OUTs into exactly what one machine writes:
those two keys taken off, the rows in the jobs' order, each once; two different rows for one
place are a conflict, named with both files and lines, and nothing is written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bbm_tui.core.dataset import DatasetError, iter_jsonl, row_from_json
from bbm_tui.core.errors import UserError

SHARD_KEY = "shard"
PLACE_KEY = "shard_row"
_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


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
            raise ShardError(f"--shard takes I/N (this machine's number, then how many), "
                             f"not {text!r}")
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

    def tag(self, line: str, place: int) -> str:
        """An OUT line with this shard and the row's place among the jobs added at its end."""
        row = json.loads(line)
        row[SHARD_KEY] = str(self)
        row[PLACE_KEY] = place
        return json.dumps(row, allow_nan=False)

    def check_rows(self, path: Path, rows: Sequence[object]) -> None:
        """Refuse an OUT holding another shard's rows, or rows written without --shard."""
        for number, extra in enumerate(_extras(rows), start=1):
            if extra.get(SHARD_KEY) != str(self):
                said = extra.get(SHARD_KEY)
                whose = (f"shard {said}'s" if said is not None
                         else "a row written without --shard")
                raise ShardError(f"{path}: row {number} is {whose}, not shard {self}'s: give "
                                 "each shard its own --out")


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


@dataclass(frozen=True)
class _Held:
    path: Path
    line: int
    text: str  # the row as one machine writes it (the shard's keys taken off)


def merge_outputs(paths: Sequence[Path], out: Path) -> Merged:
    """Join the shards' OUTs into `out` (a new file; see the module's docstring). Raises
    ShardError or DatasetError (a line that is not a row), naming the file and line; then
    nothing is written."""
    resolved = {path.resolve() for path in paths}
    if out.resolve() in resolved:
        raise ShardError(f"{out}: the merged file cannot be one of the shards' files")
    if out.exists():
        raise ShardError(f"{out} already exists: merge writes a new file, and left it "
                         "untouched; choose another --out")
    held: dict[int, _Held] = {}
    merged = Merged()
    counts: set[int] = set()
    seen: set[str] = set()
    for path in paths:
        for number, row in _rows(path):
            shard, place = row.pop(SHARD_KEY, None), row.pop(PLACE_KEY, None)
            parsed = Shard.parse(shard) if isinstance(shard, str) and _SHARD.fullmatch(shard) \
                else None
            if parsed is None or isinstance(place, bool) or not isinstance(place, int) \
                    or place < 0:
                raise ShardError(f"{path}, line {number}: not a row a --shard run wrote (no "
                                 f"`{SHARD_KEY}` and `{PLACE_KEY}`)")
            counts.add(parsed.count)
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
    if len(counts) > 1:
        raise ShardError("the files come from different splits (--shard .../"
                         f"{' and .../'.join(str(count) for count in sorted(counts))})")
    merged.shards = sorted(seen, key=lambda text: int(text.split("/")[0]))
    if counts:
        count = counts.pop()
        merged.missing = [f"{index}/{count}" for index in range(1, count + 1)
                          if f"{index}/{count}" not in seen]
    merged.rows = len(held)
    temporary = out.with_name(f".{out.name}.merging")
    with open(temporary, "w", encoding="utf-8", newline="\n") as file:
        for place in sorted(held):
            file.write(held[place].text + "\n")
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, out)
    return merged


def _rows(path: Path) -> list[tuple[int, dict]]:
    """Each line of a shard's OUT as a JSON object (checked as a dataset row), with its
    1-based line number; blank lines are passed over. Only a regular file is read, a line at
    a time (iter_jsonl): a FIFO or /dev/zero named as a shard is refused at once."""
    found = []
    try:
        for number, value in iter_jsonl(path):
            row_from_json(value, path, number)
            found.append((number, value))
    except DatasetError as error:
        if error.reason.startswith("malformed JSON") and error.line is not None:
            raise DatasetError(path, "not a JSON line (a run killed mid-write leaves one: go "
                               "on with that run to mend it)", error.line) from None
        raise
    return found
