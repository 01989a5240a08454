"""Annotation queues through the core (issue 12): the paper's protocol, undo, skip, flag,
resuming in a new process's queue, two annotators on one file, adjudication, agreement over
the store and over files, the consensus file, the exports, and the shipped dataset labelled
with its own gold labels exporting back to itself."""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.adjudication import AdjudicationQueue, store_labels
from bbm_tui.core.annotation.export import export, export_csv, load_traces
from bbm_tui.core.annotation.queue import AnnotationQueue, FinishedElsewhere, read_queue_file
from bbm_tui.core.annotation.report import from_files, from_store, report_json
from bbm_tui.core.dataset import DatasetError, bundled_path, bundled_rows
from bbm_tui.core.records import FlagReason, WorkStatus
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.core.types import ADJUDICATOR
from tests.test_export import meaning


class Clock:
    """A clock the test moves: time spent is exact."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def small_file(tmp_path: Path, count: int = 4, task: str = "word_sorting",
               labelled: bool = True) -> Path:
    path = tmp_path / f"{task}.jsonl"
    lines = []
    for row in bundled_rows(task)[:count]:
        fields = row.to_json()
        if not labelled:
            fields.pop("mistake_index")
        lines.append(json.dumps(fields))
    path.write_text("\n".join(lines) + "\n")
    return path


def label_as(queue: AnnotationQueue, mistake_index: int | None) -> None:
    """Judge the trace on show thought by thought until its label is `mistake_index`, and
    submit it."""
    for mark in protocol.judged_for(mistake_index, len(queue.current.row.steps)):
        queue.judge(mark == protocol.CORRECT)
    queue.submit()


def test_protocol_rules() -> None:
    assert protocol.unlocked("", 3) == 0
    assert protocol.judge("+", 3, False) == "+-"
    assert protocol.complete("+-", 3) and protocol.location("+-") == 1
    assert protocol.complete("+++", 3) and protocol.location("+++") is None
    assert not protocol.complete("++", 3) and protocol.unlocked("++", 3) == 2
    with pytest.raises(protocol.ProtocolError):
        protocol.judge("+-", 3, True)
    assert protocol.judged_for(2, 5) == "++-" and protocol.judged_for(None, 2) == "++"


def test_one_annotator_labels_undoes_skips_flags_and_resumes(tmp_path: Path) -> None:
    path = small_file(tmp_path)
    clock = Clock()
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path), clock=clock)
        assert queue.position == 0 and queue.unlocked == 0
        queue.judge(True)
        assert queue.unlocked == 1  # the next thought unlocks after a label
        with pytest.raises(protocol.ProtocolError):
            queue.submit()  # not complete
        queue.judge(False)
        assert queue.complete and queue.unlocked is None
        with pytest.raises(protocol.ProtocolError):
            queue.judge(True)  # the rest stay greyed
        queue.undo()
        assert queue.judged == "+" and not queue.complete
        queue.judge(False)
        clock.now = 12.0
        submitted = queue.submit()
        assert submitted.mistake_index == 1 and submitted.has_gold
        assert submitted.gold == bundled_rows("word_sorting")[0].mistake_index
        assert queue.position == 1
        queue.skip()
        assert queue.position == 2 and queue.work(1).status == WorkStatus.SKIPPED
        queue.flag(FlagReason.BAD_PROBLEM, "the target is misspelt")
        assert queue.position == 3
        # Undo on a fresh trace reopens the trace flagged or submitted last: the flag...
        queue.undo()
        assert queue.position == 2 and queue.status == WorkStatus.OPEN
        assert queue.work(2).flag_reason is None and queue.work(2).note is None
        # ...then, nothing judged there, the submitted one, its label withdrawn.
        queue.undo()
        assert queue.position == 0 and queue.judged == "+" and queue.status == WorkStatus.OPEN
        assert store.current_label(queue.session_id(0), "alice") is None
        queue.judge(False)
        queue.submit()
        assert queue.position == 2
        queue.flag(FlagReason.BAD_PROBLEM, "the target is misspelt")
        progress = queue.progress()
        assert (progress.done, progress.flagged, progress.skipped, progress.total) == (1, 1, 1, 4)
        assert progress.mean_s == pytest.approx(12.0)
        position = queue.position

    # Quitting and opening again: the same place, the same work.
    with Store.open(tmp_path / "s.sqlite3") as store:
        again = AnnotationQueue(store, "alice", read_queue_file(path))
        assert again.position == position == 3  # the first open one (skipped ones come last)
        assert again.work(0).status == WorkStatus.DONE and again.work(0).judged == "+-"
        flagged = again.work(2)
        assert (flagged.status, flagged.flag_reason, flagged.note) == (
            "flagged", "bad problem", "the target is misspelt")
        label_as(again, None)
        assert again.position == 1  # then the skipped one
        label_as(again, 0)
        assert again.first_unfinished() is None


def test_a_suggestion_makes_the_label_assisted(tmp_path: Path) -> None:
    path = small_file(tmp_path, 2)
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path))
        suggestions = queue.suggestions()
        assert suggestions[0].source == "verifier"
        label_as(queue, suggestions[0].mistake_index)
        label_as(queue, None)
        labels = {label.session_id: label.assisted for label in store.annotator_labels()}
        assert list(labels.values()) == [True, False]


def test_a_file_without_labels_has_no_gold(tmp_path: Path) -> None:
    path = small_file(tmp_path, 2, labelled=False)
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path))
        assert not queue.current.has_gold
        for mark in protocol.judged_for(0, len(queue.current.row.steps)):
            queue.judge(mark == protocol.CORRECT)
        submitted = queue.submit()
        assert submitted.gold is None and submitted.agrees is None
        assert store.queue_gold() == {}  # null would have said "no mistake"


def test_two_annotators_agreement_adjudication_and_exports(tmp_path: Path) -> None:
    path = small_file(tmp_path, 3)
    store_path = tmp_path / "s.sqlite3"
    with Store.open(store_path) as store:
        alice = AnnotationQueue(store, "alice", read_queue_file(path))
        bob = AnnotationQueue(store, "bob", read_queue_file(path))
        for queue, labels in ((alice, [1, None, 0]), (bob, [1, 2, 0])):
            for label in labels:
                label_as(queue, label)
        # One session per trace, shared by both.
        assert len(store.sessions()) == 3
        data = from_store(store)
        assert set(data.labels) == {"alice", "bob"}
        result = report_json(data)
        assert result["n"] == 3
        assert result["cohen_kappa"]["alice|bob"] is not None
        gold = [row.mistake_index for row in bundled_rows("word_sorting")[:3]]
        expected_alice = 100 * sum(a == g for a, g in zip([1, None, 0], gold, strict=True)) / 3
        assert result["gold_agreement"]["alice"] == pytest.approx(expected_alice)

        adjudication = AdjudicationQueue.open(store)
        assert [item.session_id for item in adjudication.items] == [alice.session_id(1)]
        assert adjudication.current.choices == [None, 2]
        adjudication.settle(adjudication.current.choices[1])
        assert store_labels(store).adjudicated == {alice.session_id(1): 2}
        assert AdjudicationQueue.open(store).current.adjudicated == 2

        traces = load_traces(store, None)
        assert [trace.mistake_index for trace in traces] == [1, 2, 0]
        export(traces, tmp_path / "prm.jsonl", "prm800k")
        prm = [json.loads(line) for line in (tmp_path / "prm.jsonl").read_text().splitlines()]
        assert prm[0]["label"]["finish_reason"] == "found_error"
        assert prm[0]["labeler"] == "alice, bob"
        assert isinstance(prm[0]["label"]["total_time"], int)
        assert prm[0]["timestamp"].count("T") == 1
        export_csv(store, None, tmp_path / "labels.csv")
        rows = list(csv.DictReader((tmp_path / "labels.csv").open()))
        assert {(row["annotator"], row["mistake_index"]) for row in rows} >= {
            ("alice", ""), ("bob", "2"), (ADJUDICATOR, "2")}
        assert {row["assisted"] for row in rows} == {"0"}


def test_agreement_over_files_and_the_consensus_file(tmp_path: Path, capsys) -> None:
    rows = bundled_rows("word_sorting")[:4]
    files = []
    for name, labels in (("alice", [1, None, 0, 3]), ("bob", [1, 2, 0, None]),
                         ("carol", [1, 2, 0, 4])):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(
            json.dumps({**row.to_json(), "mistake_index": label}) + "\n"
            for row, label in zip(rows, labels, strict=True)))
        files.append(str(path))
    out = tmp_path / "consensus.jsonl"
    assert main(["agreement", *files, "--json", "--consensus", str(out)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result) >= {"krippendorff_alpha", "cohen_kappa", "gold_agreement", "n"}
    assert set(result["cohen_kappa"]) == {"alice|bob", "alice|carol", "bob|carol"}
    assert result["n"] == 4
    gold = [row.mistake_index for row in rows]
    assert result["gold_agreement"]["bob"] == pytest.approx(
        100 * sum(a == g for a, g in zip([1, 2, 0, None], gold, strict=True)) / 4)
    # The dataset's own traces: the paper's alpha beside ours.
    assert result["per_task"]["word_sorting"]["paper_krippendorff_alpha"] == 0.979
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert [row.get("mistake_index", "none") for row in written] == [1, 2, 0, "none"]
    assert "mistake_index" not in written[3]  # a three-way tie stays unlabelled
    data = from_files([Path(f) for f in files])
    assert data.is_papers()
    # A second run refuses to replace the consensus file without --force.
    assert main(["agreement", *files, "--consensus", str(out)]) == 2


def test_a_bad_line_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "word_sorting.jsonl"
    path.write_text(bundled_path("word_sorting").read_text().splitlines()[0] + "\n{oops\n")
    with pytest.raises(DatasetError, match=r"word_sorting.jsonl:2"):
        read_queue_file(path)


def _gold_round_trip(tmp_path: Path, per_task: int | None) -> None:
    """Each task's bundled traces labelled with their gold labels through the queue, thought
    by thought, then exported as the dataset's JSONL: the same rows in meaning."""
    files = []
    for task in TASK_NAMES:
        rows = bundled_path(task).read_text().splitlines()
        path = tmp_path / f"{task}.jsonl"
        path.write_text("\n".join(rows[:per_task]) + "\n")
        files.append(path)
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue.open(store, files, "gold")
        for _ in range(len(queue.traces)):
            label_as(queue, queue.current.gold)
        assert queue.progress().done == len(queue.traces)
        out = tmp_path / "out.jsonl"
        result = export(load_traces(store, None), out, "jsonl")
    original = [json.loads(line) for path in files for line in path.read_text().splitlines()]
    tasks = [path.stem for path in files for _ in path.read_text().splitlines()]
    exported = [json.loads(line) for line in out.read_text().splitlines()]
    assert result.written == len(original)
    # The export names each row's task (a key the dataset's files do not carry).
    assert [row.pop("task", task) for row, task in zip(exported, tasks, strict=True)] == tasks
    assert [meaning(row) for row in exported] == [meaning(row) for row in original]


def test_gold_labels_round_trip_all_2186_traces(tmp_path: Path) -> None:
    # About 3 s here (33,303 judgements, each committed): not marked slow.
    _gold_round_trip(tmp_path, None)


def test_annotate_command_refuses_bad_input_before_the_app(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "word_sorting.jsonl"
    bad.write_text(bundled_path("word_sorting").read_text().splitlines()[0] + "\n[1, 2]\n")
    assert main(["annotate", str(bad), "--annotator", "alice"]) == 2
    assert f"{bad}:2: expected a JSON object" in capsys.readouterr().err
    (tmp_path / "good").mkdir()
    good = small_file(tmp_path / "good")
    assert main(["annotate", str(good), "--annotator", ADJUDICATOR]) == 2
    assert "not a name an annotator can have" in capsys.readouterr().err
    missing = tmp_path / "alice.jsonl"
    assert main(["annotate", str(missing), "--task", "word_sorting", "--annotator", "bob"]) == 2
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_agreement_text_report_over_the_store(tmp_path: Path, capsys) -> None:
    path = small_file(tmp_path, 2)
    with Store.open() as store:
        for name, labels in (("alice", [1, None]), ("bob", [1, 2])):
            queue = AnnotationQueue(store, name, read_queue_file(path))
            for label in labels:
                label_as(queue, label)
    assert main(["agreement"]) == 0
    out = capsys.readouterr().out
    assert "traces labelled by two or more: 2" in out
    assert "Cohen's kappa alice / bob" in out
    assert "alpha, word_sorting:" in out and "(paper: 0.979)" in out


def test_undo_unflags_and_a_flag_note_is_kept_as_text_in_the_csv(tmp_path: Path) -> None:
    path = small_file(tmp_path, 2)
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path))
        queue.flag(FlagReason.UNSURE, "=HYPERLINK(\"x\")")
        queue.go_to(0)
        assert queue.status == WorkStatus.FLAGGED and queue.unlocked is None
        export_csv(store, None, tmp_path / "flags.csv")
        rows = list(csv.DictReader((tmp_path / "flags.csv").open()))
        assert [(row["status"], row["flag_reason"], row["note"]) for row in rows] == [
            ("flagged", "unsure", "'=HYPERLINK(\"x\")")]
        assert queue.undo()
        assert queue.status == WorkStatus.OPEN and queue.unlocked == 0
        assert store.queue_work("alice")[queue.session_id(0)].flag_reason is None


def test_progress_counts_time_per_trace_and_the_estimate_to_finish(tmp_path: Path) -> None:
    """Time per trace is the mean over the latest submitted traces (flagged ones not counted);
    the estimate is that mean times the traces still open or skipped."""
    from bbm_tui.ui.viewmodels.annotate import progress_line

    path = small_file(tmp_path, 6)
    clock = Clock()
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path), clock=clock)
        first = queue.progress()
        assert (first.finished, first.total, first.mean_s, first.remaining_s) == (0, 6, None, None)
        assert progress_line(first) == "0 / 6 done"  # no time per trace before a submit
        clock.now = 20.0
        label_as(queue, 0)  # 20 s on the first trace
        clock.now = 60.0
        label_as(queue, None)  # 40 s on the second
        clock.now = 1060.0
        queue.flag(FlagReason.UNSURE)  # a flagged trace is finished, but not a time per trace
        clock.now = 1070.0
        queue.skip()
        progress = queue.progress()
        assert (progress.done, progress.flagged, progress.skipped, progress.total) == (2, 1, 1, 6)
        assert progress.mean_s == pytest.approx(30.0)
        assert progress.remaining_s == pytest.approx(30.0 * 3)  # 3 left: two open, one skipped
        assert progress_line(progress) == (
            "3 / 6 done · 1 flagged · 1 skipped · 30 s a trace · about 1 min 30 s to go")
        assert progress_line(progress, wall_clock=False) == "3 / 6 done · 1 flagged · 1 skipped"


def test_the_estimate_follows_the_latest_fifty_traces(tmp_path: Path) -> None:
    path = small_file(tmp_path, 60)
    clock = Clock()
    with Store.open(tmp_path / "s.sqlite3") as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path), clock=clock)
        for number in range(55):
            clock.now += 1000.0 if number < 5 else 10.0  # slow at first, then quicker
            label_as(queue, 0)
        progress = queue.progress()
        assert progress.mean_s == pytest.approx(10.0)
        assert progress.remaining_s == pytest.approx(50.0)


def test_time_on_a_trace_left_mid_way_is_kept_across_sittings(tmp_path: Path) -> None:
    """Quit after judging part of a trace, open the file again, finish: the time recorded (and
    PRM800K's total_time, in ms) covers both sittings."""
    path = small_file(tmp_path, 2)
    store_path = tmp_path / "s.sqlite3"
    clock = Clock()
    with Store.open(store_path) as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path), clock=clock)
        clock.now = 10.0
        queue.judge(True)
        clock.now = 12.5
        queue.judge(True)  # then the app is quit; nothing else is saved
    clock.now = 500.0  # time away from the queue does not count
    with Store.open(store_path) as store:
        queue = AnnotationQueue(store, "alice", read_queue_file(path), clock=clock)
        assert queue.position == 0 and queue.judged == "++"
        clock.now = 504.0
        queue.judge(False)
        clock.now = 505.0
        queue.submit()
        work = store.queue_work("alice")[queue.session_id(0)]
        assert work.status == WorkStatus.DONE
        assert work.time_spent_s == pytest.approx(12.5 + 5.0)
        export(load_traces(store, [queue.session_id(0)]), tmp_path / "prm.jsonl", "prm800k")
    [row] = [json.loads(line) for line in (tmp_path / "prm.jsonl").read_text().splitlines()]
    assert row["label"]["total_time"] == 17500
    assert row["labeler"] == "alice"


def test_prm800k_total_time_adds_up_every_annotators_time(tmp_path: Path) -> None:
    path = small_file(tmp_path, 1)
    with Store.open(tmp_path / "s.sqlite3") as store:
        for name, seconds in (("alice", 12.25), ("bob", 3.5)):
            clock = Clock()
            queue = AnnotationQueue(store, name, read_queue_file(path), clock=clock)
            clock.now = seconds
            label_as(queue, 1)
        export(load_traces(store, None), tmp_path / "prm.jsonl", "prm800k")
    [row] = [json.loads(line) for line in (tmp_path / "prm.jsonl").read_text().splitlines()]
    assert row["labeler"] == "alice, bob"
    assert row["label"]["total_time"] == 15750
    assert row["label"]["finish_reason"] == "found_error"


def test_trace_keys_keep_their_values() -> None:
    """Stores key queued traces by `trace_key` (queue_items.trace_key): these digests were
    computed by the first version of it and must never change."""
    from bbm_tui.core.annotation.queue import trace_key

    row = bundled_rows("word_sorting")[0]
    assert trace_key(row.input, row.steps) == "06147640b066d01da0c94521fa2503ef"
    assert trace_key("Q: ünïcode — 漢字", ["a", "", 'b\n"c"', "\ud800 lone"]) == \
        "4450959f55347a5615781d3d9e6a0b28"
    assert trace_key("", []) == "fcdf3ecfe876539956eb77f17f503ac1"
    # The same characters split differently are different traces.
    assert trace_key("ab", ["c"]) == "709cf327ef95531b685902e50b513a88"
    assert trace_key("a", ["bc"]) == "a4d2502de3aca3ac159bba2d99ea81a8"


def test_reading_a_queue_file_leaves_the_collector_as_it_was(tmp_path: Path) -> None:
    import gc

    path = small_file(tmp_path, 2)
    assert gc.isenabled()
    read_queue_file(path)
    assert gc.isenabled()
    gc.disable()
    try:
        read_queue_file(path)
        assert not gc.isenabled()
    finally:
        gc.enable()
    bad = tmp_path / "word_sorting_bad.jsonl"
    bad.write_text('{"input": "q"}\n')
    with pytest.raises(DatasetError):
        read_queue_file(bad, "word_sorting")
    assert gc.isenabled()


def test_a_new_annotators_queue_opens_without_every_traces_key(tmp_path: Path) -> None:
    """Opening a file no one has worked on digests only the trace on show (the rest are
    worked out by index(), which the screen runs in a thread after the first frame); a queue
    with work in the store matches every trace to it."""
    from bbm_tui.core.annotation.queue import trace_key

    path = small_file(tmp_path, 5)
    with Store.open(tmp_path / "s.sqlite3") as store:
        traces = read_queue_file(path)
        queue = AnnotationQueue(store, "alice", traces)
        assert [trace._key is not None for trace in traces] == [True] + [False] * 4
        assert queue.progress().total == 5
        queue.index()
        assert [trace.key for trace in traces] == [
            trace_key(trace.row.input, trace.row.steps) for trace in traces]
        label_as(queue, 1)
        again = AnnotationQueue(store, "alice", read_queue_file(path))
        assert again.position == 1 and again.progress().done == 1


def test_annotate_reads_each_rows_own_task(tmp_path: Path, capsys) -> None:
    """A file that mixes tasks, each row naming its own (as `import`, `stats` and `backtrack`
    read it): `annotate` said "cannot tell which task this file holds". Each row is queued
    under its own task; a row without one takes --task, else the file's name."""
    mixed = tmp_path / "mixed.jsonl"
    rows = [("word_sorting", bundled_rows("word_sorting")[0]),
            ("dyck_languages", bundled_rows("dyck_languages")[0])]
    mixed.write_text("".join(json.dumps({**row.to_json(), "task": task}) + "\n"
                             for task, row in rows))
    traces = read_queue_file(mixed)
    assert [trace.task for trace in traces] == ["word_sorting", "dyck_languages"]
    # The command reads it too, and goes on to the app (which needs a terminal here).
    assert main(["annotate", str(mixed), "--annotator", "alice"]) == 2
    assert "the app needs a terminal" in capsys.readouterr().err
    untasked = tmp_path / "more.jsonl"
    untasked.write_text(json.dumps(rows[0][1].to_json()) + "\n"
                        + json.dumps({**rows[1][1].to_json(), "task": "dyck_languages"}) + "\n")
    assert [t.task for t in read_queue_file(untasked, "word_sorting")] == [
        "word_sorting", "dyck_languages"]
    with pytest.raises(DatasetError, match="cannot tell which task"):
        read_queue_file(untasked)


def test_agreement_leaves_the_apps_own_labels_out_unless_asked(capsys) -> None:
    """A flag given on the main screen is stored under the app's annotator ("me"), a name
    nobody typed: agreement listed it beside alice and bob, with "—" for its kappa. It is
    left out (and the command says so), or, asked for, counted as the annotator "app"."""
    from bbm_tui.core.llm import ModelSpec
    from bbm_tui.core.store import default_path
    from bbm_tui.core.trace.session import NewTrace, TraceSession

    with Store.open(default_path()) as store:
        path = small_file(default_path().parent, 3)
        alice = AnnotationQueue(store, "alice", read_queue_file(path))
        bob = AnnotationQueue(store, "bob", read_queue_file(path))
        for queue, labels in ((alice, [1, None, 0]), (bob, [1, 2, 0])):
            for label in labels:
                label_as(queue, label)
        mine = TraceSession.create(store, NewTrace("word_sorting", "apple zebra", "apple zebra"),
                                   ModelSpec())
        mine.append_typed("The answer is apple zebra")
        mine.mark_no_mistake()
    assert main(["agreement"]) == 0
    out, err = capsys.readouterr()
    assert "me" not in out.split() and "alice / bob" in out
    assert ("the labels of 1 trace labelled on the app's main screen are left out (no "
            "annotator labelled those sessions)") in err
    assert main(["agreement", "--json", "--app-labels"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["gold_agreement"]) == {"alice", "bob", "app"}
    assert not any("me" in pair.split("|") for pair in result["cohen_kappa"])


def test_agreement_counts_a_queues_me_and_names_imported_labels(tmp_path: Path,
                                                                 capsys) -> None:
    """Labels under the app's own name come from three places. On an annotation queue's
    session they are an annotator's (the app's "Annotate files" offers the name "me"), and
    are counted. A labelled file brought in by `import` makes sessions of its own, labelled
    under that name too: no annotator's queue shares them (annotating the same file makes
    the queue's sessions, with the file's labels as their gold), so they are left out by
    default like the main screen's, and the command says which they are, and that `export`
    writes them."""
    from bbm_tui.core.annotation.export import import_rows
    from bbm_tui.core.dataset import read_rows
    from bbm_tui.core.store import default_path
    from bbm_tui.core.types import DEFAULT_ANNOTATOR

    path = small_file(tmp_path, 3)
    with Store.open(default_path()) as store:
        assert len(import_rows(store, "word_sorting", read_rows(path)).imported) == 3
        me = AnnotationQueue(store, DEFAULT_ANNOTATOR, read_queue_file(path))
        bob = AnnotationQueue(store, "bob", read_queue_file(path))
        for queue, labels in ((me, [1, None, 0]), (bob, [1, 2, 0])):
            for label in labels:
                label_as(queue, label)
    assert main(["agreement", "--json"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert set(result["gold_agreement"]) == {"me", "bob"}
    assert result["n"] == 3 and result["cohen_kappa"]["bob|me"] is not None
    assert ("the labels of 3 traces brought in by `import` are left out (no annotator "
            "labelled those sessions); --app-labels counts them as the annotator \"app\"\n"
            in err)
    consensus = tmp_path / "consensus.jsonl"
    assert main(["agreement", "--consensus", str(consensus)]) == 0
    err = capsys.readouterr().err
    assert "; `export` writes each session with its own label" in err
    assert "2 traces with the consensus label written" in err  # the tie waits
    assert main(["agreement", "--json", "--app-labels"]) == 0
    assert set(json.loads(capsys.readouterr().out)["gold_agreement"]) == {"me", "bob", "app"}
    with pytest.raises(SystemExit):
        main(["agreement", "--help"])
    assert "or brought in by `import`" in " ".join(capsys.readouterr().out.split())


def test_two_windows_of_one_annotator_never_double_a_label(tmp_path: Path) -> None:
    """`bbm-tui serve` runs one app per browser: two windows of alice's, each its own queue
    and store connection over one file. A trace submitted in one is not labelled again in the
    other; the other moves on to alice's next trace, and her judgements made in one window
    are where the other goes on from."""
    path = small_file(tmp_path)
    traces = read_queue_file(path)
    with Store.open(tmp_path / "s.sqlite3") as first_store, \
            Store.open(tmp_path / "s.sqlite3") as second_store:
        first = AnnotationQueue(first_store, "alice", traces)
        second = AnnotationQueue(second_store, "alice", read_queue_file(path))
        assert first.position == second.position == 0
        label_as(first, 1)
        # The second window still shows trace 0: its next key is refused, and it moves on.
        with pytest.raises(FinishedElsewhere):
            second.judge(True)
        assert second.position == 1 and second.judged == ""
        # A submit raced by the other window: the label is written once.
        second.judge(True)
        first.go_to(1)
        assert first.judged == ""  # first's own view, read before the judgement
        first.judge(False)  # read again first: the judgement made in the second is kept
        assert first.judged == "+-" and first.complete
        first.submit()
        with pytest.raises(FinishedElsewhere):
            second.submit()
        assert second.position == 2
    with sqlite3.connect(tmp_path / "s.sqlite3") as connection:
        rows = connection.execute("SELECT session_id, COUNT(*) FROM labels "
                                  "WHERE annotator = 'alice' GROUP BY session_id").fetchall()
    assert sorted(count for _session, count in rows) == [1, 1]
