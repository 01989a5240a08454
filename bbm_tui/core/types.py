"""The records and named values every layer shares (docs/DESIGN.md §7). A leaf: it imports nothing
of the project, so the store, the model-call boundary, the batch commands and the app can all
speak of a model, a call, a step's origin or a verdict without importing each other.

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


class SessionSource(StrEnum):
    """What made a session."""

    APP = "app"
    RUN = "run"
    IMPORT = "import"
    ANNOTATE = "annotate"
    BACKTRACK = "backtrack"


class WorkStatus(StrEnum):
    """Where one annotator stands on one trace of a queue."""

    OPEN = "open"  # not submitted yet (thoughts may be judged already)
    DONE = "done"  # submitted: the label is in the store
    SKIPPED = "skipped"  # put off: the queue comes back to it when nothing else is left
    FLAGGED = "flagged"  # set aside with a reason and a note, not labelled


class FlagReason(StrEnum):
    """Why an annotator set a trace aside."""

    BAD_PROBLEM = "bad problem"  # the question or target is wrong or unreadable
    UNSURE = "unsure"  # the annotator cannot decide
    GIVE_UP = "give up"  # per-step labelling (PRM800K's give_up): stuck, ratings kept


class ReasoningKind(StrEnum):
    """What a thinking model's reasoning text is (docs/DESIGN.md §16): its own words, a
    provider's summary of them (Claude 4 and later, Gemini, OpenAI's summaries: billed for the
    whole thinking, shown a digest), or none at all (OpenAI's o-series through chat completions
    send only a count of reasoning tokens)."""

    RAW = "raw"
    SUMMARY = "summary"
    NONE = "none"


class SplitRule(StrEnum):
    """How a thinking model's reasoning is cut into numbered steps (docs/DESIGN.md §16)."""

    PARAGRAPH = "paragraph"  # ProcessBench's: a step ends at each blank line (the default)
    SENTENCE = "sentence"  # Thought Anchors' unit: a step ends after a sentence
    LINE = "line"  # PRM800K's: a step ends at each newline


DEFAULT_SPLIT_RULE = SplitRule.PARAGRAPH


class CallPurpose(StrEnum):
    """Why a model was called."""

    STEP = "step"  # one generation step
    FIND = "find"  # a mistake finder's answer
    SAMPLE = "sample"  # candidates for a step (backtracking)


class Verdict(StrEnum):
    """A judge's word on one step, in the paper's terms (a step-level finder's "Yes"/"No")."""

    CORRECT = "Yes"
    MISTAKEN = "No"
    CANNOT_JUDGE = "?"


class TraceEnd(StrEnum):
    """Why generating a trace stopped."""

    ANSWER = "answer"  # a step stated the answer (the paper's regex)
    STEP_LIMIT = "step_limit"
    EMPTY = "empty"  # the model went silent (two empty steps)
    TRUNCATED = "truncated"  # a step cut at its token or time limit
    PAUSED = "paused"  # the number of steps asked for was reached


class ModelBranchState(StrEnum):
    """How one model's generating stands in a session of several models side by side."""

    IDLE = "idle"  # not started, or paused after the steps asked for (`n`)
    STREAMING = "streaming"  # generating (a session reopened with it so goes on)
    ANSWERED = "answered"  # a step stated the answer
    ENDED = "ended"  # over without an answer: the step limit, silence, a cut step
    FAILED = "failed"  # a call failed; the branch's `error` says why
    STOPPED = "stopped"  # the person stopped it (esc)


class FinderEnd(StrEnum):
    """How a finder run without a result ended."""

    FAILED = "failed"
    STOPPED = "stopped"


class SessionSort(StrEnum):
    """What the sessions list is ordered by."""

    UPDATED = "updated"  # the last change (the default, newest first)
    NAME = "name"
    TASK = "task"
    MODEL = "model"
    STEPS = "steps"
    LABEL = "label"


class LabelFilter(StrEnum):
    """Which sessions to list by the label in force."""

    UNLABELLED = "unlabelled"
    MISTAKE = "mistake"  # a first mistake flagged (on any branch)
    NO_MISTAKE = "none"  # labelled "no mistake"


@dataclass(frozen=True)
class SessionQuery:
    """Which sessions to list and in what order: every filter is optional; `text` is looked
    for (case-insensitively) in the names and the questions; `task` and `model` match a part of
    the session's; `since`/`before` bound the last change (Unix seconds)."""

    text: str = ""
    task: str | None = None
    model: str | None = None
    label: LabelFilter | None = None
    since: float | None = None
    before: float | None = None
    sort: SessionSort = SessionSort.UPDATED
    descending: bool = True


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

    temperature: float = 0.0
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
    # The model's chat template (a Jinja file's path) for going on from a prefix of its
    # reasoning (core/llm/prefix.py); None: the server applies its own (llama-server).
    chat_template: str | None = None


# One of the tokens a model weighed at a place in its text: (token text, log-probability).
Alternative = tuple[str, float]


@dataclass(frozen=True)
class TokenLogprob:
    """One token of a step as the provider sent it, with its log-probability, and the most
    likely tokens at its place as the provider ranked them (`top_logprobs`, the most likely
    first; usually the token itself among them), where they were sent. A token cut at the
    step's edge keeps the alternatives of the whole token it was part of."""

    text: str
    logprob: float
    alternatives: tuple[Alternative, ...] = ()


@dataclass
class CallRecord:
    """What one model call cost and returned, for the store and the status line. For a call
    that returned several candidates, `choice` says which this record's text is."""

    model: str
    params: dict[str, Any]
    latency_s: float
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    logprobs: list[float] | None = None
    # The provider sent log-probabilities no model could give (NaN, positive, ...): the call
    # is kept without them. Said, not stored.
    impossible_logprobs: bool = False
    finish_reason: str | None = None
    attempts: int = 1
    native_stop: bool = False
    # The tokens of exactly the stored text, where the provider sent log-probabilities.
    tokens: list[TokenLogprob] | None = None
    choice: int = 0
    # The token counts are an estimate (litellm's count, or one token a chunk), not the
    # provider's own: the output's always, the prompt's where `prompt_estimated` (a stream
    # closed before the provider counted its output keeps its count of the prompt).
    usage_estimated: bool = False
    prompt_estimated: bool = False
    # Of `prompt_tokens` (every prompt token, cached or not): those read from the provider's
    # prompt cache and those written to it, as the provider reported them (None: it said
    # nothing of caching).
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    # Where the step was one of several taken from one streamed call (one-call mode): that
    # call's id, shared by its steps, and this step's place among them (0: the first, which
    # carries the call's prompt tokens). None: a call of its own.
    one_call: str | None = None
    one_call_share: int = 0
    # The Router deployment that served the call (None: no router).
    deployment: str | None = None

    @property
    def total_logprob(self) -> float | None:
        return sum(self.logprobs) if self.logprobs else None
