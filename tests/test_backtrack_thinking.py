"""`bbm-tui backtrack --mode thinking` (issue 35, item 2): a thinking step resampled from the
prefix of its raw reasoning against the suite's llama-server (tests/llama_server.py): the
prefix sent byte for byte, samples cut at the split rule, the original's repeats dropped, the
paper's choice starred, going on from it to the answer; refused before any request where the
provider cannot go on from a prefix."""

from __future__ import annotations

import itertools
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.cli import main
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.records import SessionSource
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.types import SplitRule, StepOrigin
from tests.llama_server import FakeLlamaServer, qwen3_template
from tests.openai_server import FakeOpenAI

QUESTION = "((1 + 1) * 2) = ?"
TARGET = "4"
# A thinking trace as `run --mode thinking` writes it: odd whitespace and a CRLF kept raw.
REASONING = "Plan: add, then multiply.  \n\n1 + 1 = 3.\r\n\n3 * 2 = 6. \n\nSo 6.\n\n"
RULE = SplitRule.PARAGRAPH
RAW = split_text(REASONING, RULE)
MISTAKE = 1  # "1 + 1 = 3."

# What the model writes after the first step: the original again, or one of two others
# (five tokens or seven, at -1.0 a token: the shorter is the likelier).
SAMPLES = ["1 + 1 = 3.\r\n\nmore", "One and one make two, not three. \n\nmore",
           "1 + 1 = 2. \n\nmore"]
ENDING = "2 * 2 = 4.\n\n</think>\n\nSo the answer is 4"


def script(server: FakeLlamaServer) -> None:
    turn = itertools.cycle(SAMPLES)
    lock = threading.Lock()

    def continuation(prompt: str, body: dict[str, Any]) -> str:
        if prompt.endswith("1 + 1 = 2. \n\n") or prompt.endswith("not three. \n\n"):
            return ENDING
        with lock:
            return next(turn)

    server.continuation = continuation


def thinking_file(path: Path) -> Path:
    row = {"input": QUESTION, "steps": [step.strip() for step in RAW], "answer": "6",
           "target": TARGET, "mistake_index": MISTAKE, "mode": "thinking", "split": str(RULE),
           "reasoning": REASONING, "reasoning_kind": "raw"}
    path.write_text(json.dumps(row) + "\n")
    return path


def backtrack(server: FakeLlamaServer, source: Path, out: Path, *extra: str) -> int:
    return main(["backtrack", "--mode", "thinking", "--model", "openai/tiny", "--api-base",
                 server.base_url, "--input", str(source), "--task", "multistep_arithmetic",
                 "--locations", "gold", "--out", str(out), "--no-progress", "--json", *extra])


def test_a_thinking_step_is_resampled_from_its_raw_prefix_and_goes_on_to_the_answer(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script(llama)
    out = tmp_path / "out.jsonl"
    code = backtrack(llama, thinking_file(tmp_path / "in.jsonl"), out, "--top-p", "0.95")
    captured = capsys.readouterr()
    assert code == 0, captured.err
    head = qwen3_template([{"role": "user", "content": llama.requests[0].body["messages"][0]
                            ["content"]}]) + "<think>\n"
    completions = [record for record in llama.requests if record.path == "/completion"]
    samples, going_on = completions[:8], completions[8:]
    # The prefix byte for byte: the template, the opened reasoning, step 1 as it was.
    assert {record.body["prompt"] for record in samples} == {head + RAW[0]}
    assert all(record.body["temperature"] == 1.0 and record.body["top_p"] == 0.95
               and record.body["n_probs"] == 1 for record in samples)
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    drawn = row["samples"]
    assert len(drawn) == 8
    # Cut where the paragraph rule ends the step, its raw slice kept.
    assert {sample["raw"] for sample in drawn} == {"1 + 1 = 3.\r\n\n",
                                                  "One and one make two, not three. \n\n",
                                                  "1 + 1 = 2. \n\n"}
    # The original again is dropped; the likeliest of the rest (5 tokens, -5.0) is starred.
    assert all(sample["dropped"] == (sample["text"] == "1 + 1 = 3.") for sample in drawn)
    assert sum(sample["dropped"] for sample in drawn) >= 1
    starred = [sample for sample in drawn if sample["chosen"]]
    assert [sample["text"] for sample in starred] == ["1 + 1 = 2."]
    assert starred[0]["logprob"] == pytest.approx(-5.0)  # "1", " +", " 1", " =", " 2."
    assert row["chosen_by"] == "logprob"
    # Going on greedily from the chosen step, to the answer.
    (answer_call,) = going_on
    assert answer_call.body["prompt"] == head + RAW[0] + "1 + 1 = 2. \n\n"
    assert answer_call.body["temperature"] == 0.0
    assert row["new_reasoning"] == RAW[0] + "1 + 1 = 2. \n\n" + "2 * 2 = 4.\n\n"
    assert row["new_steps"] == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4."]
    assert (row["new_answer"], row["new_correct"]) == ("4", True)
    result = json.loads(captured.out)
    assert result["tasks"]["multistep_arithmetic"]["delta_accuracy_incorrect"] == 100.0


def test_the_result_is_a_session_in_the_store_with_both_reasonings_whole(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """As `backtrack` keeps the paper's traces: a session (source "backtrack") the app opens,
    the row's trace as its first branch, the samples stored, and the new branch whose
    reasoning is stored whole, so `S` re-cuts it; a second run into another OUT finds the
    same session and adds its branch there."""
    script(llama)
    source = thinking_file(tmp_path / "in.jsonl")
    assert backtrack(llama, source, tmp_path / "out.jsonl") == 0, capsys.readouterr().err
    with Store.open() as store:
        (session,) = store.sessions_of_question(task="multistep_arithmetic", input=QUESTION,
                                                model="openai/tiny")
        assert session.source == SessionSource.BACKTRACK
        trace = TraceSession.load(store, session.id)
        assert trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4."]
        assert trace.answer == "4" and trace.steps[1].origin == StepOrigin.BACKTRACK
        reasoning = trace.reasoning()
        assert reasoning is not None and reasoning.complete
        assert reasoning.text == RAW[0] + "1 + 1 = 2. \n\n" + "2 * 2 = 4.\n\n"
        stored = store.candidates(session.id, trace.steps[0].id, 2)
        assert len(stored) == 8
        assert [c.text for c in stored if c.step_id is not None] == ["1 + 1 = 2."]
        assert all(c.dropped == (c.text == "1 + 1 = 3.") for c in stored)
        # The row's trace: the first branch, its reasoning whole, its gold flag kept.
        leaves = trace.tree.leaves()
        assert len(leaves) == 2
        original = trace.tree.path(leaves[0].id)
        assert [step.text for step in original] == [step.strip() for step in RAW]
        trace.switch_to(original[-1].id)
        first = trace.reasoning()
        assert first is not None and first.text == REASONING and first.complete
        assert trace.mistake_number == MISTAKE + 1
        # S re-cuts the new branch's reasoning, no call.
        trace.switch_to(leaves[1].id)
        assert trace.recut(SplitRule.SENTENCE)
        assert trace.texts[1] == "1 + 1 = 2."
    assert backtrack(llama, source, tmp_path / "out2.jsonl") == 0, capsys.readouterr().err
    with Store.open() as store:
        (again,) = store.sessions_of_question(task="multistep_arithmetic", input=QUESTION,
                                              model="openai/tiny")
        assert again.id == session.id
        assert len(store.candidates(session.id, original[0].id, 2)) == 16


def test_without_log_probabilities_the_first_that_differs_is_chosen(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script(llama)
    llama.send_logprobs = False
    out = tmp_path / "out.jsonl"
    assert backtrack(llama, thinking_file(tmp_path / "in.jsonl"), out,
                     "--samples", "3") == 0, capsys.readouterr().err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    first = next(sample for sample in row["samples"] if not sample["dropped"])
    assert first["chosen"] and first["logprob"] is None
    assert row["chosen_by"] == "first"


def test_a_row_without_its_raw_reasoning_fails_with_a_reason(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"input": QUESTION, "steps": ["a", "b"], "answer": "6",
                                  "target": TARGET, "mistake_index": 1}) + "\n")
    assert backtrack(llama, source, tmp_path / "out.jsonl") == 1
    assert "no raw reasoning" in capsys.readouterr().err
    assert llama.requests == []


@pytest.mark.parametrize(("model", "says"), [
    ("anthropic/claude-sonnet-4-5", "Anthropic's API cannot go on"),
    ("gemini/gemini-2.5-pro", "Gemini's API cannot go on"),
    ("openai/o3", "OpenAI's reasoning models cannot go on"),
    ("deepseek/deepseek-reasoner", "DeepSeek's API cannot go on"),
])
def test_providers_that_cannot_go_on_are_refused_before_any_request(
        model: str, says: str, openai_server: FakeOpenAI, tmp_path: Path,
        capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENAI_API_KEY",
                     "DEEPSEEK_API_KEY"):
        monkeypatch.setenv(variable, "sk-test")
    code = main(["backtrack", "--mode", "thinking", "--model", model, "--input",
                 str(thinking_file(tmp_path / "in.jsonl")), "--task", "multistep_arithmetic",
                 "--locations", "gold", "--out", str(tmp_path / "out.jsonl"), "--no-progress"])
    assert code != 0
    assert says in capsys.readouterr().err
    assert openai_server.requests == []
    assert not (tmp_path / "out.jsonl").exists()


def test_processes_are_refused_with_thinking_mode(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    code = backtrack(llama, thinking_file(tmp_path / "in.jsonl"), tmp_path / "out.jsonl",
                     "--concurrency", "4", "--processes", "2")
    assert code != 0
    assert "--processes is for the paper's traces" in capsys.readouterr().err
    assert llama.requests == []


def test_solver_thinking_backtracks_offline_with_no_key(
        tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    """`run` then `backtrack --mode thinking` on the offline thinking model: each row's step
    resampled from its raw prefix (offline/continuation.py), gone on from to an answer, and
    kept as a session of the store."""
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
    rows = tmp_path / "thinking.jsonl"
    assert main(["run", "--model", "solver/thinking", "--mode", "thinking", "--task",
                 "multistep_arithmetic", "--dataset", "--limit", "3", "--out", str(rows),
                 "--no-progress"]) == 0, capsys.readouterr().err
    out = tmp_path / "bt.jsonl"
    code = main(["backtrack", "--mode", "thinking", "--model", "solver/thinking", "--input",
                 str(rows), "--task", "multistep_arithmetic", "--locations", "random",
                 "--out", str(out), "--no-progress", "--json"])
    assert code == 0, capsys.readouterr().err
    done = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(done) == 3
    for row in done:
        assert len(row["samples"]) == 8
        assert all(sample["logprob"] is not None for sample in row["samples"])
        if row["chosen_by"] is not None:
            assert row["new_reasoning"].startswith(
                "".join(split_text(row["reasoning"], RULE)[: row["location"]]))
            assert row["new_answer"] is not None
    with Store.open() as store:
        backtracked = [summary.session for summary in store.sessions()
                       if summary.session.source == SessionSource.BACKTRACK]
        assert len(backtracked) == 3
