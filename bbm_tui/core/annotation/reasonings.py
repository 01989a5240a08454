"""A thinking trace's row (docs/DESIGN.md §16): the reasoning its steps were cut from, as a
`run --mode thinking` row carries it beside the steps, or as a reasoning read from a file
(core/dataset/formats: `reasoning`, `deltabench`) does. `import` and `annotate` store it whole
with the session, the steps a view of it, as a thinking run stores them."""

from __future__ import annotations

from collections.abc import Sequence

from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.generation.thinking import strip_view
from bbm_tui.core.records import ReasoningKind
from bbm_tui.core.store import RecordedReasoning, Step, Store
from bbm_tui.core.types import SplitRule, StepOrigin

# What an export says a thinking trace's steps are cut from, by its reasoning's kind: a
# summary is said so, so that nobody takes it for the model's thinking.
KIND_SENTENCES = {
    ReasoningKind.RAW: "the model's reasoning",
    ReasoningKind.SUMMARY: "the provider's summary of the model's reasoning (not the "
                           "reasoning itself)",
    ReasoningKind.NONE: "the answer (no reasoning text sent by the provider)",
}
RULE_SENTENCES = {SplitRule.PARAGRAPH: "by paragraph", SplitRule.SENTENCE: "by sentence",
                  SplitRule.LINE: "by line"}


def thinking_of(row: TraceRow) -> RecordedReasoning | None:
    """The reasoning a row's steps were cut from (None: a step-at-a-time trace, or a row
    whose reasoning keys are not a thinking trace's, or whose steps are not that reasoning
    cut by that rule (edited since): its steps then come in as recorded)."""
    extra = row.extra
    text, split, kind = extra.get("reasoning"), extra.get("split"), extra.get("reasoning_kind")
    answer_text = extra.get("answer_text")
    if (extra.get("mode") != "thinking" or not isinstance(text, str)
            or split not in set(SplitRule) or kind not in set(ReasoningKind)
            or not (answer_text is None or isinstance(answer_text, str))):
        return None
    if strip_view(split_text(text, SplitRule(split))) != list(row.steps):
        return None
    return RecordedReasoning(text, str(kind), str(split), answer_text)


def stored_thinking(store: Store, steps: Sequence[Step]) -> RecordedReasoning | None:
    """The reasoning a stored branch's steps are a view of, whole, with its kind and rule, as
    a thinking run's row carries it (None: a step-at-a-time branch, or a reasoning not
    stored whole: a call cut short)."""
    if not steps or steps[0].origin != StepOrigin.THINKING:
        return None
    reasoning_id, split = store.step_view(steps[0].id)
    if reasoning_id is None or split is None:
        return None
    reasoning = store.reasoning(reasoning_id)
    if not reasoning.complete:
        return None
    return RecordedReasoning(reasoning.text, reasoning.kind, split, reasoning.answer_text)


def thinking_keys(reasoning: RecordedReasoning) -> dict[str, object]:
    """The keys a thinking trace's row carries beside its steps (`run --mode thinking`'s)."""
    return {"mode": "thinking", "split": reasoning.split, "reasoning": reasoning.text,
            "reasoning_kind": reasoning.kind, "answer_text": reasoning.answer_text}


def cut_from_sentence(reasoning: RecordedReasoning) -> str:
    """"the provider's summary of the model's reasoning (...), by paragraph"."""
    return (f"{KIND_SENTENCES[ReasoningKind(reasoning.kind)]}, cut "
            f"{RULE_SENTENCES[SplitRule(reasoning.split)]}")
