"""The records and named values every layer shares (docs/DESIGN.md §7). A leaf: it imports nothing
of the project, so the store, the model-call boundary, the batch commands and the app can all
speak of a model, a call or a step's origin without importing each other. The store's and the
calls' records and named values (a verdict, a call's record, a session's source...) are in
core/records.py, the other leaf, which the app's first frame does not import.

The named values are `StrEnum`s: each member *is* its string, which is what the store keeps
and the JSONL files carry.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

# chat: one call a step, the prompt as a user message; completion: the same through text
# completion (base models); thinking: one call a trace, the model's reasoning cut into steps
# (docs/DESIGN.md §16).
Mode = Literal["chat", "completion", "thinking"]
MODES: tuple[Mode, ...] = ("chat", "completion", "thinking")

DEFAULT_MODEL = "replay/bbm"
DEFAULT_STEP_MAX_TOKENS = 1024
# Seconds a call may wait to connect, for each read, and for a stream's first text.
DEFAULT_TIMEOUT_S = 60.0
DEFAULT_STEP_TIMEOUT_S = 300.0
# Longest silence of a stream once it has begun to write.
DEFAULT_IDLE_TIMEOUT_S = 30.0
# A whole answer (a finder's) at a slow local model's ~3 tokens a second: ~1,800 tokens.
DEFAULT_ANSWER_TIMEOUT_S = 600.0
DEFAULT_STEP_LIMIT = 160
# The temperatures a person may set for generation (OpenAI's range; most providers share it).
MIN_TEMPERATURE = 0.0
MAX_TEMPERATURE = 2.0
# Generation's temperature step at a time unless given: the paper's.
PAPER_TEMPERATURE = 0.0
# Who labels, when nobody said: the app's own user.
DEFAULT_ANNOTATOR = "me"
# Whose label settles a trace the annotators disagree on (docs/DESIGN.md §11); the parentheses
# keep it apart from any annotator's name (`--annotator` refuses them).
ADJUDICATOR = "(adjudicated)"
# The task verifier as a judge (core/judging/judges.py): its name, and the model its runs are
# recorded under (it asks none).
VERIFY = "verify"
VERIFIER_MODEL = "verifier"
# The model of a recorded trace (import, a queue) whose row names none: nothing to call.
RECORDED_MODEL = "dataset"
# A finder's answer is short; CoT reasoning runs to a few hundred tokens.
DEFAULT_FINDER_MAX_TOKENS = 2048
# What one call's usage may sanely say; anything else (2**64, 1e23, negative, NaN, a string)
# is stored as unknown.
MAX_CALL_TOKENS = 10**9
MAX_CALL_COST = 1000.0  # dollars


def sane_tokens(value: Any) -> int | None:
    """A token count as a provider should send it, else None (unknown): whole, 0 or more,
    at most MAX_CALL_TOKENS. Never a bool, a float, a string, NaN or 2**64."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_CALL_TOKENS else None


def sane_cost(value: Any) -> float | None:
    """A call's cost in dollars, else None (unknown): finite, 0 or more, at most
    MAX_CALL_COST."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    cost = float(value)
    return cost if math.isfinite(cost) and 0.0 <= cost <= MAX_CALL_COST else None


# The longest question (a dataset row's `input`) and target bbm-tui takes, in characters. The
# bundled dataset's longest question has 1,026; a step's prompt carries the whole question, and
# no model reads much more than this in one (a 10 MB question took 47 s and 871 MB to the
# app's first frame). A longer one is refused where it comes in, naming the file and line.
MAX_QUESTION_CHARS = 100_000


# A log-probability is log(p) for a probability 0 < p <= 1: at most 0 (a provider's float32
# rounding of log 1 may land a hair above, kept as 0), finite, and not below the floor: far
# under any real token's (OpenAI's "as good as impossible" is -9999), and low enough that a sum
# over a 10^5-token trace stays a plain float. Anything else (positive, NaN, infinite, 1e308,
# `true` read as 1.0) is no log-probability at all.
LOGPROB_FLOOR = -1e6
LOGPROB_ROUNDING = 1e-6


def sane_logprob(value: Any) -> float | None:
    """A token's log-probability as a model can give it, else None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not LOGPROB_FLOOR <= value <= LOGPROB_ROUNDING:  # NaN fails both comparisons
        return None
    return min(float(value), 0.0)


def plausible_logprob(value: Any) -> bool:
    return sane_logprob(value) is not None


def sane_logprob_sum(value: Any, tokens: int | None = None) -> float | None:
    """A stored sum of log-probabilities (over `tokens` tokens, where known) that such tokens
    could add up to, else None: what an earlier bbm-tui may have stored unchecked."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    count = max(tokens or 1, 1)
    if value > LOGPROB_ROUNDING * count or (tokens and value < LOGPROB_FLOOR * count):
        return None
    return min(float(value), 0.0)


class StepOrigin(StrEnum):
    """Who wrote a step."""

    MODEL = "model"  # generated, one call per step
    TYPED = "typed"  # written by the person
    DATASET = "dataset"  # loaded from a recorded trace (to label it)
    EDIT = "edit"  # the person rewrote a model's step (a new branch)
    BACKTRACK = "backtrack"  # a resampled step chosen by backtracking (a new branch)
    THINKING = "thinking"  # cut from a thinking model's reasoning (docs/DESIGN.md §16)


class SplitRule(StrEnum):
    """How a thinking model's reasoning is cut into numbered steps (docs/DESIGN.md §16)."""

    PARAGRAPH = "paragraph"  # ProcessBench's: a step ends at each blank line (the default)
    SENTENCE = "sentence"  # Thought Anchors' unit: a step ends after a sentence
    LINE = "line"  # PRM800K's: a step ends at each newline


DEFAULT_SPLIT_RULE = SplitRule.PARAGRAPH


@dataclass(frozen=True)
class ModelSpec:
    """Which model to call and how. API keys are never part of it: they stay in the environment."""

    model: str = DEFAULT_MODEL
    api_base: str | None = None
    mode: Mode = "chat"
    # A litellm Router file (core/llm/router.py): `model` then names one of its model groups,
    # served by the deployments the file lists (each with its own api base and key).
    router: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {self.mode!r}")


@dataclass(frozen=True)
class RetryPolicy:
    """Our own retries of a failed call: how many attempts, and the backoff between them."""

    attempts: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0
    max_retry_after_s: float = 60.0

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        """Seconds to wait before attempt `attempt + 1` (attempt counts from 1)."""
        if retry_after_s is not None:
            return min(max(retry_after_s, 0.0), self.max_retry_after_s)
        backoff = self.base_delay_s * (2 ** (attempt - 1))
        return min(backoff, self.max_delay_s) * (0.75 + random.random() / 2)


@dataclass(frozen=True)
class CallSettings:
    """What one model call is made with: sampling, limits and timeouts, retries."""

    temperature: float = PAPER_TEMPERATURE
    max_tokens: int | None = DEFAULT_STEP_MAX_TOKENS
    logprobs: bool = False
    timeout_s: float = DEFAULT_TIMEOUT_S
    # Longest silence between two chunks of a stream, once it has begun to write, before it
    # counts as a timeout (before its first text, `timeout_s` applies).
    idle_timeout_s: float = DEFAULT_IDLE_TIMEOUT_S
    # Wall-clock limit of one generation step: a server dripping text with no newline is cut
    # here, the text kept and marked truncated, like a token-limit cut.
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S
    # Wall-clock limit of one whole answer (a mistake finder's), streamed: what came by then
    # is kept (finish reason "time_limit"), as a step's is.
    answer_timeout_s: float = DEFAULT_ANSWER_TIMEOUT_S
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # Mark the prompt's unchanging prefix for the provider's prompt cache, where the provider
    # needs a mark (Anthropic's `cache_control`; docs/DESIGN.md §3). Off: the same text, unmarked.
    caching: bool = True
    # With caching: a step's prompt is written to the cache for the next step to read. Off
    # for a step no step can follow (the step limit's): its mark goes on the prompt the step
    # before wrote, so that is read and nothing is written (a write costs 1.25x the input).
    cache_for_next: bool = True

    def params(self) -> dict[str, Any]:
        """The parameters worth recording beside a call."""
        params: dict[str, Any] = {"temperature": self.temperature}
        if self.max_tokens is not None:
            params["max_tokens"] = self.max_tokens
        if self.logprobs:
            params["logprobs"] = True
        return params


@dataclass(frozen=True)
class StepperSettings:
    """How a trace is generated: the step limit and the settings of each step's call."""

    step_limit: int = DEFAULT_STEP_LIMIT
    call: CallSettings = field(default_factory=CallSettings)
    # One streamed call for many steps (generation/stepper.py), not the paper's one call a
    # step: opt-in, never the default.
    one_call: bool = False
    # Thinking mode (generation/thinking.py): how the reasoning is cut into steps, and how
    # long the model may think (--thinking-effort, --thinking-budget; None: its default).
    split: SplitRule = DEFAULT_SPLIT_RULE
    thinking_effort: str | None = None
    thinking_budget: int | None = None
    # A thinking call's temperature (--temperature, the config's `temperature`, the model
    # dialog's): None leaves it out, the provider's default, which is the only one some take
    # with thinking on (Anthropic's 1, OpenAI's reasoning models'); `call.temperature` is the
    # step-at-a-time mode's, the paper's 0 unless given.
    thinking_temperature: float | None = None
    # The model's chat template (a Jinja file's path) for going on from a prefix of its
    # reasoning (core/llm/prefix.py); None: the server applies its own (llama-server).
    chat_template: str | None = None


