"""The task logic run forwards (docs/DESIGN.md §12): `solver/bbm`, an offline model that writes the
next step of a trace for any question of word sorting, tracking, arithmetic or Dyck languages, in
the dataset's phrasing. Pure: no model calls; the provider that serves it comes later.

At temperature 0 every candidate is the step a careful trace writes next. Above 0 each
candidate is, with a probability that grows with the temperature, a wrong version of that step
carrying a mistake of the kinds the dataset shows; `mistake` names it (None: the step is
right). Everything is seeded: the same question, steps, temperature, seed and n give the same
candidates.

Log-probabilities are synthetic, made up to be consistent: every token of a step gets a small
negative score, and each token where a wrong version departs from the right step gets a large
one, so the right step ranks highest almost always (never by construction).
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from types import ModuleType

from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.tasks import arithmetic, dyck, get_task, tracking, word_sorting
from bbm_tui.core.tasks.verdicts import Judgement, QuestionError

# The tasks the solver writes; each module reads a question (`start`), replays a step
# (`check_step`), writes the next one (`write_step`) and wrong versions of it (`mistakes`).
SOLVED: dict[str, ModuleType] = {
    "word_sorting": word_sorting,
    "tracking_shuffled_objects": tracking,
    "multistep_arithmetic": arithmetic,
    "dyck_languages": dyck,
}

# How likely a sampled candidate is to carry a mistake, per unit of temperature.
MISTAKE_RATE = 0.35
MAX_MISTAKE_RATE = 0.9
# Synthetic log-probabilities (per token): a right token, and a token where a wrong version
# departs from the right step.
RIGHT_TOKEN_LOGPROB = -0.05
WRONG_TOKEN_LOGPROB = -2.5


class SolverError(ValueError):
    """A request the solver cannot serve; the message says why, for the user."""


@dataclass(frozen=True)
class Candidate:
    """One written step. `mistake` is the kind of mistake sampled into it (None: none); the
    tests check the verifiers catch it at this step."""

    text: str
    logprob: float
    tokens: tuple[TokenLogprob, ...]
    mistake: str | None = None


def solver_task(task: str) -> ModuleType:
    get_task(task)  # an unknown name gets the tasks' own message
    if task not in SOLVED:
        raise SolverError(
            f"the solver does not write {get_task(task).title.lower()} steps: its statements "
            "leave too many ways to reason for one program to write them; use a model"
        )
    return SOLVED[task]


def replay(logic: ModuleType, question_input: str, prior_steps: Sequence[str]) -> object:
    """The state the steps so far reach, each read as written (a mistaken step is taken as
    the trace states it, so the solver goes on from the trace as it stands)."""
    try:
        state = logic.start(question_input)
    except QuestionError as error:
        raise SolverError(f"cannot read the question: {error}") from None
    for step in prior_steps:
        with contextlib.suppress(Judgement):  # go on from what the step says
            logic.check_step(state, step)
    if getattr(state, "answered", False):
        raise SolverError("the trace already states its answer")
    return state


def _rng(task: str, question_input: str, prior_steps: Sequence[str], temperature: float,
         seed: int) -> random.Random:
    """A generator that depends only on the request (Python's hash() of a str changes from
    run to run, so a digest is used)."""
    digest = hashlib.sha256(
        "\x1f".join([task, question_input, *prior_steps, repr(temperature), str(seed)])
        .encode("utf-8")
    ).hexdigest()
    return random.Random(int(digest[:16], 16))


_TOKEN = re.compile(r"\s*\S+")


def tokens_of(text: str) -> list[str]:
    """Word-like tokens that join back into exactly `text`."""
    tokens = _TOKEN.findall(text)
    return tokens if "".join(tokens) == text else [text]


def score(text: str, right: str, rng: random.Random) -> tuple[TokenLogprob, ...]:
    """Synthetic log-probabilities: small for tokens the right step shares, large for each
    place where `text` departs from it (a token changed or added, or one left out: then the
    token after the gap carries it)."""
    tokens = tokens_of(text)
    departures = [0] * len(tokens)
    matcher = difflib.SequenceMatcher(a=tokens_of(right), b=tokens, autojunk=False)
    for tag, _, _, start, end in matcher.get_opcodes():
        if tag in ("replace", "insert"):
            for index in range(start, end):
                departures[index] += 1
        elif tag == "delete" and tokens:
            departures[min(start, len(tokens) - 1)] += 1
    scored = []
    for token, departed in zip(tokens, departures, strict=True):
        base = RIGHT_TOKEN_LOGPROB + departed * WRONG_TOKEN_LOGPROB
        scored.append(TokenLogprob(token, round(base * rng.uniform(0.5, 1.5), 4)))
    return tuple(scored)


def _candidate(text: str, right: str, mistake: str | None, rng: random.Random) -> Candidate:
    tokens = score(text, right, rng)
    return Candidate(text, round(sum(t.logprob for t in tokens), 4), tokens, mistake)


def next_step(task: str, question_input: str, prior_steps: Sequence[str],
              temperature: float = 0.0, seed: int = 0, n: int = 1) -> list[Candidate]:
    """`n` candidates for the step after `prior_steps` (see the module's notes)."""
    if n < 1:
        raise SolverError("n must be at least 1")
    if temperature < 0:
        raise SolverError("the temperature cannot be negative")
    logic = solver_task(task)
    state = replay(logic, question_input, prior_steps)
    try:
        right = logic.write_step(state)
    except QuestionError as error:
        raise SolverError(f"cannot go on: {error}") from None
    rng = _rng(task, question_input, prior_steps, temperature, seed)
    rate = min(MAX_MISTAKE_RATE, MISTAKE_RATE * temperature)
    candidates = []
    for _ in range(n):
        wrong = logic.mistakes(state, rng) if temperature > 0 and rng.random() < rate else []
        if wrong:
            kind, text = rng.choice(wrong)
            candidates.append(_candidate(text, right, kind, rng))
        else:
            candidates.append(_candidate(right, right, None, rng))
    return candidates
