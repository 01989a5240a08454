"""`merge` says the truth (issue 33, item 8; issue 34, item 8): shards carry what they are
shares of and a mix is refused; a shard still being written, or one no file holds, is refused
(`--allow-missing` for the partial file); `--out -` is standard output; the merged file is
0600 and its temporary never goes through a planted link; a bad shard names file and line."""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path

import pytest

from tests.cli_helpers import ROOT, assert_refused, run_all

RUN = ("run", "--task", "logical_deduction", "--dataset", "--no-progress", "--concurrency", "2")


def machine(tmp_path: Path, name: str) -> dict[str, str]:
    return {"BBM_TUI_HOME": str(tmp_path / name)}


def shards(tmp_path: Path, name: str, *extra: str, limit: int = 6, count: int = 2) -> list[str]:
    parts = []
    for index in range(1, count + 1):
        out = tmp_path / f"{name}{index}.jsonl"
        [part] = run_all([(*RUN, "--limit", str(limit), *extra, "--shard", f"{index}/{count}",
                           "--out", str(out))], machine(tmp_path, f"{name}{index}"))
        assert part.code == 0, part.err
        parts.append(str(out))
    return parts


def test_shares_of_different_inputs_are_not_interleaved(tmp_path: Path) -> None:
    """Shard 1 of a 6-question input and shard 2 of a 4-question one: before, their places
    did not collide and merge said "N rows from 2 files"."""
    six = shards(tmp_path, "six", limit=6)
    four = shards(tmp_path, "four", limit=4)
    merged = tmp_path / "merged.jsonl"
    [mixed] = run_all([("merge", six[0], four[1], "--out", str(merged))])
    assert_refused(mixed, "shares of different batches", "another input", "six1.jsonl",
                   "four2.jsonl")
    assert not merged.exists()
    # Each row says what it is a share of.
    row = json.loads(Path(six[0]).read_text().splitlines()[0])
    assert set(row["shard_of"]) == {"input", "task", "model"}
    assert row["shard_of"]["model"] == "replay/bbm"
    [whole] = run_all([("merge", *six, "--out", str(merged))])
    assert whole.code == 0, whole.err
    assert "shard_of" not in merged.read_text()


def test_a_shard_still_being_written_is_refused(tmp_path: Path) -> None:
    parts = shards(tmp_path, "p")
    merged = tmp_path / "merged.jsonl"
    with open(parts[1], "rb") as held:  # its run still going: it holds the lock
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        [locked] = run_all([("merge", *parts, "--out", str(merged))])
    assert_refused(locked, "p2.jsonl", "still writing it")
    assert not merged.exists()


def test_a_missing_shard_is_refused_unless_the_partial_file_is_asked_for(
    tmp_path: Path
) -> None:
    parts = shards(tmp_path, "p", count=3)
    merged = tmp_path / "merged.jsonl"
    [missing] = run_all([("merge", parts[0], parts[2], "--out", str(merged))])
    assert_refused(missing, "no file held a row of shard 2/3", "--allow-missing")
    assert not merged.exists()
    [partial] = run_all([("merge", parts[0], parts[2], "--out", str(merged),
                          "--allow-missing")])
    assert partial.code == 0, partial.err
    assert "partial file" in partial.err and "2/3" in partial.err
    rows = len(Path(parts[0]).read_text().splitlines()) + len(
        Path(parts[2]).read_text().splitlines())
    assert len(merged.read_text().splitlines()) == rows


def test_out_dash_is_standard_output_and_a_merged_file_is_private(tmp_path: Path) -> None:
    parts = shards(tmp_path, "p")
    [to_stdout] = run_all([("merge", *parts, "--out", "-")])
    assert to_stdout.code == 0, to_stdout.err
    # No file named "-" (the commands run in the project's folder, as `main` is run there).
    assert not (ROOT / "-").exists() and not (tmp_path / "-").exists()
    assert len(to_stdout.out.splitlines()) == 6 and "standard output" in to_stdout.err
    merged = tmp_path / "merged.jsonl"
    # Someone plants a link where the old temporary went: its target is never written.
    target = tmp_path / "target.txt"
    target.write_text("precious\n")
    (tmp_path / ".merged.jsonl.merging").symlink_to(target)
    [written] = run_all([("merge", *parts, "--out", str(merged))])
    assert written.code == 0, written.err
    assert target.read_text() == "precious\n"
    assert stat.S_IMODE(os.stat(merged).st_mode) == 0o600
    assert merged.read_text() == to_stdout.out


@pytest.mark.parametrize("shard", ["3/2", "0/2"])
def test_an_impossible_shard_in_a_row_names_file_and_line(tmp_path: Path, shard: str) -> None:
    bad = tmp_path / "bad.jsonl"
    row = {"input": "Q", "target": "A", "steps": ["s"], "answer": None, "model": "m"}
    bad.write_text(json.dumps(row | {"shard": "1/2", "shard_row": 0}) + "\n"
                   + json.dumps(row | {"input": "R", "shard": shard, "shard_row": 1}) + "\n")
    [refused] = run_all([("merge", str(bad), "--out", str(tmp_path / "out.jsonl"))])
    assert_refused(refused, "bad.jsonl, line 2", "I must be from 1 to N")
