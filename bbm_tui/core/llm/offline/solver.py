"""`solver/bbm` (docs/DESIGN.md §12), without litellm: an offline model that
writes the next step of any trace for any question of word sorting, tracking shuffled
objects, multistep arithmetic and Dyck languages (typed questions too), in the dataset's
phrasing, from the task logic run forwards (core/tasks/solver.py). At temperature 0 its
steps are right; above it, seeded samples carry the dataset's kinds of mistakes, with
log-probabilities that rank the right step highest; `n` gives several. The handler in
handler.py serves it as a litellm custom provider, as it serves `replay/bbm`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from bbm_tui.core.llm.offline.replay import last_user_text, parse_generation_prompt
from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.tasks import get_task
from bbm_tui.core.tasks.solver import SolverError, next_step

PROVIDER = "solver"
MODEL = "solver/bbm"


class SolverModelError(ValueError):
    """A request solver/bbm cannot answer; the message says why, for the user."""


@dataclass(frozen=True)
class SolverChoice:
    """One choice: the text a model would send after "Thought k:", with its tokens."""

    text: str
    tokens: tuple[TokenLogprob, ...]


def respond(model: str, messages: Sequence[dict], optional_params: dict) -> list[SolverChoice]:
    """The choices for one request (`n` of them, default 1)."""
    name = model.rpartition("/")[2]
    if name != "bbm":
        raise SolverModelError(f"solver/{name}: no such model (there is solver/bbm)")
    request = parse_generation_prompt(last_user_text(messages))
    if request is None:
        raise SolverModelError(
            "solver/bbm only writes the next step of a trace (the paper's generation "
            "prompts); it does not judge traces: pick another model to find mistakes"
        )
    prefix = get_task(request.task).question_prefix
    question = request.question.removeprefix(prefix)
    temperature = float(optional_params.get("temperature") or 0.0)
    seed = int(optional_params.get("seed") or 0)
    count = max(1, int(optional_params.get("n") or 1))
    try:
        candidates = next_step(request.task, question, list(request.steps), temperature,
                               seed, count)
    except SolverError as error:
        raise SolverModelError(f"solver/bbm: {error}") from None
    return [_choice(candidate.text, candidate.tokens) for candidate in candidates]


def _choice(text: str, tokens: Sequence[TokenLogprob]) -> SolverChoice:
    # A model writes a space after "Thought k:"; it belongs to the first token.
    shifted = list(tokens)
    if shifted:
        shifted[0] = TokenLogprob(" " + shifted[0].text, shifted[0].logprob)
    return SolverChoice(" " + text, tuple(shifted))
