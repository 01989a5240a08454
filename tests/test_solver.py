"""The solver's logic (issue 13, item 4): at temperature 0 its traces are right from start to
answer for the dataset's questions and generated ones; above 0 the mistakes it samples are
caught by the verifiers at the step where they were made; sampling is seeded; logical
deduction is refused with a clear message.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Callable

import pytest

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.records import Verdict
from bbm_tui.core.tasks import arithmetic, dyck, extract_answer, tracking, word_sorting
from bbm_tui.core.tasks.solver import SolverError, next_step
from bbm_tui.core.tasks.verify import first_mistake, verify_trace

SOLVED = ("word_sorting", "tracking_shuffled_objects", "multistep_arithmetic", "dyck_languages")
QUESTIONS_PER_TASK = 200
STEP_LIMIT = 400


def solve(task: str, question: str, prior: list[str] | None = None) -> list[str]:
    steps = list(prior or [])
    while len(steps) < STEP_LIMIT:
        (candidate,) = next_step(task, question, steps, temperature=0.0)
        steps.append(candidate.text)
        if extract_answer(candidate.text) is not None:
            return steps
    raise AssertionError(f"no answer after {STEP_LIMIT} steps")


# What a right answer is, worked out here without the task modules' own logic.


def sorted_answer(question: str) -> str:
    return " ".join(sorted(question.split()))


def tracked_answer(question: str) -> str:
    first, swaps_line, *option_lines = question.split("\n")
    held = dict(re.findall(r"(\w+) (?:has an?|gets|is dancing with|is playing) ([^,]+?)"
                           r"(?:,|\.$)", first.split(": ", 1)[1]))
    for a, b in re.findall(r"(\w+) and (\w+) (?:swap|switch|trade)", swaps_line):
        held[a], held[b] = held[b], held[a]
    asked = re.search(r"At the end of [^,]*, (\w+)", swaps_line).group(1)
    return next(line.split()[0] for line in option_lines[1:]
                if line.split(" ", 1)[1].rstrip(".") == held[asked])


def closed_answer(question: str) -> str:
    pairs = {"(": ")", "[": "]", "{": "}", "<": ">"}
    stack: list[str] = []
    for symbol in question.split():
        if symbol in pairs:
            stack.append(symbol)
        else:
            stack.pop()
    return " ".join(pairs[symbol] for symbol in reversed(stack))


def computed_answer(question: str) -> str:
    # The generated questions use only + - * on integers, which Python's own parser reads.
    return str(eval(question.rstrip("= "), {"__builtins__": {}}))


EXPECTED: dict[str, Callable[[str], str]] = {
    "word_sorting": sorted_answer,
    "tracking_shuffled_objects": tracked_answer,
    "multistep_arithmetic": computed_answer,
    "dyck_languages": closed_answer,
}


def questions(task: str) -> list[tuple[str, str]]:
    """(question, target): half the dataset's, half generated (the target worked out here)."""
    rows = bundled_rows(task)
    half = QUESTIONS_PER_TASK // 2
    from_dataset = [(row.input, row.target.strip()) for row in rows[:half]]
    rng = random.Random(f"solver-{task}")
    vocabulary = sorted({word for row in bundled_rows("word_sorting")
                         for word in row.input.split()})
    generated = []
    for _ in range(QUESTIONS_PER_TASK - half):
        if task == "word_sorting":
            question = word_sorting.random_question(rng, vocabulary)
        else:
            question = {"tracking_shuffled_objects": tracking.random_question,
                        "multistep_arithmetic": arithmetic.random_question,
                        "dyck_languages": dyck.random_question}[task](rng)
        generated.append((question, EXPECTED[task](question)))
    return from_dataset + generated


@pytest.mark.parametrize("task", SOLVED)
def test_the_expected_answers_agree_with_the_dataset_targets(task: str) -> None:
    """The test's own answers are right, checked on the dataset's questions."""
    for row in bundled_rows(task)[:QUESTIONS_PER_TASK]:
        assert EXPECTED[task](row.input) == row.target.strip()


@pytest.mark.parametrize("task", SOLVED)
def test_at_temperature_0_the_traces_are_right_and_reach_the_target(task: str) -> None:
    for question, target in questions(task):
        steps = solve(task, question)
        assert first_mistake(task, question, steps) is None, (question, steps)
        assert all(v.kind is Verdict.CORRECT for v in verify_trace(task, question, steps))
        assert extract_answer(steps[-1]) == target, (question, steps[-1])


def test_the_solver_writes_the_prompts_own_trace() -> None:
    """The generation prompt's first word-sorting example, word for word."""
    steps = solve("word_sorting", "oven costume counterpart")
    assert steps == [
        'I should start by looking at the first letter of the words in the list. The first '
        'letter: "oven": "o" (15). "costume": "c" (3). "counterpart": "c" (3).',
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


@pytest.mark.parametrize(("task", "question", "answer"), [
    ("multistep_arithmetic", "((-3 + 5 * 8 * -4) - (9 - 8 * -7 + -9)) =", "-219"),
    ("dyck_languages", "< > ( ( [ [ ( { } ) [ < > ] ]", "] ) )"),
])
def test_the_prompts_answers(task: str, question: str, answer: str) -> None:
    steps = solve(task, question)
    assert extract_answer(steps[-1]) == answer
    assert steps[-1].endswith(f"So the answer is {answer}")


@pytest.mark.parametrize(("task", "question", "answer"), [
    ("word_sorting", "zebra apple mango apple-pie", "apple apple-pie mango zebra"),
    ("word_sorting", "as ass a", "a as ass"),
    ("word_sorting", "pear apple pear", "apple pear pear"),
    ("multistep_arithmetic", "(1 + 2 * 3) =", "7"),
    ("multistep_arithmetic", "((8 / 4) - (1 - 3)) =", "4"),
    ("multistep_arithmetic", "(7 / 2) =", "7/2"),
    ("dyck_languages", "( [ ] {", "} )"),
    ("tracking_shuffled_objects",
     "Zoe, Yan, and Xia are friends. At the start, they each have a gift: Zoe has a red hat, "
     "Yan has a blue scarf, and Xia has a green glove.\nAs time goes on, they trade gifts. "
     "First, Zoe and Yan swap gifts. Finally, Xia and Zoe swap gifts. At the end of the day, "
     "Zoe has the\nOptions:\n(A) red hat.\n(B) blue scarf.\n(C) green glove.", "(C)"),
])
def test_typed_questions(task: str, question: str, answer: str) -> None:
    steps = solve(task, question)
    assert first_mistake(task, question, steps) is None, steps
    assert extract_answer(steps[-1]) == answer


def test_it_continues_a_prefix_with_a_mistake_from_the_trace_as_written() -> None:
    """The swap the prefix got wrong stands; what follows is right from there on."""
    question = tracking.random_question(random.Random(5))
    prior = solve("tracking_shuffled_objects", question)[:2]
    people = prior[1].split(": ", 1)[1].rstrip(".").split(", ")
    wrong = people[1:] + people[:1]  # everyone's object moved on by one
    prior[1] = prior[1].split(": ", 1)[0] + ": " + ", ".join(
        f"{a.split(': ')[0]}: {b.split(': ')[1]}" for a, b in zip(people, wrong, strict=True))
    steps = solve("tracking_shuffled_objects", question, prior)
    verdicts = verify_trace("tracking_shuffled_objects", question, steps)
    assert [v.index for v in verdicts if v.kind is Verdict.MISTAKEN] == [1]


# -- sampling above temperature 0 ------------------------------------------------------------


@pytest.mark.parametrize("task", SOLVED)
def test_sampled_mistakes_are_caught_where_they_were_made(task: str) -> None:
    kinds: Counter[str] = Counter()
    right = wrong = ranked = 0
    for question, _ in questions(task)[:: QUESTIONS_PER_TASK // 25]:
        steps: list[str] = []
        while True:
            candidates = next_step(task, question, steps, temperature=1.0, seed=11, n=4)
            (best,) = next_step(task, question, steps, temperature=0.0)
            for candidate in candidates:
                judged = verify_trace(task, question, [*steps, candidate.text])[-1]
                if candidate.mistake is None:
                    assert candidate.text == best.text
                    assert judged.kind is Verdict.CORRECT, (steps, candidate)
                    right += 1
                else:
                    assert judged.kind is Verdict.MISTAKEN, (steps, candidate)
                    kinds[candidate.mistake] += 1
                    wrong += 1
                    ranked += candidate.logprob < best.logprob
            steps.append(best.text)
            if extract_answer(best.text) is not None:
                break
    assert wrong > 20 and right > wrong
    assert len(kinds) >= 2, kinds
    assert ranked > wrong / 2  # the right step ranks highest more often than not


def test_the_kinds_of_mistakes_each_task_samples() -> None:
    seen: dict[str, set[str]] = {task: set() for task in SOLVED}
    for task in SOLVED:
        for question, _ in questions(task)[:10]:
            steps: list[str] = []
            while True:
                for candidate in next_step(task, question, steps, 1.0, seed=3, n=8):
                    if candidate.mistake:
                        seen[task].add(candidate.mistake)
                (best,) = next_step(task, question, steps)
                steps.append(best.text)
                if extract_answer(best.text) is not None:
                    break
    assert seen == {
        "word_sorting": {"letter_position", "wrong_letter", "dropped_word", "swapped_order"},
        "tracking_shuffled_objects": {"swapped_holder", "skipped_swap", "wrong_option"},
        "multistep_arithmetic": {"copy_error", "arithmetic_slip", "wrong_order", "wrong_value"},
        "dyck_languages": {"wrong_stack", "skipped_symbol", "wrong_order"},
    }


def test_sampling_is_seeded_and_reproducible() -> None:
    question, steps = "oven costume counterpart", []

    def texts(seed: int) -> list[tuple[str, float, str | None]]:
        return [(c.text, c.logprob, c.mistake)
                for c in next_step("word_sorting", question, steps, 1.0, seed, n=16)]

    assert texts(1) == texts(1)
    assert texts(1) != texts(2)
    assert len(texts(1)) == 16


def test_temperature_0_gives_n_copies_of_the_right_step() -> None:
    candidates = next_step("dyck_languages", "[ { [", [], temperature=0.0, seed=4, n=3)
    assert [c.text for c in candidates] == [dyck.PLAN] * 3
    assert all(c.mistake is None for c in candidates)


def test_mistakes_grow_with_the_temperature() -> None:
    def mistaken(temperature: float) -> int:
        question = "(((1 + 2 * 3) - (4 * 5 - 6)) * ((7 - 8) + (9 * 2 - 1))) ="
        prior = solve("multistep_arithmetic", question)[:1]
        candidates = next_step("multistep_arithmetic", question, prior, temperature, 9, n=200)
        return sum(c.mistake is not None for c in candidates)

    assert 0 == mistaken(0.0) < mistaken(0.5) < mistaken(1.5)


def test_log_probabilities_cover_exactly_the_step_text() -> None:
    for candidate in next_step("tracking_shuffled_objects", tracking.random_question(
            random.Random(8)), [], temperature=2.0, seed=1, n=10):
        assert "".join(token.text for token in candidate.tokens) == candidate.text
        assert candidate.logprob == pytest.approx(sum(t.logprob for t in candidate.tokens),
                                                  abs=1e-3)
        assert all(token.logprob < 0 for token in candidate.tokens)


# -- what the solver refuses -----------------------------------------------------------------


def test_logical_deduction_is_refused_with_a_clear_message() -> None:
    row = bundled_rows("logical_deduction")[0]
    with pytest.raises(SolverError, match="does not write logical deduction steps"):
        next_step("logical_deduction", row.input, [])


@pytest.mark.parametrize(("task", "question", "steps", "message"), [
    ("word_sorting", "oven costume counterpart",
     ["I have now sorted all the words. The answer is costume counterpart oven"],
     "already states its answer"),
    ("dyck_languages", "( x )", [], "cannot read the question"),
    ("multistep_arithmetic", "(1 + ) =", [], "cannot read the question"),
    ("multistep_arithmetic", "(" * 100 + "1" + ")" * 100 + " =", [], "nest deeper"),
    ("tracking_shuffled_objects", "Who has the ball?", [], "cannot read the question"),
    ("multistep_arithmetic", "((1 + 2) - (3 + 4)) =",
     ['This equation can be written as "A - B", where A = (1 + 2).',
      "Let's calculate A = (1 + 2) = 3."], "uses B, which it never defines"),
])
def test_requests_it_cannot_serve(task: str, question: str, steps: list[str],
                                  message: str) -> None:
    with pytest.raises(SolverError, match=message):
        next_step(task, question, steps)


def test_bad_sampling_settings_are_refused() -> None:
    with pytest.raises(SolverError, match="n must be at least 1"):
        next_step("dyck_languages", "[", [], n=0)
    with pytest.raises(SolverError, match="cannot be negative"):
        next_step("dyck_languages", "[", [], temperature=-1)
