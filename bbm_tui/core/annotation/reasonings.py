"""A thinking trace's row (docs/DESIGN.md §16): the reasoning its steps were cut from, as a
`run --mode thinking` row carries it beside the steps, or as a reasoning read from a file
(core/dataset/formats: `reasoning`, `deltabench`) does. `import` and `annotate` store it whole
with the session, the steps a view of it, as a thinking run stores them."""

from __future__ import annotations

from bbm_tui.core.dataset import TraceRow
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.generation.thinking import strip_view
from bbm_tui.core.store import RecordedReasoning
from bbm_tui.core.types import ReasoningKind, SplitRule


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
