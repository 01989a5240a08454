"""The store's rows as frozen records."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from bbm_tui.core.records import CallRecord, TokenLogprob
from bbm_tui.core.types import DEFAULT_ANNOTATOR, Mode, sane_logprob_sum


@dataclass(frozen=True)
class Session:
    """A saved session: one question of one task, its model and where its branch ends."""

    id: int
    name: str
    task: str
    input: str
    target: str | None
    dataset_index: int | None
    gold_mistake_index: int | None
    model: str
    api_base: str | None
    mode: Mode  # what the store writes: a ModelSpec's
    source: str
    head_step_id: int | None
    created_at: float
    updated_at: float
    # A task of one's own: the digest of the definition it was made with (store v10 on; its
    # text: Store.task_definition). None: one of the paper's five.
    task_digest: str | None = None
    # A session `run` started: the digest of its OUT file and settings (store v17 on; see
    # core/batch/run.py). None: not a run's, or made before v17.
    run_key: str | None = None


class Step(NamedTuple):
    """One stored thought: its place in the tree, its text and what its call cost.

    A named tuple, not a dataclass: a trace may hold 10^5 of them, and a frozen dataclass sets
    each of its 20 fields through `object.__setattr__`, which took three times as long as
    reading the rows (bench/big_store.py); a tuple is made in one go, and stays as frozen."""

    id: int
    session_id: int
    parent_id: int | None
    number: int
    text: str
    origin: str
    answer: str | None
    truncated: bool
    created_at: float
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    # The sum of the step's token log-probabilities, when they were asked for and sent.
    logprob: float | None = None
    # The call that made it and its choice there (one call may return several candidates).
    call_id: int | None = None
    choice: int | None = None
    # The tokens of exactly `text`, each with its log-probability (store v4 on).
    tokens: tuple[TokenLogprob, ...] | None = None
    # How many tokens `logprob` sums over (store v7 on): with it, the thought's confidence
    # without loading its tokens.
    ntokens: int | None = None
    # How many choices its call returned, where it was chosen among several samples
    # (backtracking); then `completion_tokens` are its own (None where the provider sent no
    # tokens) and `cost` is None: the call's figures are for all of them.
    call_choices: int | None = None
    # Its call's token counts are an estimate, not the provider's own (store v9 on).
    usage_estimated: bool = False
    # Of `prompt_tokens`, those the provider read from its prompt cache (store v14 on; None:
    # it said nothing of caching).
    cached_tokens: int | None = None
    # Its prompt's count is an estimate too (`usage_estimated` alone: its output's only).
    prompt_estimated: bool = False
    # The model branch it is on, in a session of several models side by side (store v15 on);
    # None in a session of one model.
    model_branch_id: int | None = None
    # The id of the call it was taken from with other steps (one-call mode; None: a call of
    # its own), and the router deployment that served its call (store v16 on).
    one_call: str | None = None
    deployment: str | None = None

    @property
    def confidence(self) -> float | None:
        """The geometric mean of its tokens' probabilities, exp(mean log-probability), in
        0..1 (None without log-probabilities): independent of the thought's length."""
        if self.logprob is None or not self.ntokens:
            return None
        # A sum no model could give (an earlier version stored them unchecked) is none.
        mean = sane_logprob_sum(self.logprob / self.ntokens)
        return None if mean is None else math.exp(mean)


@dataclass(frozen=True)
class Label:
    """The person's verdict on a trace: the first mistaken step, or (None) no mistake."""

    id: int
    session_id: int
    mistake_step_id: int | None
    leaf_step_id: int | None
    created_at: float
    annotator: str = DEFAULT_ANNOTATOR
    # Made after seeing a suggestion (a finder's or a verifier's verdict).
    assisted: bool = False
    # The per-step protocol's (store v12): each thought's rating on the branch, as far as
    # rated (-1 bad, 0 neutral, +1 good), and PRM800K's finish reason; None for a label of
    # the paper's protocol. `note`: why the first mistake is one, where the annotator said.
    ratings: tuple[int, ...] | None = None
    finish_reason: str | None = None
    note: str | None = None

    @property
    def no_mistake(self) -> bool:
        return self.mistake_step_id is None

    def mistake_index(self, step_ids: Sequence[int]) -> int | None:
        """Where the flagged first mistake is on a branch (its step ids, root first), 0-based:
        None when the label says there is no mistake, or flags a step on another branch."""
        if self.mistake_step_id is None:
            return None
        for index, step_id in enumerate(step_ids):
            if step_id == self.mistake_step_id:
                return index
        return None


@dataclass(frozen=True)
class TaskDefinition:
    """A task of one's own as a session keeps it: the digest of its content and its
    definition as JSON text (the store keeps it as it is given; core/tasks/files.py makes
    and reads it)."""

    digest: str
    text: str


@dataclass(frozen=True)
class SessionSummary:
    """A session as the sessions list shows it: its steps, label and answer, what its calls
    cost (`cost` sums those whose price is known; `unpriced_calls` are not); `models`, the
    models of its branches in their columns' order, where several models answer it side by
    side (empty for a session of one model: `session.model`)."""

    session: Session
    steps: int
    label: Label | None
    mistake_number: int | None
    answer: str | None
    calls: int = 0
    cost: float = 0.0
    unpriced_calls: int = 0
    models: tuple[str, ...] = ()
    # Side by side: each model's own length, label and answer, by column (issue 34: the
    # session's label and its head's answer could be two models').
    branches: tuple[ModelSummary, ...] = ()

    @property
    def model_names(self) -> str:
        """The session's model, or its models side by side ("a + b")."""
        return " + ".join(self.models) if self.models else self.session.model


@dataclass(frozen=True)
class ModelSummary:
    """One model's trace of a session side by side, as the sessions list shows it: its
    length, the label in force on it (anyone's; `mistake_number` where it flags a thought
    on the branch the column shows) and its answer."""

    model: str
    steps: int
    label: Label | None
    mistake_number: int | None
    answer: str | None


@dataclass(frozen=True)
class ModelBranch:
    """One model's trace of a session of several models side by side (store v15): its column
    (`position`, from 0), the model settings it generates with (the api base as stored:
    redacted), where its branch on show ends, and how its generating stands (`state`, a
    ModelBranchState; `error`: why it failed)."""

    id: int
    session_id: int
    position: int
    model: str
    api_base: str | None
    mode: Mode
    head_step_id: int | None
    state: str
    error: str | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class RecordedReasoning:
    """A thinking trace's reasoning written elsewhere (an imported or queued file's row),
    stored whole with the session its steps come in with: the steps a view of it, cut by
    `split`."""

    text: str
    kind: str
    split: str
    answer_text: str | None = None


@dataclass(frozen=True)
class Reasoning:
    """A thinking call's reasoning (store v17, docs/DESIGN.md §16): the raw text whole (as far
    as it was stored: `complete` once the call ended well), what kind it is (a ReasoningKind
    value), the answer written after it, the reasoning tokens counted, and the provider's
    opaque blocks (JSON, never shown). Its steps are views of it, each cut by a rule."""

    id: int
    session_id: int
    model_branch_id: int | None
    model: str
    text: str
    kind: str
    answer_text: str | None
    reasoning_tokens: int | None
    opaque: bytes | None
    complete: bool
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class FinderVerdict:
    """One answer of a finder: about Thought `step_number` (step-level) or the whole trace
    (None). `verdict` is the parsed answer in the paper's format ("Yes"/"No" for a thought,
    "No"/"N" for a trace), None when unparseable; `raw` is the answer verbatim."""

    id: int
    run_id: int
    step_number: int | None
    raw: str
    verdict: str | None
    parsed: bool
    created_at: float
    call: CallRecord | None = None


@dataclass(frozen=True)
class FinderRun:
    """A finder run on a session's trace. `mistake_number` (1-based; None = no mistake) and
    `parsed` are set when it finished (`finished_at`); a run cut short has neither, and
    `ended` says how: "failed" (`error` says why), "stopped", or None if its process died."""

    id: int
    session_id: int
    leaf_step_id: int | None
    method: str
    model: str
    params: dict[str, Any]
    mistake_number: int | None
    parsed: bool | None
    finished_at: float | None
    created_at: float
    verdicts: tuple[FinderVerdict, ...] = ()
    ended: str | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class Totals:
    """A session's calls, tokens and cost, summed. `prompt_tokens` counts every prompt token;
    `cached_tokens` and `cache_write_tokens` are the parts read from and written to the
    provider's prompt cache. `cost` sums the calls whose price is known: with
    `unpriced_calls` (of `unpriced_models`) it is a lower bound, and with all of them unknown."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float
    # Calls whose token counts are estimates (then so are the sums): their output's, and of
    # those, their prompt's too.
    estimated_calls: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    unpriced_calls: int = 0
    unpriced_models: tuple[str, ...] = ()
    prompt_estimated_calls: int = 0

    @property
    def known_cost(self) -> float | None:
        """The cost, or None when no call's price is known (never a made-up $0)."""
        return None if self.calls and self.unpriced_calls == self.calls else self.cost

    def plus(self, call: CallRecord) -> Totals:
        """These totals and one more call, as the store will sum them once it is committed:
        a screen keeps its totals in step without reading them again. The steps one streamed
        call gave (one-call mode) are its shares: the call counts once, at its first."""
        first_share = call.one_call_share == 0
        unpriced = self.unpriced_models
        if call.cost is None and call.model not in unpriced:
            unpriced = tuple(sorted((*unpriced, call.model)))
        return Totals(
            self.calls + first_share,
            self.prompt_tokens + (call.prompt_tokens or 0),
            self.completion_tokens + (call.completion_tokens or 0),
            self.cost + (call.cost or 0.0),
            self.estimated_calls + call.usage_estimated,
            self.cached_tokens + (call.cached_tokens or 0),
            self.cache_write_tokens + (call.cache_write_tokens or 0),
            self.unpriced_calls + (call.cost is None and first_share),
            unpriced,
            self.prompt_estimated_calls + call.prompt_estimated,
        )


def steps_calls(steps: Sequence[Step]) -> dict[object, list[Step]]:
    """The calls that made these steps, each with its steps: a call of its own (by its id), or
    one call that gave several (by its `one_call` id; its steps are its shares)."""
    calls: dict[object, list[Step]] = {}
    for step in steps:
        if step.call_id is not None:
            calls.setdefault(step.one_call or step.call_id, []).append(step)
    return calls


def calls_latency(steps: Sequence[Step]) -> float:
    """The time the steps' calls took, each call once: a one-call step's latency is from its
    call's start, so the call's is its last step's."""
    return sum(max(step.latency_s or 0.0 for step in shares)
               for shares in steps_calls(steps).values())


def default_session_name(task: str, dataset_index: int | None, input_text: str) -> str:
    if dataset_index is not None:
        return f"{task} #{dataset_index}"
    first_line = " ".join(input_text.split())[:40]
    return f"{task}: {first_line}"


@dataclass(frozen=True)
class StoredCandidate:
    """A candidate a call returned for Thought `number` after step `parent_id`: kept whether
    chosen or not. `dropped`: identical to the step it was to replace. `step_id`: the step
    made from it, when it was chosen."""

    id: int
    session_id: int
    call_id: int | None
    choice: int
    parent_id: int | None
    number: int
    text: str
    tokens: tuple[TokenLogprob, ...] | None
    logprob: float | None
    dropped: bool
    step_id: int | None
    created_at: float


@dataclass(frozen=True)
class QueueWork:
    """One annotator's work on one queued trace (store v6, `annotation_work`): the thoughts
    judged in order ('+' correct, '-' incorrect), where it stands (a WorkStatus), the flag's
    reason and note, the seconds spent on it and whether a suggestion was seen."""

    session_id: int
    annotator: str
    judged: str = ""
    status: str = "open"
    flag_reason: str | None = None
    note: str | None = None
    time_spent_s: float = 0.0
    assisted: bool = False
    updated_at: float = 0.0


@dataclass(frozen=True)
class AnnotatorLabel:
    """An annotator's label in force on a session, as agreement reads it: the 0-based index
    of the first mistake, or None for "no mistake"."""

    session_id: int
    annotator: str
    mistake_index: int | None
    assisted: bool
    created_at: float
    # Each thought's rating, for a label of the per-step protocol (store v12), else None.
    ratings: tuple[int, ...] | None = None
    finish_reason: str | None = None
    note: str | None = None
