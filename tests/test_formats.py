"""The field's step-level formats read into traces and written back (core/dataset/formats/).

The fixtures in tests/fixtures/formats/ were written by hand from each format's published
schema (the sources are named in each reader's docstring), with the edge cases: no mistake,
a mistake at the first step and at the last, a neutral PRM800K rating before a -1, a PRMBench
trace with two error steps, the Math-Shepherd tag inside a step's text. Every expected label
below is written out, not computed.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.core.dataset import DatasetError
from bbm_tui.core.dataset.formats import (
    FORMATS,
    detect_format,
    document_text,
    out_trace,
    read_dataset,
    write_rows,
)
from bbm_tui.core.dataset.formats.documents import iter_rows
from bbm_tui.core.tasks import get_task

FIXTURES = Path(__file__).parent / "fixtures" / "formats"
FILES = {
    "processbench": FIXTURES / "processbench.json",
    "prm800k": FIXTURES / "prm800k.jsonl",
    "mr-gsm8k": FIXTURES / "mr_gsm8k.json",
    "mr-ben": FIXTURES / "mr_ben.json",
    "math-shepherd": FIXTURES / "math_shepherd.jsonl",
    "prmbench": FIXTURES / "prmbench.jsonl",
    "trl": FIXTURES / "trl_stepwise.jsonl",
}
# (line the row starts on, labelled, mistake_index, number of steps) for every row.
EXPECTED = {
    "processbench": [(2, True, 1, 4), (15, True, None, 3), (27, True, 0, 2), (38, True, 2, 3)],
    # A neutral 0 before the -1 (row 1: the mistake is the -1, the third step); a phase 1
    # labeller's own step after two -1 completions (row 2: the solution went on with it);
    # the first (and last) step -1; a give_up with no -1: unlabelled.
    "prm800k": [(1, True, 2, 5), (2, True, None, 3), (3, True, 0, 1), (4, False, None, 3)],
    "mr-gsm8k": [(2, True, None, 4), (19, True, 0, 2), (34, True, 2, 3)],
    # Blank lines and the `Solution:` line: "Step 3" is the third non-blank line.
    "mr-ben": [(3, True, None, 3), (24, True, 0, 3), (52, True, 2, 3)],
    "math-shepherd": [(1, True, None, 3), (2, True, 0, 3), (3, True, 2, 3), (4, True, None, 2)],
    # error_steps [5, 3]: the smallest, step 3.
    "prmbench": [(1, True, 2, 6), (2, True, 0, 3), (3, True, 1, 2), (4, True, None, 2)],
    "trl": [(1, True, None, 3), (2, True, 0, 2), (3, True, 2, 3)],
}


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_each_fixture_is_read_with_its_labels(fmt: str) -> None:
    found = read_dataset(FILES[fmt])
    assert found.format.name == fmt
    assert [(line, row.labelled, row.mistake_index, len(row.steps))
            for line, row in found.rows] == EXPECTED[fmt]
    for row in found.traces:
        assert row.extra["origin"]["format"] == fmt
        assert row.task is None  # the task comes from --task, else the format's own


@pytest.mark.parametrize("fmt", sorted(FILES))
def test_writing_a_fixture_back_in_its_format_loses_nothing(fmt: str) -> None:
    found = read_dataset(FILES[fmt])
    rows, skipped = write_rows(fmt, [out_trace(row, fmt) for row in found.traces])
    assert skipped == 0
    originals = [value for _line, value in iter_rows(FILES[fmt])]
    for original, written in zip(originals, rows, strict=True):
        assert list(written) == list(original)  # the keys, in their order
        for key in original:
            assert written[key] == original[key], (fmt, key)


def test_processbench_questions_steps_and_carried_fields() -> None:
    rows = read_dataset(FILES["processbench"]).traces
    assert rows[1].input == ("A robe takes 2 bolts of blue fiber and half that much white "
                             "fiber. How many bolts in total does it take?")
    assert rows[1].steps[-1] == "In total it takes 2 + 1 = \\boxed{3} bolts."
    assert rows[1].answer == "3"
    assert rows[1].target == ""
    assert rows[0].answer == "30"  # "The answer is (\\boxed{30})": the boxed answer
    assert rows[0].extra["origin"]["fields"] == {
        "id": "gsm8k-0", "generator": "Qwen2-7B-Instruct", "final_answer_correct": False}


def test_prm800k_trajectory_ratings_and_the_rest_of_the_solution() -> None:
    rows = read_dataset(FILES["prm800k"]).traces
    first = rows[0]
    assert first.target == "40,\\!000"
    assert first.extra["origin"]["ratings"] == [0, 1, -1, None, None]
    assert first.steps[2] == "I know that $200,\\!000 = 2^5\\cdot 10^4 = 2^9\\cdot 5^4$."
    # Labelling stopped at the error; the solution's last two steps are its pre-generated ones.
    assert first.steps[4].endswith("# Answer\n\n320,000")
    assert first.answer == "320,000"
    second = rows[1]
    assert second.steps[1] == ("The denominator factors as $(x+3)(x-2)$, which is zero at "
                               "$x=-3$ and $x=2$.")
    assert second.extra["origin"]["ratings"] == [1, 1, 1]
    assert second.answer == "2"
    assert get_task("prm800k").is_correct(second.answer, second.target)
    assert rows[3].extra["origin"]["ratings"] == [1, 1, None]


def test_mr_gsm8k_steps_as_one_text_and_numbers_as_strings() -> None:
    rows = read_dataset(FILES["mr-gsm8k"]).traces
    assert rows[2].steps == [
        "Step 1: The house and repairs cost 80,000 + 50,000 = 130,000 dollars.",
        "Step 2: The value increased by 80,000 * 1.5 = 120,000, so the house is worth "
        "80,000 + 120,000 = 200,000 dollars.",
        "Step 3: The profit is 200,000 - 80,000 = 120,000 dollars."]
    assert rows[2].target == "70000"
    assert rows[1].extra["origin"]["fields"]["model_output_solution_first_error_reason"] == (
        "Half of 2 bolts is 1 bolt, not 2 * 2 = 4 bolts.")


def test_mr_ben_options_join_the_question_and_blank_lines_are_not_steps() -> None:
    rows = read_dataset(FILES["mr-ben"]).traces
    assert rows[0].input == (
        "A satellite of mass m orbits a planet of mass M in a circular orbit of radius R. The "
        "time required for one revolution is\n\nOptions:\nA: independent of M \nB: "
        "proportional to m^(1/2) \nC: linear in R \nD: proportional to R^(3/2) ")
    assert rows[0].steps[-1] == "Solution: Choice_D"
    assert rows[0].answer == "D" and rows[0].target == "D"
    assert rows[1].answer == "A"
    assert rows[2].input.startswith("How many moles")  # no Options: a question alone
    assert rows[2].steps[2].startswith("Step 3: Each mole of oxygen")


def test_math_shepherd_tag_inside_a_step_is_text() -> None:
    rows = read_dataset(FILES["math-shepherd"]).traces
    assert rows[3].input == "How many letters does the word кики have?"
    assert rows[3].steps == ["Step 1: The word кики is spelt к, и, к, и.",
                             "Step 2: That is 4 letters. The answer is: 4"]
    assert rows[1].extra["origin"]["ratings"] == [-1, 1, -1]  # every label kept
    assert rows[0].steps[0] == ("Step 1: Janet's ducks lay 16 eggs per day, and she uses "
                                "3 + 4 = <<3+4=7>>7 of them.")


def test_prmbench_numbers_set_aside_and_both_error_steps_kept() -> None:
    found = read_dataset(FILES["prmbench"])
    first = found.traces[0]
    assert first.steps[2] == ("Assume a pencil costs 29 cents. Then verify this against the "
                              "original equations.")
    rows, _ = write_rows("prmbench", [out_trace(first, "prmbench")])
    assert rows[0]["error_steps"] == [5, 3]
    assert rows[0]["modified_process"][2] == ("3. Assume a pencil costs 29 cents. Then verify "
                                              "this against the original equations.")


def test_a_relabelled_trace_is_written_with_its_new_label() -> None:
    row = read_dataset(FILES["prmbench"]).traces[0]
    row.mistake_index = 4
    written = write_rows("prmbench", [out_trace(row, "prmbench")])[0][0]
    assert written["error_steps"] == [5]
    trl = read_dataset(FILES["trl"]).traces[0]
    trl.mistake_index = 1
    written = write_rows("trl", [out_trace(trl, "trl")])[0][0]
    assert written["labels"] == [True, False]  # up to the first mistake: nothing known after
    assert written["completions"] == ["She uses 3 + 4 = 7 eggs.", "She sells 16 - 7 = 9 eggs."]


@pytest.mark.parametrize("fmt", ["processbench", "mr-gsm8k", "mr-ben", "prmbench"])
def test_unlabelled_traces_are_left_out_of_formats_that_need_a_label(fmt: str) -> None:
    row = read_dataset(FILES[fmt]).traces[0]
    row.labelled = False
    row.mistake_index = None
    assert write_rows(fmt, [out_trace(row, fmt)]) == ([], 1)


def test_detection_by_the_first_rows_keys() -> None:
    assert detect_format({"input": "", "steps": [], "answer": "", "target": ""}).name == "bbm"
    assert detect_format({"problem": "", "steps": [], "label": -1}).name == "processbench"
    assert detect_format({"input": "", "label": "", "task": ""}).name == "math-shepherd"
    assert detect_format({"question": {}, "label": {}}).name == "prm800k"
    assert detect_format({"prompt": "", "completions": [], "labels": []}).name == "trl"
    assert detect_format({"question": "", "model_output_steps": []}).name == "mr-gsm8k"
    assert detect_format({"Question": "", "Model_Solution_Steps": []}).name == "mr-ben"
    assert detect_format({"modified_question": "", "modified_process": []}).name == "prmbench"
    assert detect_format({"text": "hello"}) is None


def test_a_file_of_no_known_format_is_named_with_its_keys(tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_text('{"text": "hello", "score": 1}\n', encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_dataset(path)
    assert str(caught.value) == (
        f"{path}:1: cannot tell which dataset format this is: its keys are 'text', 'score'; "
        "the formats: bbm, processbench, prm800k, mr-gsm8k, mr-ben, math-shepherd, "
        "prmbench, trl, reasoning, deltabench (--format FORMAT says which)")


def test_format_named_on_the_command_line_wins(tmp_path: Path) -> None:
    path = tmp_path / "shepherd.jsonl"
    path.write_text(FILES["math-shepherd"].read_text(encoding="utf-8"), encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_dataset(path, "trl")
    assert str(caught.value) == (f"{path}:1: TRL stepwise row: missing keys 'prompt', "
                                 "'completions', 'labels'")


BAD_ROWS = [
    ("processbench", '[\n{"problem": "q", "steps": ["a"], "label": -1},\n'
     '{"problem": "q", "steps": ["a", "b"],\n "label": 2}\n]\n',
     "3: ProcessBench row: 'label' 2 is outside the 2 steps (0-based; -1 = no mistake)"),
    ("math-shepherd", '{"input": "Q? Step 1: a ки", "label": "Q? Step 1: b +"}\n',
     "1: Math-Shepherd row: 'label' is not 'input' with its step tags marked: they part at "
     "character 12 of 'input'"),
    ("trl", '{"prompt": "q", "completions": ["a", "b"], "labels": [true]}\n',
     "1: TRL stepwise row: 'labels' has 1 values for 2 completions"),
    ("prm800k", '{"question": {"problem": "q"}, "label": {"steps": [{"completions": '
     '[{"text": "a", "rating": 2}], "chosen_completion": 0}]}}\n',
     "1: PRM800K row: step 1: a rating must be -1, 0, 1 or null, not 2"),
    ("mr-gsm8k", '[{"question": "q", "model_output_steps": ["a"], '
     '"model_output_solution_correctness": "wrong", '
     '"model_output_solution_first_error_step": 4}]\n',
     "1: MR-GSM8K row: 'model_output_solution_first_error_step' 4 is past the 1 steps (they "
     "count from 1)"),
    ("mr-ben", '{"u": [{"Question": "q", "Model_Solution_Steps": ["Step 1: a", ""], '
     '"Model_Solution_Correctness": "incorrect", "Model_Solution_First_Error_Step": "2"}]}\n',
     "1: MR-BEN row: 'Model_Solution_First_Error_Step' 2: no step is labelled 'Step 2'"),
    ("prmbench", '{"modified_question": "q", "modified_process": ["1. a"], '
     '"error_steps": [0]}\n',
     "1: PRMBench row: 'error_steps' holds 0, outside the 1 steps (they count from 1)"),
]


@pytest.mark.parametrize(("fmt", "text", "message"), BAD_ROWS, ids=[b[0] for b in BAD_ROWS])
def test_a_bad_row_is_one_message_naming_file_line_and_format(
        tmp_path: Path, fmt: str, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_dataset(path)
    assert str(caught.value) == f"{path}:{message}"


def test_malformed_json_in_a_document_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('[\n{"problem": "q", "steps": ["a"], "label": -1},\n{"problem": }\n]\n',
                    encoding="utf-8")
    with pytest.raises(DatasetError) as caught:
        read_dataset(path)
    assert str(caught.value).startswith(f"{path}:3: malformed JSON")


def test_documents_are_written_as_the_formats_tools_read_them() -> None:
    found = read_dataset(FILES["mr-ben"])
    rows, _ = write_rows("mr-ben", [out_trace(row, "mr-ben") for row in found.traces])
    grouped = json.loads(document_text(FORMATS["mr-ben"], rows))
    assert list(grouped) == ["1f6d61d1-b627-4186-b44e-5a662a906ef9",
                             "84d494ab-8937-45e2-a49d-e6720e9f88ad"]
    assert [len(solutions) for solutions in grouped.values()] == [2, 1]
    found = read_dataset(FILES["mr-gsm8k"])
    rows, _ = write_rows("mr-gsm8k", [out_trace(row, "mr-gsm8k") for row in found.traces])
    assert isinstance(json.loads(document_text(FORMATS["mr-gsm8k"], rows)), list)


def test_each_formats_task_is_zero_shot_and_named_after_it() -> None:
    for name in ("processbench", "prm800k", "mr-gsm8k", "mr-ben", "math-shepherd",
                 "prmbench", "trl"):
        task = get_task(name)
        assert not task.few_shot and not task.is_paper
        assert task.question("x") == "x"
        assert FORMATS[name].task == name
