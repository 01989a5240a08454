"""Numbers Python cannot hold as they were meant (issue 33, items 13 and 14): `1e400` (JSON
reads it as infinity, past the NaN/Infinity guard), token counts past the float range, and
integers of more than 4,300 digits (Python's conversion limit) get one message naming the
file and line, never "internal error" or a 5,000-character value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bbm_tui.core.dataset import bundled_rows
from tests.cli_helpers import assert_refused, run_all

BIG = "9" * 5000


def dataset_line(**extra: object) -> str:
    row = bundled_rows("word_sorting")[0]
    value = {"input": row.input, "steps": row.steps, "answer": row.answer,
             "target": row.target, "mistake_index": row.mistake_index}
    return json.dumps(value | extra)


@pytest.fixture
def infinite(tmp_path: Path) -> Path:
    path = tmp_path / "word_sorting.jsonl"
    path.write_text(dataset_line().replace('"steps"', '"score": 1e400, "steps"', 1) + "\n")
    return path


@pytest.mark.parametrize("command", [
    ("find", "--method", "verify", "--input", "{file}", "--out", "{out}"),
    ("backtrack", "--model", "solver/bbm", "--input", "{file}", "--locations", "gold",
     "--out", "{out}"),
], ids=["find", "backtrack"])
def test_1e400_in_a_dataset_file_is_named(tmp_path: Path, infinite: Path,
                                          command: tuple[str, ...]) -> None:
    args = tuple(part.format(file=infinite, out=tmp_path / "out.jsonl") for part in command)
    [refused] = run_all([args])
    assert_refused(refused, "word_sorting.jsonl:1", "1e400 is past the range of a number")


def test_1e400_in_a_shard_is_named(tmp_path: Path) -> None:
    shard = tmp_path / "part.jsonl"
    shard.write_text(json.dumps({"input": "Q", "target": "A", "steps": ["s"], "answer": None,
                                 "model": "m", "shard": "1/1", "shard_row": 0}
                                ).replace('"model"', '"x": 1e400, "model"') + "\n")
    [refused] = run_all([("merge", str(shard), "--out", str(tmp_path / "merged.jsonl"))])
    assert_refused(refused, "part.jsonl:1", "1e400")


@pytest.mark.parametrize("tokens", ["1e400", str(10 ** 400)], ids=["1e400", "10**400"])
def test_compare_takes_token_counts_past_the_float_range(tmp_path: Path, tokens: str) -> None:
    rows = tmp_path / "word_sorting.jsonl"
    lines = []
    for model in ("a/m", "b/m"):
        line = dataset_line(model=model, task="word_sorting", latency_s=1.0,
                            usage={"calls": 1, "prompt_tokens": 7, "completion_tokens": 5,
                                   "cost": 0.1})
        lines.append(line.replace('"prompt_tokens": 7', f'"prompt_tokens": {tokens}'))
    rows.write_text("\n".join(lines) + "\n")
    [compared] = run_all([("compare", str(rows))])
    assert "internal error" not in compared.err and "Traceback" not in compared.err
    if tokens == "1e400":
        assert_refused(compared, "word_sorting.jsonl:1", "1e400")
    else:
        assert compared.code == 0, compared.err
        assert "without usage" in compared.out + compared.err


MR_BEN = {"u1": [{
    "Question_UUID": "u1", "Subject": "x", "Question": "Q?", "Ground_Truth_Answer": "2",
    "Model_Solution_Steps": ["Step 1: a"], "Model_Solution_Correctness": "incorrect",
    "Model_Solution_First_Error_Step": BIG, "Model_Solution_Error_Reason": ["N/A"],
    "Model_Solution_Rectified_First_Error_Step": ["N/A"]}]}
MR_GSM8K = [{"uuid": "a", "question": "Q", "ground_truth_answer": "1",
             "model_output_steps": ["a"], "model_output_answer_correctness": "wrong",
             "model_output_solution_correctness": "wrong",
             "model_output_solution_first_error_step": BIG}]
PRMBENCH = {"original_question": "Q", "modified_question": "Q", "original_process": ["a"],
            "modified_process": ["a"], "modified_steps": [1], "error_steps": [int(BIG[:18])],
            "reason": "r", "idx": "1", "question": "Q", "classification": "x"}


@pytest.mark.parametrize(("fmt", "name", "text", "needle"), [
    ("mr-ben", "mrben.json", json.dumps(MR_BEN), "5,000 digits"),
    ("mr-gsm8k", "mrgsm.json", json.dumps(MR_GSM8K), "5,000 digits"),
    ("prmbench", "prmbench.jsonl",
     json.dumps(PRMBENCH).replace(BIG[:18], BIG), "5,000 digits"),
    ("processbench", "pb.jsonl", json.dumps({"id": "gsm8k-0", "problem": "Q", "steps": ["a"],
                                             "label": BIG, "final_answer_correct": True}),
     "'label' must be a whole number"),
    ("processbench", "pb2.jsonl", json.dumps({"id": "gsm8k-0", "problem": "Q",
                                              "steps": ["a"], "label": 0,
                                              "final_answer_correct": True}
                                             ).replace('"label": 0', f'"label": {BIG}'),
     "5,000 digits"),
], ids=["mr-ben", "mr-gsm8k", "prmbench", "processbench-text", "processbench-number"])
def test_integers_of_5000_digits_in_the_fields_formats(
    tmp_path: Path, fmt: str, name: str, text: str, needle: str
) -> None:
    path = tmp_path / name
    path.write_text(text + "\n")
    [refused] = run_all([("stats", str(path), "--format", fmt)])
    assert_refused(refused, f"{name}:1", needle)
    assert len(refused.err) < 400  # the value is named, not printed


def test_an_integer_of_5000_digits_in_a_toml_or_router_file(tmp_path: Path) -> None:
    (tmp_path / "p.txt").write_text("Add.\n")
    task = tmp_path / "sums.toml"
    task.write_text('name = "sums"\ntitle = "Sums"\nprompt = "p.txt"\nquestion = "Q: {input}"\n'
                    f'compare = "number"\nx = {BIG}\n')
    config = tmp_path / "bad-config.toml"
    config.write_text(f"temperature = {BIG}\n")
    router = tmp_path / "router.yaml"
    router.write_text("model_list:\n  - model_name: tiny\n    litellm_params:\n"
                      "      model: openai/test\n      api_base: http://127.0.0.1:9/v1\n"
                      f"    model_info: {{id: {BIG}}}\n")
    out = str(tmp_path / "out.jsonl")
    [bad_task, bad_router] = run_all([
        ("stats", "--task-file", str(task), str(tmp_path / "none.jsonl")),
        ("run", "--router", str(router), "--model", "tiny", "--dataset", "--task",
         "word_sorting", "--limit", "1", "--out", out),
    ])
    assert_refused(bad_task, "sums.toml", "line 6", "5,000 digits")
    assert_refused(bad_router, "router.yaml, line 6", "5,000 digits")
    [bad_config] = run_all([("run", "--dataset", "--task", "word_sorting", "--limit", "1",
                             "--out", out)], {"BBM_TUI_CONFIG": str(config)})
    assert_refused(bad_config, "bad-config.toml", "line 1", "5,000 digits")


def test_a_shard_of_5000_digits(tmp_path: Path) -> None:
    shard = tmp_path / "part.jsonl"
    shard.write_text(json.dumps({"input": "Q", "target": "A", "steps": ["s"], "answer": None,
                                 "model": "m", "shard": f"{BIG}/2", "shard_row": 0}) + "\n")
    [option, row] = run_all([
        ("run", "--dataset", "--task", "word_sorting", "--shard", f"{BIG}/2", "--out",
         str(tmp_path / "out.jsonl")),
        ("merge", str(shard), "--out", str(tmp_path / "merged.jsonl")),
    ])
    assert_refused(option, "--shard takes I/N")
    assert_refused(row, "part.jsonl, line 1", "is not I/N")
    assert len(option.err) < 300 and len(row.err) < 300


@pytest.mark.parametrize("answer", [f"Thought {BIG}", BIG, f"The mistake is in Thought {BIG}.",
                                    f"Thought {BIG} is wrong"],
                         ids=["label", "bare", "prose", "wrong"])
def test_a_finders_answer_of_5000_digits_is_unparsed_not_a_crash(answer: str) -> None:
    """A model's answer alone could stop `find` with "internal error"."""
    from bbm_tui.core.judging.parsing import parse_critic_answer, parse_trace_answer

    assert parse_trace_answer(answer, 5).parsed is False
    assert parse_critic_answer(f"\\boxed{{{BIG}}}", 5).parsed is False
    assert parse_trace_answer("Thought 3", 5).mistake_number == 3  # as before
    assert parse_critic_answer("\\boxed{-1}", 5).mistake_number is None
