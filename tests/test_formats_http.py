"""A ProcessBench-format file end to end over HTTP: `find --method critic` against the local
OpenAI-compatible server, its ProcessBench F1 checked against one worked out here from the
PREDS (ProcessBench's "Average F1": the mean of the subsets' F1s, each the harmonic mean of
the accuracy on the traces with an error and on those without); then `annotate` on the PREDS
in the app, the critic's answer as the suggestion, and the label exported back to
ProcessBench with the rows' own ids."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

from textual.widgets import Static

from bbm_tui.cli import main
from bbm_tui.core.annotation.queue import read_queue_file
from bbm_tui.core.store import Store
from bbm_tui.ui.app import AnnotateRequest
from tests.fake_server import prompt_of
from tests.openai_server import FakeOpenAI, Reply
from tests.ui.ui_helpers import SIZE, make_app, wait_for

# (id, label, the critic's answer): 0-based, -1 for none, as ProcessBench writes them.
ROWS = [
    ("gsm8k-0", 0, 0), ("gsm8k-1", 1, 1), ("gsm8k-2", 2, 1), ("gsm8k-3", -1, -1),
    ("gsm8k-4", -1, 2),
    ("math-0", 1, 1), ("math-1", 2, 0), ("math-2", -1, -1), ("math-3", -1, -1),
    ("math-4", -1, -1),
]


def processbench_file(tmp_path: Path) -> Path:
    rows = [{"id": identifier, "generator": "Qwen2-7B-Instruct",
             "problem": f"Problem {identifier}: what is {number} + {number}?",
             "steps": [f"We add {number} and {number}.", f"That is {2 * number}.",
                       f"So the answer is \\boxed{{{2 * number}}}."],
             "final_answer_correct": label == -1, "label": label}
            for number, (identifier, label, _answer) in enumerate(ROWS)]
    path = tmp_path / "processbench.json"
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    return path


def critic(path: str, body: dict) -> Reply:
    """The critic's answer for the trace asked about: its thought number (1-based), or -1."""
    asked = re.search(r"Problem ([\w-]+):", prompt_of(body))
    answer = next(answer for identifier, _label, answer in ROWS
                  if asked and identifier == asked.group(1))
    return Reply(text="Each thought checked in turn.\n\\boxed{"
                 f"{answer + 1 if answer >= 0 else -1}}}")


def f1_by_hand(preds: list[dict]) -> float:
    subsets: dict[str, list[dict]] = {}
    for pred in preds:
        subsets.setdefault(pred["origin"]["fields"]["id"].split("-")[0], []).append(pred)
    scores = []
    for rows in subsets.values():
        wrong = [r for r in rows if r["mistake_index"] is not None]
        right = [r for r in rows if r["mistake_index"] is None]
        acc_wrong = 100 * sum(r["predicted_mistake_index"] == r["mistake_index"]
                              for r in wrong) / len(wrong)
        acc_right = 100 * sum(r["predicted_mistake_index"] is None for r in right) / len(right)
        scores.append(2 * acc_wrong * acc_right / (acc_wrong + acc_right))
    return sum(scores) / len(scores)


def test_find_critic_on_processbench_over_http(openai_server: FakeOpenAI, tmp_path: Path,
                                              capsys) -> None:
    openai_server.responder = critic
    source = processbench_file(tmp_path)
    preds = tmp_path / "preds.jsonl"
    code = main(["find", "--model", "openai/critic", "--api-base", openai_server.base_url,
                 "--method", "critic", "--input", str(source), "--out", str(preds),
                 "--json", "--no-progress"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(openai_server.requests) == 10
    # The critic's prompt: our template with the format's task description.
    assert "[Task]\n\nA competition or grade-school mathematics problem" in prompt_of(
        openai_server.requests[0].body)
    result = json.loads(captured.out)
    lines = [json.loads(line) for line in preds.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 10 and all(line["parsed"] for line in lines)
    by_hand = f1_by_hand(lines)
    # gsm8k: with an error 2 of 3 right, without 1 of 2: F1 57.14; math: 1 of 2 and 3 of 3:
    # 66.67; ProcessBench's Average F1 is their mean (pooled, it would be 68.57).
    assert round(by_hand, 2) == 61.90
    assert result["overall"]["processbench_f1"] == round(by_hand, 2)
    assert result["tasks"]["processbench/gsm8k"]["processbench_f1"] == 57.14
    assert result["tasks"]["processbench/math"]["processbench_f1"] == 66.67
    # The table says the same.
    assert main(["find", "--model", "openai/critic", "--api-base", openai_server.base_url,
                 "--method", "critic", "--input", str(source), "--out", str(preds),
                 "--no-progress"]) == 0
    table = capsys.readouterr().out
    overall = next(line for line in table.splitlines() if "overall" in line)
    assert "61.90" in overall
    assert len(openai_server.requests) == 10  # read back from PREDS: no call made again


async def test_annotate_the_critics_preds_and_export_to_processbench(
        openai_server: FakeOpenAI, tmp_path: Path, capsys) -> None:
    openai_server.responder = critic
    source = processbench_file(tmp_path)
    preds = tmp_path / "preds.jsonl"
    # In a thread: the command runs its own event loop, and this test's is running.
    assert await asyncio.to_thread(main, [
        "find", "--model", "openai/critic", "--api-base", openai_server.base_url, "--method",
        "critic", "--input", str(source), "--out", str(preds), "--no-progress",
        # PREDS rows are written as traces finish; one at a time, the queue's order is the
        # file's, which the keys below rest on.
        "--concurrency", "1"]) == 0
    capsys.readouterr()
    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(preds)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
        await pilot.app.workers.wait_for_complete()
        assert app.screen.queue.current.task == "processbench"
        await pilot.press("h")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        suggestion = str(app.screen.query_one("#a-suggestion", Static).render())
        assert "openai/critic: Thought 1" in suggestion
        for key in ("x", "enter", "c", "x", "enter"):
            await pilot.press(key)
            await pilot.app.workers.wait_for_complete()
    with Store.open() as store:
        assert [(label.session_id, label.mistake_index, label.assisted)
                for label in store.annotator_labels()] == [(1, 0, True), (2, 1, False)]
    out = tmp_path / "labels.jsonl"
    assert main(["export", "--format", "processbench", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["id"], row["generator"], row["label"]) for row in rows] == [
        ("gsm8k-0", "Qwen2-7B-Instruct", 0), ("gsm8k-1", "Qwen2-7B-Instruct", 1)]
    assert rows[0]["problem"] == "Problem gsm8k-0: what is 0 + 0?"
