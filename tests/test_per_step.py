"""PRM800K's per-step labelling (core/annotation/protocol.py, queue.py): every thought rated
+1/0/-1 to the end, PRM800K's finish reasons, undo and resume; two annotators' agreement, with
Krippendorff's alpha over the step ratings worked out here by hand; the exports carry the
ratings (PRM800K, TRL, BBM rows, the per-step CSV).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.export import export, export_step_csv, load_traces
from bbm_tui.core.annotation.queue import AnnotationQueue, read_queue_file
from bbm_tui.core.annotation.report import from_store, report_json
from bbm_tui.core.records import FlagReason, WorkStatus
from bbm_tui.core.store import Store
from tests.test_formats import FILES

GOOD, NEUTRAL, BAD = 1, 0, -1


def test_the_per_step_protocol_rates_to_the_end() -> None:
    judged = ""
    for rating in (GOOD, NEUTRAL, BAD):
        assert not protocol.complete(judged, 4, protocol.PER_STEP)
        judged = protocol.rate(judged, 4, rating)
    # A bad thought does not end the trace, as it does in the paper's protocol.
    assert protocol.complete(judged, 4) and not protocol.complete(judged, 4, protocol.PER_STEP)
    assert protocol.unlocked(judged, 4, protocol.PER_STEP) == 3
    judged = protocol.rate(judged, 4, GOOD)
    assert judged == "+0-+"
    assert protocol.ratings(judged) == [1, 0, -1, 1]
    assert protocol.location(judged) == 2  # the first -1 is the first mistake
    assert protocol.finish_reason(judged) == "found_error"
    assert protocol.finish_reason("+0+") == "solution"
    with pytest.raises(protocol.ProtocolError, match="complete"):
        protocol.rate(judged, 4, GOOD)
    with pytest.raises(protocol.ProtocolError, match="no neutral"):
        protocol.rate("", 4, NEUTRAL, protocol.PAPER)


def queue(store: Store, annotator: str) -> AnnotationQueue:
    return AnnotationQueue(store, annotator, read_queue_file(FILES["processbench"]),
                           protocol_name=protocol.PER_STEP)


def rate_all(q: AnnotationQueue, ratings: list[int]) -> None:
    for rating in ratings:
        q.rate(rating)


def label_two_annotators(store: Store) -> None:
    """The ProcessBench fixture's four traces (4, 3, 2 and 3 thoughts), by ana and bo."""
    ana = queue(store, "ana")
    rate_all(ana, [GOOD, NEUTRAL, BAD, GOOD])
    assert ana.submit().finish_reason == "found_error"
    rate_all(ana, [GOOD, GOOD, GOOD])
    assert ana.submit().finish_reason == "solution"
    rate_all(ana, [BAD, BAD])
    ana.submit()
    ana.rate(GOOD)
    ana.flag(FlagReason.GIVE_UP, "too long")  # give_up: set aside, its rating kept
    bo = queue(store, "bo")
    rate_all(bo, [GOOD, GOOD, BAD, BAD])
    bo.submit()
    rate_all(bo, [GOOD, NEUTRAL, GOOD])
    bo.submit()
    rate_all(bo, [GOOD, BAD])
    bo.set_note("7 times 7 is 49, which is not greater than 50.")
    bo.submit()
    bo.flag(FlagReason.BAD_PROBLEM)  # bad_problem


def test_ratings_finish_reasons_and_notes_are_stored(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        label_two_annotators(store)
        labels = {(label.annotator, label.session_id): label
                  for label in store.annotator_labels()}
        first = labels[("ana", 1)]
        assert (first.mistake_index, first.ratings, first.finish_reason) == (
            2, (1, 0, -1, 1), "found_error")
        assert labels[("ana", 2)].ratings == (1, 1, 1)
        assert labels[("ana", 2)].mistake_index is None
        assert labels[("bo", 3)].note == "7 times 7 is 49, which is not greater than 50."
        assert ("ana", 4) not in labels and ("bo", 4) not in labels
        work = {(item.annotator, item.session_id): item for item in store.all_queue_work()}
        assert (work[("ana", 4)].status, work[("ana", 4)].flag_reason,
                work[("ana", 4)].judged) == ("flagged", "give up", "+")
        assert work[("bo", 4)].flag_reason == "bad problem"


def test_undo_and_resume_after_quitting(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        first = queue(store, "cy")
        rate_all(first, [GOOD, NEUTRAL, BAD])
        assert first.undo() and first.judged == "+0"
        first.rate(NEUTRAL)
        # Quit mid-trace and open the file again: the ratings so far are there.
        again = queue(store, "cy")
        assert again.position == 0 and again.judged == "+00"
        assert again.unlocked == 3
        again.rate(GOOD)
        again.submit()
        assert again.position == 1
        # Undo on a fresh trace reopens the one submitted: its label withdrawn, its last
        # rating undone.
        assert again.undo()
        assert again.position == 0 and again.judged == "+00"
        assert again.status is WorkStatus.OPEN
        assert store.current_label(1, "cy") is None


def test_agreement_reports_alpha_over_step_ratings(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        label_two_annotators(store)
        result = report_json(from_store(store))
    # First mistakes: trace 1 (2, 2), trace 2 (none, none), trace 3 (0, 1): values 2, 2, N,
    # N, 0, 1; n = 6, disagreeing pairs 2, expected pairs 6^2 - (4 + 4 + 1 + 1) = 26.
    assert result["krippendorff_alpha"] == pytest.approx(1 - 5 * 2 / 26)
    assert result["n"] == 3
    # Step ratings (the submitted traces only): nine steps rated by both. Coincidences:
    # (1,1) 6, (-1,-1) 4, (0,1) and (1,0) 2 each, (1,-1) and (-1,1) 2 each; n_1 = 10,
    # n_0 = 2, n_-1 = 6, n = 18.
    rated = result["step_ratings"]
    # Nominal: 8 disagreeing pairs; expected pairs 18^2 - (100 + 4 + 36) = 184.
    assert rated["krippendorff_alpha_nominal"] == pytest.approx(1 - 17 * 8 / 184)
    # Interval: observed 2*1 + 2*1 + 2*4 + 2*4 = 20; expected
    # 2 * (10*2*1 + 10*6*4 + 2*6*1) = 544.
    assert rated["krippendorff_alpha_interval"] == pytest.approx(1 - 17 * 20 / 544)
    assert (rated["n_steps"], rated["n_traces"]) == (9, 3)


def test_exports_carry_the_ratings(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        label_two_annotators(store)
        traces = load_traces(store, None)
        export(traces, tmp_path / "prm.jsonl", "prm800k")
        export(traces, tmp_path / "trl.jsonl", "trl")
        export(traces, tmp_path / "bbm.jsonl", "jsonl")
        export(traces, tmp_path / "ben.json", "mr-ben")
        export_step_csv(store, None, tmp_path / "steps.csv")
    prm = [json.loads(line) for line in (tmp_path / "prm.jsonl").read_text().splitlines()]
    # Trace 3 is a tie (Thought 1 against Thought 2): unlabelled, waiting for adjudication.
    assert [row["label"]["finish_reason"] for row in prm] == [
        "found_error", "solution", "give_up"]
    assert [[step["completions"][0]["rating"] for step in row["label"]["steps"]]
            for row in prm] == [[1, 0, -1, 1], [1, 1, 1], [1]]
    # Rated to the end: the solution goes on past the -1 (chosen every time).
    assert [step["chosen_completion"] for step in prm[0]["label"]["steps"]] == [0, 0, 0, 0]
    assert prm[0]["labeler"] == "ana, bo"
    trl = [json.loads(line) for line in (tmp_path / "trl.jsonl").read_text().splitlines()]
    # TRL's own PRM800K conversion: true for +1 only.
    assert [row["labels"] for row in trl] == [[True, False, False, True], [True, True, True],
                                              [True]]
    bbm = [json.loads(line) for line in (tmp_path / "bbm.jsonl").read_text().splitlines()]
    assert [row.get("ratings") for row in bbm] == [[1, 0, -1, 1], [1, 1, 1], None, [1]]
    assert [row.get("mistake_index", "unlabelled") for row in bbm] == [
        2, None, "unlabelled", "unlabelled"]
    with (tmp_path / "steps.csv").open(newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 18
    assert [(row["annotator"], row["thought"], row["rating"]) for row in rows[:4]] == [
        ("ana", "1", "1"), ("ana", "2", "0"), ("ana", "3", "-1"), ("ana", "4", "1")]
    assert {row["protocol"] for row in rows} == {"per-step"}
    assert rows[0]["finish_reason"] == "found_error"


def test_mr_ben_takes_the_reason_from_the_annotators_note(tmp_path: Path) -> None:
    with Store.open(tmp_path / "s.sqlite3") as store:
        ana = AnnotationQueue(store, "ana", read_queue_file(FILES["processbench"]))
        ana.judge(True)
        ana.set_note("18 - 6 is 12 pink, but 6 went back out white: 12 pink, not 18.")
        ana.judge(False)
        ana.submit()
        export(load_traces(store, None), tmp_path / "ben.json", "mr-ben")
    [row] = json.loads((tmp_path / "ben.json").read_text())["processbench-1"]
    assert row["Model_Solution_First_Error_Step"] == "2"
    assert row["Model_Solution_Correctness"] == "incorrect"
    assert row["Model_Solution_Error_Reason"] == [
        "18 - 6 is 12 pink, but 6 went back out white: 12 pink, not 18."]
    assert row["Model_Solution_Rectified_First_Error_Step"] == "N/A"


def test_adjudication_reads_per_step_labels_by_their_first_mistake(tmp_path: Path) -> None:
    from bbm_tui.core.annotation.adjudication import AdjudicationQueue

    with Store.open(tmp_path / "s.sqlite3") as store:
        label_two_annotators(store)
        adjudication = AdjudicationQueue.open(store)
        # Only trace 3 is disputed: ana's first -1 at Thought 1, bo's at Thought 2.
        assert [(item.session_id, item.candidates) for item in adjudication.items] == [
            (3, {"ana": 0, "bo": 1})]


def test_the_annotate_command_hands_the_protocol_to_the_app(monkeypatch) -> None:
    from bbm_tui import cli
    from bbm_tui.cli import annotate

    asked = []
    monkeypatch.setattr(annotate, "open_app", lambda args, request: asked.append(request) or 0)
    assert cli.main(["annotate", str(FILES["prm800k"]), "--annotator", "ana",
                     "--protocol", "per-step"]) == 0
    [request] = asked
    assert request.protocol == "per-step" and request.annotator == "ana"
    assert [trace.task for trace in request.traces] == ["prm800k"] * 4
    assert [trace.has_gold for trace in request.traces] == [True, True, True, False]
