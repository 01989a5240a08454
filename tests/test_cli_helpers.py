"""The in-process runner of the command line (tests/cli_helpers.py) reads as a child process
does: the same exit code, stdout and stderr, for a success, a refusal, a usage error and the
app without a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_rows
from tests.cli_helpers import launch, run_here

TASK = "word_sorting"


def commands(folder: Path) -> dict[str, tuple[str, ...]]:
    good = folder / f"{TASK}.jsonl"
    good.write_text("".join(row.to_line() + "\n" for row in bundled_rows(TASK)[:3]))
    bad = folder / "bad.jsonl"
    bad.write_text(bundled_rows(TASK)[0].to_line() + "\n{oops\n")
    return {
        "stats": ("stats", "--json", str(good)),
        "a bad line": ("stats", "--task", TASK, str(bad)),
        "an empty store": ("sessions",),
        "a usage error": ("run", "--no-such-option"),
        "help": ("export", "--help"),
        "the app without a terminal": (),
    }


@pytest.mark.parametrize("name", ["stats", "a bad line", "an empty store", "a usage error",
                                  "help", "the app without a terminal"])
def test_in_this_process_as_in_a_child(name: str, tmp_path: Path) -> None:
    args = commands(tmp_path)[name]
    child = launch(*args)
    out, err = child.communicate(timeout=60)
    here = run_here(args)
    assert (here.code, here.out, here.err) == (child.returncode, out, err)
