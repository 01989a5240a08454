"""What the commands say, as a person reads it (issue 34, item 13): a line of information is a
note, not an error; `agreement --consensus` refusing an existing file names its own flags;
`export --format dpo` says why it wrote no pair; the CSV exports credit each label to who made
it (a session's own, an imported file's), not all to "me"."""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from pathlib import Path

from bbm_tui.cli import main
from bbm_tui.core.annotation.export import import_rows
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import TraceSession
from tests.cli_helpers import run_here

TASK = "word_sorting"


def dataset_file(tmp_path: Path, name: str, labels: Sequence[int | None]) -> Path:
    path = tmp_path / name
    path.write_text("".join(
        json.dumps({**row.to_json(), "mistake_index": label}) + "\n"
        for row, label in zip(bundled_rows(TASK), labels, strict=False)))
    return path


def test_a_line_of_information_is_a_note_not_an_error(tmp_path: Path) -> None:
    source = dataset_file(tmp_path, "rows.jsonl", [0, None])
    result = run_here(("stats", str(source), "--plot"))
    assert result.code == 0, result
    assert "note: charts left out: the output is not a terminal" in result.err, result.err
    assert "bbm-tui:" not in result.err


def test_agreement_consensus_refuses_an_existing_file_in_its_own_words(
        tmp_path: Path) -> None:
    files = [str(dataset_file(tmp_path, f"{name}.jsonl", labels))
             for name, labels in (("alice", [0, None]), ("bob", [0, 1]))]
    consensus = tmp_path / "consensus.jsonl"
    consensus.write_text("kept\n")
    result = run_here(("agreement", *files, "--consensus", str(consensus)))
    assert result.code == 2, result
    assert "agreement --consensus replaces a file whole" in result.err, result.err
    assert "choose another --consensus file" in result.err
    assert "export" not in result.err and "--out" not in result.err
    assert consensus.read_text() == "kept\n"


def test_dpo_with_no_pair_says_why(tmp_path: Path) -> None:
    out = tmp_path / "pairs.jsonl"
    result = run_here(("export", "--format", "dpo", "--out", str(out)))
    assert result.code == 0, result
    assert "0 preference pairs written" in result.err and "the store has no sessions" in result.err
    with Store.open() as store:
        import_rows(store, TASK, bundled_rows(TASK)[:3])
    flagged = sum(row.mistake_index is not None for row in bundled_rows(TASK)[:3])
    result = run_here(("export", "--format", "dpo", "--out", str(out), "--force"))
    assert result.code == 0, result
    assert (f"{flagged} flagged thought(s), none with a backtracked or rewritten version "
            "(b or w in the app, or `bbm-tui backtrack`)") in result.err, result.err


def test_the_csv_credits_imported_and_own_labels_apart(tmp_path: Path) -> None:
    with Store.open() as store:
        imported = import_rows(store, TASK, bundled_rows(TASK)[:2]).imported
        # The second one relabelled in the app: the person's own label now.
        relabelled = TraceSession.load(store, imported[1])
        relabelled.flag_mistake(1)
    for fmt in ("csv", "csv-steps"):
        out = tmp_path / f"labels.{fmt}"
        assert main(["export", "--format", fmt, "--out", str(out)]) == 0
        rows = list(csv.DictReader(out.open()))
        credit = {int(row["session_id"]): row["annotator"] for row in rows}
        assert credit == {imported[0]: "imported", imported[1]: "app"}, (fmt, credit)
