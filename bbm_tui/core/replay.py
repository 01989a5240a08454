"""The offline model `replay/bbm` (DESIGN §6), without litellm.

It recognises the question in a generation prompt, counts the thoughts already written, and
answers with the next recorded step of the bundled dataset. It is deterministic and cannot
invent a step: a trace that leaves the recorded one gets an error that says so. `llm.py` wraps
this engine in a litellm custom provider that streams the answer at a settable pace
(`BBM_TUI_REPLAY_TPS` tokens per second, 0 = instant).
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from bbm_tui.core.dataset import TraceRow, bundled_rows
from bbm_tui.core.prompts import generation_prompt
from bbm_tui.core.tasks import TASK_NAMES, get_task

PROVIDERS = ("replay",)
MODEL_NAMES = {"replay": ("bbm",)}
REPLAY_MODEL = "replay/bbm"
PACE_ENV = "BBM_TUI_REPLAY_TPS"
DEFAULT_TOKENS_PER_SECOND = 30.0

_TOKEN = re.compile(r"\s*\S+|\s+")


class ReplayError(ValueError):
    """A request the replay model cannot answer; the message starts with the model's name."""


def tokens_of(text: str) -> list[str]:
    """Word-sized pieces (leading spaces attached, as in BPE) that join back to `text`."""
    return _TOKEN.findall(text)


def paced_pieces(text: str, seconds_per_token: float) -> list[str]:
    """How to stream `text`: token by token at a pace, or all at once when the pace is zero."""
    if seconds_per_token == 0:
        return [text] if text else []
    return tokens_of(text)


@dataclass(frozen=True)
class GenerationRequest:
    task: str
    question: str
    steps: tuple[str, ...]


def parse_generation_prompt(prompt: str) -> GenerationRequest | None:
    """Split a next-step prompt (DESIGN §3) back into task, question and steps so far."""
    for task in TASK_NAMES:
        prefix = generation_prompt(task) + "\n\n"
        if not prompt.startswith(prefix):
            continue
        rest = prompt[len(prefix):]
        split = rest.find("\nThought 1:")
        if split < 0:
            return None
        question, thoughts = rest[:split], rest[split + 1:]
        lines = thoughts.split("\n")
        if lines[-1] != f"Thought {len(lines)}:":
            return None
        steps = []
        for number, line in enumerate(lines[:-1], start=1):
            label = f"Thought {number}: "
            if not line.startswith(label):
                return None
            steps.append(line[len(label):])
        return GenerationRequest(task, question, tuple(steps))
    return None


def last_user_text(messages: Sequence[dict]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):  # content parts
                return "".join(part.get("text", "") for part in content if isinstance(part, dict))
            return str(content or "")
    return ""


class ReplayEngine:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._questions: dict[tuple[str, str], list[int]] | None = None

    def respond(self, model: str, messages: Sequence[dict], optional_params: dict) -> str:
        """The full text the model answers (the provider applies `stop`)."""
        name = model.split("/", 1)[-1]
        if name not in MODEL_NAMES["replay"]:
            raise ReplayError(f"replay/{name}: no such replay model (there is replay/bbm)")
        request = parse_generation_prompt(last_user_text(messages))
        if request is None:
            raise ReplayError(
                "replay/bbm does not know this prompt: it answers only the generation prompts "
                "of the bundled BIG-Bench Mistake questions"
            )
        return self.next_step_text(request)

    def next_step_text(self, request: GenerationRequest) -> str:
        rows = self.rows_for(request.task, request.question)
        if not rows:
            raise ReplayError(
                f"replay/bbm does not know this {get_task(request.task).title.lower()} question: "
                "it replays only the bundled dataset; pick a question from it, or choose "
                "another model"
            )
        written = list(request.steps)
        for row in rows:
            if _continues(row, written):
                return _continuation(row, len(written))
        number = _first_divergence(rows[0], written) + 1
        raise ReplayError(
            f"replay/bbm cannot invent a new step: Thought {number} differs from the recorded "
            "trace of this question; choose another model to continue an edited trace"
        )

    def rows_for(self, task: str, question: str) -> list[TraceRow]:
        index = self._question_index()
        rows = bundled_rows(task)
        return [rows[i] for i in index.get((task, question), [])]

    def row_index(self, task: str, question: str) -> int | None:
        found = self._question_index().get((task, question))
        return found[0] if found else None

    def _question_index(self) -> dict[tuple[str, str], list[int]]:
        with self._lock:
            if self._questions is None:
                index: dict[tuple[str, str], list[int]] = {}
                for task in TASK_NAMES:
                    question_of = get_task(task).question
                    for number, row in enumerate(bundled_rows(task)):
                        index.setdefault((task, question_of(row.input)), []).append(number)
                self._questions = index
            return self._questions

    def seconds_per_token(self) -> float:
        return seconds_per_token()


def seconds_per_token() -> float:
    raw = os.environ.get(PACE_ENV, "").strip()
    if not raw:
        return 1.0 / DEFAULT_TOKENS_PER_SECOND
    try:
        rate = float(raw)
    except ValueError:
        raise ReplayError(
            f"replay/bbm: {PACE_ENV} must be a number (tokens per second, 0 = instant), "
            f"not {raw!r}"
        ) from None
    if rate < 0:
        raise ReplayError(f"replay/bbm: {PACE_ENV} must be 0 or more, not {raw!r}")
    return 0.0 if rate == 0 else 1.0 / rate


def _continues(row: TraceRow, written: list[str]) -> bool:
    recorded = row.steps
    if len(written) <= len(recorded):
        return recorded[: len(written)] == written
    # Past the end of the recorded trace only empty steps can have been written (the model
    # said nothing, and the stepper asked once more before it stopped).
    return recorded == written[: len(recorded)] and not any(written[len(recorded):])


def _continuation(row: TraceRow, done: int) -> str:
    """The recorded next step, then the following thought, as a base model would run on."""
    if done >= len(row.steps):
        return ""
    text = row.steps[done]
    if done + 1 < len(row.steps):
        text += f"\nThought {done + 2}: {row.steps[done + 1]}"
    return text


def _first_divergence(row: TraceRow, written: list[str]) -> int:
    for index, step in enumerate(written):
        if index >= len(row.steps) or row.steps[index] != step:
            return index
    return len(written)


@cache
def engine() -> ReplayEngine:
    return ReplayEngine()
