"""Cutting a thinking model's reasoning into numbered steps (docs/DESIGN.md §16), live.

Three rules (`SplitRule`):

- `paragraph` (ProcessBench's, the default): a step ends at each blank line.
- `sentence` (Thought Anchors' unit, without its bugs): a step ends after `.`, `?` or `!` (and
  any closing quotes or brackets right after it) followed by whitespace, and at each blank line;
  never after a single capital letter (`J. Smith`, `U.S.`), the abbreviations in
  `ABBREVIATIONS`, or between digits (`3.5`: no whitespace follows the stop); a piece under
  `MIN_SENTENCE_CHARS` characters joins the next; text after the last stop is a step too.
- `line` (PRM800K's): a step ends at each newline.

The steps are slices of the raw text: joined, they give it back byte for byte. The whitespace
after a boundary belongs to the step before it, so a step is certain only when the first
character of the next one arrives (the model's very next token, in practice); that is also what
makes the cut a function of the text read so far: fed in any pieces, a `Splitter` gives exactly
the steps `split_text` gives for the whole. A piece that is all whitespace (the text's leading
blank lines) is never a step of its own: it joins the next. `\\r\\n` line ends count as `\\n`
(the `\\r` is whitespace inside the run), so CRLF text cuts as LF text does.

A step shown or stored is `raw.strip()`; the raw slices are what re-cutting and resampling need.
"""

from __future__ import annotations

import re

from bbm_tui.core.types import SplitRule

# Never a sentence's end, though a stop and whitespace follow (the list; capitalised
# forms of the lower-case ones too, for a sentence that begins with one).
ABBREVIATIONS = frozenset(
    {
        "e.g.", "E.g.", "i.e.", "I.e.", "etc.", "Etc.", "vs.", "Vs.",
        "Dr.", "Mr.", "Mrs.", "Ms.", "Fig.", "No.",
    }
)  # fmt: skip
MIN_SENTENCE_CHARS = 10
_STOPS = ".?!"
_CLOSERS = "\"')]}»”’"
_OPENERS = "\"'([{«“‘"
# A run of whitespace with the character after it: the only places a step can end.
_GAP = re.compile(r"\s+(?=\S)")
# How far back a stop's word is looked for (the longest abbreviation is 4 characters; a word
# longer than this cannot be one, and cannot be a single capital).
_WORD_WINDOW = 16


def _ends_sentence(before: str) -> bool:
    """Whether `before` (the text up to a run of whitespace) ends with a sentence's stop that
    counts: `.`, `?` or `!`, then any closers, and not one of the exceptions."""
    end = len(before)
    while end > 0 and before[end - 1] in _CLOSERS:
        end -= 1
    if end == 0 or before[end - 1] not in _STOPS:
        return False
    if before[end - 1] != ".":
        return True
    window = before[max(0, end - _WORD_WINDOW) : end]
    word = re.split(r"\s", window)[-1].lstrip(_OPENERS)
    if word in ABBREVIATIONS:
        return False
    # A single capital letter before the dot (an initial: "J. Smith", the last of "U.S."):
    # the letter stands alone, with no letter before it.
    is_initial = (
        len(word) >= 2 and word[-2].isupper() and (len(word) == 2 or not word[-3].isalpha())
    )
    return not is_initial


class Splitter:
    """Incremental, one per trace: `feed` deltas, get the steps now certain; `close`: the rest."""

    def __init__(self, rule: SplitRule) -> None:
        self.rule = SplitRule(rule)
        self._buf = ""  # the open step's text, and whatever has come after it
        self._scan = 0  # where in _buf the next gap may begin (everything before is decided)

    def feed(self, text: str) -> list[str]:
        """The steps (raw slices) that `text` made certain, in order; often none."""
        if not text:
            return []
        self._buf += text
        steps: list[str] = []
        start = 0
        position = self._scan
        for gap in _GAP.finditer(self._buf, position):
            cut = gap.end()
            position = cut
            if self._is_boundary(self._buf, start, gap.start(), gap.group()):
                steps.append(self._buf[start:cut])
                start = cut
        # A trailing run of whitespace is not decided until the character after it arrives.
        tail = len(self._buf)
        while tail > position and self._buf[tail - 1].isspace():
            tail -= 1
        self._buf = self._buf[start:]
        self._scan = tail - start
        return steps

    def close(self) -> list[str]:
        """The rest of the text as the last step (none if nothing is left)."""
        rest, self._buf, self._scan = self._buf, "", 0
        return [rest] if rest else []

    def _is_boundary(self, buf: str, start: int, gap_start: int, gap: str) -> bool:
        piece = buf[start:gap_start]
        if not piece.strip():
            return False  # leading whitespace: it joins the step that follows
        if self.rule is SplitRule.LINE:
            return "\n" in gap
        if self.rule is SplitRule.PARAGRAPH:
            return gap.count("\n") >= 2
        if len(piece.strip()) < MIN_SENTENCE_CHARS:
            return False
        return gap.count("\n") >= 2 or _ends_sentence(piece)


def make_splitter(rule: SplitRule) -> Splitter:
    return Splitter(rule)


def split_text(text: str, rule: SplitRule) -> list[str]:
    """The whole text at once: the same steps a `Splitter` fed it in any pieces gives."""
    splitter = Splitter(rule)
    return splitter.feed(text) + splitter.close()


def stripped_steps(raw_steps: list[str]) -> list[str]:
    """The steps as shown and stored: each raw slice stripped, whitespace-only ones left out
    (only a text that is nothing but whitespace makes one)."""
    return [step.strip() for step in raw_steps if step.strip()]
