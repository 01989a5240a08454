"""The dataset's JSONL format: strict reading with errors that name the file and line, and
writing that gives back the dataset's own bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.core.dataset import (
    DatasetError,
    TraceRow,
    bundled_path,
    bundled_rows,
    read_rows,
    resolve_task,
    task_from_path,
    write_rows,
)
from bbm_tui.core.tasks import TASK_NAMES, UnknownTaskError

GOOD = {"input": "b a", "steps": ["x", "The answer is a b"], "answer": "a b", "target": "a b",
        "mistake_index": None}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("task", TASK_NAMES)
def test_bundled_rows_round_trip_byte_for_byte(task: str) -> None:
    lines = bundled_path(task).read_bytes().decode("utf-8").split("\n")
    rows = bundled_rows(task)
    assert len(rows) == len(lines)
    assert [row.to_line() for row in rows] == lines


def test_write_rows_then_read_rows_keeps_extra_keys(tmp_path: Path) -> None:
    row = TraceRow("in", ["s1", "The answer is x"], "x", "x", 1,
                   {"model": "replay/bbm", "latency_s": 0.5})
    path = tmp_path / "out.jsonl"
    write_rows(path, [row, row])
    assert read_rows(path) == [row, row]
    assert json.loads(path.read_text().splitlines()[0])["model"] == "replay/bbm"
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input": "x", "steps": [', "malformed JSON"),
        ("[1, 2]", "expected a JSON object, found list"),
        ('{"input": "x"}', "missing key(s): steps, answer, target"),
        (json.dumps({**GOOD, "input": 3}), "'input' must be a str"),
        (json.dumps({**GOOD, "steps": "abc"}), "'steps' must be a list of strings"),
        (json.dumps({**GOOD, "steps": ["a", 2]}), "'steps' must be a list of strings"),
        (json.dumps({**GOOD, "answer": 5}), "'answer' must be a string or null"),
        (json.dumps({**GOOD, "target": None}), "'target' must be a str"),
        (json.dumps({**GOOD, "mistake_index": "1"}), "'mistake_index' must be an integer"),
        (json.dumps({**GOOD, "mistake_index": True}), "'mistake_index' must be an integer"),
        (json.dumps({**GOOD, "mistake_index": 2}), "'mistake_index' 2 is outside the 2 steps"),
        (json.dumps({**GOOD, "mistake_index": -1}), "outside the 2 steps"),
    ],
)
def test_bad_lines_are_located(tmp_path: Path, line: str, message: str) -> None:
    path = write_lines(tmp_path / "word_sorting.jsonl", [json.dumps(GOOD), "", line])
    before = path.read_bytes()
    with pytest.raises(DatasetError) as raised:
        read_rows(path)
    assert raised.value.line == 3
    assert str(raised.value).startswith(f"{path}:3: ")
    assert message in str(raised.value)
    assert path.read_bytes() == before


def test_truncated_last_line_is_located(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(GOOD) + "\n" + json.dumps(GOOD)[:30], encoding="utf-8")
    with pytest.raises(DatasetError, match=r"x\.jsonl:2: malformed JSON"):
        read_rows(path)


def test_wrong_encoding_is_located(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(json.dumps(GOOD).encode() + b"\n" + b'{"input": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match=r"x\.jsonl:2: not UTF-8 text"):
        read_rows(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="no such file"):
        read_rows(tmp_path / "nope.jsonl")
    with pytest.raises(DatasetError, match="is a directory"):
        read_rows(tmp_path)


def test_blank_lines_are_skipped(tmp_path: Path) -> None:
    path = write_lines(tmp_path / "x.jsonl", ["", json.dumps(GOOD), "   ", json.dumps(GOOD)])
    assert len(read_rows(path)) == 2


def test_task_from_file_name() -> None:
    assert task_from_path(Path("/a/b/word_sorting.jsonl")) == "word_sorting"
    assert task_from_path("dyck_languages.preds.jsonl") == "dyck_languages"
    with pytest.raises(DatasetError, match="pass --task"):
        task_from_path("traces.jsonl")
    assert resolve_task("traces.jsonl", "logical_deduction") == "logical_deduction"
    with pytest.raises(UnknownTaskError):
        resolve_task("word_sorting.jsonl", "sorting")


@pytest.mark.parametrize("key", ["input", "target"])
def test_a_question_or_target_past_the_limit_is_refused_with_file_and_line(
    tmp_path: Path, key: str
) -> None:
    """A 10 MB question took 47 s and 871 MB to the app's first frame; bbm-tui takes
    questions and targets of up to MAX_QUESTION_CHARS characters, and says so of a longer
    one, naming the file and line, whatever command reads it."""
    from bbm_tui.core.dataset import read_questions
    from bbm_tui.core.types import MAX_QUESTION_CHARS

    row = {"input": "b a", "steps": ["So the answer is a b."], "answer": "a b", "target": "a b"}
    path = tmp_path / "word_sorting.jsonl"
    taken = {**row, key: "w" * MAX_QUESTION_CHARS}
    path.write_text(json.dumps(row) + "\n" + json.dumps(taken) + "\n")
    assert len(read_rows(path)) == 2 and len(read_questions(path).rows) == 2
    path.write_text(json.dumps(row) + "\n" + json.dumps({**row, key: "w " * 5_000_000}) + "\n")
    for read in (read_rows, read_questions):
        with pytest.raises(DatasetError) as raised:
            read(path)
        assert str(raised.value) == (
            f"{path}:2: {key!r} is 10,000,000 characters long; bbm-tui takes questions and "
            f"targets of up to {MAX_QUESTION_CHARS:,}")
