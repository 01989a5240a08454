"""A labelled trace with no steps keeps its label (issue 33, item 11): ProcessBench's
`label: -1` with no steps, and TRL's, PRM800K's and MR-BEN's equivalents, import labelled
("no mistake", as `stats` counts them) and export again, instead of coming in unlabelled
and being left out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli_helpers import run_all

ROWS = {
    "processbench": ("pb.jsonl", {"id": "gsm8k-0", "problem": "What is 1+1?", "steps": [],
                                  "label": -1, "final_answer_correct": True}),
    "trl": ("stepwise.jsonl", {"prompt": "What is 1+1?", "completions": [], "labels": []}),
    "prm800k": ("phase2.jsonl", {
        "labeler": "x", "timestamp": "t", "generation": None,
        "is_quality_control_question": False, "is_initial_screening_question": False,
        "question": {"problem": "What is 1+1?", "ground_truth_answer": "2"},
        "label": {"steps": [], "total_time": 1, "finish_reason": "solution"}}),
    "mr-ben": ("mrben.json", {"u1": [{
        "Question_UUID": "u1", "Subject": "x", "Question": "What is 1+1?",
        "Ground_Truth_Answer": "2", "Model_Solution_Steps": [],
        "Model_Solution_Correctness": "correct", "Model_Solution_First_Error_Step": "N/A",
        "Model_Solution_Error_Reason": ["N/A"],
        "Model_Solution_Rectified_First_Error_Step": ["N/A"]}]}),
}


@pytest.mark.parametrize("fmt", sorted(ROWS))
def test_a_labelled_trace_with_no_steps_keeps_its_label(tmp_path: Path, fmt: str) -> None:
    name, row = ROWS[fmt]
    source = tmp_path / name
    source.write_text(json.dumps(row) + "\n", encoding="utf-8")
    out = tmp_path / f"out-{name}"
    [stats, imported, exported] = run_all([
        ("stats", str(source), "--format", fmt, "--json"),
        ("import", str(source), "--format", fmt),
        ("export", "--format", fmt, "--out", str(out)),
    ])
    assert json.loads(stats.out)["overall"]["unlabelled"] == 0, stats.err
    assert imported.code == 0 and "unlabelled" not in imported.err, imported.err
    assert exported.code == 0, exported.err
    assert "1 trace written" in exported.err and "left out" not in exported.err
    text = out.read_text(encoding="utf-8")
    assert "What is 1+1?" in text
    if fmt == "processbench":
        assert json.loads(text)["label"] == -1
