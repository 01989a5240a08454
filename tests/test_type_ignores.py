"""The type checker's silences in bbm_tui/ (pyright runs in scripts/test): none of the blanket
kind, and each one names its rule and says why on the line above (a library's typing gap, not
a type of ours left wrong)."""

from __future__ import annotations

import re
from pathlib import Path

CODE = Path(__file__).resolve().parents[1] / "bbm_tui"


def silences() -> list[tuple[Path, int, str, str]]:
    found = []
    for path in sorted(CODE.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for number, line in enumerate(lines, start=1):
            if re.search(r"#\s*(type|pyright):\s*ignore", line):
                above = lines[number - 2].strip() if number > 1 else ""
                found.append((path.relative_to(CODE.parent), number, line, above))
    return found


def test_no_blanket_type_ignore() -> None:
    blanket = [(str(path), number) for path, number, line, _ in silences()
               if re.search(r"#\s*type:\s*ignore", line)]
    assert blanket == []


def test_each_pyright_ignore_names_its_rule_and_says_why() -> None:
    for path, number, line, above in silences():
        assert re.search(r"#\s*pyright:\s*ignore\[report\w+\]\s*$", line), (path, number)
        assert above.startswith("#"), f"{path}:{number}: no comment above says why"
