"""`solver/thinking` going on from a prefix of its reasoning (issue 35), with no key: what
backtracking a thinking step (`b`, `backtrack --mode thinking`) and the importance of each
step (`I`, `anchors`) need of a model, offline.

The model's reasoning is a list of paragraphs (thinking.py: a plan, the working, a check). Its
continuation of a prefix is read at the paragraph level, so any split rule's prefix works:
the prefix's whole paragraphs say which path the reasoning is on, the open paragraph (if any)
is finished as the path writes it, and the paths' remaining paragraphs follow, then
`</think>` and the answer. At temperature 0 it writes what it would have written anyway; above
0, the next piece is one of (weights in `_WEIGHTS`):

- the original (a sample equal to the original step: backtracking drops it);
- a hesitation (`HESITATIONS`) put before it: a different step, the same meaning;
- at the slip of a recorded trace that goes wrong (tasks the solver writes, but Dyck whose
  paragraphs hold several steps), the right step instead: the working goes on right from
  there (the solver's steps), its check finds nothing, and the answer is the right one;
- at the check of a trace that goes wrong, the other check: one that catches the slip (the
  answer corrected to the target) where the original missed it, or misses it where the
  original caught it.

So the answer depends on the steps kept: the slip and the check are the trace's anchors.
Each token's log-probability is made up, by what wrote it (`_LOGPROBS`): the original's
tokens the likeliest, then a correction's, a check's, a hesitation's; the paper's choice (the
highest total among the samples that differ) is then the correction where one was drawn.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.llm.offline import thinking
from bbm_tui.core.llm.offline.replay import engine, last_user_text
from bbm_tui.core.prompts.thinking import question_of_thinking_prompt
from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.tasks import TASK_NAMES, extract_answer, get_task
from bbm_tui.core.tasks.solver import SOLVED, SolverError, next_step

THINK_CLOSE = "</think>"
PARAGRAPH = "\n\n"
# Put before a piece of the reasoning: each is a sentence of ten characters or more (the
# sentence rule joins a shorter piece to the next), so it is a step of its own by that rule.
HESITATIONS = (
    "Hmm, let me think about this part again.",
    "Let me be careful here.",
    "Okay, one thing at a time.",
    "Right, let me go on.",
)
_CHECK_OPENING = "Wait, let me check"
_CAUGHT = re.compile(r"the answer should be (.+) instead\.")
# How likely each kind of piece is, above temperature 0 (a kind that cannot be written at the
# place is left out and the rest weigh as they do).
_WEIGHTS = {"original": 0.4, "hesitation": 0.3, "correction": 0.3, "check": 0.3}
_LOGPROBS = {"original": -0.05, "correction": -0.1, "check": -0.3, "hesitation": -1.2}
_TOKEN = re.compile(r"\S+\s*|\s+")


class ContinuationError(ValueError):
    """A prefix solver/thinking cannot go on from; the message says why."""


@dataclass(frozen=True)
class OfflineContinuation:
    """What the model wrote after the prefix: the rest of the reasoning, `</think>` and the
    answer (as a server's raw completion would), its tokens with log-probabilities, and why
    it stopped ("length": `max_tokens` ran out)."""

    text: str
    tokens: list[TokenLogprob]
    finish_reason: str


@dataclass(frozen=True)
class _Paths:
    """The reasoning's paragraphs as the model writes them, and (where it has one) the path
    that corrects its slip: the same paragraphs up to `slip`, then right ones."""

    task: str
    original: list[str]
    original_answer: str | None  # what the working states, before any check
    target: str
    corrected: list[str] | None = None
    corrected_answer: str | None = None
    slip: int = -1
    caught_check: str | None = None  # the check that catches the slip
    missed_check: str | None = None  # the check that misses it


def continue_reasoning(model: str, messages: Sequence[dict], kept: str, *,
                       temperature: float = 1.0, max_tokens: int = 8192,
                       rng: random.Random | None = None) -> OfflineContinuation:
    """solver/thinking's continuation of its reasoning after `kept` (steps 1..k-1 of it, raw,
    cut by any rule; or of a reasoning it went on before), for the question of its thinking
    prompt in `messages`. Raises ContinuationError (the thinking model's own errors are one:
    another model, a prompt not ours, a question it does not know)."""
    try:
        paths = _paths_for(model, messages)
    except thinking.ThinkingModelError as error:
        raise ContinuationError(str(error)) from None
    rng = rng or random.Random()
    pieces = _go_on(paths, kept, temperature, rng)
    return _tokens_out(pieces, max_tokens)


def _paths_for(model: str, messages: Sequence[dict]) -> _Paths:
    thinking.respond(model, messages)  # the same refusals as a thinking call
    question = question_of_thinking_prompt(last_user_text(messages))
    assert question is not None
    for task in TASK_NAMES:
        rows = engine().rows_for(task, question)
        if rows:
            return _recorded_paths(task, rows[0])
    return _solved_paths(question)


def _recorded_paths(task: str, row: TraceRow) -> _Paths:
    working = thinking._paragraphs(task, row.steps)
    answer = row.answer
    wrong = answer is not None and answer != row.target
    catches = wrong and thinking._catches(task, row.input)
    check = thinking._check(task, wrong=wrong, catches=catches, target=row.target)
    original = [thinking.PLANS[task], *working, check]
    paths = _Paths(task, original, answer, row.target)
    if not wrong:
        return paths
    caught = thinking._check(task, wrong=True, catches=True, target=row.target)
    missed = thinking._check(task, wrong=True, catches=False, target=row.target)
    corrected = _corrected_working(task, row)
    if corrected is None:
        return replace(paths, caught_check=caught, missed_check=missed)
    steps, right_answer = corrected
    holds = thinking._check(task, wrong=False, catches=False, target=row.target)
    assert row.mistake_index is not None
    return replace(paths, corrected=[thinking.PLANS[task], *steps, holds],
                 corrected_answer=right_answer, slip=1 + row.mistake_index,
                 caught_check=caught, missed_check=missed)


def _corrected_working(task: str, row: TraceRow) -> tuple[list[str], str] | None:
    """The working with its slip put right: the recorded steps before the slip, then the
    solver's. None: the task has no solver, a paragraph holds several steps (Dyck), the trace
    has no labelled slip, or the solver writes the slip itself."""
    index = row.mistake_index
    if task not in SOLVED or task == "dyck_languages" or index is None or not row.labelled:
        return None
    if any(not step.strip() for step in row.steps):  # paragraphs would not be the steps
        return None
    steps = list(row.steps[:index])
    try:
        while len(steps) < thinking.MAX_STEPS:
            steps.append(next_step(task, row.input, steps)[0].text)
            answer = extract_answer(steps[-1])
            if answer is not None:
                break
        else:
            return None
    except SolverError:
        return None
    if steps[index].strip() == row.steps[index].strip():
        return None
    return steps, answer


def _solved_paths(question: str) -> _Paths:
    reply = thinking.solved_reply(question)
    paragraphs = reply.reasoning.rstrip("\n").split(PARAGRAPH)
    task = next(task for task in SOLVED
                if question.startswith(get_task(task).question_prefix))
    answer = _answer_in(reply.content)
    return _Paths(task, paragraphs, answer, answer or "")


def _answer_in(content: str) -> str | None:
    return extract_answer(content) if content else None


def _is_check(paragraph: str) -> bool:
    return _plain(paragraph).lstrip().startswith(_CHECK_OPENING)


def _plain(text: str) -> str:
    """The text without the hesitations the model put in it."""
    for hesitation in HESITATIONS:
        text = text.replace(hesitation + " ", "")
    return text


def _line(paths: _Paths, written: Sequence[str]) -> list[str]:
    """The path the written paragraphs are on: the corrected one once its slip is put right."""
    if paths.corrected is not None and len(written) > paths.slip and \
            _plain(written[paths.slip]) == paths.corrected[paths.slip]:
        return paths.corrected
    return paths.original


def _answer(paths: _Paths, written: Sequence[str]) -> str | None:
    """The answer the whole reasoning leads to: what its check says, else its working's."""
    for paragraph in reversed(written):
        found = _CAUGHT.search(_plain(paragraph))
        if found:
            return found.group(1)
        if _is_check(paragraph):
            break
    if _line(paths, written) is paths.corrected:
        return paths.corrected_answer
    return paths.original_answer


def _separator(paragraph: str) -> str:
    """What follows a paragraph: a blank line, or a newline after the last (the check)."""
    return "\n" if _is_check(paragraph) else PARAGRAPH


Piece = tuple[str, str]  # (text, what wrote it: a key of _LOGPROBS)


def _go_on(paths: _Paths, kept: str, temperature: float, rng: random.Random) -> list[Piece]:
    *whole, open_text = kept.split(PARAGRAPH)
    written = list(whole)
    pieces: list[Piece] = []
    line = _line(paths, written)
    if any(_is_check(paragraph) for paragraph in written) or len(written) >= len(line):
        return _ending(paths, written, pieces)  # the reasoning is over
    if open_text.strip():
        _finish_open(paths, written, line, open_text, temperature, rng, pieces)
    else:
        kind, paragraph = _next_paragraph(paths, written, line, temperature, rng)
        if kind == "hesitation":
            greedy = line[len(written)]
            pieces.append((paragraph.removesuffix(greedy), "hesitation"))
            pieces.append((greedy + _separator(greedy), "original"))
        else:
            pieces.append((paragraph + _separator(paragraph), kind))
        written.append(_plain(paragraph))
    if not _is_check(written[-1]):
        line = _line(paths, written)
        for paragraph in line[len(written):]:
            pieces.append((paragraph + _separator(paragraph), "original"))
            written.append(paragraph)
    return _ending(paths, written, pieces)


def _finish_open(paths: _Paths, written: list[str], line: Sequence[str], open_text: str,
                 temperature: float, rng: random.Random, pieces: list[Piece]) -> None:
    """Finish the open paragraph as the model would (its hesitations aside), after a
    hesitation of its own where sampling draws one; a paragraph not the model's is closed
    and the reasoning goes on after it."""
    plain = _plain(open_text)
    for kind, paragraph in _alternatives(paths, written, line):
        whole = paragraph + _separator(paragraph)
        if whole.startswith(plain):
            rest = whole[len(plain):]
            if temperature > 0 and rest.strip() and open_text[-1:].isspace() and \
                    _draw(rng, {"original", "hesitation"}) == "hesitation":
                pieces.append((rng.choice(HESITATIONS) + " ", "hesitation"))
            pieces.append((rest, kind))
            written.append(paragraph)
            return
    pieces.append(("\n" if open_text.endswith("\n") else PARAGRAPH, "original"))
    written.append(open_text.strip())


def _alternatives(paths: _Paths, written: Sequence[str],
                  line: Sequence[str]) -> list[tuple[str, str]]:
    """What the model may write as the paragraph after `written`, its own first: the path's,
    the right step at the slip, the other check at the check."""
    index = len(written)
    greedy = line[index]
    found = [("original", greedy)]
    if line is paths.original and paths.corrected is not None and index == paths.slip:
        found.append(("correction", paths.corrected[index]))
    if line is paths.original and _is_check(greedy) and paths.caught_check is not None:
        other = paths.missed_check if greedy == paths.caught_check else paths.caught_check
        assert other is not None
        found.append(("check", other))
    return found


def _next_paragraph(paths: _Paths, written: Sequence[str], line: Sequence[str],
                    temperature: float, rng: random.Random) -> tuple[str, str]:
    """The paragraph after `written` and what wrote it: the path's own at temperature 0,
    else one drawn from the kinds that can stand there."""
    alternatives = dict(_alternatives(paths, written, line))
    greedy = alternatives["original"]
    if temperature <= 0:
        return "original", greedy
    kind = _draw(rng, {*alternatives, "hesitation"})
    if kind == "hesitation":
        return kind, rng.choice(HESITATIONS) + " " + greedy
    return kind, alternatives[kind]


def _draw(rng: random.Random, kinds: set[str]) -> str:
    names = sorted(kinds)
    return rng.choices(names, weights=[_WEIGHTS[name] for name in names])[0]


def _ending(paths: _Paths, written: Sequence[str], pieces: list[Piece]) -> list[Piece]:
    answer = _answer(paths, written)
    pieces.append((THINK_CLOSE + PARAGRAPH + thinking._content(answer), "original"))
    return pieces


def _tokens_out(pieces: Sequence[Piece], max_tokens: int) -> OfflineContinuation:
    tokens: list[TokenLogprob] = []
    for text, kind in pieces:
        tokens.extend(TokenLogprob(piece, _LOGPROBS[kind]) for piece in _TOKEN.findall(text))
    finish = "stop"
    if len(tokens) > max_tokens:
        tokens, finish = tokens[:max(0, max_tokens)], "length"
    return OfflineContinuation("".join(token.text for token in tokens), tokens, finish)
