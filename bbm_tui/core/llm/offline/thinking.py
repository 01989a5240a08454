"""`solver/thinking` (docs/DESIGN.md §16), without litellm: an offline thinking model for the
paper's five tasks, so a thinking trace can be shown, flagged and found with no key.

It answers our thinking prompt (core/prompts/thinking.py) the way thinking models write: a plan,
the working, a "Wait," and a check, then the answer. The working is a recorded trace of the
bundled dataset for that question (its steps verbatim, one paragraph each, so the verifiers read
them in the dataset's phrasing), or, for a question of one's own, the steps `solver/bbm` writes.
A recorded trace that goes wrong is the model's slip: its check catches it and corrects the
answer for some questions and misses it for others (decided by the question, the same every
time). The handler in handler.py streams the reasoning as `reasoning_content`, then the answer
as `content`, as an OpenAI-compatible thinking server does.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.llm.offline.replay import engine, last_user_text
from bbm_tui.core.prompts.thinking import question_of_thinking_prompt
from bbm_tui.core.tasks import TASK_NAMES, extract_answer, get_task
from bbm_tui.core.tasks.solver import SOLVED, SolverError, next_step

MODEL = "solver/thinking"
NAME = "thinking"
# How many steps a question of one's own may take before the model gives up (as the stepper's
# step limit would).
MAX_STEPS = 60
# Dyck traces write one short line a symbol: a paragraph holds this many of them.
DYCK_LINES_A_PARAGRAPH = 6

PLANS = {
    "word_sorting": "Okay, so I need to sort these words alphabetically. Let me look at the "
    "first letter of each word first, and break ties by the letters after it.",
    "tracking_shuffled_objects": "Alright, the objects change hands at every swap. I will "
    "write down who holds what at the start, then update it after each swap in order.",
    "logical_deduction": "So I have to put the objects in order. I will take the statements "
    "that fix a position first, then the relative ones, and fill the gaps by elimination.",
    "multistep_arithmetic": "Let me work this out carefully: the innermost brackets first, "
    "multiplication before addition, and I have to keep track of the signs.",
    "dyck_languages": "I need to close the sequence properly. I will go through it symbol by "
    "symbol and keep a stack of the brackets that are still open.",
}
CHECKS = {
    "word_sorting": "the order of the words, letter by letter",
    "tracking_shuffled_objects": "the swaps one more time",
    "logical_deduction": "each statement against the order",
    "multistep_arithmetic": "the signs and the last subtraction",
    "dyck_languages": "the stack from the start",
}


class ThinkingModelError(ValueError):
    """A request solver/thinking cannot answer; the message says why, for the user."""


@dataclass(frozen=True)
class ThinkingReply:
    reasoning: str  # what streams as reasoning_content
    content: str  # the answer after it


def respond(model: str, messages: Sequence[dict]) -> ThinkingReply:
    name = model.rpartition("/")[2]
    if name != NAME:
        raise ThinkingModelError(f"solver/{name}: no such model (there is {MODEL})")
    question = question_of_thinking_prompt(last_user_text(messages))
    if question is None:
        raise ThinkingModelError(
            f"{MODEL} answers only the thinking prompt of a question of the paper's five "
            "tasks (--mode thinking); it does not write Thought lines or judge traces"
        )
    for task in TASK_NAMES:
        rows = engine().rows_for(task, question)
        if rows:
            return recorded_reply(task, rows[0])
    return solved_reply(question)


def recorded_reply(task: str, row: TraceRow) -> ThinkingReply:
    """The reasoning around a recorded trace; its slip (if any) caught or not."""
    working, answer = row.steps, row.answer
    wrong = answer is not None and answer != row.target
    catches = wrong and _catches(task, row.input)
    check = _check(task, wrong=wrong, catches=catches, target=row.target)
    final = row.target if catches else answer
    return ThinkingReply(_reasoning(task, working, check), _content(final))


def solved_reply(question: str) -> ThinkingReply:
    """A question of one's own: the steps solver/bbm writes (right ones), checked."""
    for task, _logic in SOLVED.items():
        prefix = get_task(task).question_prefix
        if not question.startswith(prefix):
            continue
        steps = _solve(task, question.removeprefix(prefix))
        if steps is not None:
            answer = extract_answer(steps[-1])
            check = _check(task, wrong=False, catches=False, target=answer or "")
            return ThinkingReply(_reasoning(task, steps, check), _content(answer))
    raise ThinkingModelError(
        f"{MODEL} knows the bundled questions of the paper's five tasks and writes its own "
        "for word sorting, tracking, arithmetic and Dyck languages; this question is neither"
    )


def _solve(task: str, question_input: str) -> list[str] | None:
    steps: list[str] = []
    try:
        while len(steps) < MAX_STEPS:
            steps.append(next_step(task, question_input, steps)[0].text)
            if extract_answer(steps[-1]) is not None:
                return steps
    except SolverError:
        return None
    return None


def _catches(task: str, question_input: str) -> bool:
    """Whether the check finds the slip: about half the wrong traces, fixed per question."""
    digest = hashlib.sha256(f"{task}\x1f{question_input}".encode()).digest()
    return digest[0] % 2 == 0


def _check(task: str, *, wrong: bool, catches: bool, target: str) -> str:
    opening = f"Wait, let me check {CHECKS[task]}."
    if catches:
        return (f"{opening} Hmm, that is not right: I slipped somewhere above. Going back "
                f"over it carefully, the answer should be {target} instead.")
    if wrong:
        return f"{opening} Yes, each part follows from the one before, so I will keep it."
    return f"{opening} Everything holds, so the answer stands."


def _reasoning(task: str, working: Sequence[str], check: str) -> str:
    paragraphs = [PLANS[task], *_paragraphs(task, working), check]
    return "\n\n".join(paragraphs) + "\n"


def _paragraphs(task: str, working: Sequence[str]) -> list[str]:
    if task != "dyck_languages":
        return [step for step in working if step.strip()]
    lines = [step for step in working if step.strip()]
    return ["\n".join(lines[i : i + DYCK_LINES_A_PARAGRAPH])
            for i in range(0, len(lines), DYCK_LINES_A_PARAGRAPH)]


def _content(answer: str | None) -> str:
    if answer is None:
        return "I could not reach an answer."
    return f"So the answer is {answer}"
