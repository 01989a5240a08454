"""The files commands write: never one they did not write themselves.

`run --out` and `find --out` append one row per finished trace and resume from what the file
already holds; `export --out` replaces a file whole. Before either touches a path:

- the session store (and its `-wal`/`-shm`) and the command's own inputs are refused;
- anything but a regular file (a folder, a FIFO, `/dev/full`, `/dev/zero`) is refused;
- an appended file is locked (`flock`, exclusive) for the whole batch, so a second command on
  the same file stops with one message instead of interleaving rows or cutting a line the other
  just wrote;
- every complete line must be one of the command's own rows; the one repair ever made is to drop
  a cut-off last line (what a killed run leaves), and only when everything before it is ours;
- a file replaced whole (an export) must not exist yet, be empty, or be named with --force.

Anything else is refused with one message naming the file (and line), and the file is left
byte for byte as it was.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, TextIO, TypeVar

from bbm_tui.core.dataset import (
    MAX_LINE_BYTES,
    DatasetError,
    check_regular_file,
    is_standard_output,
)

T = TypeVar("T")
READ_CHUNK = 1 << 20

try:  # POSIX; elsewhere a second writer is not detected (documented in docs/reliability.md)
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None


class OutputFileError(DatasetError):
    """A path a command refuses to write, with why and what to do."""


# --------------------------------------------------------------------------- what is ours

def check_output_path(
    path: Path, *, store_path: Path | None, inputs: Sequence[Path] = ()
) -> None:
    """Refuse the store, an input, and anything that exists but is not a regular file.
    Standard output (`-`) is none of them."""
    if is_standard_output(path):
        return
    if store_path is not None:
        for sidecar in ("", "-wal", "-shm", "-journal"):
            if _same_file(path, Path(f"{store_path}{sidecar}")):
                raise OutputFileError(
                    path, "is bbm-tui's session store"
                    + (f" ({sidecar} file)" if sidecar else "")
                    + "; it is never an output: choose another file"
                )
    for source in inputs:
        if _same_file(path, source):
            raise OutputFileError(
                path, "is also an input of this command; write to another file"
            )
    if path.is_dir():
        raise OutputFileError(path, "cannot use it: Is a directory")
    check_regular_file(path, missing_ok=True)


def _same_file(first: Path, second: Path) -> bool:
    try:
        return os.path.samefile(first, second)
    except OSError:  # one of them does not exist (yet): compare where they would be
        return _resolved(first) == _resolved(second)


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):
        return path.expanduser().absolute()


# --------------------------------------------------------------------------- appended files

@dataclass
class AppendedFile(Generic[T]):
    """An output file opened for appending, locked against other bbm-tui commands until
    closed. `rows` are the ones it already held (each checked by the command's validator)."""

    path: Path
    descriptor: int
    rows: list[T] = field(default_factory=list)
    mended: str | None = None  # what was repaired, if anything, for the command to say
    # Where the file that was here went, with `start_over` (None: nothing was moved).
    moved_to: Path | None = None
    # Standard output instead of a file (`-`): each row written to it as it comes.
    stream: TextIO | None = None

    def write_line(self, line: str) -> None:
        """One row, in one write: a kill leaves whole rows and at most one cut-off line."""
        if self.stream is not None:
            self.stream.write(line + "\n")
            self.stream.flush()
            return
        data = (line + "\n").encode("utf-8")
        while data:
            written = os.write(self.descriptor, data)
            data = data[written:]

    def close(self) -> None:
        if self.descriptor >= 0:
            os.close(self.descriptor)  # closing releases the lock
            self.descriptor = -1

    def __enter__(self) -> AppendedFile[T]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Validator = Callable[[object, Path, int], T]


def open_appended(
    path: Path,
    validate: Validator[T],
    *,
    what: str,
    store_path: Path | None,
    inputs: Sequence[Path] = (),
    start_over: bool = False,
) -> AppendedFile[T]:
    """Open (creating it 0600 if absent) and lock an output file, check every line it holds
    with `validate` (which raises DatasetError for a line that is not one of `what`), and
    drop a cut-off last line if that is the only damage. Raises OutputFileError (or
    DatasetError) with the file untouched otherwise. Standard output (`-`) holds no rows
    and is not locked: each row is written to it as it comes. With `start_over` a file
    already there (not empty) is first moved aside, byte for byte (move_aside), and a new
    one begun."""
    if is_standard_output(path):
        return AppendedFile(path, -1, stream=sys.stdout)
    check_output_path(path, store_path=store_path, inputs=inputs)
    moved_to = move_aside(path) if start_over else None
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as error:  # a folder, a folder that does not exist, no permission
        raise OutputFileError(path, f"cannot use it: {error.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):  # swapped in since the check
            raise OutputFileError(path, "is not a regular file")
        _lock(descriptor, path)
        output: AppendedFile[T] = AppendedFile(path, descriptor, moved_to=moved_to)
        output.rows, output.mended = _check_and_mend(descriptor, path, validate, what)
        return output
    except BaseException:
        os.close(descriptor)
        raise


# How many names move_aside tries (OUT.old, OUT.old.2, ...) before it gives up.
_ASIDE_NAMES = 1000


def move_aside(path: Path) -> Path | None:
    """Move a file that is not empty out of the way, to the first free name of PATH.old,
    PATH.old.2, ... (returned; None: nothing there to move). Never over another file: the new
    name is made as a hard link, which fails where a file is; then the old name goes. Locked
    meanwhile, like a file being appended to: another command writing it stops this."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None
    except OSError as error:
        raise OutputFileError(path, f"cannot use it: {error.strerror}") from None
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise OutputFileError(path, "is not a regular file")
        if status.st_size == 0:
            return None
        _lock(descriptor, path)
        for number in range(1, _ASIDE_NAMES + 1):
            aside = path.with_name(f"{path.name}.old" + (f".{number}" if number > 1 else ""))
            try:
                os.link(path, aside)
            except FileExistsError:
                continue
            except OSError as error:
                raise OutputFileError(path, f"cannot move it aside to {aside}: "
                                      f"{error.strerror}") from None
            os.unlink(path)
            return aside
        raise OutputFileError(path, f"cannot move it aside: {path.name}.old to "
                              f"{path.name}.old.{_ASIDE_NAMES} are all taken")
    finally:
        os.close(descriptor)


def _lock(descriptor: int, path: Path) -> None:
    if fcntl is None:  # pragma: no cover
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _lock_holder(descriptor)
        raise OutputFileError(
            path, "another bbm-tui command is writing this file right now"
            + (f" (pid {holder})" if holder else "")
            + "; wait for it to finish, or choose another --out"
        ) from None


def _lock_holder(descriptor: int) -> int | None:
    """The pid holding the flock on this file, where Linux says (/proc/locks); else None."""
    info = os.fstat(descriptor)
    where = f"{os.major(info.st_dev):02x}:{os.minor(info.st_dev):02x}:{info.st_ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as locks:
            for line in locks:
                # "1: FLOCK  ADVISORY  WRITE 4242 fe:00:2146447 0 EOF"; waiters have "->".
                fields = line.split()
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == where:
                    return int(fields[4]) if fields[4].isdigit() else None
    except OSError:  # not Linux, or /proc not mounted
        pass
    return None


def _check_and_mend(
    descriptor: int, path: Path, validate: Validator[T], what: str
) -> tuple[list[T], str | None]:
    rows: list[T] = []
    tail: bytes | None = None
    tail_start = 0
    for number, start, line, complete in _lines(descriptor, path):
        if not complete:
            tail, tail_start = line, start
            tail_number = number
            break
        if not line.strip():
            continue
        rows.append(_ours(line, path, number, validate, what))
    if tail is None or not tail.strip():
        return rows, None
    try:
        value = json.loads(tail.decode("utf-8"))
    except RecursionError:
        raise _not_ours(path, tail_number, what, "nested too deeply to read") from None
    except (UnicodeDecodeError, json.JSONDecodeError):
        # Cut off mid-row, as a killed run leaves it; anything else is not ours to cut.
        if not tail.startswith(b'{"'):
            raise _not_ours(path, tail_number, what, "its last line is not JSON") from None
        os.ftruncate(descriptor, tail_start)
        return rows, f"dropped a cut-off last line (line {tail_number}) left by a stopped run"
    try:
        rows.append(validate(value, path, tail_number))
    except DatasetError as error:
        raise _not_ours(path, tail_number, what, error.reason) from None
    os.write(descriptor, b"\n")  # a whole row that only lacked its newline
    return rows, None


def _ours(line: bytes, path: Path, number: int, validate: Validator[T], what: str) -> T:
    try:
        value = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise _not_ours(path, number, what, "it is not UTF-8 text") from None
    except json.JSONDecodeError as error:
        raise _not_ours(path, number, what, f"malformed JSON: {error.msg}") from None
    except RecursionError:
        raise _not_ours(path, number, what, "nested too deeply to read") from None
    try:
        return validate(value, path, number)
    except DatasetError as error:
        raise _not_ours(path, number, what, error.reason) from None


def _not_ours(path: Path, number: int, what: str, why: str) -> OutputFileError:
    return OutputFileError(
        path, f"{why}: not a file of {what}, so it was left untouched; choose another --out",
        number,
    )


def _lines(descriptor: int, path: Path) -> Iterator[tuple[int, int, bytes, bool]]:
    """(line number, byte offset, bytes without the newline, ended by a newline) for each
    line, read in chunks and never more than MAX_LINE_BYTES of one line in memory."""
    offset = 0
    number = 0
    pending = b""
    pending_start = 0
    while True:
        chunk = os.pread(descriptor, READ_CHUNK, offset)
        if not chunk:
            break
        offset += len(chunk)
        pending += chunk
        while True:
            newline = pending.find(b"\n")
            if newline < 0:
                break
            number += 1
            yield number, pending_start, pending[:newline], True
            pending_start += newline + 1
            pending = pending[newline + 1:]
        if len(pending) > MAX_LINE_BYTES:
            raise OutputFileError(
                path, f"line longer than {MAX_LINE_BYTES // 2**20} MiB; not a file of rows",
                number + 1,
            )
    if pending:
        yield number + 1, pending_start, pending, False


# --------------------------------------------------------------------------- replaced files

def check_not_replacing(path: Path, command: str = "export", flag: str = "--out") -> None:
    """An export replaces its file whole, so an existing file with anything in it is refused
    unless the person said to replace it (`--force`). Standard output replaces nothing.
    `command` and `flag` are what the message names: the command that writes the file and
    the flag that gave it (`agreement`'s `--consensus`)."""
    if is_standard_output(path):
        return
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return
    except OSError as error:
        raise OutputFileError(path, f"cannot use it: {error.strerror}") from None
    if size:
        raise OutputFileError(
            path, f"already exists; {command} replaces a file whole, so it left this one "
            f"untouched: pass --force to replace it, or choose another {flag}"
        )
