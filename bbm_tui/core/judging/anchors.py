"""Each step's importance in a thinking trace (issue 35, item 3; Thought Anchors, Bogdan et al.
2025), from rollouts that went on from prefixes of its reasoning.

A rollout from prefix j kept steps 0..j-1 (0-based) as the reasoning had them and wrote the
rest, step j first, then the answer. For step i, the rollouts from prefix i are those that
*resample* it and the rollouts from prefix i+1 those that *keep* it (one set of rollouts
serves both: resampling step i+1 keeps step i, as Thought Anchors' own runs share them). Per
step:

- the answer distribution kept and resampled, and the accuracy of each;
- resampling importance = accuracy kept − accuracy resampled;
- counterfactual importance = KL(resampled-and-different ‖ kept) over the answers, counting
  only the resamples whose step differs in meaning from the original (`Similar`: an
  embedding's cosine ≥ 0.8, Thought Anchors' threshold, or a word-overlap measure); the
  distributions smoothed by one count of each answer seen (so that an answer one side never
  gave does not make the divergence infinite); None where either side has no rollout.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Similar = Callable[[str, str], bool]

# Thought Anchors' threshold: resamples with cosine similarity below it differ in meaning.
COSINE_DIFFERENT_BELOW = 0.8
# The word-overlap measure's threshold (Jaccard similarity of the two steps' sets of words).
OVERLAP_DIFFERENT_BELOW = 0.5
WORD_OVERLAP = f"word overlap (Jaccard of lower-cased words < {OVERLAP_DIFFERENT_BELOW})"
NO_ANSWER = "(no answer)"

_WORD = re.compile(r"\w+")


def word_overlap(first: str, second: str) -> float:
    words_a = set(_WORD.findall(first.lower()))
    words_b = set(_WORD.findall(second.lower()))
    if not words_a and not words_b:
        return 1.0
    return len(words_a & words_b) / len(words_a | words_b)


def similar_by_words(first: str, second: str) -> bool:
    return word_overlap(first, second) >= OVERLAP_DIFFERENT_BELOW


@dataclass(frozen=True)
class Rollout:
    prefix: int  # the steps kept: 0..prefix-1
    first_step: str  # the step it wrote in place of step `prefix` (stripped)
    answer: str | None
    correct: bool


@dataclass
class StepImportance:
    index: int  # 0-based
    text: str
    kept: int
    resampled: int
    accuracy_kept: float | None
    accuracy_resampled: float | None
    answers_kept: dict[str, int] = field(default_factory=dict)
    answers_resampled: dict[str, int] = field(default_factory=dict)
    different: int = 0  # resamples differing in meaning from the step
    counterfactual_kl: float | None = None

    @property
    def importance(self) -> float | None:
        if self.accuracy_kept is None or self.accuracy_resampled is None:
            return None
        return self.accuracy_kept - self.accuracy_resampled

    def to_json(self) -> dict[str, Any]:
        return {"step": self.index, "text": self.text, "kept": self.kept,
                "resampled": self.resampled, "accuracy_kept": self.accuracy_kept,
                "accuracy_resampled": self.accuracy_resampled,
                "importance": self.importance, "answers_kept": self.answers_kept,
                "answers_resampled": self.answers_resampled, "different": self.different,
                "counterfactual_kl": self.counterfactual_kl}


def _accuracy(rollouts: Sequence[Rollout]) -> float | None:
    return sum(r.correct for r in rollouts) / len(rollouts) if rollouts else None


def _answers(rollouts: Sequence[Rollout]) -> dict[str, int]:
    return dict(Counter(r.answer if r.answer is not None else NO_ANSWER for r in rollouts))


def kl_divergence(p_counts: dict[str, int], q_counts: dict[str, int]) -> float | None:
    """KL(P ‖ Q) of two answer counts, each smoothed by one count of every answer either
    gave; None where either has none."""
    if not p_counts or not q_counts:
        return None
    answers = set(p_counts) | set(q_counts)
    p_total = sum(p_counts.values()) + len(answers)
    q_total = sum(q_counts.values()) + len(answers)
    total = 0.0
    for answer in answers:
        p = (p_counts.get(answer, 0) + 1) / p_total
        q = (q_counts.get(answer, 0) + 1) / q_total
        total += p * math.log(p / q)
    return total


def importances(steps: Sequence[str], rollouts: Sequence[Rollout],
                similar: Similar) -> list[StepImportance]:
    by_prefix: dict[int, list[Rollout]] = {}
    for rollout in rollouts:
        by_prefix.setdefault(rollout.prefix, []).append(rollout)
    rows = []
    for index, text in enumerate(steps):
        resampled = by_prefix.get(index, [])
        kept = by_prefix.get(index + 1, [])
        different = [r for r in resampled if not similar(r.first_step, text)]
        rows.append(StepImportance(
            index, text, len(kept), len(resampled), _accuracy(kept), _accuracy(resampled),
            _answers(kept), _answers(resampled), len(different),
            kl_divergence(_answers(different), _answers(kept))))
    return rows


def top_anchors(rows: Sequence[StepImportance], count: int = 5) -> list[StepImportance]:
    """The steps whose resampling moved the answer most (the largest |importance|)."""
    scored = [row for row in rows if row.importance is not None]
    return sorted(scored, key=lambda row: (-abs(row.importance or 0.0), row.index))[:count]


def importance_bar(importance: float | None, width: int) -> str:
    """A bar of |importance| (0..1) in `width` cells at most: █ for a step whose keeping
    helps, ░ for one that hurts (told apart without colour); "" where there is no figure."""
    if importance is None:
        return ""
    filled = round(min(abs(importance), 1.0) * width)
    return ("█" if importance >= 0 else "░") * filled
