"""Whole files read with a bound: task files, their prompt files, router files.

Reading a FIFO never ends, /dev/zero never ends and fills the memory, and a 2 GB sparse file
is read whole in 15 s and 4.2 GB (issue 33). Only regular files are read, opened without
blocking (a FIFO swapped in after a check cannot hang the open), and a file over its limit is
refused from its size before a byte is read. A JSONL file is read a line at a time instead
(core/dataset: iter_jsonl).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# The README's bound on what is read at once ("a line over 16 MiB is refused").
MAX_TEXT_FILE_BYTES = 16 * 2**20


class FileReadError(ValueError):
    """Why a file was not read, as a sentence without the path (callers put it in their own
    message, which names the file and the key)."""


def kind_of(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a special file"


def read_regular_file(path: Path | str, limit: int = MAX_TEXT_FILE_BYTES) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes; FileReadError otherwise
    (FileNotFoundError when there is no such file)."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise FileReadError("is a folder, not a file") from None
    except OSError as error:
        raise FileReadError(f"cannot read it: {error.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise FileReadError(f"is {kind_of(status.st_mode)}, not a regular file")
        if status.st_size > limit:
            raise FileReadError(f"is {_size(status.st_size)}: larger than the {_size(limit)} "
                                "a file of this kind may be")
        # Read one byte past the limit: a file grown since fstat is caught too.
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise FileReadError(f"is larger than the {_size(limit)} a file of this kind may be")
    return data


def _size(count: int) -> str:
    if count >= 2**20:
        return f"{count / 2**20:.4g} MiB"
    if count >= 2**10:
        return f"{count / 2**10:.4g} KiB"
    return f"{count} bytes"
