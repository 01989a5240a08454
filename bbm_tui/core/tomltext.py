"""Messages about TOML files (the config file, task files) that lead with the line, as every
message about a file does here. `tomllib` reads; this says where (reading again only to find
the line of nesting too deep, which tomllib reports as a RecursionError with no place)."""

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


def too_deep_message(text: str) -> str:
    """"line 2: nested too deeply to read (invalid TOML)", for a text tomllib recursed too deep
    on (5,000 nested inline tables, 100,000 nested arrays). The line is the last of the
    shortest run of whole lines from the top that recurses, found by halving: a prefix that
    recursed recurses whatever follows it."""
    import tomllib

    lines = text.splitlines(keepends=True)
    low, high = 1, max(len(lines), 1)
    while low < high:
        middle = (low + high) // 2
        try:
            tomllib.loads("".join(lines[:middle]))
        except RecursionError:
            high = middle
            continue
        except tomllib.TOMLDecodeError:
            pass
        low = middle + 1
    return f"line {low}: nested too deeply to read (invalid TOML)"


_LONG_NUMBER = re.compile(r"[0-9][0-9_]{4300,}")


def too_long_number_message(text: str) -> str:
    """"line 3: a number of 5,000 digits ...", for a text tomllib could not convert an integer
    of (Python converts at most 4,300 digits; tomllib raises a bare ValueError, no place)."""
    for number, line in enumerate(text.splitlines(), start=1):
        found = _LONG_NUMBER.search(line)
        if found:
            digits = sum(character.isdigit() for character in found.group())
            return (f"line {number}: a number of {digits:,} digits is past what a number may "
                    "have (4,300 digits)")
    return "a number past what a number may have (4,300 digits)"


def toml_text(raw: bytes) -> str:
    """A TOML file's text: UTF-8, less the byte-order mark some editors write first (tomllib
    reads it as an "Invalid statement"). Raises UnicodeDecodeError."""
    return raw.decode("utf-8").removeprefix("\ufeff")
