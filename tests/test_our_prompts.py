"""Our own prompts (prompts/ours/): the zero-shot instruction, the zero-shot finders and the
critic, pinned by SHA-256 like the paper's, and the messages they make, written out here in
full rather than built by the code; the critic's answers read as ProcessBench read them."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.judging.finders import final_result
from bbm_tui.core.judging.judges import JUDGES, check_judge, default_judge, judges_for
from bbm_tui.core.judging.parsing import parse_critic_answer
from bbm_tui.core.prompts.finding import MethodError, build_messages, our_methods_for
from bbm_tui.core.resources import prompts_dir
from bbm_tui.core.tasks import Task, use_tasks
from bbm_tui.core.tasks.files import load_task_file

OURS_SHA256 = {
    "zero_shot_instruction.txt":
        "e665722b332448682ef06c5587cc54b73b2cc74ff95e2c87eaa85b13b517716a",
    "finding_prompts.json": "9140202de73212d594ed031f5bd34eed19e71724df807f0935217790e1eaf46a",
    "paper_task_descriptions.json":
        "555c99dc05a28b3b260102bec0cec73c81b33ed86ded38a7248d9fe9dc0ec313",
    "field_tasks.json": "663b4a6c08a8d5600436ff9b31b38e44fb356f4df8d1e30b07c21b65ae152e70",
}

DESCRIPTION = "Add two numbers; the answer is their sum."


@pytest.fixture
def sums(tmp_path: Path):
    path = tmp_path / "sums.toml"
    path.write_text(f'name = "sums"\nquestion = "Q: {{input}} = ?"\n'
                    f'description = "{DESCRIPTION}"\n', encoding="utf-8")
    task = load_task_file(path)
    use_tasks([task])
    yield task
    use_tasks([])


@pytest.mark.parametrize("name", sorted(OURS_SHA256))
def test_our_prompt_files_are_the_pinned_bytes(name: str) -> None:
    data = (prompts_dir() / "ours" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == OURS_SHA256[name]
    if name.endswith(".txt"):
        assert not data.endswith(b"\n")  # as the paper's prompts


def test_every_file_of_ours_is_pinned() -> None:
    found = {path.name for path in (prompts_dir() / "ours").iterdir()
             if path.suffix in (".txt", ".json")}
    assert found == set(OURS_SHA256)


def test_zero_shot_direct_messages_are_the_papers_template_with_the_description(
        sums: Task) -> None:
    steps = ["1 + 2 = 3.", "So the answer is 4."]
    assert build_messages("sums", "direct-trace-zero-shot", "1 + 2", steps) == [
        {"role": "user",
         "content": "For each sequence of steps, identify the first mistake made, if any."},
        {"role": "user", "content": f"The sequences of steps solve this task: {DESCRIPTION}"},
        {"role": "user", "content": (
            "Q: 1 + 2 = ?\nThought 1: 1 + 2 = 3.\nThought 2: So the answer is 4.\n"
            'Q: Is there a mistake in this sequence? Write "No" if there are no mistakes, or '
            "the number N if there is a mistake in Thought N.")},
    ]
    assert build_messages("sums", "direct-step-zero-shot", "1 + 2", steps, 1) == [
        {"role": "user", "content": (
            "Identify whether a thought is correct and contributes towards solving the "
            'question. Write "Yes" if it is correct, and "No" if it is not.')},
        {"role": "user", "content": f"The thoughts solve this task: {DESCRIPTION}"},
        {"role": "user", "content": (
            "Q: 1 + 2 = ?\nThought 1: 1 + 2 = 3.\n"
            'Q: Is Thought 1 correct? Write "Yes" if it is correct, and "No" if it is not.')},
    ]


def test_the_critic_prompt(sums: Task) -> None:
    assert build_messages("sums", "critic", "1 + 2", ["1 + 2 = 4.", "So the answer is 4."]) == [
        {"role": "user", "content": (
            "The following is a question of a task and a solution to it, written as numbered "
            "thoughts starting from Thought 1.\n\n"
            f"[Task]\n\n{DESCRIPTION}\n\n"
            "[Question]\n\nQ: 1 + 2 = ?\n\n"
            "[Solution]\n\nThought 1: 1 + 2 = 4.\nThought 2: So the answer is 4.\n\n"
            "Review the solution thought by thought. Once you find a thought that is wrong (a "
            "false statement, a wrong calculation, or a conclusion that does not follow from "
            "what came before), stop: your answer is the number of the earliest wrong "
            "thought. If every thought is correct, your answer is -1.\n\n"
            "Reason first, then put your final answer (the number of the earliest wrong "
            "thought, or -1) in \\boxed{}.")},
    ]


def test_the_critic_on_a_paper_task_uses_its_question_and_our_description() -> None:
    row = bundled_rows("word_sorting")[0]
    [message] = build_messages("word_sorting", "critic", row.input, row.steps)
    assert ("[Question]\n\nQ: Sort the following words alphabetically: List: "
            + row.input + "\n\n[Solution]") in message["content"]
    assert "[Task]\n\nSort a list of words alphabetically." in message["content"]


def test_what_a_task_of_ones_own_is_offered(sums: Task, tmp_path: Path) -> None:
    assert [judge.name for judge in judges_for("sums")] == [
        "direct-trace-zero-shot", "direct-step-zero-shot", "critic"]
    assert default_judge("sums") == "direct-step-zero-shot"
    assert default_judge("word_sorting") == "direct-step"
    with pytest.raises(MethodError, match=r"'sums' has no few-shot finding prompts .*use one "
                       r"of: direct-trace-zero-shot, direct-step-zero-shot, critic"):
        check_judge("sums", "direct-step")
    with pytest.raises(MethodError, match="the task verifiers check the paper's five tasks"):
        check_judge("sums", "verify")
    # With few-shot finding prompts of its own: the paper's methods it has prompts for.
    # A task file's paths stay in its folder (issue 33 item 6): the example's prompts beside it.
    example = Path(__file__).resolve().parents[1] / "examples" / "tasks"
    (tmp_path / "finding.json").write_bytes((example / "school_math_finding.json").read_bytes())
    (tmp_path / "f.toml").write_text('name = "fs"\nfinding_prompts = "finding.json"\n',
                                     encoding="utf-8")
    few_shot = load_task_file(tmp_path / "f.toml")
    assert [judge.name for judge in judges_for(few_shot)] == [
        "direct-trace", "direct-step", "critic"]
    assert our_methods_for(few_shot) == ("critic",)


async def test_offline_models_refuse_a_task_of_ones_own(sums: Task) -> None:
    for model in ("replay/bbm", "simulated/rm-0.65"):
        with pytest.raises(llm.LLMError, match=f"{model} .* 'sums' is a task of your own"):
            await final_result(JUDGES["critic"].events("sums", "1 + 2", ["x"],
                                                       llm.ModelSpec(model)))


@pytest.mark.parametrize(("text", "number", "parsed"), [
    ("Thought 2 adds wrongly. \\boxed{2}", 2, True),
    ("First \\boxed{1}, on second thought \\boxed{3}", 3, True),
    ("All correct. \\boxed{-1}", None, True),
    ("\\boxed{\\text{None}}", None, True),
    ("\\boxed{no error}", None, True),
    ("\\boxed{ Thought 4 }", 4, True),
    ("\\boxed{$2$}", 2, True),
    ("\\boxed{0}", None, False),
    ("\\boxed{5}", None, False),  # the trace has 4 thoughts
    ("\\boxed{-2}", None, False),
    ("\\boxed{2, 3}", None, False),
    ("The mistake is in Thought 2.", None, False),  # no box: as ProcessBench, unparseable
    ("\\boxed{}", None, False),
])
def test_critic_answers(text: str, number: int | None, parsed: bool) -> None:
    answer = parse_critic_answer(text, 4)
    assert (answer.mistake_number, answer.parsed) == (number, parsed)
