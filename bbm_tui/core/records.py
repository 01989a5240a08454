"""The records and named values of the store, the traces and the model calls: a leaf, as
core/types.py is. Apart from it so that the app's first frame, which needs the model's
settings and none of these, does not build them: eleven enums and three dataclasses were
~3.5 ms of the start (bench/first_frame.py)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any


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
