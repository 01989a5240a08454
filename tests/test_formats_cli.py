"""The field's formats through the commands: `import` then `export` to the same format keeps
every field, `stats` counts any format (with the histogram of first mistakes), `--format` and
detection on every command that reads datasets, and the two exports made from branches: DPO
pairs and MR-BEN's rectified step.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core.annotation.export import import_rows
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.dataset.formats.documents import iter_rows
from bbm_tui.core.store import Store, default_path
from bbm_tui.core.trace.session import TraceSession
from tests.test_formats import FILES

# What `export` writes for each fixture: every row but those the format cannot hold.
WRITTEN = {"processbench": 4, "prm800k": 4, "mr-gsm8k": 3, "mr-ben": 3, "math-shepherd": 4,
           "prmbench": 4, "trl": 3}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_import_then_export_to_the_same_format_keeps_every_field(
        tmp_path: Path, capsys, fmt: str) -> None:
    code, _, err = run(capsys, "import", str(FILES[fmt]))
    assert code == 0, err
    out = tmp_path / f"out-{fmt}"
    code, _, err = run(capsys, "export", "--format", fmt, "--out", str(out))
    assert code == 0, err
    assert err.startswith(f"{WRITTEN[fmt]} traces written to {out}")
    originals = [value for _line, value in iter_rows(FILES[fmt])]
    exported = [value for _line, value in iter_rows(out)]
    assert len(exported) == len(originals)
    for original, written in zip(originals, exported, strict=True):
        assert list(written) == list(original)
        for key, value in original.items():
            assert written[key] == value, (fmt, key)


def test_round_trip_values_written_out(tmp_path: Path, capsys) -> None:
    """A few of the fields above, as literals: the ids, labels and carried texts."""
    for fmt in ("processbench", "prm800k", "mr-ben"):
        assert run(capsys, "import", str(FILES[fmt]))[0] == 0
    out = tmp_path / "pb.jsonl"
    assert run(capsys, "export", "--format", "processbench", "--out", str(out),
               "--session", "1", "2", "3", "4")[0] == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["id"], row["generator"], row["label"], row["final_answer_correct"])
            for row in rows] == [
        ("gsm8k-0", "Qwen2-7B-Instruct", 1, False),
        ("gsm8k-1", "Llama-3.1-8B-Instruct", -1, True),
        ("math-7", "Qwen2.5-Math-7B-Instruct", 0, False),
        ("math-8", "Meta-Llama-3-70B-Instruct", 2, False)]
    out = tmp_path / "prm.jsonl"
    assert run(capsys, "export", "--format", "prm800k", "--out", str(out),
               "--session", "5", "6", "7", "8")[0] == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [row["label"]["finish_reason"] for row in rows] == [
        "found_error", "solution", "found_error", "give_up"]
    assert [[c["rating"] for c in rows[0]["label"]["steps"][2]["completions"]]] == [[-1, 0]]
    out = tmp_path / "ben.json"
    assert run(capsys, "export", "--format", "mr-ben", "--out", str(out),
               "--session", "9", "10", "11")[0] == 0
    grouped = json.loads(out.read_text(encoding="utf-8"))
    second = grouped["1f6d61d1-b627-4186-b44e-5a662a906ef9"][1]
    assert second["Model_Solution_First_Error_Step"] == "1"
    assert second["Model_Solution_Steps"][2] == ""  # the blank line put back
    assert second["Model_Solution_Error_Reason"][1] == (
        "Kepler's third law has M in it: the period is not independent of M.\n")


def test_a_field_format_exported_as_bbm_rows_keeps_its_origin(tmp_path: Path, capsys) -> None:
    assert run(capsys, "import", str(FILES["trl"]))[0] == 0
    bbm = tmp_path / "bbm.jsonl"
    assert run(capsys, "export", "--out", str(bbm))[0] == 0
    rows = [json.loads(line) for line in bbm.read_text(encoding="utf-8").splitlines()]
    assert [row["mistake_index"] for row in rows] == [None, 0, 2]
    assert rows[1]["origin"]["format"] == "trl"
    # Read back as BBM rows, they are TRL's again (the task and the rows).
    trl = tmp_path / "again.jsonl"
    with Store.open(tmp_path / "other.sqlite3") as store:
        from bbm_tui.core.annotation.export import export, load_traces
        from bbm_tui.core.dataset import read_input_rows

        ids = import_rows(store, "trl", read_input_rows(bbm)).imported
        export(load_traces(store, ids), trl, "trl")
    assert trl.read_text(encoding="utf-8") == FILES["trl"].read_text(encoding="utf-8")


def test_stats_counts_any_format_with_the_histogram(capsys) -> None:
    code, out, err = run(capsys, "stats", "--json", str(FILES["processbench"]),
                         str(FILES["prm800k"]), str(FILES["prmbench"]))
    assert code == 0, err
    result = json.loads(out)
    assert result["tasks"]["processbench"] == {
        "traces": 4, "correct": 1, "with_mistake": 3, "without_mistake": 1,
        "mean_steps": 3.0, "unlabelled": 0}
    assert result["tasks"]["prm800k"] == {
        "traces": 4, "correct": 2, "with_mistake": 2, "without_mistake": 1,
        "mean_steps": 3.0, "unlabelled": 1}
    assert result["files"][str(FILES["prmbench"])] == {
        "traces": 4, "correct": 0, "with_mistake": 3, "without_mistake": 1,
        "mean_steps": 3.25, "unlabelled": 0, "format": "prmbench"}
    histogram = result["mistake_index_histogram"]
    assert histogram["tasks"] == {"processbench": {"0": 1, "1": 1, "2": 1},
                                  "prm800k": {"0": 1, "2": 1},
                                  "prmbench": {"0": 1, "1": 1, "2": 1}}
    assert histogram["files"][str(FILES["prm800k"])] == {"0": 1, "2": 1}
    assert histogram["overall"] == {"0": 3, "1": 2, "2": 3}


def test_stats_table_prints_the_files_and_the_histogram(capsys) -> None:
    code, out, _ = run(capsys, "stats", str(FILES["math-shepherd"]))
    assert code == 0
    assert "Traces per file" in out and "First mistake at thought N" in out
    histogram = out.split("First mistake at thought N")[1]
    rows = [line.split("│")[1:-1] for line in histogram.splitlines() if line.startswith("│")]
    assert [cell.strip() for cell in rows[0]][:4] == ["math-shepherd", "1", "0", "1"]


def test_task_names_the_files_questions_task(capsys) -> None:
    code, out, _ = run(capsys, "stats", "--json", "--task", "prm800k",
                       str(FILES["processbench"]))
    assert code == 0
    assert list(json.loads(out)["tasks"]) == ["prm800k"]


@pytest.mark.parametrize("command", [
    ("stats",), ("import",), ("verify",), ("agreement",),
    ("find", "--method", "critic", "--out", "p.jsonl", "--input"),
    ("backtrack", "--locations", "gold", "--out", "b.jsonl", "--input"),
    ("annotate", "--annotator", "ana"),
])
def test_every_command_that_reads_datasets_takes_format(
        capsys, tmp_path: Path, command: tuple[str, ...]) -> None:
    """Named with --format, a file of another format is one message naming file, line and
    format, from every command that reads datasets."""
    args = [*command, str(FILES["math-shepherd"]), "--format", "processbench"]
    if command[0] == "agreement":
        args.insert(2, str(FILES["trl"]))
    code, out, err = run(capsys, *args)
    assert code == 2
    assert "Traceback" not in err and out == ""
    assert err == (f"bbm-tui: {FILES['math-shepherd']}:1: ProcessBench row: missing keys "
                   "'problem', 'steps'\n")


def test_a_file_of_no_known_format_is_named(tmp_path: Path, capsys) -> None:
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"question": "q", "answer": "a"}\n', encoding="utf-8")
    code, _, err = run(capsys, "stats", str(odd))
    assert code == 2
    assert err == (f"bbm-tui: {odd}:1: cannot tell which dataset format this is: its keys "
                   "are 'question', 'answer'; the formats: bbm, processbench, prm800k, "
                   "mr-gsm8k, mr-ben, math-shepherd, prmbench, trl, reasoning, deltabench "
                   "(--format FORMAT says which)\n")


def _rewrite(store: Store, session_id: int, number: int, text: str) -> None:
    trace = TraceSession.load(store, session_id)

    async def go() -> None:
        async for _event in trace.rewrite(number, text, generate=False):
            pass

    asyncio.run(go())


def test_dpo_pairs_from_a_rewritten_branch_that_reached_the_answer(
        tmp_path: Path, capsys) -> None:
    """Only where the original was flagged and the new branch reached the right answer."""
    rows = [row for row in bundled_rows("multistep_arithmetic") if row.mistake_index == 1][:2]
    with Store.open(default_path()) as store:
        right, wrong = import_rows(store, "multistep_arithmetic", rows).imported
        _rewrite(store, right, 2, f"So the answer is {rows[0].target}")
        _rewrite(store, wrong, 2, "So the answer is 12345.")  # a wrong answer: no pair
        flagged = TraceSession.load(store, right)
        original_step = rows[0].steps[1]
    out = tmp_path / "dpo.jsonl"
    code, _, err = run(capsys, "export", "--format", "dpo", "--out", str(out))
    assert code == 0, err
    assert err == f"1 preference pair written to {out}\n"
    [pair] = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert pair["prompt"] == (f"Q: {rows[0].input}\nThought 1: {rows[0].steps[0]}\n"
                              "Thought 2:")
    assert pair["chosen"] == f" So the answer is {rows[0].target}"
    assert pair["rejected"] == f" {original_step}"
    assert pair["bbm_tui"] == {"session_id": right, "task": "multistep_arithmetic",
                               "thought": 2, "flagged_by": ["person:me"],
                               "chosen_origin": "edit"}
    assert flagged.id == right


def test_mr_ben_takes_the_rectified_step_from_a_rewritten_branch(
        tmp_path: Path, capsys) -> None:
    assert run(capsys, "import", str(FILES["mr-ben"]))[0] == 0
    corrected = "Step 3: The equation gives 2 moles of water for 2 moles of hydrogen."
    with Store.open(default_path()) as store:
        _rewrite(store, 3, 3, corrected)  # the new branch is on show now, unlabelled
    out = tmp_path / "ben.json"
    assert run(capsys, "export", "--format", "mr-ben", "--out", str(out))[0] == 0
    solution = json.loads(out.read_text(encoding="utf-8"))[
        "84d494ab-8937-45e2-a49d-e6720e9f88ad"][0]
    assert solution["Model_Solution_First_Error_Step"] == "3"  # the flagged branch
    assert solution["Model_Solution_Steps"][4] == (
        "Step 3: Each mole of oxygen gives one mole of water, so 1 mole of water forms.")
    assert solution["Model_Solution_Rectified_First_Error_Step"] == [
        "Step 3: The equation gives 2 moles of water from 2 moles of hydrogen.", corrected]
