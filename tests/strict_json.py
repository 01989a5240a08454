"""Standard JSON only (RFC 8259): Python's reader takes NaN, Infinity and -Infinity, which
strict readers (JavaScript's JSON.parse, jq, Go, serde) refuse. Every file bbm-tui writes is
read back through these in the tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


class NotStandardJson(ValueError):
    pass


def _refuse(constant: str) -> Any:
    raise NotStandardJson(f"{constant} is not JSON")


def strict_loads(text: str | bytes) -> Any:
    return json.loads(text, parse_constant=_refuse)


def strict_json_lines(path: Path) -> list[Any]:
    """Every line of a JSONL file, read strictly."""
    return [strict_loads(line) for line in path.read_text(encoding="utf-8").splitlines()
            if line.strip()]


# What a strict reader refuses and Python's takes: a bare constant outside a string.
NONSTANDARD_TOKENS = (b"NaN", b"Infinity")


def nonstandard_json_files(folder: Path) -> list[str]:
    """The JSON and JSONL files under `folder` that Python reads and a strict reader does
    not (files that are not JSON at all, such as a test's broken input, are not counted)."""
    found = []
    for path in sorted(folder.rglob("*")):
        if path.suffix not in (".json", ".jsonl") or not path.is_file() or path.is_symlink():
            continue
        data = path.read_bytes()
        if not any(token in data for token in NONSTANDARD_TOKENS):
            continue
        for number, line in enumerate(_documents(path, data), start=1):
            try:
                json.loads(line)
            except ValueError:
                continue  # not JSON to anyone
            try:
                strict_loads(line)
            except NotStandardJson as error:
                found.append(f"{path}:{number}: {error}")
    return found


def _documents(path: Path, data: bytes) -> list[bytes]:
    return data.splitlines() if path.suffix == ".jsonl" else [data]
