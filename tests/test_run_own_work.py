"""A `run` goes on only with its own work (issue 34, items 1 and 7; issue 33, items 10 and
15): the rows in its OUT and the sessions it made for that OUT with the same settings; other
runs' sessions only with --reuse-sessions, and then said; a run refused before any call leaves
no session; rows carry their task's digest and a resume with another version of the task file
is refused; a questions row's own `dataset_index` is not copied into OUT."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from bbm_tui.core.store import Store
from tests.cli_helpers import run_all
from tests.openai_server import FakeOpenAI, Reply

RUN = ("run", "--task", "dyck_languages", "--dataset", "--limit", "3", "--no-progress",
       "--concurrency", "1")


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def session_count() -> int:
    with Store.open() as store, sqlite3.connect(store.path) as connection:
        return connection.execute("SELECT COUNT(*) FROM sessions").fetchone()[0]


def test_a_new_out_with_other_settings_makes_its_own_traces(tmp_path: Path) -> None:
    """Before: the step-limited run into a new OUT wrote the first run's whole traces (16 and
    34 steps), "0 calls"."""
    whole, short = tmp_path / "whole.jsonl", tmp_path / "short.jsonl"
    [first, limited] = run_all([(*RUN, "--out", str(whole)),
                                (*RUN, "--step-limit", "2", "--out", str(short))])
    assert first.code == 0, first.err
    assert limited.code == 0, limited.err
    assert max(len(row["steps"]) for row in rows(whole)) > 2
    assert all(len(row["steps"]) <= 2 for row in rows(short))
    assert all(row["usage"]["calls"] > 0 for row in rows(short))
    assert "taken from sessions" not in limited.err


def test_the_same_settings_into_another_out_generate_again_unless_asked(
    tmp_path: Path
) -> None:
    first_out, second_out, reused_out = (tmp_path / name for name in ("a.jsonl", "b.jsonl",
                                                                       "c.jsonl"))
    [first, second] = run_all([(*RUN, "--out", str(first_out)),
                               (*RUN, "--out", str(second_out))])
    assert first.code == 0 and second.code == 0, (first.err, second.err)
    assert not re.search(r"\b0 calls", second.err)
    assert session_count() == 6  # each run its own three traces
    # Asked to: the earlier sessions are taken, and it is said.
    [reused] = run_all([(*RUN, "--reuse-sessions", "--out", str(reused_out))])
    assert reused.code == 0, reused.err
    assert "3 traces taken from sessions made on " in reused.err
    assert re.search(r"\b0 calls", reused.err)
    assert session_count() == 6
    assert [row["steps"] for row in rows(reused_out)] == [row["steps"] for row in
                                                          rows(first_out)]


def test_a_resumed_run_goes_on_in_its_own_sessions(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    [first] = run_all([(*RUN, "--out", str(out))])
    assert first.code == 0, first.err
    out.write_text(out.read_text().splitlines()[0] + "\n")  # two rows lost: sessions kept
    [again] = run_all([(*RUN, "--out", str(out))])
    assert again.code == 0, again.err
    assert "2 traces written" in again.err and re.search(r"\b0 calls", again.err)
    assert "taken from sessions" not in again.err
    assert session_count() == 3


def test_a_run_refused_before_any_call_leaves_no_session(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = lambda path, body: Reply(status=401)
    [refused] = run_all([("run", "--model", "openai/test", "--api-base",
                          openai_server.base_url, "--task", "word_sorting", "--dataset",
                          "--limit", "3", "--no-progress", "--out",
                          str(tmp_path / "out.jsonl"))])
    assert refused.code == 1 and "needs an API key" in refused.err, refused.err
    assert session_count() == 0


def test_a_backtrack_refused_before_any_call_leaves_no_session(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    from tests.test_backtrack_cli import dataset_file

    openai_server.responder = lambda path, body: Reply(status=401)
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    [refused] = run_all([("backtrack", "--model", "openai/test", "--api-base",
                          openai_server.base_url, "--input", str(source), "--out",
                          str(tmp_path / "out.jsonl"), "--locations", "gold",
                          "--no-progress")])
    assert refused.code == 1 and "needs an API key" in refused.err, refused.err
    assert session_count() == 0


@pytest.fixture
def own_task(tmp_path: Path) -> Path:
    folder = tmp_path / "sums"
    folder.mkdir()
    (folder / "prompt.txt").write_text("Add.\n\nQ: 1 + 1\nThought 1: So the answer is 2.\n")
    (folder / "questions.jsonl").write_text(
        '{"input": "2 + 3", "target": "5"}\n{"input": "4 + 4", "target": "8"}\n')
    path = folder / "sums.toml"
    path.write_text('name = "sums"\ntitle = "Sums"\nprompt = "prompt.txt"\n'
                    'question = "Q: {input}"\ncompare = "number"\n'
                    'questions = "questions.jsonl"\n')
    return path


def test_run_rows_carry_the_task_digest_and_another_version_is_refused(
    tmp_path: Path, own_task: Path, openai_server: FakeOpenAI
) -> None:
    openai_server.responder = lambda path, body: Reply(" So the answer is 5.\n")
    out = tmp_path / "out.jsonl"
    run = ("run", "--task-file", str(own_task), "--task", "sums", "--dataset", "--limit", "1",
           "--no-progress", "--out", str(out), "--model", "openai/test", "--api-base",
           openai_server.base_url)
    [first] = run_all([run])
    assert first.code == 0, first.err
    [row] = rows(out)
    assert isinstance(row["task_digest"], str) and len(row["task_digest"]) >= 12
    # The task file changes: going on would mix two prompts in one OUT.
    prompt = own_task.parent / "prompt.txt"
    prompt.write_text("Add them.\n\nQ: 1 + 1\nThought 1: So the answer is 2.\n")
    [changed] = run_all([(*run[:6], "--limit", "2", *run[8:])])
    assert changed.code == 1, changed.err
    assert "row 1 was made with another version of task 'sums'" in changed.err
    assert "new --out" in changed.err
    assert len(rows(out)) == 1


def test_new_out_starts_over_and_keeps_the_old_file_aside(
    tmp_path: Path, own_task: Path, openai_server: FakeOpenAI
) -> None:
    """Issue 33 item 10: `--new-out` starts an OUT a resume refuses over; the old file is
    moved aside, byte for byte, to a name said on stderr, and never over another file."""
    openai_server.responder = lambda path, body: Reply(" So the answer is 5.\n")
    out = tmp_path / "out.jsonl"
    run = ("run", "--task-file", str(own_task), "--task", "sums", "--dataset", "--limit", "1",
           "--no-progress", "--out", str(out), "--model", "openai/test", "--api-base",
           openai_server.base_url)
    [first] = run_all([run])
    assert first.code == 0, first.err
    before = out.read_bytes()
    (own_task.parent / "prompt.txt").write_text("Add them.\n\nQ: 1 + 1\nThought 1: So the "
                                                "answer is 2.\n")
    [refused] = run_all([run])
    assert refused.code == 1 and "--new-out" in refused.err, refused.err
    (tmp_path / "out.jsonl.old").write_text("someone else's file\n")
    calls = len(openai_server.requests)
    [started_over] = run_all([(*run, "--new-out")])
    assert started_over.code == 0, started_over.err
    aside = tmp_path / "out.jsonl.old.2"
    assert (f"note: {out} was moved aside to {aside} (--new-out), with its unfinished "
            f"traces; {out} starts over") in started_over.err
    assert aside.read_bytes() == before
    assert (tmp_path / "out.jsonl.old").read_text() == "someone else's file\n"
    [row] = rows(out)
    assert row["task_digest"] != json.loads(before)["task_digest"]
    assert len(openai_server.requests) > calls  # generated anew, not copied
    # Resuming the new OUT goes on as ever; the moved file resumes where it now is.
    [again] = run_all([run])
    assert again.code == 0 and "1 already there" in again.err, again.err
    assert (aside.stat().st_mode & 0o777, out.stat().st_mode & 0o777) == (0o600, 0o600)


def test_run_does_not_copy_a_questions_rows_own_dataset_index(tmp_path: Path) -> None:
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"input": "( [ ] ", "target": ")",
                                     "dataset_index": 7, "note": "kept"}) + "\n")
    out = tmp_path / "out.jsonl"
    [ran] = run_all([("run", "--task", "dyck_languages", "--model", "solver/bbm", "--input",
                      str(questions), "--no-progress", "--out", str(out))])
    assert ran.code == 0, ran.err
    [row] = rows(out)
    assert "dataset_index" not in row
    assert row["source_index"] == 0 and row["note"] == "kept"


def test_a_run_an_offline_model_refuses_leaves_no_session(tmp_path: Path, own_task: Path) -> None:
    """solver/bbm writes no task of one's own: refused at each trace's first step."""
    [refused] = run_all([("run", "--model", "solver/bbm", "--task-file", str(own_task),
                          "--task", "sums", "--dataset", "--no-progress", "--out",
                          str(tmp_path / "out.jsonl"))])
    assert refused.code == 1 and "a task of your own" in refused.err, refused.err
    assert session_count() == 0
