"""What a thinking trace's views say beside its steps (docs/DESIGN.md §16): that the steps were
cut from a thinking model's reasoning, by which rule, and, where the provider sends a summary
rather than the reasoning itself, "summary", so that nobody takes it for the model's thinking."""

from __future__ import annotations

from collections.abc import Sequence

from bbm_tui.core.annotation.reasonings import thinking_of
from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.llm.capabilities import reasoning_is_summary, sends_no_reasoning_text
from bbm_tui.core.records import ReasoningKind
from bbm_tui.core.store import Step, Store
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.types import SplitRule, StepOrigin

# The rule a re-cut goes to from each (the key cycles through them).
NEXT_RULE = {SplitRule.PARAGRAPH: SplitRule.SENTENCE, SplitRule.SENTENCE: SplitRule.LINE,
             SplitRule.LINE: SplitRule.PARAGRAPH}
RULE_WORDS = {SplitRule.PARAGRAPH: "paragraphs", SplitRule.SENTENCE: "sentences",
              SplitRule.LINE: "lines"}
KIND_WORDS = {ReasoningKind.RAW: "reasoning", ReasoningKind.SUMMARY: "summary",
              ReasoningKind.NONE: "no reasoning text"}


def reasoning_kind(trace: TraceSession) -> ReasoningKind | None:
    """What the trace's text is: the stored reasoning's kind, or (before anything is stored)
    what the model's provider sends. None: not a thinking trace."""
    stored = trace.reasoning()
    if stored is not None:
        return ReasoningKind(stored.kind)
    if trace.spec.mode != "thinking":
        return None
    if sends_no_reasoning_text(trace.spec):
        return ReasoningKind.NONE
    return ReasoningKind.SUMMARY if reasoning_is_summary(trace.spec) else ReasoningKind.RAW


def reasoning_fact(trace: TraceSession) -> str | None:
    """What the line "Reasoning: …" under a thinking trace's answer says where the provider
    sent no text of the reasoning (OpenAI's reasoning models through chat completions): that
    none came, so the thoughts are cut from the answer, and the reasoning tokens it counted
    (billed, in the cost): all there is to see of its thinking. None: a trace whose reasoning
    is on show as its thoughts, or a step-at-a-time one."""
    stored = trace.reasoning()
    kind = ReasoningKind(stored.kind) if stored is not None else reasoning_kind(trace)
    if kind != ReasoningKind.NONE:
        return None
    said = "no reasoning text sent by the provider; the thoughts are cut from the answer"
    tokens = stored.reasoning_tokens if stored is not None else None
    return said + ("" if tokens is None else f" · {tokens:,} reasoning tokens (in the cost)")


def thinking_note(trace: TraceSession, default_rule: SplitRule, *, short: bool = False) -> str:
    """"summary · paragraphs", "reasoning · sentences"; "" for a step-at-a-time trace.
    `short` (a column's title, which says "thinking" already): the reasoning's kind only where
    it is not the reasoning itself."""
    kind = reasoning_kind(trace)
    if kind is None:
        return ""
    return kind_and_rule(kind, trace.split_rule() or default_rule, short=short)


def kind_and_rule(kind: str, rule: str, *, short: bool = False) -> str:
    """What a thinking trace's steps are cut from and by which rule: "summary · paragraphs"
    (the annotation queue's and adjudication's titles, from the row or the store)."""
    kind, rule = ReasoningKind(kind), SplitRule(rule)
    if short and kind == ReasoningKind.RAW:
        return RULE_WORDS[rule]
    return f"{KIND_WORDS[kind]} · {RULE_WORDS[rule]}"


def stored_thinking_note(store: Store, steps: Sequence[Step]) -> str:
    """A stored branch's note ("summary · paragraphs"); "" unless its steps are a view of a
    stored reasoning. Reads the store: called in a thread."""
    if not steps or steps[0].origin != StepOrigin.THINKING:
        return ""
    reasoning_id, split = store.step_view(steps[0].id)
    if reasoning_id is None or split is None:
        return ""
    return kind_and_rule(store.reasoning(reasoning_id).kind, split)


def queued_thinking_note(row: TraceRow) -> str:
    """A queued row's note ("summary · paragraphs"); "" unless it is a thinking trace."""
    recorded = thinking_of(row)
    return "" if recorded is None else kind_and_rule(recorded.kind, recorded.split)


def thoughts_title(trace: TraceSession, default_rule: SplitRule) -> str:
    note = thinking_note(trace, default_rule)
    return f"Thoughts · {note}" if note else "Thoughts"
