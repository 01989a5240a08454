"""Issue 10, items 1-4: a trace nobody has labelled is never taken for "no mistake".

A row with no `mistake_index` key is unlabelled; `"mistake_index": null` is "no mistake", as
in the paper's files. Every command is run as a user runs it (the real `main`, the replay
model, a real store in the test's own home).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.dataset import DatasetError, bundled_rows, read_questions, read_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import TraceSession
from tests.openai_server import FakeOpenAI, Reply


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def questions(task: str, indexes: list[int]) -> list[dict]:
    rows = bundled_rows(task)
    return [{"input": rows[i].input, "target": rows[i].target} for i in indexes]


def json_out(capsys: pytest.CaptureFixture, argv: list[str]) -> dict:
    assert main(argv) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_round_trip_never_counts_an_unlabelled_trace_as_no_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    source = write_jsonl(tmp_path / "word_sorting.jsonl", questions("word_sorting", [0, 1, 2]))
    out = tmp_path / "out.jsonl"
    assert main(["run", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(written) == 3 and all("mistake_index" not in row for row in written)

    stats = json_out(capsys, ["stats", "--json", str(out)])["tasks"]["word_sorting"]
    assert (stats["traces"], stats["unlabelled"]) == (3, 3)
    assert stats["with_mistake"] == stats["without_mistake"] == 0

    preds = tmp_path / "preds.jsonl"
    scores = json_out(capsys, ["find", "--method", "direct-trace", "--input", str(out),
                               "--out", str(preds), "--no-progress", "--json"])
    assert scores["unlabelled_left_out"] == 3
    assert scores["tasks"] == {}  # nothing to score against
    assert len(preds.read_text().splitlines()) == 3  # the predictions are kept

    assert main(["import", str(out)]) == 0
    assert "0 sessions imported (3 traces already saved" in capsys.readouterr().err
    with Store.open() as store:
        sessions = store.sessions()
        traces = [TraceSession.load(store, s.session.id) for s in sessions]
    # `run` saved these traces already: importing its rows makes no second session.
    assert len(sessions) == 3
    assert all(trace.label is None for trace in traces)

    exported = tmp_path / "export.jsonl"
    assert main(["export", "--out", str(exported)]) == 0
    assert "3 of them unlabelled" in capsys.readouterr().err
    rows = read_rows(exported)
    assert [row.labelled for row in rows] == [False] * 3
    assert all("mistake_index" not in json.loads(line)
               for line in exported.read_text().splitlines())

    pb = tmp_path / "pb.jsonl"
    assert main(["export", "--format", "processbench", "--out", str(pb)]) == 0
    assert "3 traces left out: unlabelled" in capsys.readouterr().err
    assert pb.read_text() == ""


def labelled_counts(stats: dict) -> tuple[int, int, int, int]:
    return (stats["traces"], stats["unlabelled"], stats["with_mistake"],
            stats["without_mistake"])


def test_round_trip_with_labelled_rows_among_unlabelled_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """`run`'s unlabelled traces and labelled dataset rows in one file, through stats, find,
    import and export, and the exported file through stats and find again: the labelled rows
    keep their labels, and no unlabelled trace is ever counted or scored as "no mistake"."""
    rows = bundled_rows("word_sorting")
    with_mistake = [i for i, row in enumerate(rows) if row.mistake_index is not None][:2]
    without = [i for i, row in enumerate(rows) if row.mistake_index is None][:2]
    labelled = [rows[i] for i in [*with_mistake, *without]]
    unlabelled_questions = [i for i in range(len(rows)) if i not in with_mistake + without][:3]

    source = write_jsonl(tmp_path / "word_sorting.jsonl",
                         questions("word_sorting", unlabelled_questions))
    out = tmp_path / "run.jsonl"
    assert main(["run", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    (tmp_path / "mixed").mkdir()
    mixed = tmp_path / "mixed" / "word_sorting.jsonl"  # named after its task, for import
    ran = out.read_text().splitlines()
    # Interleaved: a labelled row, an unlabelled one, and so on.
    given = [json.dumps(row.to_json()) for row in labelled]
    lines = [line for pair in zip(given, [*ran, ""], strict=True) for line in pair if line]
    mixed.write_text("\n".join(lines) + "\n")
    expected = (7, 3, 2, 2)  # traces, unlabelled, with a mistake, without

    def stats_of(path: Path) -> tuple[int, int, int, int]:
        report = json_out(capsys, ["stats", "--json", "--task", "word_sorting", str(path)])
        return labelled_counts(report["tasks"]["word_sorting"])

    def scores_of(path: Path, preds: Path) -> dict:
        return json_out(capsys, ["find", "--method", "direct-trace", "--task", "word_sorting",
                                 "--input", str(path), "--out", str(preds), "--no-progress",
                                 "--json"])

    assert stats_of(mixed) == expected
    scores = scores_of(mixed, tmp_path / "preds-mixed.jsonl")
    # replay/bbm answers from the gold label: every labelled row scored, and right.
    assert scores["unlabelled_left_out"] == 3
    assert scores["tasks"]["word_sorting"]["n"] == 4
    assert scores["tasks"]["word_sorting"]["accuracy"] == pytest.approx(100.0)  # per cent

    assert main(["import", str(mixed)]) == 0
    assert "4 sessions imported (3 traces already saved" in capsys.readouterr().err
    exported = tmp_path / "export.jsonl"
    assert main(["export", "--out", str(exported)]) == 0
    assert "7 traces written" in capsys.readouterr().err
    back = read_rows(exported)
    by_input = {row.input: row for row in back}
    assert len(back) == 7
    for row in labelled:
        assert by_input[row.input].labelled
        assert by_input[row.input].mistake_index == row.mistake_index
    unlabelled_inputs = {rows[i].input for i in unlabelled_questions}
    assert {row.input for row in back if not row.labelled} == unlabelled_inputs
    assert all("mistake_index" not in json.loads(line)
               for line in exported.read_text().splitlines()
               if json.loads(line)["input"] in unlabelled_inputs)

    # Round again: the exported file reads the same.
    assert stats_of(exported) == expected
    again = scores_of(exported, tmp_path / "preds-again.jsonl")
    assert again["unlabelled_left_out"] == 3
    assert again["tasks"]["word_sorting"]["n"] == 4
    assert again["tasks"]["word_sorting"] == scores["tasks"]["word_sorting"]


def test_find_scores_only_the_labelled_rows(tmp_path: Path, capsys) -> None:
    rows = bundled_rows("word_sorting")[:4]
    mixed = [rows[0].to_json(), rows[1].to_json()]
    for row in rows[2:]:
        unlabelled = row.to_json()
        del unlabelled["mistake_index"]
        mixed.append(unlabelled)
    source = write_jsonl(tmp_path / "word_sorting.jsonl", mixed)
    scores = json_out(capsys, ["find", "--method", "direct-trace", "--input", str(source),
                               "--out", str(tmp_path / "p.jsonl"), "--no-progress", "--json"])
    assert scores["tasks"]["word_sorting"]["n"] == 2
    assert scores["unlabelled_left_out"] == 2


def test_import_keeps_labels_and_unlabelled_rows_apart(tmp_path: Path, capsys) -> None:
    rows = bundled_rows("multistep_arithmetic")
    no_mistake = next(row for row in rows if row.mistake_index is None)
    with_mistake = next(row for row in rows if row.mistake_index is not None)
    unlabelled = rows[5].to_json()
    del unlabelled["mistake_index"]
    source = write_jsonl(tmp_path / "multistep_arithmetic.jsonl",
                         [no_mistake.to_json(), with_mistake.to_json(), unlabelled])
    assert main(["import", str(source)]) == 0
    assert "3 sessions imported (1 of them unlabelled)" in capsys.readouterr().err
    # A loaded trace reads its steps from the store as it needs them: read while it is open.
    with Store.open() as store:
        traces = [TraceSession.load(store, s.session.id) for s in store.sessions()]
        by_input = {trace.session.input: trace for trace in traces}
        assert by_input[no_mistake.input].no_mistake
        assert by_input[with_mistake.input].mistake_number == with_mistake.mistake_index + 1
        assert by_input[rows[5].input].label is None
    # Imported twice: nothing new.
    assert main(["import", str(source)]) == 0
    assert "0 sessions imported (3 traces already saved" in capsys.readouterr().err


def test_run_takes_questions_with_just_an_input(tmp_path: Path, capsys) -> None:
    rows = bundled_rows("dyck_languages")
    source = write_jsonl(tmp_path / "dyck_languages.jsonl", [
        {"input": rows[3].input},
        {"input": rows[1].input, "target": rows[1].target},
        rows[2].to_json(),  # a whole dataset row: its trace and label are not used
    ])
    out = tmp_path / "out.jsonl"
    assert main(["run", "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert f"{source}: 1 row holds steps, answer or mistake_index; run uses only" in err
    written = [json.loads(line) for line in out.read_text().splitlines()]
    # The inputs' order, each row's place in the dataset, no label.
    assert [row["dataset_index"] for row in written] == [3, 1, 2]
    assert [row["input"] for row in written] == [rows[3].input, rows[1].input, rows[2].input]
    assert all("mistake_index" not in row for row in written)
    assert written[0]["target"] == ""  # not given: unknown
    assert written[1]["steps"] == rows[1].steps
    with Store.open() as store:
        sessions = {s.session.input: s.session for s in store.sessions()}
    session = sessions[rows[3].input]
    # Named like the app's, with the dataset index (so `g` shows the gold label).
    assert (session.name, session.dataset_index) == ("dyck_languages #3", 3)
    assert session.gold_mistake_index == rows[3].mistake_index
    assert session.target is None


def test_run_of_questions_not_in_the_dataset_keeps_their_row_numbers(
    tmp_path: Path, capsys: pytest.CaptureFixture, openai_server: FakeOpenAI
) -> None:
    # The first question is the slowest: its row still comes first in OUT.
    openai_server.responder = lambda path, body: Reply(
        "The answer is 3.", delay_s=0.8 if "((1 + 2))" in json.dumps(body) else 0.0)
    source = write_jsonl(tmp_path / "qs.jsonl", [
        {"input": "((1 + 2)) =", "task": "multistep_arithmetic"},
        {"input": bundled_rows("word_sorting")[7].input, "task": "word_sorting"},
        {"input": "((2 + 2)) =", "target": "4", "task": "multistep_arithmetic"},
    ])
    out = tmp_path / "out.jsonl"
    assert main(["run", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--input", str(source), "--out", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row["task"] for row in written] == [
        "multistep_arithmetic", "word_sorting", "multistep_arithmetic"]
    assert [row.get("source_index") for row in written] == [0, None, 2]
    assert written[1]["dataset_index"] == 7
    with Store.open() as store:
        names = sorted(s.session.name for s in store.sessions())
    assert names == ["multistep_arithmetic: ((1 + 2)) =", "multistep_arithmetic: ((2 + 2)) =",
                     "word_sorting #7"]


def test_mixed_task_files_are_read_row_by_row(tmp_path: Path, capsys) -> None:
    ws, ds = bundled_rows("word_sorting")[0], bundled_rows("dyck_languages")[0]
    source = write_jsonl(tmp_path / "mixed.jsonl", [
        {**ws.to_json(), "task": "word_sorting"},
        {**ds.to_json(), "task": "dyck_languages"},
    ])
    stats = json_out(capsys, ["stats", "--json", str(source)])
    assert set(stats["tasks"]) == {"word_sorting", "dyck_languages"}
    assert main(["import", str(source)]) == 0
    capsys.readouterr()
    with Store.open() as store:
        assert {s.session.task for s in store.sessions()} == {"word_sorting", "dyck_languages"}
    exported = tmp_path / "all.jsonl"
    assert main(["export", "--out", str(exported)]) == 0
    capsys.readouterr()
    assert sorted(json.loads(line)["task"] for line in exported.read_text().splitlines()) == [
        "dyck_languages", "word_sorting"]
    # The export reads back with each row's task.
    assert json_out(capsys, ["stats", "--json", str(exported)])["overall"]["traces"] == 2


def test_an_unknown_task_in_a_row_names_the_file_and_line(tmp_path: Path, capsys) -> None:
    source = write_jsonl(tmp_path / "x.jsonl", [{"input": "q", "task": "word_sorting"},
                                                 {"input": "q", "task": "chess"}])
    with pytest.raises(DatasetError, match=r"x.jsonl:2: unknown task 'chess'"):
        read_questions(source)
    assert main(["run", "--input", str(source), "--out", str(tmp_path / "o.jsonl")]) == 2
    assert "x.jsonl:2: unknown task 'chess'" in capsys.readouterr().err


def test_the_dataset_rows_are_unchanged() -> None:
    for task in ("word_sorting", "dyck_languages"):
        for row in bundled_rows(task)[:50]:
            assert row.labelled and "mistake_index" in row.to_json()
