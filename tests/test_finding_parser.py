"""Answer parsing: strict where the paper's format is met, sensible where models stray, and
unparseable (kept verbatim, counted wrong) where an answer says nothing usable."""

from __future__ import annotations

import pytest

from bbm_tui.core.judging.parsing import (
    UNPARSEABLE,
    TraceAnswer,
    parse_step_answer,
    parse_trace_answer,
)

NO = TraceAnswer(None, True)


def at(number: int) -> TraceAnswer:
    return TraceAnswer(number, True)


COT_FIVE = (
    "Comment 1: Thought 1 lists the first letters. So Thought 1 is correct.\n"
    "Comment 2: Thought 2 orders them. So Thought 2 is correct.\n"
    "Comment 7: Thoughts 1 to 4 are correct, but Thought 5 is incorrect. So the answer is 5"
)
COT_NONE = (
    "Comment 6: According to Thought 4, the order is right, so Thought 5 is correct. "
    "So the answer is No"
)

# Trace-level answers about a trace of 10 thoughts: (answer, expected).
TRACE_ANSWERS: list[tuple[str, TraceAnswer]] = [
    # the paper's own format
    ("No", NO),
    ("3", at(3)),
    ("10", at(10)),
    (COT_FIVE, at(5)),
    (COT_NONE, NO),
    # decorated
    ("No.", NO),
    ("no", NO),
    ('"No"', NO),
    ("**No**", NO),
    ("`7`", at(7)),
    ("**5**", at(5)),
    ("5.", at(5)),
    ("'4'", at(4)),
    ("  6 \n", at(6)),
    ("“2”", at(2)),
    # near the format
    ("Thought 3", at(3)),
    ("Thought #2", at(2)),
    ("**Thought 6**", at(6)),
    ("Step 2", at(2)),
    ("Answer: 4", at(4)),
    ("Final answer: No", NO),
    ("The answer is 4.", at(4)),
    ("So the answer is 4", at(4)),
    ("The answer is: Thought 5", at(5)),
    ("the answer is No.", NO),
    ("Yes, Thought 4.", at(4)),
    ("None", NO),
    ("No mistakes.", NO),
    ("There are no mistakes in this sequence.", NO),
    ("3\n\nExplanation: Thought 3 sorts 'oven' before 'costume'.", at(3)),
    ("Thought 2: We now have (3) ...", UNPARSEABLE),  # a thought quoted back
    ("Thought 2: We now have (3) ...\nThe first mistake is in Thought 2.", at(2)),
    ("5 (the sort by third letters is wrong)", at(5)),
    ("No\n\nAll the thoughts are correct.", NO),
    # prose
    ("The first mistake is in Thought 3.", at(3)),
    ("There is a mistake in Thought 7.", at(7)),
    ("Thought 3 is incorrect.", at(3)),
    ("Thought 8 contains the first mistake.", at(8)),
    ("The first mistake is in Thought 2; Thought 4 is also wrong.", at(2)),
    ("Thought 7 says 'The answer is arson'. So Thought 2 is incorrect.", at(2)),
    ("All thoughts are correct.", NO),
    # unparseable: nothing usable, contradictions, numbers the trace does not have
    ("", UNPARSEABLE),
    ("Yes", UNPARSEABLE),
    ("N/A", UNPARSEABLE),
    ("I cannot determine where the mistake is.", UNPARSEABLE),
    ("0", UNPARSEABLE),
    ("-1", UNPARSEABLE),
    ("11", UNPARSEABLE),
    ("Thought 12", UNPARSEABLE),
    ("So the answer is 42", UNPARSEABLE),
    ("No, the mistake is in Thought 3", UNPARSEABLE),
    ("Thought 3 is incorrect. Thought 5 is incorrect.", UNPARSEABLE),
    ("Thought 3 is correct.", UNPARSEABLE),
]

# Step-level answers: (answer, cot, expected) with True = "Yes" (correct), False = "No".
STEP_ANSWERS: list[tuple[str, bool, bool | None]] = [
    ("Yes", False, True),
    ("No", False, False),
    ("Yes.", False, True),
    ("no", False, False),
    ("**No**", False, False),
    ('"Yes"', False, True),
    ("No, it is not.", False, False),
    ("Yes, Thought 3 is correct.", False, True),
    ("Correct", False, True),
    ("Incorrect.", False, False),
    ("Answer: Yes", False, True),
    ("The thought is correct.", False, True),
    ("Thought 3 is not correct.", False, False),
    ("Not correct.", False, False),
    ("No mistakes.", False, True),
    ("maybe", False, None),
    ("", False, None),
    ("I'm not sure.", False, None),
    ("Comment 1: x\nComment 5: So Thought 1 is correct. Yes", True, True),
    ("Comment 4: (16) < (3) is incorrect, so Thought 2 is incorrect. No", True, False),
    ("... so Thought 7 is incorrect.", True, False),
    ("Final answer: **No**.", True, False),
    ("Comment 3: so Thought 4 is correct. Yes.", True, True),
    ("Comment 3: I checked every word. Thought 4 is correct.", True, True),
    ("Comment 2: The stack is wrong. \n\n**No**", True, False),
    ("Comment 1: Let me check.", True, None),
]


@pytest.mark.parametrize(("answer", "expected"), TRACE_ANSWERS)
def test_trace_answers(answer: str, expected: TraceAnswer) -> None:
    assert parse_trace_answer(answer, 10) == expected


@pytest.mark.parametrize(("answer", "cot", "expected"), STEP_ANSWERS)
def test_step_answers(answer: str, cot: bool, expected: bool | None) -> None:
    assert parse_step_answer(answer, cot=cot) is expected


def test_the_table_is_big_enough() -> None:
    assert len(TRACE_ANSWERS) + len(STEP_ANSWERS) >= 40
    assert len(TRACE_ANSWERS) >= 40


def test_verdict_is_the_papers_format() -> None:
    assert at(3).verdict == "3"
    assert NO.verdict == "No"
    assert UNPARSEABLE.verdict is None


def test_every_few_shot_answer_parses_to_itself() -> None:
    """The paper's own example answers are the strict format: they must all parse."""
    from bbm_tui.core.prompts.finding import finding_prompts

    for task, prompts in finding_prompts().items():
        for key in ("DIRECT_MESSAGES", "COT_MESSAGES"):
            for message in prompts.get(key, []):
                if message["role"] == "assistant":
                    assert parse_trace_answer(message["content"], 30).parsed, (task, key)
        for key, cot in (("DIRECT_PERSTEP_MESSAGES", False), ("COT_PERSTEP_MESSAGES", True)):
            for message in prompts[key]:
                if message["role"] == "assistant":
                    assert parse_step_answer(message["content"], cot) is not None, (task, key)
