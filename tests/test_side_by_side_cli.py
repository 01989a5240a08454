"""`run --model A --model B` and `compare`, over real HTTP: two local OpenAI-compatible
servers, one writing the dataset's recorded traces and one the solver's; a row per model in
the inputs' order, resumed after a kill without a finished model's trace done again, and
`compare` saying what is computed here by hand from the rows."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store, default_path
from bbm_tui.core.tasks import get_task
from tests.cli_helpers import launch, run_here
from tests.fake_server import last_prompt, solver_responder
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

TASK = "tracking_shuffled_objects"


def models(recorded: FakeOpenAI, solver: FakeOpenAI) -> list[str]:
    return ["--model", "openai/recorded", "--api-base", recorded.base_url,
            "--model", "openai/solver", "--api-base", solver.base_url]


def rows_of(out: Path) -> list[dict]:
    return [json.loads(line) for line in out.read_text().splitlines()]


def asked_about(server: FakeOpenAI, question: str) -> int:
    """How many of the server's calls were about this question."""
    return sum(question in last_prompt(request.body) for request in server.requests)


def test_run_with_two_models_writes_a_row_per_model_in_order(
    tmp_path: Path, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    openai_server.responder = dataset_responder
    second_openai_server.responder = solver_responder
    out = tmp_path / "out.jsonl"
    result = run_here(("run", *models(openai_server, second_openai_server), "--task", TASK,
                       "--dataset", "--limit", "3", "--no-progress", "--out", str(out)))
    assert result.code == 0, result.err
    assert "6 traces written" in result.err
    rows = rows_of(out)
    dataset = bundled_rows(TASK)
    assert [(row["dataset_index"], row["model"]) for row in rows] == [
        (0, "openai/recorded"), (0, "openai/solver"), (1, "openai/recorded"),
        (1, "openai/solver"), (2, "openai/recorded"), (2, "openai/solver")]
    task = get_task(TASK)
    for row in rows:
        recorded = dataset[row["dataset_index"]]
        assert row["input"] == recorded.input and row["target"] == recorded.target
        if row["model"] == "openai/recorded":
            assert row["steps"] == recorded.steps
        else:
            assert task.is_correct(row["answer"], row["target"])
        usage = row["usage"]
        assert usage["calls"] == len(row["steps"])
        assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0
        assert usage["cost"] is None  # litellm knows no price for these models
    # Each server answered its own model only.
    assert {r.body["model"] for r in openai_server.requests} == {"recorded"}
    assert {r.body["model"] for r in second_openai_server.requests} == {"solver"}
    # Each model's trace is a session of its own, found again by its model.
    with Store.open(default_path()) as store:
        assert sorted(s.session.model for s in store.sessions()) == [
            "openai/recorded"] * 3 + ["openai/solver"] * 3

    # Run again with a third model: only its rows are made, after the others.
    again = run_here(("run", *models(openai_server, second_openai_server),
                      "--model", "solver/bbm", "--task", TASK, "--dataset", "--limit", "3",
                      "--no-progress", "--out", str(out)))
    assert again.code == 2 and "--api-base given 2 times for 3 models" in again.err
    before = len(openai_server.requests), len(second_openai_server.requests)
    again = run_here(("run", "--model", "openai/recorded", "--model", "openai/solver",
                      "--model", "solver/bbm", "--api-base", openai_server.base_url,
                      "--api-base", second_openai_server.base_url, "--api-base", "",
                      "--task", TASK, "--dataset", "--limit", "3", "--no-progress",
                      "--out", str(out)))
    assert again.code == 0, again.err
    assert "3 traces written" in again.err and "6 already there" in again.err
    assert (len(openai_server.requests), len(second_openai_server.requests)) == before
    assert [row["model"] for row in rows_of(out)[6:]] == ["solver/bbm"] * 3


def test_a_model_given_twice_is_refused(tmp_path: Path) -> None:
    result = run_here(("run", "--model", "replay/bbm", "--model", "replay/bbm", "--task", TASK,
                       "--dataset", "--limit", "1", "--out", str(tmp_path / "o.jsonl")))
    assert result.code == 2 and "each model once" in result.err


def test_a_killed_run_resumes_without_repeating_a_finished_models_trace(
    tmp_path: Path, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    """One trace at a time: the recorded model's trace of question 0 is written and the
    solver's is half-way when the process is killed. Resumed: the recorded model is not
    asked about question 0 again, and the solver's stored thoughts are not asked for again
    (at most the one being streamed at the kill)."""
    openai_server.responder = dataset_responder

    def slow_solver(path: str, body: dict) -> Reply:
        reply = solver_responder(path, body)
        reply.chunk_delay_s = 0.05
        return reply

    second_openai_server.responder = slow_solver
    out = tmp_path / "out.jsonl"
    question = bundled_rows(TASK)[0].input
    child = launch("run", *models(openai_server, second_openai_server), "--task", TASK,
                   "--dataset", "--limit", "2", "--concurrency", "1", "--no-progress",
                   "--out", str(out), env={"BBM_TUI_HOME": os.environ["BBM_TUI_HOME"]})
    deadline = time.monotonic() + 120
    while asked_about(second_openai_server, question) < 3:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the solver's trace never got going"
        time.sleep(0.02)
    child.send_signal(signal.SIGKILL)
    child.communicate()
    written = rows_of(out)
    assert [row["model"] for row in written] == ["openai/recorded"]
    recorded_calls = asked_about(openai_server, question)
    assert recorded_calls == len(bundled_rows(TASK)[0].steps)
    with Store.open(default_path()) as store:
        [solver] = [s for s in store.sessions() if s.session.model == "openai/solver"]
        kept = solver.steps
    assert kept >= 2
    solver_calls = asked_about(second_openai_server, question)

    second_openai_server.responder = solver_responder
    result = run_here(("run", *models(openai_server, second_openai_server), "--task", TASK,
                       "--dataset", "--limit", "2", "--no-progress", "--out", str(out)))
    assert result.code == 0, result.err
    assert "3 traces written" in result.err and "1 already there" in result.err
    rows = rows_of(out)
    assert [(row["dataset_index"], row["model"]) for row in rows] == [
        (0, "openai/recorded"), (0, "openai/solver"), (1, "openai/recorded"),
        (1, "openai/solver")]
    assert asked_about(openai_server, question) == recorded_calls  # not asked again
    steps = len(rows[1]["steps"])
    resumed_calls = asked_about(second_openai_server, question) - solver_calls
    assert resumed_calls == steps - kept  # only the thoughts not yet stored
    assert rows[1]["steps"][:kept] == rows[1]["steps"][:kept]
    assert rows[1]["usage"]["calls"] == steps  # the resumed trace counts all its calls


@pytest.fixture
def run_rows(tmp_path: Path) -> Path:
    """A run of three models on three tracking questions, offline: the recorded one, the
    solver and the recording again, written as `run` writes them."""
    out = tmp_path / "out.jsonl"
    result = run_here(("run", "--model", "replay/bbm", "--model", "solver/bbm", "--task", TASK,
                       "--dataset", "--limit", "4", "--no-progress", "--out", str(out)))
    assert result.code == 0, result.err
    return out


def test_compare_says_what_the_rows_say(run_rows: Path) -> None:
    rows = rows_of(run_rows)
    task = get_task(TASK)
    expected: dict[str, dict] = {}
    for row in rows:
        figures = expected.setdefault(row["model"], {"traces": 0, "correct": 0, "steps": 0,
                                                     "in": 0, "out": 0})
        figures["traces"] += 1
        figures["correct"] += task.is_correct(row["answer"], row["target"])
        figures["steps"] += len(row["steps"])
        figures["in"] += row["usage"]["prompt_tokens"]
        figures["out"] += row["usage"]["completion_tokens"]
    by_question: dict[int, dict[str, dict]] = {}
    for row in rows:
        by_question.setdefault(row["dataset_index"], {})[row["model"]] = row
    partings = []
    for index, pair in by_question.items():
        replay, solver = pair["replay/bbm"], pair["solver/bbm"]
        if replay["answer"] != solver["answer"]:
            first = next(number for number, (a, b) in enumerate(
                zip(replay["steps"], solver["steps"], strict=False), start=1) if a != b)
            partings.append((index, first))
    assert partings, "the recording goes wrong somewhere in the first questions"

    result = run_here(("compare", str(run_rows), "--json"))
    assert result.code == 0, result.err
    found = json.loads(result.out)
    assert [(m["model"], m["traces"], m["correct"], m["mean_steps"], m["prompt_tokens"],
             m["completion_tokens"], m["cost"]) for m in found["models"]] == [
        (model, e["traces"], e["correct"], e["steps"] / e["traces"], e["in"], e["out"], 0.0)
        for model, e in expected.items()]
    assert [m["accuracy"] for m in found["models"]] == [
        e["correct"] / e["traces"] for e in expected.values()]
    assert found["questions_compared"] == 4
    assert [(p["where"], p["first_difference"]) for p in found["partings"]] == [
        (f"#{index}", first) for index, first in partings]
    first = found["partings"][0]
    row = by_question[partings[0][0]]
    assert [(a["model"], a["answer"], a["correct"]) for a in first["answers"]] == [
        (model, row[model]["answer"], task.is_correct(row[model]["answer"], row[model]["target"]))
        for model in ("replay/bbm", "solver/bbm")]

    table = run_here(("compare", str(run_rows)))
    assert table.code == 0, table.err
    replay = expected["replay/bbm"]
    accuracy = f"{replay['correct'] / replay['traces']:.1%} ({replay['correct']}/4)"
    assert accuracy in table.out
    assert f"The answers part on {len(partings)} of 4 questions" in table.out
    assert f"the traces part at Thought {partings[0][1]}" in table.out
    assert " $0 " in table.out  # the offline models cost nothing


def test_compare_refuses_what_is_not_run_output(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"input": "x", "steps": [], "answer": null, "target": ""}\n')
    result = run_here(("compare", str(bad)))
    assert result.code == 2 and "bad.jsonl:1:" in result.err
    assert "model" in result.err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run_here(("compare", str(empty)))
    assert result.code == 2 and "no rows" in result.err
