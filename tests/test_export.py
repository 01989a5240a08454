"""Import and export: the dataset round-trips in meaning through the store; ProcessBench,
PRM800K and Markdown say the same labels."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.annotation.export import export, import_rows, load_traces, markdown
from bbm_tui.core.annotation.queue import AnnotationQueue
from bbm_tui.core.dataset import bundled_path, bundled_rows, read_rows
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES
from tests.strict_json import strict_json_lines


def meaning(row: dict) -> dict:
    """What a dataset row says; the two tracking rows with " (C)" mean "(C)"."""
    answer = row["answer"].strip() if row["answer"] is not None else None
    return {**row, "answer": answer}


@pytest.mark.parametrize("task", TASK_NAMES)
def test_dataset_round_trips_through_store_and_export(tmp_path: Path, task: str) -> None:
    out = tmp_path / f"{task}.jsonl"
    with Store.open(tmp_path / "s.sqlite3") as store:
        ids = import_rows(store, task, bundled_rows(task)).imported
        result = export(load_traces(store, ids), out, "jsonl")
    assert result.written == len(bundled_rows(task)) and result.skipped == 0
    original = [json.loads(line) for line in bundled_path(task).read_text().splitlines()]
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert [meaning(row) for row in exported] == [meaning(row) for row in original]
    assert out.stat().st_mode & 0o777 == 0o600


def test_processbench_and_prm800k_labels(tmp_path: Path) -> None:
    rows = bundled_rows("multistep_arithmetic")[:40]
    with Store.open(tmp_path / "s.sqlite3") as store:
        traces = load_traces(store, import_rows(store, "multistep_arithmetic", rows).imported)
    export(traces, tmp_path / "pb.jsonl", "processbench")
    export(traces, tmp_path / "prm.jsonl", "prm800k")
    processbench = [json.loads(line) for line in (tmp_path / "pb.jsonl").read_text().splitlines()]
    prm = [json.loads(line) for line in (tmp_path / "prm.jsonl").read_text().splitlines()]
    for row, pb, rated in zip(rows, processbench, prm, strict=True):
        assert pb["label"] == (-1 if row.mistake_index is None else row.mistake_index)
        assert pb["steps"] == row.steps
        assert pb["problem"] == "Q: " + row.input
        assert pb["final_answer_correct"] == (row.answer.strip() == row.target)
        ratings = [step["completions"][0]["rating"] for step in rated["label"]["steps"]]
        if row.mistake_index is None:
            assert ratings == [1] * len(row.steps)
            # PRM800K's "solution" means the answer is right; no wrong step and a wrong
            # answer (19 arithmetic labels) is "give_up".
            expected = "solution" if row.answer.strip() == row.target else "give_up"
            assert rated["label"]["finish_reason"] == expected
        else:
            assert ratings == [1] * row.mistake_index + [-1]
            assert rated["label"]["finish_reason"] == "found_error"


def test_unlabelled_traces_are_left_out_where_a_label_is_needed(tmp_path: Path) -> None:
    rows = bundled_rows("word_sorting")[:3]
    with Store.open(tmp_path / "s.sqlite3") as store:
        imported = import_rows(store, "word_sorting", rows, labelled=False).imported
        traces = load_traces(store, imported)
    assert export(traces, tmp_path / "pb.jsonl", "processbench").skipped == 3
    assert (tmp_path / "pb.jsonl").read_text() == ""
    export(traces, tmp_path / "d.jsonl", "jsonl")
    assert [r.mistake_index for r in read_rows(tmp_path / "d.jsonl")] == [None] * 3


def test_markdown_keeps_hostile_text_literal(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        from bbm_tui.core.dataset import TraceRow

        row = TraceRow("[link](http://x) <script>", ["**bold** `code` #h", "The answer is a"],
                       "a", "a", 0)
        (trace,) = load_traces(store, import_rows(store, "word_sorting", [row]).imported)
    text = markdown(trace)
    assert "\\[link\\](http://x) \\<script\\>" in text
    assert "1. \\*\\*bold\\*\\* \\`code\\` \\#h ✗ **first mistake**" in text


def test_markdown_keeps_the_backquotes_of_an_answer(tmp_path: Path) -> None:
    """Code spans are fenced by one backquote more than the text's longest run (CommonMark),
    instead of its backquotes turned into "'" (issue 33, item 15)."""
    with Store.open(tmp_path / "s.sqlite3") as store:
        from bbm_tui.core.dataset import TraceRow

        row = TraceRow("Q", ["The answer is `a` ``b`` c"], "`a` ``b`` c", "`x", None)
        (trace,) = load_traces(store, import_rows(store, "word_sorting", [row]).imported)
    text = markdown(trace)
    assert "- answer: ``` `a` ``b`` c ``` " in text
    assert "- target: `` `x ``" in text


def test_export_and_import_commands(tmp_path: Path, capsys) -> None:
    source = tmp_path / "logical_deduction.jsonl"
    source.write_text("\n".join(bundled_path("logical_deduction").read_text()
                                .splitlines()[:5]) + "\n")
    assert main(["import", str(source)]) == 0
    assert "5 sessions imported" in capsys.readouterr().err
    assert main(["sessions", "--json"]) == 0
    listed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(listed) == 5 and {item["source"] for item in listed} == {"import"}
    out = tmp_path / "out.jsonl"
    assert main(["export", "--out", str(out)]) == 0
    assert [row.steps for row in read_rows(out)] == [row.steps for row in read_rows(source)]
    assert main(["export", "--session", "999", "--out", str(tmp_path / "none.jsonl")]) == 1
    assert "there is no session 999" in capsys.readouterr().err


def test_the_sessions_command_tells_a_label_on_another_branch(capsys) -> None:
    """`sessions` reads a label as the sessions screen does (store/records.py's Label): a
    flag on a branch not on show is not "no mistake"."""
    from bbm_tui.core.store import default_path
    from bbm_tui.core.trace.session import TraceSession

    rows = [row for row in bundled_rows("word_sorting") if row.mistake_index == 1][:2]
    with Store.open(default_path()) as store:
        flagged, moved = import_rows(store, "word_sorting", rows).imported
        trace = TraceSession.load(store, moved)
        trace.fork_at(1)
        trace.append_typed("Another first thought.")
    assert main(["sessions", "--json"]) == 0
    labels = {item["id"]: item["label"] for item in map(json.loads,
                                                          capsys.readouterr().out.splitlines())}
    assert labels == {flagged: "mistake at 2", moved: "other branch"}


ANSWERED = {"input": "b a", "steps": ["Let me sort them.", "So the answer is a b."],
            "answer": "a b", "target": "a b", "mistake_index": None}


def test_import_then_export_keeps_a_rows_own_answer(tmp_path: Path, capsys) -> None:
    """The row says `"answer": "a b"`; its last step reads "So the answer is a b.", where the
    answer regex finds "a b.". Before, the export wrote "a b." (jsonl and the consensus file)
    and Markdown marked the trace wrong against its target "a b". The row's own answer is
    kept as given, a null one too; the regex's answer is what a generated trace gets."""
    source = tmp_path / "word_sorting.jsonl"
    unanswered = {**ANSWERED, "input": "d c", "answer": None,
                  "steps": ["Let me sort them.", "So the answer is c d."], "target": "c d"}
    source.write_text(json.dumps(ANSWERED) + "\n" + json.dumps(unanswered) + "\n")
    assert main(["import", str(source)]) == 0
    out, markdown = tmp_path / "out.jsonl", tmp_path / "out.md"
    assert main(["export", "--format", "jsonl", "--out", str(out)]) == 0
    assert main(["export", "--format", "markdown", "--out", str(markdown)]) == 0
    rows = {row["input"]: row for row in strict_json_lines(out)}
    assert rows["b a"]["answer"] == "a b" and rows["d c"]["answer"] is None
    assert "- answer: `a b` (correct)" in markdown.read_text()
    consensus = tmp_path / "consensus.jsonl"
    capsys.readouterr()
    assert main(["agreement", "--app-labels", "--consensus", str(consensus)]) == 0
    assert {row["input"]: row["answer"] for row in strict_json_lines(consensus)} == {
        "b a": "a b", "d c": None}


def test_an_annotated_files_rows_keep_their_own_answer(tmp_path: Path) -> None:
    source = tmp_path / "word_sorting.jsonl"
    source.write_text(json.dumps(ANSWERED) + "\n")
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue.open(store, [source], "alice")
        for _ in ANSWERED["steps"]:
            queue.judge(True)
        queue.submit()
        [trace] = load_traces(store, None)
        assert trace.answer == "a b" and trace.correct


def test_every_labelled_branch_is_a_labelled_row_in_every_format(tmp_path: Path,
                                                                 capsys) -> None:
    """The README's story: Thought 2 flagged, then a new branch from it (backtracking's or a
    rewrite), which is on show unlabelled. The flagged original is a labelled row in every
    format, the new branch an unlabelled one where the format has them, and jsonl and csv
    agree; once the new branch is labelled too, both are labelled rows."""
    import csv

    from bbm_tui.core.store import default_path
    from bbm_tui.core.trace.session import TraceSession

    row = bundled_rows("multistep_arithmetic")[7]
    with Store.open(default_path()) as store:
        [session_id] = import_rows(store, "multistep_arithmetic", [row],
                                   labelled=False).imported
        trace = TraceSession.load(store, session_id)
        trace.flag_mistake(2)
        original = trace.texts
        trace.fork_at(2)
        for text in ("Let's calculate A = 3.", "B = 10.", "So the answer is -7"):
            trace.append_typed(text)

    def exported(fmt: str) -> list:
        out = tmp_path / f"{fmt}.out"
        assert main(["export", "--format", fmt, "--out", str(out), "--force"]) == 0
        capsys.readouterr()
        if fmt == "csv":
            return list(csv.DictReader(out.open()))
        if fmt == "markdown":
            return [out.read_text()]
        return [json.loads(line) for line in out.read_text().splitlines()]

    new_branch = [original[0], "Let's calculate A = 3.", "B = 10.", "So the answer is -7"]
    rows = exported("jsonl")
    assert [(r["steps"], r.get("mistake_index", "unlabelled")) for r in rows] == [
        (new_branch, "unlabelled"), (original, 1)]
    table = exported("csv")
    assert [(r["status"], r["mistake_index"], r["branch"]) for r in table] == [
        ("labelled", "1", "other")]
    [bench] = exported("processbench")
    assert bench["label"] == 1 and "-branch-" in bench["id"]  # apart from the branch on show
    [rated] = exported("prm800k")
    assert rated["bbm_tui"]["session_id"] == session_id and len(rated["label"]["steps"]) == 2
    [text] = exported("markdown")
    assert "(another branch)" in text and "- first mistake: Thought 2" in text
    assert "- first mistake: not labelled" in text

    with Store.open(default_path()) as store:
        TraceSession.load(store, session_id).mark_no_mistake()
    rows = exported("jsonl")
    assert [(r["steps"], r["mistake_index"]) for r in rows] == [(new_branch, None),
                                                                (original, 1)]
    table = exported("csv")
    assert [(r["branch"], r["mistake_index"]) for r in table] == [("on show", ""),
                                                                  ("other", "1")]
    assert [r["label"] for r in exported("processbench")] == [-1, 1]
