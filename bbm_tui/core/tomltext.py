"""Messages about TOML files (the config file, task files) that lead with the line, as every
message about a file does here. No TOML parsing of its own: `tomllib` reads, this says where."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import tomllib

_AT = re.compile(r"\(at line (\d+), column (\d+)\)")


def toml_error_message(error: tomllib.TOMLDecodeError) -> str:
    """tomllib says "... (at line 3, column 7)"; this says "line 3, column 7: invalid TOML: ..."."""
    message = str(error)
    found = _AT.search(message)
    if found:
        line, column = found.groups()
        reason = message[: found.start()].strip()
        return f"line {line}, column {column}: invalid TOML: {reason}"
    return f"invalid TOML: {message}"


def key_line(key: str, text: str) -> int | None:
    """The line (from 1) where `key = ...` is set in a TOML text, None where it is not."""
    pattern = re.compile(rf"\s*(?:{re.escape(key)}|\"{re.escape(key)}\"|'{re.escape(key)}')\s*=")
    for number, line in enumerate(text.splitlines(), start=1):
        if pattern.match(line):
            return number
    return None


def line_of(key: str, text: str) -> str:
    """"line 4: " where `key` is set, "" where it is not: the start of a message."""
    number = key_line(key, text)
    return f"line {number}: " if number is not None else ""
