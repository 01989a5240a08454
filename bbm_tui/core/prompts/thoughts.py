"""The "Thought N:" protocol (docs/DESIGN.md §3), built and parsed here and nowhere else.

A thought is one line. Generation prompts list the thoughts so far as `Thought k: text\\n`
and end with the label of the one asked for; the finders' templates list them joined by
newlines. A model's step is its text up to the first line break (any Unicode one), with an
echoed leading `Thought N:` removed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


def label(number: int) -> str:
    """The label a generation prompt ends with to ask for Thought `number`."""
    return f"Thought {number}:"


def thought_line(number: int, step: str) -> str:
    """`Thought 3: text`: one thought as the prompts list it."""
    return f"{label(number)} {step}"


def format_thoughts(steps: Sequence[str]) -> str:
    """`Thought 1: s1\\n...Thought k: sk\\n` (empty for no steps): a generation prompt's."""
    return "".join(thought_line(number, step) + "\n"
                   for number, step in enumerate(steps, start=1))


def format_steps(steps: Sequence[str]) -> str:
    """`Thought 1: s1\\nThought 2: s2...` (no trailing newline: the finders' templates add
    their own)."""
    return "\n".join(thought_line(number, step) for number, step in enumerate(steps, start=1))


def split_thoughts(text: str) -> tuple[str, ...] | None:
    """A generation prompt's tail read back: the steps `text` lists if it is exactly
    `format_thoughts(steps) + label(len(steps) + 1)`, else None."""
    lines = text.split("\n")
    if lines[-1] != label(len(lines)):
        return None
    steps = []
    for number, line in enumerate(lines[:-1], start=1):
        prefix = thought_line(number, "")
        if not line.startswith(prefix):
            return None
        steps.append(line[len(prefix):])
    return tuple(steps)


# Every Unicode line break ends a step, not only "\n": a model (or a server) that writes
# "\r", NEL, U+2028 or U+2029 between thoughts would otherwise merge them. These are what
# str.splitlines() splits on.
LINE_BREAK = re.compile("[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")


LAST_LABEL = re.compile(r"Thought (\d+):\s*$")


def asked_number(prompt: str) -> int | None:
    """The number of the thought a generation prompt asks for, if it ends with its label."""
    match = LAST_LABEL.search(prompt)
    return int(match.group(1)) if match else None


class EchoStripper:
    """Hold back the start of a step until it is clear whether the model echoed `Thought N:`,
    so that the live view never shows a prefix the saved step will not have."""

    _FULL = re.compile(r"\s*thought\s*(\d+)\s*:[ \t]*", re.IGNORECASE)
    _PARTIAL = re.compile(
        r"\s*(t(h(o(u(g(h(t(\s*(\d+(\s*(:[ \t]*)?)?)?)?)?)?)?)?)?)?)?", re.IGNORECASE
    )

    def __init__(self) -> None:
        self.held = ""
        self.deciding = True
        self.label: int | None = None  # the number of the label it stripped

    def feed(self, text: str) -> str:
        if not self.deciding:
            return text
        self.held += text
        full = self._FULL.match(self.held)
        if full and full.end() < len(self.held):
            self.label = int(full.group(1))
            return self._release(self.held[full.end():])
        if self._PARTIAL.fullmatch(self.held):
            return ""
        return self._release(self.held)

    def finish(self) -> str:
        if not self.deciding:
            return ""
        full = self._FULL.match(self.held)
        return self._release(self.held[full.end():] if full else self.held)

    def _release(self, text: str) -> str:
        self.deciding = False
        self.held = ""
        return text


def leading_label(text: str) -> tuple[bool, int | None, int]:
    """The start of `text` read as EchoStripper reads it: (decided, the number of the
    `Thought N:` label it begins with or None, where the text after the label begins).
    Undecided while `text` could still be the start of a label."""
    full = EchoStripper._FULL.match(text)
    if full and full.end() < len(text):
        return True, int(full.group(1)), full.end()
    if EchoStripper._PARTIAL.fullmatch(text):
        return False, None, 0
    return True, None, 0


# An echoed label at the very start of a step (after its leading whitespace).
ECHO = re.compile(r"thought[ \t]*(\d+)[ \t]*:[ \t]*", re.IGNORECASE)


def step_span(raw: str, number: int | None) -> tuple[int, int]:
    """Where the step lies in a model's raw text for Thought `number`: `raw[start:end]` is the
    text that is stored. Leading whitespace is skipped, then an echoed `Thought N:`; the step
    ends at the first line break, and is stripped. An empty line followed by another thought's
    label is an empty step (the model skipped this one). The same rules, applied as text
    streams in, make the live step (EchoStripper and llm's cut)."""
    start = len(raw) - len(raw.lstrip())
    leading_break = LINE_BREAK.search(raw, 0, start) is not None
    echo = ECHO.match(raw, start)
    if echo:
        if leading_break and int(echo.group(1)) != number:
            return start, start
        start = echo.end()
    found = LINE_BREAK.search(raw, start)
    end = found.start() if found else len(raw)
    piece = raw[start:end]
    start += len(piece) - len(piece.lstrip())
    return start, start + len(piece.strip())


def cut_step(raw: str, number: int | None) -> str:
    """The step a model's raw text holds (see step_span)."""
    start, end = step_span(raw, number)
    return raw[start:end]
