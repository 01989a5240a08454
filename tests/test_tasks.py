"""Tasks, question formatting, the answer regex and correctness."""

from __future__ import annotations

import pytest

from bbm_tui.core.tasks import (
    TASK_NAMES,
    UnknownTaskError,
    extract_answer,
    get_task,
    is_correct,
)


def test_the_five_tasks_in_the_paper_order() -> None:
    assert TASK_NAMES == (
        "word_sorting",
        "tracking_shuffled_objects",
        "logical_deduction",
        "multistep_arithmetic",
        "dyck_languages",
    )
    multiple_choice = {name for name in TASK_NAMES if get_task(name).multiple_choice}
    assert multiple_choice == {"tracking_shuffled_objects", "logical_deduction"}


def test_unknown_task_names_the_known_ones() -> None:
    with pytest.raises(UnknownTaskError) as raised:
        get_task("word_sortin")
    assert "word_sortin" in str(raised.value) and "word_sorting" in str(raised.value)


@pytest.mark.parametrize(
    ("step", "answer"),
    [
        ("So the answer is (C)", "(C)"),
        ("The answer is 42", "42"),
        ("Thus the answer is   a b c  ", "a b c"),
        ("I have now sorted all the words. The answer is costume counterpart oven",
         "costume counterpart oven"),
        ("the answer is", ""),
        ("No answer here", None),
        ("THE ANSWER IS 3", None),
        ("The answer is 3. Or the answer is 4", "3. Or the answer is 4"),
    ],
)
def test_answer_regex(step: str, answer: str | None) -> None:
    assert extract_answer(step) == answer


def test_so_the_answer_lowercase_s_matches() -> None:
    # "[Tt]he answer is": "so the answer is (C)." has a lowercase t and matches.
    assert extract_answer("so the answer is (C).") == "(C)."


def test_correct_means_equal_after_stripping() -> None:
    assert is_correct("(C)", "(C)")
    assert is_correct(" (C)", "(C)")
    assert not is_correct("(c)", "(C)")
    assert not is_correct(None, "(C)")
    assert not is_correct("", "(C)")
