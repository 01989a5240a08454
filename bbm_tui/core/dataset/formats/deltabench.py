"""DeltaBench (He et al. 2025, "Can Large Language Models Detect Errors in Long Chain-of-Thought
Reasoning?"; github.com/OpenStellarTeam/DeltaBench): long reasoning of o1-like models cut
into sections by the authors, each section labelled by people. Its CSV (`Deltabench_v1.csv`)
and JSON Lines files share the columns: `id`, `origin`, `task_l1`, `task_l2`, `level`,
`question`, `answer` (the right one), `sections_content`, `sections_labeled_info`,
`final_correct`, the 1-based section numbers of each label (`reason_error_section_numbers`,
`reason_unuseful_section_numbers`, `reflection_section_numbers` and
`stragegy_shift_section_numbers`, spelt so; a list in JSON, its text `[2, 7]` in the CSV),
and `error_type`.

`sections_content` is the reasoning with each section headed `sectionN:` at the start of a
line ("section1: Let's tackle…\\n\\n\\nsection2: …"). The reasoning read is the sections'
texts joined by a blank line, cut into steps by the command's `--split` (a blank line ends a
step under every rule, so a step spans two sections only where the sentence rule joins a
short piece to the next); the label is the first step that holds text of the first section
DeltaBench marks wrong (`reason_error_section_numbers`), none when it marks none. The section
each step begins in is kept (`step_sections`), and every other column as the row had it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bbm_tui.core.dataset.formats import FieldRow, StepCut, ThinkingText
from bbm_tui.core.dataset.formats.positions import RowError, rest, text

KEYS = ("question", "sections_content")
ERROR_SECTIONS = "reason_error_section_numbers"
# Every label column of section numbers (the spelling of the file's own header).
SECTION_COLUMNS = (ERROR_SECTIONS, "reason_unuseful_section_numbers",
                   "reflection_section_numbers", "stragegy_shift_section_numbers")
_HEADING = re.compile(r"(?:^|\n)section(\d+):[ \t]*")
SECTION_SEPARATOR = "\n\n"


def read(row: dict[str, Any], cut: StepCut) -> FieldRow:
    question = text(row, "question")
    sections = parse_sections(text(row, "sections_content"))
    labels = {column: section_numbers(row.get(column), column, len(sections))
              for column in SECTION_COLUMNS if column in row}
    reasoning = SECTION_SEPARATOR.join(sections)
    slices, steps = cut.steps(reasoning)
    spans = section_spans(slices, sections)
    step_sections = [first for first, _last in spans]
    errors = labels.get(ERROR_SECTIONS)
    labelled = errors is not None
    mistake = first_step_into(min(errors), spans) if errors else None
    fields = rest(row, "question", "answer", "sections_content", *labels)
    fields |= {column: numbers for column, numbers in labels.items()}
    fields["step_sections"] = step_sections
    return FieldRow(question, steps, _target(row), labelled, mistake, fields,
                    thinking=ThinkingText(reasoning, cut.rule, "raw"))


def parse_sections(content: str) -> list[str]:
    """The sections' texts, stripped, in order. A heading counts only as the next number
    in turn (`section3:` after `section2:`), so one inside a section's text is text."""
    starts: list[tuple[int, int]] = []  # (where the heading starts, where its text starts)
    for match in _HEADING.finditer(content):
        if int(match.group(1)) == len(starts) + 1:
            starts.append((match.start(), match.end()))
    if not starts:
        raise RowError("'sections_content' has no 'section1:' heading (DeltaBench's sections "
                       "begin 'section1:', 'section2:', …)")
    if content[:starts[0][0]].strip():
        raise RowError("'sections_content' has text before its 'section1:' heading")
    ends = [start for start, _ in starts[1:]] + [len(content)]
    sections = [content[begin:end].strip() for (_, begin), end in zip(starts, ends,
                                                                          strict=True)]
    empty = next((number for number, section in enumerate(sections, 1) if not section), None)
    if empty is not None:
        raise RowError(f"'sections_content': section {empty} is empty")
    return sections


def section_numbers(value: object, column: str, sections: int) -> list[int]:
    """A label column: 1-based section numbers, a list (JSON) or its text (the CSV's
    "[2, 7]"; an empty cell is none)."""
    if isinstance(value, str):
        if not value.strip():
            return []
        try:
            value = json.loads(value)
        except ValueError:
            raise RowError(f"{column!r} must be a list of section numbers such as [2, 7], "
                           f"not {value[:40]!r}") from None
    if value is None:
        return []
    if not isinstance(value, list) or not all(
            isinstance(number, int) and not isinstance(number, bool) for number in value):
        raise RowError(f"{column!r} must be a list of section numbers such as [2, 7]")
    outside = [number for number in value if not 1 <= number <= sections]
    if outside:
        raise RowError(f"{column!r}: section {outside[0]} is outside the {sections} sections "
                       "(1-based)")
    return sorted(set(value))


def section_spans(slices: list[str], sections: list[str]) -> list[tuple[int, int]]:
    """For each step (each slice with text): the 1-based sections its text begins and ends
    in. A blank line ends a step under every rule, so a step spans two sections only where
    a rule joins a short piece to the next (a sentence under 10 characters)."""
    starts, offset = [], 0
    for section in sections:
        starts.append(offset)  # where the section's text begins in the reasoning
        offset += len(section) + len(SECTION_SEPARATOR)

    def section_at(position: int) -> int:
        return sum(1 for start in starts if start <= position)

    spans, position = [], 0
    for piece in slices:
        text_start = position + len(piece) - len(piece.lstrip())
        text_end = position + len(piece.rstrip()) - 1
        position += len(piece)
        if piece.strip():
            spans.append((section_at(text_start), section_at(text_end)))
    return spans


def first_step_into(section: int, spans: list[tuple[int, int]]) -> int | None:
    """The 0-based index of the first step that holds text of `section` (or of a later
    one): the step DeltaBench's first wrong section begins in."""
    return next((index for index, (_first, last) in enumerate(spans) if last >= section),
                None)


def _target(row: dict[str, Any]) -> str:
    value = row.get("answer")
    if value is None:
        return ""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:g}" if isinstance(value, float) else str(value)
    if not isinstance(value, str):
        raise RowError(f"'answer' must be a string, not {type(value).__name__}")
    return value
