"""The task verifiers as a judge (issue 13, items 2-3): `find --method verify` (no model, no
key, the paper's metrics) and `verify --report` (where the verifier and the label part)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.dataset import bundled_path, bundled_rows, read_rows
from bbm_tui.core.judging.verifier import verify
from bbm_tui.core.tasks import TASK_NAMES

# The verifiers' first-mistake accuracy against the gold labels (docs/fidelity.md, "Task
# verifiers").
ACCURACY = {"word_sorting": 96.33, "tracking_shuffled_objects": 95.67,
            "logical_deduction": 82.0, "multistep_arithmetic": 91.67, "dyck_languages": 98.48}


def test_find_method_verify_over_the_whole_dataset_needs_no_model(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "")  # no key anywhere: none is needed
    preds = tmp_path / "preds.jsonl"
    argv = ["find", "--method", "verify", "--model", "openai/no-such-model", "--input",
            *[str(bundled_path(task)) for task in TASK_NAMES], "--out", str(preds),
            "--no-progress", "--json"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    scores = json.loads(captured.out)
    assert {task: scores["tasks"][task]["accuracy"] for task in TASK_NAMES} == ACCURACY
    assert "0 calls" in captured.err
    rows = read_rows(preds)
    assert len(rows) == 2186
    assert {(row.extra["method"], row.extra["model"]) for row in rows} == {("verify",
                                                                           "verifier")}
    first = rows[0]
    assert len(first.extra["raw"]) == len(first.steps)
    assert first.extra["raw"][0].startswith("Thought 1: ")


def test_a_verdict_per_step_with_its_reason() -> None:
    row = bundled_rows("word_sorting")[66]  # 'scorch' given the wrong letter number
    result, verdicts = verify("word_sorting", row.input, row.steps)
    assert result.mistake_index == 0 and result.parsed and result.calls == []
    assert "'scorch' starts with s (19)" in result.raw[0]
    assert [v.index for v in verdicts] == list(range(len(row.steps)))


def test_verify_report_lists_where_verifier_and_label_part(tmp_path: Path, capsys) -> None:
    rows = bundled_rows("multistep_arithmetic")
    agreeing = next(row for index, row in enumerate(rows)
                    if verify("multistep_arithmetic", row.input, row.steps)[0].mistake_index
                    == row.mistake_index)
    wrong_label = rows[1]  # labelled "no mistake", the verifier finds one (docs/fidelity.md)
    unlabelled = {k: v for k, v in rows[24].to_json().items() if k != "mistake_index"}
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in
                              [agreeing.to_json(), wrong_label.to_json(), unlabelled]))
    assert main(["verify", "--report", "--json", str(source)]) == 0
    report = json.loads(capsys.readouterr().out)["tasks"]["multistep_arithmetic"]
    assert (report["traces"], report["agree"]) == (2, 1)  # the unlabelled row left out
    [found] = report["disagreements"]
    assert (found["row"], found["gold"], found["verifier"]) == (1, None, 0)
    assert found["reason"] and found["step"] == wrong_label.steps[0]
    assert main(["verify", "--report", str(source)]) == 0
    text = capsys.readouterr().out
    assert "agrees with the label on 1 of 2 traces" in text and "no mistake" in text
