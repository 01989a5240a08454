"""The offline model `replay/bbm` (docs/DESIGN.md §6), without litellm.

It recognises the question in a generation prompt, counts the thoughts already written, and
answers with the next recorded step of the bundled dataset, or of a task of one's own whose
questions file has recorded traces (rows with `steps`; issue 34, item 9). It is
deterministic and cannot invent a step: a trace that leaves the recorded one gets an error
that says so. `llm.py` wraps
this engine in a litellm custom provider that streams the answer at a settable pace
(`BBM_TUI_REPLAY_TPS` tokens per second, 0 = instant).
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import string
import threading
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

from bbm_tui.core.dataset import TraceRow, bundled_rows, question_rows
from bbm_tui.core.prompts.generation import generation_prompt
from bbm_tui.core.prompts.thoughts import label, split_thoughts, thought_line
from bbm_tui.core.tasks import INPUT_FIELD, TASK_NAMES, Task, get_task, user_tasks

PROVIDERS = ("replay", "simulated")
# simulated/ names are made up on the fly: rm-X for any X in 0.0..1.0 (SIMULATED_NAME).
MODEL_NAMES = {"replay": ("bbm",), "simulated": ("rm-X",)}
SIMULATED_NAME = re.compile(r"rm-(\d*\.?\d+)")
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
    """Split a next-step prompt (docs/DESIGN.md §3) back into task, question and steps so far."""
    return next(iter(generation_requests(prompt)), None)


def generation_requests(prompt: str) -> list[GenerationRequest]:
    """Every reading of a next-step prompt as a task's: the paper's five, then one's own
    (two zero-shot tasks begin with the same instruction: their questions tell them apart)."""
    found = []
    for task in (*TASK_NAMES, *(task.name for task in user_tasks())):
        prefix = generation_prompt(task) + "\n\n"
        if not prompt.startswith(prefix):
            continue
        rest = prompt[len(prefix):]
        split = rest.find("\n" + label(1))
        if split < 0:
            continue
        steps = split_thoughts(rest[split + 1:])
        if steps is not None:
            found.append(GenerationRequest(task, rest[:split], steps))
    return found


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
        self._inputs: dict[tuple[str, str], list[int]] | None = None

    def respond(self, model: str, messages: Sequence[dict], optional_params: dict) -> str:
        """The full text the model answers (the provider applies `stop`)."""
        provider, _, name = model.rpartition("/")
        if provider == "simulated":
            return self.simulated_answer(name, last_user_text(messages))
        if name not in MODEL_NAMES["replay"]:
            raise ReplayError(f"replay/{name}: no such replay model (there is replay/bbm)")
        finder = self.parse_finder_prompt(last_user_text(messages))
        if finder is not None:
            return finder_answer(finder, finder.row.mistake_index)
        requests = generation_requests(last_user_text(messages))
        if not requests:
            raise ReplayError(
                "replay/bbm does not know this prompt: it answers only the generation and "
                "mistake-finding prompts of the bundled BIG-Bench Mistake questions, and the "
                "generation prompts of recorded traces in a task's questions file"
            )
        request = next((found for found in requests
                        if self.rows_for(found.task, found.question)), requests[0])
        return self.next_step_text(request)

    def next_step_text(self, request: GenerationRequest) -> str:
        rows = self.rows_for(request.task, request.question)
        if not rows:
            where = ("the bundled dataset" if request.task in TASK_NAMES else
                     "recorded traces (rows with steps in the task's questions file)")
            raise ReplayError(
                f"replay/bbm does not know this {get_task(request.task).title.lower()} question: "
                f"it replays only {where}; pick a question from it, or choose another model"
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
        if task not in TASK_NAMES:
            return recorded_rows(task, question)
        index = self._question_index()
        rows = bundled_rows(task)
        return [rows[i] for i in index.get((task, question), [])]

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

    # -- mistake finding: the gold-label oracle and the simulated reward model

    def parse_finder_prompt(self, text: str, model: str = REPLAY_MODEL) -> FinderRequest | None:
        """Recognise a finder template filled with a bundled trace; None when the text is not
        a finder prompt. Raises ReplayError for a finder prompt about an unknown trace."""
        matched = False
        for task, method, tail, pattern in [*_finder_patterns(), *_own_finder_patterns()]:
            # The literal after a template's last field is a cheap first filter.
            match = pattern.fullmatch(text) if text.endswith(tail) else None
            if match is None:
                continue
            matched = True
            current = match.groupdict().get("current_step")
            number = int(current) if current is not None else None
            if task in TASK_NAMES:
                row = self._finder_row(task, match.group("input"), match.group("steps"), number)
            else:
                row = _own_finder_row(task, match.group("input"), match.group("steps"), number,
                                      model)
            if row is not None:
                return FinderRequest(task, method, row, number)
        if matched:
            raise ReplayError(
                f"{model} does not know this trace: it knows only the labelled traces of the "
                "dataset and of a task's questions file; choose another model"
            )
        return None

    def _finder_row(
        self, task: str, input_text: str, steps_text: str, current_step: int | None
    ) -> TraceRow | None:
        from bbm_tui.core.prompts.thoughts import format_steps

        rows = bundled_rows(task)
        for index in self._input_index().get((task, input_text), []):
            row = rows[index]
            shown = row.steps if current_step is None else row.steps[:current_step]
            if current_step is not None and not 1 <= current_step <= len(row.steps):
                continue
            if format_steps(shown) == steps_text:
                return row
        return None

    def _input_index(self) -> dict[tuple[str, str], list[int]]:
        with self._lock:
            if self._inputs is None:
                index: dict[tuple[str, str], list[int]] = {}
                for task in TASK_NAMES:
                    for number, row in enumerate(bundled_rows(task)):
                        index.setdefault((task, row.input), []).append(number)
                self._inputs = index
            return self._inputs

    def simulated_answer(self, name: str, text: str) -> str:
        accuracy = simulated_accuracy(name)
        request = self.parse_finder_prompt(text, f"simulated/{name}")
        if request is None or request.task not in TASK_NAMES:
            raise ReplayError(
                f"simulated/{name} answers only the mistake-finding prompts of the bundled "
                "BIG-Bench Mistake traces"
            )
        return finder_answer(request, simulated_location(accuracy, request.task, request.row))


# Set from the app (tokens per second; 0 = instant); None: the environment's, else the default.
_pace_override: float | None = None


def set_pace(tokens_per_second: float | None) -> None:
    """The replay's pace from now on (None: back to BBM_TUI_REPLAY_TPS or the default)."""
    global _pace_override
    if tokens_per_second is not None and tokens_per_second < 0:
        raise ValueError("the replay pace must be 0 (instant) or more tokens a second")
    _pace_override = tokens_per_second


def pace() -> float:
    """Tokens a second the replay streams at now (0: instant)."""
    seconds = seconds_per_token()
    return 0.0 if seconds == 0 else 1.0 / seconds


def seconds_per_token() -> float:
    if _pace_override is not None:
        return 0.0 if _pace_override == 0 else 1.0 / _pace_override
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


def recorded_rows(task: str, question: str) -> list[TraceRow]:
    """A task of one's own's recorded traces of `question`: the rows of its questions file
    that have steps (read each time: the file is the user's, and small)."""
    found = get_task(task)
    return [row for row in question_rows(found)
            if row.steps and found.question(row.input) == question]


def has_recorded_traces(task: str) -> bool:
    """Whether replay/bbm has anything to replay on a task of one's own."""
    return any(row.steps for row in question_rows(task))


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
        text += "\n" + thought_line(done + 2, row.steps[done + 1])
    return text


def _first_divergence(row: TraceRow, written: list[str]) -> int:
    for index, step in enumerate(written):
        if index >= len(row.steps) or row.steps[index] != step:
            return index
    return len(written)


# ---------------------------------------------------------------------------- finder answers


@dataclass(frozen=True)
class FinderRequest:
    """A finder prompt about a bundled trace: which method, and (step-level) which thought."""

    task: str
    method: str
    row: TraceRow
    current_step: int | None


@cache
def _finder_patterns() -> list[tuple[str, str, str, re.Pattern[str]]]:
    """Per (task, method) template: its closing literal and a regular expression with its
    fields turned into groups. The critic's template (ours) is filled per task: its
    description, and the question as the task writes it around the input."""
    from bbm_tui.core.prompts.finding import (
        CRITIC,
        METHODS,
        OUR_METHODS,
        finding_prompts,
        our_finding_prompts,
    )

    patterns = []
    for task, prompts in finding_prompts().items():
        for method in METHODS.values():
            template = prompts.get(method.template_key)
            if template is not None:
                patterns.append((task, method.name, *_template_pattern(template, {})))
        found = get_task(task)
        critic = our_finding_prompts()[OUR_METHODS[CRITIC].template_key]
        fixed = {"description": re.escape(found.description),
                 "input": re.escape(found.question_prefix) + r"(?P<input>.*?)"}
        patterns.append((task, CRITIC, *_template_pattern(critic, fixed)))
    return patterns


# A task of one's own's finder patterns, made when first needed (its prompt files are read
# then), for as long as the task is the one loaded.
_own_patterns: dict[Task, list[tuple[str, str, str, re.Pattern[str]]]] = {}


def _own_finder_patterns() -> list[tuple[str, str, str, re.Pattern[str]]]:
    """The patterns of the finder prompts of the user's tasks (replay/bbm answers them for
    the traces recorded in a task's questions file): the task's own few-shot templates, and
    our zero-shot ones and the critic filled with its description and question."""
    from bbm_tui.core.prompts.finding import (
        ALL_METHODS,
        check_method,
        methods_for,
        our_finding_prompts,
        our_methods_for,
    )

    patterns = []
    for found in user_tasks():
        # Made once per task; its questions file is read only when one of them matches.
        if found not in _own_patterns:
            made = []
            for name in (*methods_for(found), *our_methods_for(found)):
                method = check_method(found, name)
                if method.ours:
                    template = our_finding_prompts()[ALL_METHODS[name].template_key]
                    prefix, _, suffix = found.question_template.partition(INPUT_FIELD)
                    fixed = {"description": re.escape(found.description or found.title),
                             "input": re.escape(prefix) + r"(?P<input>.*?)" + re.escape(suffix)}
                else:
                    template = (found.finding_prompts or {})[method.template_key]
                    fixed = {}
                made.append((found.name, name, *_template_pattern(template, fixed)))
            _own_patterns[found] = made
        patterns += _own_patterns[found]
    return patterns


def _own_finder_row(task: str, input_text: str, steps_text: str, current_step: int | None,
                    model: str) -> TraceRow | None:
    """The recorded trace of a task of one's own that a finder prompt shows (None: none);
    ReplayError when its row has no label to answer from."""
    from bbm_tui.core.prompts.thoughts import format_steps

    found = get_task(task)
    for row in question_rows(found):
        if not row.steps or row.input != input_text:
            continue
        if current_step is not None and not 1 <= current_step <= len(row.steps):
            continue
        shown = row.steps if current_step is None else row.steps[:current_step]
        if format_steps(shown) != steps_text:
            continue
        if not row.labelled:
            raise ReplayError(
                f"{model} answers a finder on a recorded trace from its label, and this "
                f"trace of {task!r} has no `mistake_index` in its row of "
                f"{found.questions_path}: add one (null: no mistake), or choose another model")
        return row
    return None


def _template_pattern(template: str, fixed: dict[str, str]) -> tuple[str, re.Pattern[str]]:
    """A template's closing literal, and a regular expression with its fields as groups
    (`fixed` says what some fields hold)."""
    groups = {
        "input": r"(?P<input>.*?)",
        "steps": f"(?P<steps>{re.escape(label(1))} .*?)",
        "current_step": r"(?P<current_step>\d+)",
        **fixed,
    }
    parts = list(string.Formatter().parse(template))
    regex = "".join(
        re.escape(literal) + (groups[field] if field is not None else "")
        for literal, field, _, _ in parts
    )
    tail = parts[-1][0] if parts[-1][1] is None else ""
    return tail, re.compile(regex, re.DOTALL)


def finder_answer(request: FinderRequest, location: int | None) -> str:
    """The answer, in the paper's format for the request's method, of a finder that believes
    the first mistake is at `location` (0-based; None = no mistake). It knows only the first
    mistake, so it calls every thought after it incorrect too (they build on it)."""
    number = None if location is None else location + 1
    if request.method == "critic":
        if number is None:
            return "Every thought is correct, so there is no wrong thought: \\boxed{-1}"
        return f"Thought {number} is the earliest wrong thought: \\boxed{{{number}}}"
    if request.current_step is None:
        if request.method == "direct-trace":
            return "No" if number is None else str(number)
        if number is None:
            return "All thoughts are correct. So the answer is No"
        earlier = f"Thoughts 1 to {number - 1} are correct, but " if number > 2 else (
            "Thought 1 is correct, but " if number == 2 else ""
        )
        return f"{earlier}Thought {number} is incorrect. So the answer is {number}"
    k = request.current_step
    correct = number is None or k < number
    if request.method == "direct-step":
        return "Yes" if correct else "No"
    if number is None:
        reason = "The trace has no mistake"
    elif k < number:
        reason = f"Thought {k} comes before the first mistake (Thought {number})"
    elif k == number:
        reason = f"Thought {k} is the first mistake"
    else:
        reason = f"Thought {k} comes after the first mistake (Thought {number})"
    verdict = "correct. Yes" if correct else "incorrect. No"
    return f"Comment 1: {reason}, so Thought {k} is {verdict}"


def simulated_accuracy(name: str) -> float:
    match = SIMULATED_NAME.fullmatch(name)
    accuracy = float(match.group(1)) if match else -1.0
    if not 0.0 <= accuracy <= 1.0:
        raise ReplayError(
            f"simulated/{name}: no such model; simulated/rm-X is a reward model right with "
            "probability X, a number from 0.0 to 1.0 (e.g. simulated/rm-0.65)"
        )
    return accuracy


@cache
def location_counts(task: str) -> Counter[int | None]:
    """How often each first-mistake location (None = no mistake) occurs in a task's traces."""
    return Counter(row.mistake_index for row in bundled_rows(task))


def simulated_location(accuracy: float, task: str, row: TraceRow) -> int | None:
    """The paper's simulated reward model: the gold location with probability `accuracy`,
    otherwise a wrong one drawn from the task's distribution of locations (limited to the
    thoughts this trace has). Seeded by the model, the task and the trace, so a trace always
    gets the same answer."""
    seed_text = "\x1f".join([repr(accuracy), task, row.input, *row.steps])
    rng = random.Random(hashlib.sha256(seed_text.encode("utf-8")).digest())
    if rng.random() < accuracy:
        return row.mistake_index
    wrong = {
        location: count
        for location, count in location_counts(task).items()
        if location != row.mistake_index and (location is None or location < len(row.steps))
    }
    if not wrong:  # every location this trace allows is rare in the task: pick evenly
        choices = [None, *range(len(row.steps))]
        wrong = {location: 1 for location in choices if location != row.mistake_index}
    locations = sorted(wrong, key=lambda location: -1 if location is None else location)
    return rng.choices(locations, weights=[wrong[location] for location in locations])[0]


@cache
def engine() -> ReplayEngine:
    return ReplayEngine()
