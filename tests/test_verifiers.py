"""The task verifiers (issue 13): hand-made steps per task (right ones, each kind of mistake,
forms the checker does not know), the disagreement report, and agreement with the paper's
gold labels on the bundled dataset (a sample every run; all 2,186 traces in the slow run).
"""

from __future__ import annotations

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.records import Verdict
from bbm_tui.core.tasks import UnknownTaskError
from bbm_tui.core.tasks.verify import (
    Disagreement,
    accuracy,
    disagreements,
    first_mistake,
    verify_trace,
)

# -- word sorting ------------------------------------------------------------------------------

WS = "oven costume counterpart"
WS_STEPS = [
    'I should start by looking at the first letter of the words in the list. The first letter: '
    '"oven": "o" (15). "costume": "c" (3). "counterpart": "c" (3).',
    'We now have: (3) ["costume" ? "counterpart"] < (15) "oven".',
    'Now let\'s sort this subpart ["costume" ? "counterpart"] by looking at their second '
    'letters. The second letter: "costume": "o" (15). "counterpart": "o" (15).',
    'We now have: (15) ["costume" ? "counterpart"] for the subpart. Hence, we have '
    '["costume" ? "counterpart"] < "oven".',
    'Now let\'s sort this subpart ["costume" ? "counterpart"] by looking at their third '
    'letters. The third letter: "costume": "s" (19). "counterpart": "u" (21).',
    'We now have: (19) "costume" < (21) "counterpart" for the subpart. Hence, we have '
    '"costume" < "counterpart" < "oven".',
    "I have now sorted all the words. The answer is costume counterpart oven",
]
FIRST = "I should start by looking at the first letter of the words in the list. The first letter: "
# Two groups to sort: the one that comes first must be sorted first.
WS2 = "cow bee cat bat"
WS2_STEPS = [
    FIRST + '"cow": "c" (3). "bee": "b" (2). "cat": "c" (3). "bat": "b" (2).',
    'We now have: (2) ["bee" ? "bat"] < (3) ["cow" ? "cat"].',
]

# (question, steps before the one judged, the step judged, verdict, words in the reason)
WORD_SORTING_CASES = [
    (WS, [], FIRST + '"oven": "o" (15). "costume": "c" (4). "counterpart": "c" (3).',
     Verdict.MISTAKEN, "'costume' starts with c (3), not 4"),
    (WS, [], FIRST + '"oven": "o" (15). "costume": "o" (15). "counterpart": "c" (3).',
     Verdict.MISTAKEN, "'costume' starts with c, not o"),
    (WS, [], FIRST + '"oven": "o" (15). "costume": "c" (3).', Verdict.MISTAKEN,
     "'counterpart' is missing"),
    (WS, [], FIRST + '"oven": "o" (15). "costume": "c" (3). "counterpart": "c" (3). '
     '"banana": "b" (2).', Verdict.MISTAKEN, "'banana' is not in the list"),
    # a misspelt copy is read as the word meant, as the annotators read it
    (WS, [], FIRST + '"oven": "o" (15). "costume": "c" (3). "counterpat": "c" (3).',
     Verdict.CORRECT, ""),
    (WS, WS_STEPS[:1], 'We now have: (3) ["costume" ? "counterpart"].', Verdict.MISTAKEN,
     "'oven' is missing"),
    (WS, WS_STEPS[:1], 'We now have: (15) "oven" < (3) ["costume" ? "counterpart"].',
     Verdict.MISTAKEN, "'costume' (3) should come before 'oven' (15)"),
    (WS, WS_STEPS[:1], 'We now have: (3) "costume" < (3) "counterpart" < (15) "oven".',
     Verdict.MISTAKEN, "'costume' and 'counterpart' are not ordered yet"),
    (WS, WS_STEPS[:1], 'We now have: (3) ["costume" ? "counterpart"] < (16) "oven".',
     Verdict.MISTAKEN, "'oven' has (15), not (16)"),
    (WS, WS_STEPS[:2], 'Now let\'s sort this subpart ["costume" ? "counterpart"] by looking '
     'at their third letters. The third letter: "costume": "s" (19). "counterpart": "u" (21).',
     Verdict.MISTAKEN, "compared up to their first letter; the second comes next"),
    (WS, WS_STEPS[:2], 'Now let\'s sort this subpart ["costume" ? "counterpart"] by looking '
     'at their second letters. The second letter: "costume": "o" (15). "counterpart": "u" '
     '(21).', Verdict.MISTAKEN, "the second letter of 'counterpart' is o, not u"),
    (WS, WS_STEPS[:2], "I have now sorted all the words. The answer is costume counterpart "
     "oven", Verdict.MISTAKEN, '["costume" ? "counterpart"] is not sorted yet'),
    (WS, WS_STEPS[:5], 'We now have: (19) "costume" < (21) "counterpart" for the subpart. '
     'Hence, we have "costume" < "counterpart".', Verdict.MISTAKEN, "'oven' is missing"),
    (WS, WS_STEPS[:6], "I have now sorted all the words. The answer is counterpart costume "
     "oven", Verdict.MISTAKEN, "in the answer, 'costume' should come before 'counterpart'"),
    (WS, WS_STEPS[:6], "I have now sorted all the words. The answer is costume oven",
     Verdict.MISTAKEN, "in the answer, 'counterpart' is missing"),
    (WS, WS_STEPS, "Final answer: costume counterpart oven", Verdict.MISTAKEN,
     "goes on after its answer"),
    (WS2, WS2_STEPS, 'Now let\'s sort this subpart ["cow" ? "cat"] by looking at their second '
     'letters. The second letter: "cow": "o" (15). "cat": "a" (1).', Verdict.MISTAKEN,
     '["bee" ? "bat"] comes first and is not sorted yet'),
    (WS2, WS2_STEPS, 'Now let\'s sort this subpart ["bee" ? "bat"] by looking at their second '
     'letters. The second letter: "bee": "e" (5). "bat": "a" (1).', Verdict.CORRECT, ""),
    (WS, WS_STEPS[:1], "Let me think about the words for a moment.", Verdict.CANNOT_JUDGE,
     "not a word-sorting step"),
]

# -- tracking shuffled objects -----------------------------------------------------------------

TR = (
    "Alice, Bob, and Claire are playing a game. At the start of the game, they are each "
    "holding a ball: Alice has a yellow ball, Bob has a blue ball, and Claire has a pink ball.\n"
    "As the game progresses, pairs of players trade balls. First, Claire and Alice swap balls. "
    "Then, Alice and Bob swap balls. Finally, Claire and Bob swap balls. At the end of the "
    "game, Bob has the\nOptions:\n(A) yellow ball\n(B) blue ball\n(C) pink ball"
)
TR_STEPS = [
    "At the start: Alice: yellow, Bob: blue, Claire: pink.",
    "Claire and Alice swap balls: Alice: pink, Bob: blue, Claire: yellow.",
    "Alice and Bob swap balls: Alice: blue, Bob: pink, Claire: yellow.",
    "Claire and Bob swap balls: Alice: blue, Bob: yellow, Claire: pink.",
    "At the end of the game, Bob has the yellow ball. So the answer is (A)",
]
TRACKING_CASES = [
    (TR, [], "At the start: A: yellow, B: blue, C: pink.", Verdict.CORRECT, ""),
    (TR, [], "At the start: Alice: blue, Bob: yellow, Claire: pink.", Verdict.MISTAKEN,
     "at the start, Alice has the yellow ball, not the blue ball"),
    (TR, TR_STEPS[:1], "Claire and Alice swap balls: Alice: blue, Bob: yellow, Claire: pink.",
     Verdict.MISTAKEN, "after Claire and Alice swap, Alice has the pink ball, not the blue"),
    (TR, TR_STEPS[:2], "Claire and Bob swap balls: Alice: pink, Bob: yellow, Claire: blue.",
     Verdict.MISTAKEN, "it skips the swap of Alice and Bob"),
    # naming the swap and listing the holdings in the next step is allowed (guidelines)
    (TR, TR_STEPS[:2], "Alice and Bob swap balls.", Verdict.CORRECT, ""),
    (TR, [*TR_STEPS[:2], "Alice and Bob swap balls."], "Alice: blue, Bob: pink, Claire: yellow.",
     Verdict.CORRECT, ""),
    (TR, TR_STEPS[:2], "Alice and Bob swap balls: Alice: blue.", Verdict.MISTAKEN,
     "it leaves out what Bob now has"),
    (TR, TR_STEPS[:3], "At the end of the game, Bob has the pink ball. So the answer is (C)",
     Verdict.MISTAKEN, "the swap of Claire and Bob is not done yet"),
    (TR, TR_STEPS[:4], "At the end of the game, Bob has the yellow ball. So the answer is (B)",
     Verdict.MISTAKEN, "the yellow ball is option (A), not (B)"),
    (TR, TR_STEPS[:4], "At the end of the game, Bob has the pink ball. So the answer is (C)",
     Verdict.MISTAKEN, "Bob has the yellow ball, not the pink ball"),
    # repeating who holds what, with no swap left, is redundant (guidelines)
    (TR, TR_STEPS[:4], "Final answer: Bob has the yellow ball.", Verdict.MISTAKEN,
     "it repeats who holds what without a swap"),
    (TR, TR_STEPS[:1], "Hmm, let me count the swaps.", Verdict.CANNOT_JUDGE,
     "not a tracking step"),
]

# -- multistep arithmetic ----------------------------------------------------------------------

AR = "((-3 + 5 * 8 * -4) - (9 - 8 * -7 + -9)) ="
AR_STEPS = [
    'This equation can be written as "A - B", where A = (-3 + 5 * 8 * -4) and '
    "B = (9 - 8 * -7 + -9).",
    "Let's calculate A = (-3 + 5 * 8 * -4) = (-3 + (5 * 8) * -4) = (-3 + (40) * -4) = "
    "(-3 + (40 * -4)) = (-3 + (-160)) = -163.",
    "Let's calculate B = (9 - 8 * -7 + -9) = (9 - (8 * -7) + -9) = (9 - (-56) + -9) = "
    "((9 - -56) + -9) = ((65) + -9) = 56.",
    "Then, the final equation is A - B = -163 - 56 = -219. So the answer is -219",
]
ARITHMETIC_CASES = [
    (AR, [], 'This equation can be written as "A + B", where A = (-3 + 5 * 8 * -4) and '
     "B = (9 - 8 * -7 + -9).", Verdict.MISTAKEN, "the split is worth -107, but the question "
     "is worth -219"),
    (AR, [], 'This equation can be written as "A - B - C", where A = (-3 + 5 * 8 * -4) and '
     "B = (9 - 8 * -7 + -9).", Verdict.MISTAKEN, "C is used but never defined"),
    (AR, AR_STEPS[:1], "Let's calculate A = (-3 + 5 * 8 * -4) = ((-3 + 5) * 8 * -4) = "
     "(2 * 8 * -4) = -64.", Verdict.MISTAKEN,
     "(-3 + 5 * 8 * -4) is -163, but ((-3 + 5) * 8 * -4) is -64"),
    (AR, AR_STEPS[:2], "Let's calculate B = (9 - 8 * -7 + -9) = (9 - (8 * -7) + -9) = "
     "(9 - (-54) + -9) = ((9 - -54) + -9) = ((63) + -9) = 54.", Verdict.MISTAKEN,
     "(9 - (8 * -7) + -9) is 56, but (9 - (-54) + -9) is 54"),
    (AR, AR_STEPS[:1], "Let's calculate A = (-3 + 5 * 8 * -3) = -123.", Verdict.MISTAKEN,
     "A was defined as (-3 + 5 * 8 * -4), worth -163, not -123"),
    # one miswritten expression the chain does not build on is a typo (the annotators' view)
    (AR, AR_STEPS[:2], "Let's calculate B = (9 - 8 * -7 + -9) = (9 - (8 * -7) - -9) = "
     "(9 - (-56) + -9) = 56.", Verdict.CORRECT, ""),
    (AR, AR_STEPS[:2], "Then, the final equation is A - B = -163 - 56 = -219. So the answer "
     "is -219", Verdict.MISTAKEN, "B has not been calculated"),
    (AR, AR_STEPS[:3], "Then, the final equation is A - B = -163 - 56 = -209. So the answer "
     "is -209", Verdict.MISTAKEN, "-163 - 56 is -219, not -209"),
    (AR, AR_STEPS[:3], "Then, the final equation is A - B = -163 - 56 = -219. So the answer "
     "is -218", Verdict.MISTAKEN, "the equation gives -219, not -218"),
    (AR, AR_STEPS[:3], "Then, the final equation is A + B = -163 + 56 = -107. So the answer "
     "is -107", Verdict.MISTAKEN, 'the final equation is not the split A - B'),
    (AR, [], "Let's recall that the order of operations in mathematics is as follows: (1) "
     "Parentheses, (2) exponents, (3) multiplication and division (from left to right), (4) "
     "addition and multiplication (from left to right). So, remember to always compute the "
     "expressions inside parentheses or brackets first.", Verdict.CORRECT, ""),
    (AR, AR_STEPS[:1], "Multiplication is fun.", Verdict.CANNOT_JUDGE,
     "not an arithmetic step"),
]

# -- Dyck languages ----------------------------------------------------------------------------

DY = "[ { ["
DY_STEPS = [
    "We should process each input one by one and keep track of the stack configuration.",
    "stack: empty",
    "[ ; stack: [",
    "{ ; stack: [ {",
    "[ ; stack: [ { [",
    'Now, we have reached the end. The final stack is "[ { [".',
    'We will need to pop out "[", "{", "[" one by one in that order.',
    'So, we need "]", "}", "]". So the answer is ] } ]',
]
DY2 = "( ( ) <"
DY2_STEPS = [*DY_STEPS[:2], "( ; stack: (", "( ; stack: ( ("]
DYCK_CASES = [
    (DY, DY_STEPS[:3], "{ ; stack: {", Verdict.MISTAKEN, "after { the stack is [ {, not {"),
    (DY, DY_STEPS[:3], "[ ; stack: [ [", Verdict.MISTAKEN, "the next symbol is {, not ["),
    (DY2, DY2_STEPS, ") ; stack: ( ( )", Verdict.MISTAKEN, "after ) the stack is (, not ( ( )"),
    (DY2, DY2_STEPS, ") ; stack: (", Verdict.CORRECT, ""),
    (DY, DY_STEPS[:4], 'Now, we have reached the end. The final stack is "[ {".',
     Verdict.MISTAKEN, "the input goes on: 1 more symbol, starting with ["),
    (DY, DY_STEPS[:5], 'Now, we have reached the end. The final stack is "[ {".',
     Verdict.MISTAKEN, "the stack is [ { [, not [ {"),
    (DY, DY_STEPS[:6], 'We will need to pop out "[", "[", "{" one by one in that order.',
     Verdict.MISTAKEN, "popping [ { [ gives [ { [, not [ [ {"),
    (DY, DY_STEPS[:6], 'We will need to pop out "[" and "{" and "[".', Verdict.CORRECT, ""),
    (DY, DY_STEPS[:6], 'We will need to pop out "[", "{", "[". So the answer is ] } ]',
     Verdict.CORRECT, ""),
    (DY, DY_STEPS[:7], 'So, we need "]", "]", "}". So the answer is ] ] }', Verdict.MISTAKEN,
     "closing [ { [ needs ] } ], not ] ] }"),
    (DY, DY_STEPS[:7], 'So, we need "]", "}", "]". So the answer is ]}]', Verdict.MISTAKEN,
     "the answer should read '] } ]', not ']}]'"),
    (DY, DY_STEPS[:2], "The brackets look nice.", Verdict.CANNOT_JUDGE, "not a Dyck step"),
]

# -- logical deduction ---------------------------------------------------------------------

LD = (
    "The following statements each describe a set of three objects arranged in a fixed order. "
    "The statements are logically consistent.\n"
    "- On a shelf, there are three books: a white book, a green book, and an orange book.\n"
    "- The white book is to the left of the green book.\n"
    "- The orange book is the second from the right.\n"
    "Q: Given the above statements, which of the following is correct?\nOptions:\n"
    "(A) The white book is the leftmost.\n(B) The green book is the leftmost.\n"
    "(C) The orange book is the leftmost."
)
LD_PLAN = (
    "To answer the question, I need to identify the positions of all three books. I should "
    "first find and look through any statements about absolute positions of books."
)
LD_STEPS = [
    LD_PLAN,
    "The orange book is the second from the right. So from left to right: first can be any "
    "book, then second is the orange book, then third can be any book.",
    "The white book is to the left of the green book. So from left to right: first is the "
    "white book, then second is the orange book, then third is the green book.",
    "According to this ordering, the leftmost book is the white book. So the answer is (A)",
]
LOGICAL_DEDUCTION_CASES = [
    (LD, [], LD_PLAN, Verdict.CANNOT_JUDGE, "nothing in this step a program can check"),
    (LD, LD_STEPS[:1], LD_STEPS[1], Verdict.CORRECT, ""),
    # guidelines, example 3: a true place that does not follow yet is a jump
    (LD, LD_STEPS[:1], "The orange book is the second from the right. So from left to right: "
     "first is the white book, then second is the orange book, then third can be any book.",
     Verdict.MISTAKEN, "nothing said so far puts the white book first from left to right"),
    (LD, LD_STEPS[:1], "The orange book is the second from the right. So from left to right: "
     "first is the orange book, then second can be any book, then third can be any book.",
     Verdict.MISTAKEN, "the orange book cannot be first from left to right"),
    (LD, LD_STEPS[:2], LD_STEPS[2], Verdict.CORRECT, ""),
    (LD, LD_STEPS[:3], "According to this ordering, the leftmost book is the white book. So "
     "the answer is (B)", Verdict.MISTAKEN, "(B) does not hold; (A) does"),
]

CASES = (
    [("word_sorting", *case) for case in WORD_SORTING_CASES]
    + [("tracking_shuffled_objects", *case) for case in TRACKING_CASES]
    + [("multistep_arithmetic", *case) for case in ARITHMETIC_CASES]
    + [("dyck_languages", *case) for case in DYCK_CASES]
    + [("logical_deduction", *case) for case in LOGICAL_DEDUCTION_CASES]
)


@pytest.mark.parametrize(("task", "question", "before", "step", "kind", "reason"), CASES)
def test_hand_made_steps(task: str, question: str, before: list[str], step: str,
                         kind: Verdict, reason: str) -> None:
    verdicts = verify_trace(task, question, [*before, step])
    assert [v.index for v in verdicts] == list(range(len(before) + 1))
    assert all(v.kind is not Verdict.MISTAKEN for v in verdicts[:-1]), verdicts
    judged = verdicts[-1]
    assert judged.kind is kind, judged
    assert reason in judged.reason, judged.reason


@pytest.mark.parametrize(("task", "question", "steps"), [
    ("word_sorting", WS, WS_STEPS),
    ("tracking_shuffled_objects", TR, TR_STEPS),
    ("multistep_arithmetic", AR, AR_STEPS),
    ("dyck_languages", DY, DY_STEPS),
])
def test_the_prompts_own_examples_are_correct_throughout(task: str, question: str,
                                                         steps: list[str]) -> None:
    verdicts = verify_trace(task, question, steps)
    assert [v.kind for v in verdicts] == [Verdict.CORRECT] * len(steps)
    assert first_mistake(task, question, steps) is None


def test_the_first_mistake_is_the_answer_for_the_trace() -> None:
    steps = [*WS_STEPS[:1], 'We now have: (3) ["costume" ? "counterpart"].', *WS_STEPS[2:]]
    verdict = first_mistake("word_sorting", WS, steps)
    assert verdict is not None and verdict.index == 1
    assert verdict.reason == "'oven' is missing"


def test_a_step_after_a_mistake_is_judged_against_the_trace_as_written() -> None:
    """The stack a mistaken step claims is what the next step builds on."""
    steps = [*DY_STEPS[:3], "{ ; stack: {", "[ ; stack: { ["]
    kinds = [v.kind for v in verify_trace("dyck_languages", DY, steps)]
    assert kinds == [Verdict.CORRECT] * 3 + [Verdict.MISTAKEN, Verdict.CORRECT]


@pytest.mark.parametrize(("task", "question"), [
    ("word_sorting", "   "),
    ("tracking_shuffled_objects", "Who has the ball?"),
    ("multistep_arithmetic", "((2 + ) * 3) ="),
    ("dyck_languages", "( [ x"),
    ("logical_deduction", "Which book is first?"),
])
def test_an_unreadable_question_leaves_every_step_unjudged(task: str, question: str) -> None:
    verdicts = verify_trace(task, question, ["step one", "step two"])
    assert [v.kind for v in verdicts] == [Verdict.CANNOT_JUDGE] * 2
    assert all(v.reason.startswith("cannot read the question") for v in verdicts)


def test_an_unknown_task_is_refused_by_name() -> None:
    with pytest.raises(UnknownTaskError, match="word_sortin"):
        verify_trace("word_sortin", WS, WS_STEPS)


# -- the disagreement report -----------------------------------------------------------------


class _Row:
    def __init__(self, steps: list[str], mistake_index: int | None) -> None:
        self.input = WS
        self.steps = steps
        self.mistake_index = mistake_index


def test_the_report_lists_rows_where_verifier_and_gold_disagree() -> None:
    dropped = [*WS_STEPS[:1], 'We now have: (3) ["costume" ? "counterpart"].', *WS_STEPS[2:]]
    rows = [
        _Row(WS_STEPS, None),  # agree: no mistake
        _Row(dropped, 1),  # agree: step 2
        _Row(dropped, None),  # the label missed it
        _Row(WS_STEPS, 4),  # the label marks a right step
    ]
    report = disagreements("word_sorting", rows)
    assert report == [
        Disagreement("word_sorting", 2, None, 1, dropped[1], "'oven' is missing"),
        Disagreement("word_sorting", 3, 4, None, WS_STEPS[4], "the verifier finds no mistake"),
    ]
    figures = accuracy("word_sorting", rows)
    assert (figures.agree, figures.traces) == (2, 4)
    assert (figures.agree_with_mistake, figures.with_mistake) == (1, 2)
    assert (figures.agree_without_mistake, figures.without_mistake) == (1, 2)


# -- agreement with the gold labels ----------------------------------------------------------

# Traces whose first mistake the verifier puts where the gold label does, all 2,186 traces
# (docs/fidelity.md, "Task verifiers").
# Reproduce: .venv/bin/python -m pytest tests/test_verifiers.py -m slow
GOLD_AGREEMENT = {
    "word_sorting": (289, 300),
    "tracking_shuffled_objects": (287, 300),
    "multistep_arithmetic": (275, 300),
    "dyck_languages": (971, 986),
    "logical_deduction": (246, 300),
}
# The same over the first 60 rows of each file: the everyday run's sample.
SAMPLE_ROWS = 60
SAMPLE_AGREEMENT = {
    "word_sorting": 57,
    "tracking_shuffled_objects": 48,
    "multistep_arithmetic": 56,
    "dyck_languages": 60,
    "logical_deduction": 50,
}


@pytest.mark.parametrize("task", list(SAMPLE_AGREEMENT))
def test_agreement_with_the_gold_labels_on_a_sample(task: str) -> None:
    figures = accuracy(task, bundled_rows(task)[:SAMPLE_ROWS])
    assert figures.agree == SAMPLE_AGREEMENT[task]


@pytest.mark.slow
@pytest.mark.parametrize("task", list(GOLD_AGREEMENT))
def test_agreement_with_the_gold_labels_on_the_whole_dataset(task: str) -> None:
    figures = accuracy(task, bundled_rows(task))
    assert (figures.agree, figures.traces) == GOLD_AGREEMENT[task]
    if task != "logical_deduction":
        assert figures.percent >= 91.0


HOSTILE_STEPS = [
    "Let's calculate A = " + "(1 + " * 3000 + "1" + ")" * 3000,  # deep brackets
    "Let's calculate A = " + "1 - " * 40000 + "1",  # a long flat chain
    "Then, the final equation is A = " + "(" * 5000,
    "a: " * 30000,
    '"w": "x" (1). ' * 20000,
    "( " * 50000,
    "So from left to right: " + "first is the white book, then " * 5000,
    "We now have: " + '["a" ? ' * 5000,
    "\x1b[31m So the answer is \x00",
]


@pytest.mark.parametrize("task", list(GOLD_AGREEMENT))
def test_hostile_steps_get_a_verdict(task: str) -> None:
    """Untrusted text gets a verdict, never an exception (a recursion, a runaway search)."""
    question = bundled_rows(task)[0].input
    verdicts = verify_trace(task, question, HOSTILE_STEPS)
    assert len(verdicts) == len(HOSTILE_STEPS)


def test_a_question_with_too_many_objects_is_not_searched() -> None:
    names = ", ".join(f"a book {i}" for i in range(9))
    question = (f"- On a shelf, there are nine books: {names}.\n- The book 1 is the leftmost.\n"
                "Options:\n(A) The book 1 is the leftmost.")
    verdicts = verify_trace("logical_deduction", question, ["So the answer is (A)"])
    assert verdicts[0].kind is Verdict.CANNOT_JUDGE
    assert "more than 7 objects" in verdicts[0].reason
