"""What the annotation and adjudication screens show, as pure functions of the core's state
(no widgets): each thought's state under the paper's protocol, the progress line, the lines
after a submit, the highlighted words."""

from __future__ import annotations

import re
from typing import Literal

from textual.content import Content

from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.queue import Progress, Submitted, Suggestion
from bbm_tui.core.textsafe import printable

# judged correct (per-step: good), neutral (per-step), the first mistake (per-step: bad), the
# one to judge now, not unlocked yet, after a mistake (the paper's protocol)
ThoughtState = Literal["ok", "neutral", "mistake", "current", "locked", "after"]

GLYPHS: dict[ThoughtState, tuple[str, str]] = {
    "ok": ("✓", "$text-success"),
    "neutral": ("~", "bold $text-warning"),
    "mistake": ("✗", "bold $text-error"),
    "current": ("▸", "bold $accent"),
    "locked": ("·", "$foreground 38%"),
    "after": ("·", "$foreground 38%"),
}
HIGHLIGHT = "bold reverse $warning"
_MARKS: dict[str, ThoughtState] = {protocol.CORRECT: "ok", protocol.NEUTRAL: "neutral",
                                   protocol.INCORRECT: "mistake"}


def thought_state(judged: str, index: int, steps: int, per_step: bool = False) -> ThoughtState:
    if index < len(judged):
        return _MARKS.get(judged[index], "mistake")
    if protocol.INCORRECT in judged and not per_step:  # per-step: rated to the end
        return "after"
    return "current" if index == len(judged) else "locked"


def finish_text(judged: str) -> str:
    """A rated trace's verdict, per-step: its first bad thought and PRM800K's finish."""
    return (f"{location_text(protocol.location(judged))} "
            f"({protocol.finish_reason(judged)})")


def location_text(location: int | None) -> str:
    return "no mistake" if location is None else f"Thought {location + 1}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def progress_line(progress: Progress, *, wall_clock: bool = True) -> str:
    parts = [f"{progress.finished} / {progress.total} done"]
    if progress.flagged:
        parts.append(f"{progress.flagged} flagged")
    if progress.skipped:
        parts.append(f"{progress.skipped} skipped")
    if wall_clock and progress.mean_s is not None:  # none until a trace is submitted
        parts.append(f"{duration(progress.mean_s)} a trace")
        parts.append(f"about {duration(progress.remaining_s)} to go")
    return " · ".join(parts)


def submitted_line(submitted: Submitted, *, with_file: bool = True) -> str:
    """After a submit: which trace, the label given and, where the file has one, the gold
    label. Without `with_file` (a queue over one file) the trace is named by its line."""
    trace = submitted.trace
    where = trace.name if with_file else f"line {trace.line}"
    line = f"{where}: you said {location_text(submitted.mistake_index)}"
    if submitted.finish_reason:  # per-step: PRM800K's finish
        line += f" ({submitted.finish_reason})"
    if submitted.has_gold:
        verdict = "agree" if submitted.agrees else "differ"
        line += f"; gold: {location_text(submitted.gold)} ({verdict})"
    return line


def suggestion_lines(suggestions: list[Suggestion]) -> list[str]:
    if not suggestions:
        return ["no judge can read this task"]
    lines = []
    for suggestion in suggestions:
        line = f"{suggestion.source}: {location_text(suggestion.mistake_index)}"
        if suggestion.reason:
            line += f" ({suggestion.reason})"
        lines.append(line)
    return lines


def highlighted(text: str, word: str, base: Content | None = None) -> Content:
    """Untrusted text, literal, with every occurrence of `word` (any case) highlighted."""
    content = base if base is not None else Content(printable(text))
    if not word:
        return content
    return content.highlight_regex(re.compile(re.escape(word), re.IGNORECASE),
                                   style=HIGHLIGHT)


def thought_content(number: int, text: str, state: ThoughtState,
                    word: str) -> tuple[Content, Content]:
    """A thought as the queue shows it: its gutter ("  3 ✓ ") and its text, the word
    highlighted, dimmed while locked or after the mistake."""
    glyph, style = GLYPHS[state]
    gutter = Content.styled(f"{number:>3} {glyph} ", style)
    body = highlighted(text, word)
    if state in ("locked", "after"):
        body = body.stylize("$foreground 38%")
    return gutter, body


# A line of the guidelines' running text as the PDF they came from cut it: long, and with no
# run of spaces inside (a run means columns: a table, kept as it is).
_COLUMNS = re.compile(r"\S {3,}\S")
_BULLET = re.compile(r"^[●•]\s+")
_CUT_AT = 60


def reflowed(text: str) -> str:
    """The paper's guidelines with their running text joined again: the text came out of a
    PDF with a line break every ~100 characters, which a narrower dialog wrapped a second
    time (a long line, then a stub). Lines in columns, short lines and the lines that start
    an item ("(1)", "●") are kept where they are."""
    out: list[str] = []
    for line in text.split("\n"):
        if out and _runs_on(out[-1], line):
            out[-1] = f"{out[-1].rstrip()} {line.strip()}"
        else:
            out.append(line)
    return "\n".join(out)


def _runs_on(previous: str, line: str) -> bool:
    """Whether `line` continues `previous` (cut by the PDF, not by the author)."""
    body, following = previous.strip(), line.strip()
    if len(previous.rstrip()) < _CUT_AT or not following:
        return False
    if _COLUMNS.search(_BULLET.sub("", body)) or _COLUMNS.search(following):
        return False
    if following.startswith(("(", "●", "•")):
        return False
    indent = len(previous) - len(previous.lstrip())
    indent_next = len(line) - len(line.lstrip())
    return indent_next >= indent if indent else indent_next == 0
