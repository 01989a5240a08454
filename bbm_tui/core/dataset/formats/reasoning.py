"""A thinking model's reasoning written elsewhere, one JSON object a line (docs/DESIGN.md §14,
§16): the question (`question`, or `input` as the BBM dataset names it), the reasoning, the
answer and the target:

    {"question": "...", "reasoning": "...", "answer": "...", "target": "..."}

The reasoning is `reasoning`, or the `<think>…</think>` part of a model's whole output, given
in `reasoning` or in one of `OUTPUT_KEYS` (as servers that leave the tags in the content
write it: DeepSeek-R1's distills, QwQ, Qwen3); the text after `</think>` is then the answer
unless `answer` is given. `target` (the right answer) is optional, and so is `mistake_index`
(the 0-based first mistaken step of the steps as cut, null for none: a row without it comes
in unlabelled). The reasoning is cut into steps by the command's `--split`; the raw text is
kept whole with the trace. Every other key is kept as the row had it.
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, StepCut, ThinkingText
from bbm_tui.core.dataset.formats.positions import RowError, rest, text

QUESTION_KEYS = ("question", "input")
# Where a model's whole output (its reasoning between `<think>` tags, then its answer) is
# found when the row has no `reasoning`.
OUTPUT_KEYS = ("output", "response", "completion", "generation", "model_output", "text")
OPEN_TAG, CLOSE_TAG = "<think>", "</think>"


def detect(row: dict[str, Any]) -> bool:
    """A question and a reasoning (its own key, or `<think>` in a model's output), and no
    steps (a row with steps is the BBM dataset's, a thinking run's included)."""
    if "steps" in row or not any(isinstance(row.get(key), str) for key in QUESTION_KEYS):
        return False
    if isinstance(row.get("reasoning"), str):
        return True
    return any(isinstance(row.get(key), str) and CLOSE_TAG in row[key] for key in OUTPUT_KEYS)


def read(row: dict[str, Any], cut: StepCut) -> FieldRow:
    question_key = next((key for key in QUESTION_KEYS if key in row), None)
    if question_key is None:
        raise RowError("missing key 'question' (or 'input')")
    question = text(row, question_key)
    source = _reasoning_key(row)
    reasoning, after = split_think_tags(text(row, source), strict=source != "reasoning")
    if not reasoning.strip():
        raise RowError(f"{source!r} holds no reasoning (an empty text)")
    answer_text = text(row, "answer") if "answer" in row else after
    target = text(row, "target", default="")
    _, steps = cut.steps(reasoning)
    labelled = "mistake_index" in row
    mistake = _mistake_index(row["mistake_index"], len(steps)) if labelled else None
    thinking = ThinkingText(reasoning, cut.rule, "raw", answer_text)
    return FieldRow(question, steps, target, labelled, mistake,
                    rest(row, question_key, source, "answer", "target", "mistake_index"),
                    thinking=thinking)


def _reasoning_key(row: dict[str, Any]) -> str:
    if "reasoning" in row:
        return "reasoning"
    found = next((key for key in OUTPUT_KEYS if key in row), None)
    if found is None:
        raise RowError("missing key 'reasoning' (or a model's output with <think>…</think> "
                       f"in one of {', '.join(repr(key) for key in OUTPUT_KEYS)})")
    return found


def split_think_tags(whole: str, *, strict: bool) -> tuple[str, str | None]:
    """(the reasoning, the text after it or None) of a text that may hold `<think>…</think>`.
    The opening tag may be missing (a chat template that opens the reasoning in the prompt,
    as DeepSeek-R1's does): the reasoning is then everything before `</think>`. Without a
    closing tag the whole is the reasoning, unless `strict` (a model's output, which must say
    where its reasoning ends)."""
    end = whole.find(CLOSE_TAG)
    if end < 0:
        if strict:
            raise RowError("a model's output must hold its reasoning between <think> and "
                           "</think> (or give it in 'reasoning')")
        start = whole.find(OPEN_TAG)
        return (whole[start + len(OPEN_TAG):] if start >= 0 else whole), None
    start = whole.find(OPEN_TAG, 0, end)
    reasoning = whole[start + len(OPEN_TAG):end] if start >= 0 else whole[:end]
    return reasoning, whole[end + len(CLOSE_TAG):]


def _mistake_index(value: object, steps: int) -> int | None:
    """The BBM dataset's convention: 0-based, null for "no mistake"."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise RowError(f"'mistake_index' must be a whole number (0-based) or null, not "
                       f"{value!r}")
    if not 0 <= value < steps:
        raise RowError(f"'mistake_index' {value} is outside the {steps} steps the reasoning "
                       "was cut into (0-based; --split says how it is cut)")
    return value
