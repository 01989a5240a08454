"""DPO pairs from the store (issue 33, item 12): `backtrack --locations gold` sessions keep
the row's gold label, so the story (backtrack at the gold mistakes, then export the pairs)
gives pairs; a session of a task whose file is not loaded now exports with the definition it
keeps, instead of refusing the whole store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.store import Store
from tests.openai_server import FakeOpenAI
from tests.test_backtrack import responder
from tests.test_backtrack_cli import dataset_file
from tests.test_task_cli import labelled_file
from tests.test_task_cli import task_file as task_file  # a fixture, used by name


def test_backtracking_at_the_gold_mistakes_exports_dpo_pairs(
    openai_server: FakeOpenAI, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    openai_server.responder = responder()
    source = dataset_file(tmp_path / "multistep_arithmetic.jsonl")
    code = main(["backtrack", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--input", str(source), "--locations", "gold", "--no-progress",
                 "--out", str(tmp_path / "bt.jsonl")])
    assert code == 0, capsys.readouterr().err
    with Store.open() as store:
        [summary] = store.sessions()
        assert summary.session.gold_mistake_index == 1
    pairs = tmp_path / "pairs.jsonl"
    code = main(["export", "--format", "dpo", "--out", str(pairs)])
    assert code == 0, capsys.readouterr().err
    [pair] = [json.loads(line) for line in pairs.read_text().splitlines()]
    assert pair["bbm_tui"]["thought"] == 2
    assert pair["chosen"] != pair["rejected"]


def test_dpo_export_reads_a_sessions_own_task_definition(
    tmp_path: Path, task_file: Path, capsys: pytest.CaptureFixture
) -> None:
    code = main(["import", "--task-file", str(task_file), str(labelled_file(tmp_path))])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    # The task file is not given now: the sessions keep their definition.
    pairs = tmp_path / "pairs.jsonl"
    code = main(["export", "--format", "dpo", "--out", str(pairs)])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "unknown task" not in err
    assert pairs.read_text() == ""  # no backtracked branch: no pair, but no refusal
