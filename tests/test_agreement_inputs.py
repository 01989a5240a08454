"""`bbm-tui agreement` over files that repeat or disagree with themselves, through the real
command line: a file given twice (by another path, or the same bytes under another name) is
refused, so that one annotator is never counted as two; one annotator's file that labels a
trace twice, differently, is said (both lines named) and that trace left out of that
annotator's labels; alpha and kappa that are undefined because every label is the same say
so, with the raw agreement beside them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.annotation.agreement import agreement_report
from bbm_tui.core.dataset import bundled_rows
from tests.strict_json import strict_json_lines

ROWS = bundled_rows("word_sorting")[:4]


def labels_file(path: Path, labels: list[int | None], rows=ROWS) -> Path:
    path.write_text("".join(json.dumps({**row.to_json(), "mistake_index": label}) + "\n"
                            for row, label in zip(rows, labels, strict=True)))
    return path


def agreement(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = main(["agreement", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("how", ["another path", "a symlink", "a copy"])
def test_a_file_given_twice_is_refused(tmp_path: Path, capsys, how: str) -> None:
    """Before: `agreement h1.jsonl ./h1.jsonl` gave alpha 1.000 and kappa 1.000 (one
    annotator agreeing with itself), and --consensus counted its vote twice (1:1 became 2:1)."""
    alice = labels_file(tmp_path / "alice.jsonl", [1, None, 0, 3])
    bob = labels_file(tmp_path / "bob.jsonl", [1, 2, 0, None])
    if how == "another path":
        again = tmp_path / "sub" / ".." / "alice.jsonl"
        (tmp_path / "sub").mkdir()
    elif how == "a symlink":
        again = tmp_path / "h1.jsonl"
        again.symlink_to(alice)
    else:
        again = tmp_path / "alice-copy.jsonl"
        again.write_bytes(alice.read_bytes())
    out = tmp_path / "consensus.jsonl"
    code, printed, err = agreement(capsys, str(alice), str(again), str(bob), "--consensus",
                                   str(out))
    assert code == 2 and printed == "" and not out.exists()
    assert err.startswith("bbm-tui: ") and err.count("\n") == 1, err
    assert str(alice) in err and str(again) in err
    if how == "a copy":
        assert "hold the same bytes" in err
    else:
        assert "are the same file" in err
    assert "each annotator's file once" in err.lower()


def test_one_file_labelling_a_trace_twice_differently_is_said_and_left_out(
    tmp_path: Path, capsys
) -> None:
    """alice's file labels the first trace twice, Thought 2 on line 1 and no mistake on line
    5. Before, the last line silently won. Now both lines are named, and the trace is left out
    of alice's labels (bob's label of it stands); a repeat that agrees is one label."""
    rows = [*ROWS, ROWS[0], ROWS[2]]
    alice = labels_file(tmp_path / "alice.jsonl", [1, None, 0, 3, None, 0], rows)
    bob = labels_file(tmp_path / "bob.jsonl", [1, 2, 0, None])
    code, printed, err = agreement(capsys, str(alice), str(bob), "--json")
    assert code == 0
    assert err == (f"note: {alice}: lines 1 and 5 label the same trace differently "
                   "(Thought 2, no mistake); that trace is left out of alice's labels\n")
    result = json.loads(printed)
    # Shared traces: 2, 3, 4 (the first is bob's alone now).
    assert result["n"] == 3
    expected = agreement_report({"alice": {1: None, 2: 0, 3: 3}, "bob": {1: 2, 2: 0, 3: None}})
    assert result["krippendorff_alpha"] == pytest.approx(expected.krippendorff_alpha)


def test_every_label_the_same_says_alpha_and_kappa_are_undefined(
    tmp_path: Path, capsys
) -> None:
    """Before: alpha "—" and kappa "—", and no word of why. (bob's file lists the traces in
    another order: the same bytes would be one file given twice.)"""
    alice = labels_file(tmp_path / "alice.jsonl", [None, None, None, None])
    bob = labels_file(tmp_path / "bob.jsonl", [None, None, None, None], ROWS[::-1])
    code, printed, _ = agreement(capsys, str(alice), str(bob))
    assert code == 0
    assert ("Krippendorff's alpha (nominal): undefined: every label is the same (no mistake), "
            "so chance agreement is total; raw agreement 100.0% over 4 traces") in printed
    assert ("Cohen's kappa alice / bob: undefined: both gave every trace they share the same "
            "label (no mistake); raw agreement 100.0%") in printed
    code, printed, _ = agreement(capsys, str(alice), str(bob), "--json")
    result = json.loads(printed)
    assert result["krippendorff_alpha"] is None and result["raw_agreement"] == 100.0
    assert result["cohen_raw_agreement"] == {"alice|bob": 100.0}
    assert result["undefined"] == {
        "krippendorff_alpha": "every label is the same (no mistake)",
        "alice|bob": "both gave every trace they share the same label (no mistake)"}


def test_no_shared_trace_says_why_too(tmp_path: Path, capsys) -> None:
    alice = labels_file(tmp_path / "alice.jsonl", [1, 0], ROWS[:2])
    bob = labels_file(tmp_path / "bob.jsonl", [1, 0], ROWS[2:])
    code, printed, _ = agreement(capsys, str(alice), str(bob))
    assert code == 0
    assert ("Krippendorff's alpha (nominal): undefined: no trace was labelled by two "
            "annotators") in printed
    assert "Cohen's kappa alice / bob: undefined: they share no labelled trace" in printed


def test_the_consensus_file_counts_each_annotator_once(tmp_path: Path, capsys) -> None:
    alice = labels_file(tmp_path / "alice.jsonl", [1, None, 0, 3])
    bob = labels_file(tmp_path / "bob.jsonl", [2, None, 0, 3])
    out = tmp_path / "consensus.jsonl"
    code, _, _ = agreement(capsys, str(alice), str(bob), "--consensus", str(out))
    assert code == 0
    written = strict_json_lines(out)
    assert "mistake_index" not in written[0]  # 1:1, a tie: unlabelled
