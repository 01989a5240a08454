"""`bbm-tui anchors` (issue 35, item 3): each step's importance from rollouts that go on from
prefixes of a thinking trace's reasoning, against the suite's llama-server
(tests/llama_server.py) whose answers depend on which steps the prompt keeps; the figures
computed here by hand from the server's rules; a kill mid-run resumes with no finished
rollout made again."""

from __future__ import annotations

import json
import math
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.cli import main
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.judging.anchors import (
    Rollout,
    importances,
    kl_divergence,
    similar_by_words,
    word_overlap,
)
from bbm_tui.core.types import SplitRule
from tests.cli_helpers import launch
from tests.llama_server import FakeLlamaServer

QUESTION = "((1 + 1) * 2) = ?"
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
STEPS = [f"Step {word}: looking at the {word} numbers with care." for word in WORDS]
REASONING = "".join(step + "\n\n" for step in STEPS)
M = 4


def rule_answer(kept: int, rollout: int) -> str:
    """The server's rules: keeping step 3 (index 2) makes the answer right, but for one
    rollout in four until step 8 (index 7) is kept too; without step 3, only rollout 0 is
    right."""
    if kept > 7:
        return "4"
    if kept > 2:
        return "4" if rollout < 3 else "6"
    return "4" if rollout == 0 else "5"


def rule_first_step(kept: int, rollout: int) -> str:
    """Even rollouts write the original step again; odd ones something else."""
    if kept < len(STEPS) and rollout % 2 == 0:
        return STEPS[kept]
    return f"Different idea number {rollout}."


def script(server: FakeLlamaServer) -> None:
    def continuation(prompt: str, body: dict[str, Any]) -> str:
        kept_text = prompt.split("<think>\n", 1)[1]
        kept = len(split_text(kept_text, SplitRule.PARAGRAPH))
        rollout = body["seed"]  # rollout r is sent with seed r
        return (rule_first_step(kept, rollout) + "\n\n</think>\n\nSo the answer is "
                + rule_answer(kept, rollout))

    server.continuation = continuation


def trace_file(path: Path) -> Path:
    row = {"input": QUESTION, "steps": STEPS, "answer": "4", "target": "4",
           "mistake_index": None, "mode": "thinking", "split": "paragraph",
           "reasoning": REASONING, "reasoning_kind": "raw"}
    path.write_text(json.dumps(row) + "\n")
    return path


def anchors_args(server: FakeLlamaServer, source: Path, out: Path) -> list[str]:
    return ["anchors", "--model", "openai/tiny", "--api-base", server.base_url, "--input",
            str(source), "--task", "multistep_arithmetic", "--rollouts", str(M), "--out",
            str(out), "--no-progress", "--json", "--concurrency", "4"]


def accuracy(kept: int) -> float:
    return sum(rule_answer(kept, rollout) == "4" for rollout in range(M)) / M


def test_importances_against_a_server_whose_answers_depend_on_the_steps_kept(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script(llama)
    out = tmp_path / "rollouts.jsonl"
    code = main(anchors_args(llama, trace_file(tmp_path / "in.jsonl"), out))
    captured = capsys.readouterr()
    assert code == 0, captured.err
    # Before it starts: the calls, (10 + 1) prefixes x 4, and the estimate.
    assert "44 calls" in captured.err
    assert len(llama.prompts) == 44 and len(out.read_text().splitlines()) == 44
    (trace,) = json.loads(captured.out)["traces"]
    steps = trace["steps"]
    assert json.loads(captured.out)["meaning_by"].startswith("word overlap")
    # By hand: 1/4 right without step 3, 3/4 with it, all right with step 8 too.
    assert [accuracy(kept) for kept in range(11)] == [0.25] * 3 + [0.75] * 5 + [1.0] * 3
    expected = [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.25, 0.0, 0.0]
    assert [step["importance"] for step in steps] == pytest.approx(expected)
    assert steps[2]["answers_kept"] == {"4": 3, "6": 1}
    assert steps[2]["answers_resampled"] == {"4": 1, "5": 3}
    # Step 3's resamples that differ in meaning: rollouts 1 and 3, both "5"; kept: 4 4 4 6.
    # Smoothed by one count of each of 4, 5, 6: P = (1, 3, 1)/5, Q = (4, 1, 2)/7.
    assert steps[2]["different"] == 2
    p = {"4": 1 / 5, "5": 3 / 5, "6": 1 / 5}
    q = {"4": 4 / 7, "5": 1 / 7, "6": 2 / 7}
    by_hand = sum(p[answer] * math.log(p[answer] / q[answer]) for answer in p)
    assert steps[2]["counterfactual_kl"] == pytest.approx(by_hand)
    # The last step: its resamples (prefix 9) are all right, as are those keeping it.
    assert steps[9]["accuracy_kept"] == steps[9]["accuracy_resampled"] == 1.0
    per_step = [json.loads(line) for line in
                (tmp_path / "rollouts.steps.jsonl").read_text().splitlines()]
    assert [row["importance"] for row in per_step] == pytest.approx(expected)
    assert (tmp_path / "rollouts.steps.jsonl").stat().st_mode & 0o777 == 0o600


def test_a_second_run_makes_no_rollout_again(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script(llama)
    out = tmp_path / "rollouts.jsonl"
    source = trace_file(tmp_path / "in.jsonl")
    assert main(anchors_args(llama, source, out)) == 0
    capsys.readouterr()
    llama.requests.clear()
    assert main(anchors_args(llama, source, out)) == 0
    assert llama.prompts == []
    (trace,) = json.loads(capsys.readouterr().out)["traces"]
    assert trace["steps"][2]["importance"] == pytest.approx(0.5)


def test_a_kill_mid_run_resumes_without_repeating_a_finished_rollout(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script(llama)
    llama.latency_s = 0.2
    out = tmp_path / "rollouts.jsonl"
    source = trace_file(tmp_path / "in.jsonl")
    child = launch(*anchors_args(llama, source, out))
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 8:
                break
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(30)
    finished = [json.loads(line) for line in out.read_text().splitlines()
                if line.endswith("}")]
    assert 8 <= len(finished) < 44
    done = {(row["prefix"], row["rollout"]) for row in finished}
    llama.requests.clear()
    llama.latency_s = 0.0
    assert main(anchors_args(llama, source, out)) == 0
    again = [(len(split_text(record.body["prompt"].split("<think>\n", 1)[1],
                             SplitRule.PARAGRAPH)), record.body["seed"])
             for record in llama.requests if record.path == "/completion"]
    assert not done & set(again)
    assert len(again) == 44 - len(done)
    (trace,) = json.loads(capsys.readouterr().out)["traces"]
    assert [step["importance"] for step in trace["steps"]] == pytest.approx(
        [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.25, 0.0, 0.0])


def test_the_figures_by_hand_on_made_up_rollouts() -> None:
    rollouts = [Rollout(0, "A new plan entirely.", "5", False),
                Rollout(0, "Step one: add.", "4", True),
                Rollout(1, "x", "4", True), Rollout(1, "y", None, False)]
    (step,) = importances(["Step one: add."], rollouts, similar_by_words)
    assert (step.accuracy_kept, step.accuracy_resampled, step.importance) == (0.5, 0.5, 0.0)
    assert step.answers_kept == {"4": 1, "(no answer)": 1}
    assert step.different == 1
    assert step.counterfactual_kl == pytest.approx(kl_divergence({"5": 1},
                                                                 {"4": 1, "(no answer)": 1}))
    assert kl_divergence({}, {"4": 1}) is None
    assert word_overlap("Step one: add.", "step ONE add") == 1.0


def test_more_calls_than_the_limit_are_refused_without_yes_where_nobody_can_answer(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    args = anchors_args(llama, trace_file(tmp_path / "in.jsonl"), tmp_path / "o.jsonl")
    args[args.index("--rollouts") + 1] = "50"  # 550 calls
    assert main(args) != 0
    assert "550 calls" in capsys.readouterr().err
    assert llama.requests == []


def test_a_provider_that_cannot_go_on_is_refused_before_any_request(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    code = main(["anchors", "--model", "anthropic/claude-sonnet-4-5", "--input",
                 str(trace_file(tmp_path / "in.jsonl")), "--task", "multistep_arithmetic",
                 "--rollouts", "2", "--out", str(tmp_path / "o.jsonl"), "--no-progress"])
    assert code != 0
    assert "Anthropic's API cannot go on" in capsys.readouterr().err
    assert not (tmp_path / "o.jsonl").exists()


def test_meaning_judged_by_an_embedding_model_when_named(
        llama: FakeLlamaServer, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    script(llama)
    # The embedding model finds "Different idea number 3." the same as the step it replaced
    # (cosine 0.99) and "... number 1." far from it (cosine 0): one resample differs.
    llama.embed = lambda text: ([0.0, 1.0] if text.endswith("number 1.")
                                else [1.0, 0.1] if text.endswith("number 3.") else [1.0, 0.0])
    out = tmp_path / "rollouts.jsonl"
    args = anchors_args(llama, trace_file(tmp_path / "in.jsonl"), out)
    code = main([*args, "--embedding-model", "openai/embedder", "--embedding-api-base",
                 llama.base_url])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    result = json.loads(captured.out)
    assert result["meaning_by"].startswith("embedding openai/embedder (cosine < 0.8)")
    step = result["traces"][0]["steps"][2]
    assert step["different"] == 1
    assert step["counterfactual_kl"] == pytest.approx(kl_divergence({"5": 1},
                                                                    {"4": 3, "6": 1}))
    assert any(record.path == "/v1/embeddings" for record in llama.requests)
