"""A reasoning read from a file, cut into steps by the split rules a live thinking trace is cut
by (splitting.py), as the dataset readers take it (core/dataset/formats: `StepCut`)."""

from __future__ import annotations

from functools import partial

from bbm_tui.core.dataset.formats import StepCut
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.types import DEFAULT_SPLIT_RULE, SplitRule


def step_cut(rule: SplitRule | str = DEFAULT_SPLIT_RULE) -> StepCut:
    """The cut by `rule` (a SplitRule or its name)."""
    rule = SplitRule(rule)
    return StepCut(rule.value, partial(split_text, rule=rule))
