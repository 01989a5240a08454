"""`bbm-tui backtrack` (issue 11, item 5): the paper's Table 6 over dataset-format files, on
the shared batch runner, against the local server through litellm; the Table 6 arithmetic
on hand-made outcomes."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.batch.backtrack import (
    BacktrackJob,
    FatalBacktrackError,
    _open_session,
    backtrack_batch,
    jobs_from_files,
    location_of,
    parse_locations,
)
from bbm_tui.core.dataset import TraceRow, bundled_rows
from bbm_tui.core.judging.metrics import BacktrackOutcome, backtrack_deltas
from bbm_tui.core.store import Store
from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack import ORIGINAL, QUESTION, TARGET, responder

RIGHT = ["2 + 2 = 4", "4 * 1 = 4", "So the answer is 4"]


def test_table_6_arithmetic_by_hand() -> None:
    outcomes = ([BacktrackOutcome(True, True)] * 7 + [BacktrackOutcome(True, False)] * 2
                + [BacktrackOutcome(False, True)] * 3 + [BacktrackOutcome(False, False)] * 9)
    deltas = backtrack_deltas(outcomes)
    assert (deltas.n, deltas.n_correct, deltas.n_incorrect) == (21, 9, 12)
    # 7 of 9 right answers stay right: 77.78% - 100% = -22.22 points; 3 of 12 wrong ones
    # are fixed: 0% -> 25%.
    assert deltas.delta_accuracy_correct == pytest.approx(-22.2222, abs=1e-3)
    assert deltas.delta_accuracy_incorrect == pytest.approx(25.0)
    assert backtrack_deltas([BacktrackOutcome(False, False)]).delta_accuracy_correct is None


def dataset_file(path: Path) -> Path:
    rows = [
        {"input": QUESTION, "steps": ORIGINAL, "answer": "5", "target": TARGET,
         "mistake_index": 1},
        {"input": "((2 + 2) * 1) = ?", "steps": RIGHT, "answer": "4", "target": TARGET,
         "mistake_index": None},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def run_backtrack(server: FakeOpenAI, source: Path, out: Path, capsys, *extra: str) -> dict:
    code = main(["backtrack", "--model", "openai/test", "--api-base", server.base_url,
                 "--input", str(source), "--out", str(out), "--no-progress", "--json",
                 *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out)


def test_gold_locations_fix_the_wrong_answer_and_resume(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    out = tmp_path / "out.jsonl"
    result = run_backtrack(openai_server, source, out, capsys, "--locations", "gold")
    assert result["tasks"]["multistep_arithmetic"] == {
        "n": 2, "n_correct": 1, "n_incorrect": 1,
        "delta_accuracy_correct": 0.0, "delta_accuracy_incorrect": 100.0,
    }
    assert result["paper"]["multistep_arithmetic"] == {"correct": -0.0, "incorrect": 18.04}
    fixed, kept = (json.loads(line) for line in out.read_text().splitlines())
    assert fixed["location"] == 1 and fixed["new_correct"] is True
    assert fixed["new_steps"] == ["Let me work it out.", "2 + 2 = 4", "4 * 1 = 4",
                                  "So the answer is 4"]
    assert fixed["new_answer"] == "4" and fixed["steps"] == ORIGINAL  # the input row kept
    assert len(fixed["samples"]) == 8
    assert [s["chosen"] for s in fixed["samples"]].count(True) == 1
    assert [s["dropped"] for s in fixed["samples"]][:2] == [True, False]
    assert all(isinstance(s["logprob"], float) for s in fixed["samples"] if s["text"])
    assert (kept["location"], kept["new_steps"], kept["samples"]) == (None, RIGHT, [])
    # Each backtracked trace is a session holding both branches.
    with Store.open() as store:
        [summary] = store.sessions()
        assert summary.session.source == "backtrack"
    assert result["usage"]["calls"] == 3  # the eight samples' call and two continuations
    requests = len(openai_server.requests)
    again = run_backtrack(openai_server, source, out, capsys, "--locations", "gold")
    assert len(openai_server.requests) == requests
    # The same tables; this run's own usage is none.
    assert {**again, "usage": result["usage"]} == result and again["usage"]["calls"] == 0


def test_a_killed_batch_resumes_from_its_stored_samples(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """The samples and the chosen step are saved, OUT has no row yet (as after a kill before
    the continuation finished): the next run samples nothing again and finishes the trace."""
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    out = tmp_path / "out.jsonl"
    run_backtrack(openai_server, source, out, capsys, "--locations", "gold")
    lines = out.read_text().splitlines()
    out.write_text(lines[1] + "\n")  # the backtracked trace's row lost
    requests = len(openai_server.requests)
    result = run_backtrack(openai_server, source, out, capsys, "--locations", "gold")
    assert result["tasks"]["multistep_arithmetic"]["delta_accuracy_incorrect"] == 100.0
    asked = openai_server.requests[requests:]
    assert not any(request.body.get("n") for request in asked)  # no sampling again


def test_locations_random_finder_and_rm(tmp_path: Path) -> None:
    row = bundled_rows("word_sorting")[3]
    first = location_of(parse_locations("random", 7), "word_sorting", row)
    assert first == location_of(parse_locations("random", 7), "word_sorting", row)
    assert 0 <= first < len(row.steps)
    assert location_of(parse_locations("rm:1.0"), "word_sorting", row) == row.mistake_index
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({**row.to_json(), "method": "direct-trace", "model": "m",
                                 "predicted_mistake_index": 2, "parsed": True, "raw": []})
                     + "\n")
    assert location_of(parse_locations(f"finder:{preds}"), "word_sorting", row) == 2
    unlabelled = TraceRow(row.input, row.steps, row.answer, row.target, None, labelled=False)
    assert location_of(parse_locations("gold"), "word_sorting", unlabelled) is None
    for bad in ("rm:2", "rm:x", "finder:", "best"):
        with pytest.raises(ValueError):
            parse_locations(bad)


def test_bad_locations_are_one_clear_line(tmp_path: Path, capsys) -> None:
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    assert main(["backtrack", "--input", str(source), "--locations", "rm:7",
                 "--out", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bbm-tui: ") and "rm:X needs X from 0 to 1" in err


@pytest.mark.parametrize(("value", "said"), [
    (True, "true is not an index (a whole number, or null for no mistake)"),
    ("1", '"1" is not an index (a whole number, or null for no mistake)'),
    (1.0, "1.0 is not an index (a whole number, or null for no mistake)"),
    (-1, "-1 is outside the trace's 3 steps (0-based; no mistake is null)"),
    (99, "99 is outside the trace's 3 steps (0-based; no mistake is null)"),
])
def test_a_predicted_index_that_is_not_one_is_refused_with_file_and_line(
    tmp_path: Path, capsys, value: object, said: str
) -> None:
    """Before: `true` backtracked from Thought 2 (OUT "location": true); "1", 1.0, -1 and 99
    were silently counted as "kept"."""
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    rows = [json.loads(line) for line in source.read_text().splitlines()]
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({**row, "method": "direct-trace", "model": "m",
                                         "predicted_mistake_index": guess, "parsed": True,
                                         "raw": []}) + "\n"
                             for row, guess in zip(rows, [1, value], strict=True)))
    out = tmp_path / "out.jsonl"
    assert main(["backtrack", "--input", str(source), "--locations", f"finder:{preds}",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == (f"bbm-tui: {preds}:2: predicted_mistake_index {said}\n")
    assert not out.exists()


def test_an_unparsed_prediction_is_no_location_whatever_its_index(tmp_path: Path) -> None:
    """`parsed: false`: the finder's answer could not be read, so its index means nothing
    (and is null as `find` writes it); the trace is kept as it is."""
    row = bundled_rows("word_sorting")[3]
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({**row.to_json(), "method": "direct-trace", "model": "m",
                                 "predicted_mistake_index": None, "parsed": False,
                                 "raw": ["?"]}) + "\n")
    assert location_of(parse_locations(f"finder:{preds}"), "word_sorting", row) is None


async def test_a_trace_stays_claimed_once_from_its_samples_to_its_end(
    openai_server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The sampling call and the going on each took and dropped their own claim: two commits
    # more a trace, and the session left unclaimed between them. No heartbeat renews the
    # claim meanwhile on a loaded machine: each claim is then seen by its one time.
    monkeypatch.setattr("bbm_tui.core.trace.session.CLAIM_HEARTBEAT_S", 3600.0)
    store_path = tmp_path / "store.sqlite3"
    answer = responder()
    claims_seen: list[list[tuple]] = []

    def respond(path: str, body: dict) -> Reply:
        with contextlib.closing(sqlite3.connect(store_path)) as other:  # as another process
            claims_seen.append(
                other.execute("SELECT owner, heartbeat_at FROM session_claims").fetchall())
        return answer(path, body)

    openai_server.responder = respond
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    jobs = jobs_from_files([source], None, parse_locations("gold"))
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    with Store.open(store_path) as store:
        result = await backtrack_batch(jobs, spec, store, tmp_path / "out.jsonl")
        assert (result.progress.done, result.progress.errors) == (2, [])
    with contextlib.closing(sqlite3.connect(store_path)) as other:  # released at the end
        assert other.execute("SELECT COUNT(*) FROM session_claims").fetchall() == [(0,)]
    # The sampling call, then the continuation's calls (one a thought): one claim all along.
    assert len(claims_seen) >= 3
    assert all(len(claims) == 1 for claims in claims_seen)
    assert len({claims[0] for claims in claims_seen}) == 1


async def test_a_trace_the_store_refuses_leaves_no_session_behind(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    # The session, its recorded steps and its gold label were three commits: a step the
    # store refuses (a lone surrogate) left an empty session in the sessions list.
    openai_server.responder = responder()
    row = TraceRow(QUESTION, [ORIGINAL[0], "2 + 2 = \ud800"], "5", TARGET, 1)
    job = BacktrackJob("multistep_arithmetic", row, 1)
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    with Store.open(tmp_path / "store.sqlite3") as store:
        with pytest.raises(FatalBacktrackError, match="not valid Unicode"):
            await backtrack_batch([job], spec, store, tmp_path / "out.jsonl")
        assert store.sessions_of_question(task="multistep_arithmetic", input=QUESTION,
                                          model="openai/test") == []
    assert openai_server.requests == []


async def test_a_trace_made_now_is_backtracked_without_walking_its_original(
    openai_server: FakeOpenAI, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A session made for the trace holds the original as its one branch, its head the last
    # step: walking that branch down from its first thought cost a read a step (13.5 a
    # trace in bench/backtrack_concurrency.py), each on the batch's busy loop.
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    jobs = jobs_from_files([source], None, parse_locations("gold"))
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    walked: list[int | None] = []
    read_children = Store.step_children

    def counted(store: Store, session_id: int, step_id: int | None) -> list:
        walked.append(step_id)
        return read_children(store, session_id, step_id)

    monkeypatch.setattr(Store, "step_children", counted)
    with Store.open(tmp_path / "store.sqlite3") as store:
        result = await backtrack_batch(jobs, spec, store, tmp_path / "out.jsonl")
        assert (result.progress.done, result.progress.errors) == (2, [])
    assert walked == []
    fixed = json.loads((tmp_path / "out.jsonl").read_text().splitlines()[0])
    assert fixed["new_steps"] == ["Let me work it out.", "2 + 2 = 4", "4 * 1 = 4",
                                  "So the answer is 4"]


async def test_a_backtracked_trace_commits_its_claim_and_its_choice_with_what_they_join(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    # Each commit is a turn at the store's write lock, which --processes' children queue for
    # (bench/backtrack_concurrency.py). The session's claim was a commit of its own after the
    # session's, and the chosen sample one after the samples': two more a trace.
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    jobs = jobs_from_files([source], None, parse_locations("gold"))
    assert [job.location for job in jobs] == [1, None]  # one trace backtracked
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    statements: list[str] = []
    with Store.open(tmp_path / "store.sqlite3") as store:
        store._connection.set_trace_callback(statements.append)
        result = await backtrack_batch(jobs, spec, store, tmp_path / "out.jsonl")
        store._connection.set_trace_callback(None)
        assert (result.progress.done, result.progress.errors) == (2, [])
    with contextlib.closing(sqlite3.connect(tmp_path / "store.sqlite3")) as other:
        continued = other.execute(
            "SELECT COUNT(*) FROM steps WHERE origin = 'model'").fetchone()[0]
        assert other.execute("SELECT COUNT(*) FROM session_claims").fetchall() == [(0,)]
    assert continued == 2
    # The session with its original, gold label and claim; the samples with the chosen one;
    # each continued thought (a crash loses at most the one being streamed); the claim let go.
    assert statements.count("COMMIT") == 1 + 1 + continued + 1
    assert [s for s in statements if s.startswith("BEGIN")] == ["BEGIN IMMEDIATE"] * 5


async def test_samples_left_without_a_choice_are_taken_by_the_rule(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """Samples stored with none taken (left in the app with esc, or a kill between their two
    commits in an earlier version): the batch takes the rule's choice and finishes the new
    branch, sampling nothing again."""
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    jobs = jobs_from_files([source], None, parse_locations("gold"))
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    out = tmp_path / "out.jsonl"
    with Store.open(tmp_path / "store.sqlite3") as store:
        trace, made = _open_session(store, jobs[0], spec)
        assert made and jobs[0].location == 1
        ready = await trace.resample(2)
        assert ready.resample.chosen is not None
        assert all(c.step_id is None for c in store.candidates(trace.id, trace.steps[0].id, 2))
        sampled = len(openai_server.requests)
        result = await backtrack_batch(jobs, spec, store, out)
        assert (result.progress.done, result.progress.errors) == (2, [])
        assert [c.step_id is not None for c in store.candidates(
            trace.id, trace.steps[0].id, 2)].count(True) == 1
    assert not any(request.body.get("n") for request in openai_server.requests[sampled:])
    fixed = json.loads(out.read_text().splitlines()[0])
    assert fixed["new_steps"] == ["Let me work it out.", "2 + 2 = 4", "4 * 1 = 4",
                                  "So the answer is 4"]
    assert [sample["chosen"] for sample in fixed["samples"]].count(True) == 1
