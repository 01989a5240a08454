"""A command never damages a file it did not write (issue 8, items 1, 2 and 9), through the
real command line (its `main`, run as a process would run it: tests/cli_helpers.py; a child
process where two commands must overlap): `--out` naming a text file, the session store, an
input, a device or a FIFO is refused with the file left byte for byte; two commands on one OUT
or PREDS never both write it; a question listed twice runs once; reads are bounded."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_path, bundled_rows, read_rows
from bbm_tui.core.store import DATABASE_NAME, Store
from tests.cli_helpers import Snapshot, assert_refused, launch, run_all
from tests.openai_server import FakeOpenAI, Reply

TASK = "multistep_arithmetic"
ROWS = bundled_rows(TASK)


def source_file(folder: Path, count: int = 2, name: str = f"{TASK}.jsonl") -> Path:
    path = folder / name
    path.write_text("".join(row.to_line() + "\n" for row in ROWS[:count]))
    return path


def run_args(source: Path, out: Path) -> tuple[str, ...]:
    return ("run", "--input", str(source), "--out", str(out), "--no-progress")


def find_args(source: Path, out: Path, *extra: str) -> tuple[str, ...]:
    return ("find", "--model", "replay/bbm", "--method", "direct-trace", "--input", str(source),
            "--out", str(out), "--no-progress", *extra)


# ------------------------------------------------------------------ 1. files that are not ours

@pytest.mark.parametrize("content", [
    b"my notes\nthe last line has no newline",  # a text file: its last line used to be eaten
    b"my notes\n",
    b'{"name": "a JSON line of something else"}\n',
    b'{"settings": true}',  # one whole JSON value, not a row of ours, no newline
])
def test_out_naming_someone_elses_file_is_refused_and_left(tmp_path: Path,
                                                           content: bytes) -> None:
    source = source_file(tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_bytes(content)
    before = Snapshot.of(notes)
    for result in run_all([run_args(source, notes), find_args(source, notes)]):
        assert_refused(result, f"{notes}:", "left untouched", "choose another --out")
    assert Snapshot.of(notes) == before


def test_a_dataset_file_is_not_an_out_file(tmp_path: Path) -> None:
    """A dataset-format file without the `model` run writes is someone's data, not OUT."""
    data = source_file(tmp_path, name="mine.jsonl")
    before = Snapshot.of(data)
    source = source_file(tmp_path)
    (result,) = run_all([run_args(source, data)])
    assert_refused(result, f"{data}:1", "not a file of rows written by `bbm-tui run`")
    assert Snapshot.of(data) == before


@pytest.mark.parametrize("sidecar", ["", "-wal", "-shm"])
def test_the_session_store_is_never_an_output(tmp_path: Path, isolated_home: Path,
                                              sidecar: str) -> None:
    source = source_file(tmp_path)
    store_path = isolated_home / DATABASE_NAME
    # A store with a session in it, and its WAL files present (a reader holds them open).
    (result,) = run_all([run_args(source, tmp_path / "first.jsonl")])
    assert result.code == 0, result
    reader = sqlite3.connect(store_path)
    reader.execute("SELECT COUNT(*) FROM sessions").fetchone()
    target = Path(f"{store_path}{sidecar}")
    assert target.exists()
    before = Snapshot.of(store_path)
    commands = [run_args(source, target), find_args(source, target),
                ("export", "--out", str(target)), ("export", "--out", str(target), "--force")]
    for result in run_all(commands):
        assert_refused(result, str(target), "session store", "never an output")
    reader.close()
    assert Snapshot.of(store_path).data == before.data
    # A store that is not this one (another BBM_TUI_HOME's, a backup copy): still never
    # replaced by an export, even when told to.
    copy = tmp_path / "backup.sqlite3"
    copy.write_bytes(before.data)
    copied = Snapshot.of(copy)
    (result,) = run_all([("export", "--out", str(copy), "--force")])
    assert_refused(result, str(copy), "SQLite database", "even with --force")
    assert Snapshot.of(copy) == copied
    with Store.open(store_path) as store:
        assert store.integrity_check() == "ok"
        assert len(store.sessions()) == 2


def test_out_equal_to_an_input_is_refused(tmp_path: Path) -> None:
    source = source_file(tmp_path)
    before = Snapshot.of(source)
    for result in run_all([run_args(source, source), find_args(source, source)]):
        assert_refused(result, str(source), "is also an input")
    assert Snapshot.of(source) == before


def test_export_never_replaces_a_file_unless_told(tmp_path: Path) -> None:
    source = source_file(tmp_path)
    assert run_all([("import", str(source))])[0].code == 0
    notes = tmp_path / "notes.md"
    notes.write_text("my notes\n")
    before = Snapshot.of(notes)
    (result,) = run_all([("export", "--format", "markdown", "--out", str(notes))])
    assert_refused(result, str(notes), "already exists", "--force")
    assert Snapshot.of(notes) == before
    (forced,) = run_all([("export", "--format", "markdown", "--out", str(notes), "--force")])
    assert forced.code == 0, forced
    assert notes.read_text().startswith("## ")


def test_export_never_writes_over_a_file_beside_its_out(tmp_path: Path) -> None:
    """Export writes a temporary file then renames it: that file gets a fresh name, so a
    `.notes.md.tmp` of the person's own is neither truncated nor renamed away."""
    assert run_all([("import", str(source_file(tmp_path)))])[0].code == 0
    folder = tmp_path / "exports"
    folder.mkdir()
    mine = folder / ".notes.md.tmp"
    mine.write_text("my own temporary notes\n")
    before = Snapshot.of(mine)
    (result,) = run_all([("export", "--format", "markdown", "--out", str(folder / "notes.md"))])
    assert result.code == 0, result
    assert Snapshot.of(mine) == before
    assert (folder / "notes.md").read_text().startswith("## ")
    assert (folder / "notes.md").stat().st_mode & 0o777 == 0o600
    assert sorted(path.name for path in folder.iterdir()) == [".notes.md.tmp", "notes.md"]


def test_only_a_cut_off_row_is_ever_mended(tmp_path: Path) -> None:
    """Whole rows of ours then a cut-off row: the cut-off line goes, the rest stays."""
    source = source_file(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    (first,) = run_all([(*run_args(source_file(tmp_path, 1, "one.jsonl"), out)[:-1],
                         "--task", TASK, "--no-progress")])
    assert first.code == 0, first
    whole = out.read_bytes()
    out.write_bytes(whole + b'{"input": "cut off by a ki')
    (result,) = run_all([run_args(source, out)])
    assert result.code == 0, result
    assert "dropped a cut-off last line (line 2)" in result.err
    assert out.read_bytes().startswith(whole)
    assert sorted(row.input for row in read_rows(out)) == sorted(row.input for row in ROWS[:3])


# ------------------------------------------------------------------ 2. one writer at a time

def wait_until(condition, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)


def test_two_runs_on_one_out(tmp_path: Path) -> None:
    """The second run is refused while the first holds OUT; OUT ends with each row once, and
    the store with one session per question."""
    source = source_file(tmp_path, 3)
    out = tmp_path / "out.jsonl"
    slow = {"BBM_TUI_REPLAY_TPS": "40"}  # a few seconds a trace: the runs overlap
    first = launch(*run_args(source, out), "--concurrency", "1", env=slow)
    try:
        wait_until(out.exists)
        (second,) = run_all([run_args(source, out)], env=slow)
        assert_refused(second, str(out), "another bbm-tui command is writing this file",
                       f"(pid {first.pid})")
        _, first_err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0, first_err
    rows = read_rows(out)
    assert [row.input for row in rows] == [row.input for row in ROWS[:3]]
    with Store.open() as store:
        assert len(store.sessions()) == 3


def test_a_find_resuming_a_preds_being_written_is_refused(tmp_path: Path,
                                                          openai_server: FakeOpenAI) -> None:
    """Before: the second find mended "the cut-off last line" the first was in the middle of
    writing, and rows were lost. Now it waits its turn (refused), and every line survives."""
    source = source_file(tmp_path, 6)
    preds = tmp_path / "preds.jsonl"
    openai_server.responder = lambda path, body: Reply("No", delay_s=0.3)
    base = ("--model", "openai/test-model", "--api-base", openai_server.base_url)
    first = launch(*find_args(source, preds, *base, "--concurrency", "1"))
    try:
        wait_until(lambda: preds.exists() and preds.stat().st_size > 0)
        before = Snapshot.of(preds)
        (second,) = run_all([find_args(source, preds, *base)])
        assert_refused(second, str(preds), "another bbm-tui command is writing this file",
                       f"(pid {first.pid})")
        assert preds.read_bytes().startswith(before.data)
        first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 0
    lines = preds.read_text().splitlines()
    assert len(lines) == 6 and all(json.loads(line)["parsed"] for line in lines)


def test_a_question_listed_twice_runs_once(tmp_path: Path) -> None:
    source = tmp_path / f"{TASK}.jsonl"
    source.write_text("".join(row.to_line() + "\n" for row in (ROWS[0], ROWS[1], ROWS[0])))
    out = tmp_path / "out.jsonl"
    preds = tmp_path / "preds.jsonl"
    ran, found = run_all([run_args(source, out), find_args(source, preds)])
    assert ran.code == 0 and found.code == 0, (ran, found)
    assert "1 duplicate(s) in the input were done once" in ran.err
    assert "1 duplicate(s) in the input were done once" in found.err
    assert sorted(row.input for row in read_rows(out)) == sorted([ROWS[0].input, ROWS[1].input])
    assert len(read_rows(preds)) == 2
    with Store.open() as store:
        assert len(store.sessions()) == 2


# ------------------------------------------------------------------ 9. bounded reads

def test_devices_and_fifos_are_refused_at_once(tmp_path: Path) -> None:
    source = source_file(tmp_path)
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    results = run_all([
        ("stats", "--task", TASK, "/dev/zero"),
        ("stats", "--task", TASK, str(fifo)),
        run_args(source, Path("/dev/full")),
        run_args(source, fifo),
        find_args(source, fifo),
        ("run", "--task", TASK, "--input", str(fifo), "--out", str(tmp_path / "o.jsonl")),
    ])
    needles = ["is a device, not a regular file", "is a FIFO (named pipe), not a regular file",
               "is a device, not a regular file", "is a FIFO (named pipe), not a regular file",
               "is a FIFO (named pipe), not a regular file",
               "is a FIFO (named pipe), not a regular file"]
    for result, needle in zip(results, needles, strict=True):
        assert_refused(result, needle)
    assert not (tmp_path / "o.jsonl").exists()


def test_a_huge_line_is_refused_with_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / f"{TASK}.jsonl"
    with path.open("wb") as handle:
        handle.write(ROWS[0].to_line().encode() + b"\n")
        handle.write(b'{"input": "' + b"x" * (17 * 2**20))
    (result,) = run_all([("stats", str(path))])
    assert_refused(result, f"{path}:2", "a line longer than 16 MiB")


def test_the_bundled_dataset_still_reads(tmp_path: Path) -> None:
    """The chunked reader gives the very rows the whole-file reader gave."""
    raw = bundled_path("dyck_languages").read_bytes().split(b"\n")
    rows = read_rows(bundled_path("dyck_languages"))
    assert [row.to_line().encode() for row in rows] == [line for line in raw if line.strip()]
