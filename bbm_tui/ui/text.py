"""Turning untrusted strings into things Textual can show without reading them as markup.

Everything that came from a model, the dataset, the person or an exception passes through
`textsafe` (no control characters or escape sequences reach the terminal) and is wrapped in a
`Content` (no `[bold]` or `[/` is ever parsed). Styles here are our own, never the text's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.content import Content

from bbm_tui.core.accounting import (
    UNKNOWN,
    format_cost,
    format_count,
    format_tokens_in_out,
    format_total_cost,
)
from bbm_tui.core.textsafe import one_line, printable
from bbm_tui.core.types import StepOrigin

if TYPE_CHECKING:

    from bbm_tui.core.store import Step, Totals
    from bbm_tui.core.types import StepperSettings

# Status glyphs, as in the paper's labelling UI: correct before the first mistake, the first
# mistake itself, and the rest after it (not judged, shown dimmed).
GLYPH_OK = "✓"
GLYPH_MISTAKE = "✗"
GLYPH_PLAIN = "·"
GLYPH_STREAMING = "…"
GLYPH_UNPARSED = "?"
CURSOR = "▌"

# Styles for our own text inside `Content`. Textual 8 resolves "$text-muted" and
# "$text-disabled" there to plain white, so these say what those mean in the theme.
MUTED = "$foreground 60%"
DISABLED = "$foreground 38%"


def safe(text: str) -> Content:
    """Multi-line untrusted text, literal."""
    return Content(printable(text))


# Past this many characters a question, a target or a thought is cut on screen: wrapping a
# megabyte on every repaint and key froze the screen (a 10 MB question: 47 s to the first
# frame, 871 MB). Copying still takes all of it.
SHOWN_LIMIT = 20_000
QUESTION_SHOWN = SHOWN_LIMIT
# What the note after a question cut on screen says (the screens that show one bind Q to it).
COPY_QUESTION = "Q copies the whole question"


def shown_part(text: str, limit: int = SHOWN_LIMIT) -> tuple[str, int]:
    """The part of `text` shown on screen, and how many characters are left out."""
    if len(text) <= limit:
        return text, 0
    return text[:limit], len(text) - limit


def left_out(hidden: int, how: str) -> Content:
    """" … 9,980,000 more characters (HOW)", after a text cut on screen."""
    return styled(f" … {hidden:,} more characters ({how})", f"italic {MUTED}")


def safe_cut(text: str, how: str, limit: int = SHOWN_LIMIT, *, line: bool = False) -> Content:
    """Untrusted text, literal, cut on screen at `limit` characters with a note saying how
    many more there are and `how` to get them all; `line`: on one line (as safe_line)."""
    shown, hidden = shown_part(text, limit)
    content = safe_line(shown) if line else safe(shown)
    return content.append(left_out(hidden, how)) if hidden else content


def safe_line(text: str, limit: int | None = None) -> Content:
    """One line of untrusted text, literal, optionally cut with an ellipsis."""
    return Content(one_line(text, limit))


def safe_cell(text: str, limit: int | None = None) -> Text:
    """A DataTable cell (DataTable reads plain `str` cells as markup, so never pass one)."""
    return Text(one_line(text, limit), no_wrap=True, overflow="ellipsis")


def styled(text: str, style: str) -> Content:
    """Our own fixed text in one of the theme's styles (e.g. MUTED, "$accent")."""
    return Content.styled(text, style)


def fit_message(message: str, then: str, width: int, lines: int) -> str:
    """`message`, then `then` (what to do next), in at most `lines` lines of `width` cells:
    `message` is cut at a word with an ellipsis where the two do not fit; `then` is never
    cut (a status line that lost "press n to try it again" left the person stuck)."""
    whole = f"{message} {then}".strip()
    if width <= 0 or _height(whole, width) <= lines:
        return whole
    # The longest start of the message that fits with its ellipsis and `then`.
    low, high = 0, len(message)
    while low < high:
        middle = (low + high + 1) // 2
        if _height(_cut(message, middle, then), width) <= lines:
            low = middle
        else:
            high = middle - 1
    return _cut(message, low, then)


def _cut(message: str, length: int, then: str) -> str:
    start = message[:length]
    if length < len(message):
        if " " not in start.strip() and then:
            # Not even its first word fits: `then` alone ("Finish… Label the trace" said
            # nothing in a side-by-side column).
            return then
        if " " in start.strip():
            start = start[:start.rstrip().rfind(" ")]  # at a word, not inside one
    return f"{start.rstrip(' ,;:—-')}… {then}".strip()


def _height(text: str, width: int) -> int:
    return len(Content(text).wrap(width))


def thoughts(count: int) -> str:
    """'1 thought', '2 thoughts' (and '10,000 thoughts')."""
    return f"{count:,} thought" + ("" if count == 1 else "s")


def format_tokens(count: int, *, estimated: bool = False) -> str:
    """A token count; "~" before one that is an estimate, not the provider's own count."""
    return f"{format_count(count, estimated)} tok"


def cost_phrase(cost: str) -> str:
    """A cost as a line of figures shows it: "$0.0031", or "cost —" where unknown."""
    return f"cost {cost}" if cost == UNKNOWN else cost


def format_totals(totals: Totals) -> str:
    """The title's running figures: "20 calls · 24,080 in / 20,480 cached / 240 out ·
    $0.0062" ("~" on estimated counts; "≥$…" when some call's price is unknown, "cost —" when
    none is known)."""
    return totals_forms(totals)[0]


def totals_forms(totals: Totals) -> tuple[str, ...]:
    """The title's figures, longest first, for a narrow terminal to take the first that
    leaves room: all of them (`format_totals`), without the calls, the tokens in one sum
    ("1,812 tok, 1,030 cached · $0.0059"), the cost alone."""
    calls = f"{totals.calls:,} call" + ("" if totals.calls == 1 else "s")
    estimated, prompt_estimated = totals.estimated_calls > 0, totals.prompt_estimated_calls > 0
    tokens = format_tokens_in_out(totals.prompt_tokens, totals.cached_tokens,
                                  totals.completion_tokens, estimated, prompt_estimated)
    summed = format_tokens(totals.prompt_tokens + totals.completion_tokens,
                           estimated=estimated or prompt_estimated)
    cost = cost_phrase(format_total_cost(totals.cost, totals.calls, totals.unpriced_calls))
    return (f"{calls} · {tokens} · {cost}", f"{tokens} · {cost}",
            f"{summed}, {format_count(totals.cached_tokens)} cached · {cost}", cost)


def settings_line(settings: StepperSettings) -> str:
    """"temperature 0 · 1,024 tokens/step · 160 steps max"."""
    call = settings.call
    tokens = f"{call.max_tokens:,} tokens/step" if call.max_tokens else "no token limit"
    line = f"temperature {call.temperature:g} · {tokens} · {settings.step_limit:,} steps max"
    return line + (" · one call for many steps" if settings.one_call else "")


def step_meta(step: Step, *, wall_clock: bool = True) -> str:
    """The dim line under a thought: latency and tokens, or where the step came from.

    `wall_clock=False` leaves latencies out, for screenshots that must not change between runs.
    """
    if step.origin == StepOrigin.DATASET:
        return "recorded in the dataset"
    if step.origin == StepOrigin.TYPED:
        return "typed"
    if step.origin == StepOrigin.EDIT:
        return "rewritten by you (a new branch)"
    parts: list[str] = ["backtracked"] if step.origin == StepOrigin.BACKTRACK else []
    if wall_clock and step.latency_s is not None:
        parts.append(f"{step.latency_s:.2f} s")
    if step.one_call is not None:
        # Its latency is from the start of the call it shared with the steps around it.
        parts.append("taken from one call")
    if step.deployment is not None:
        parts.append(f"served by {step.deployment}")
    if step.call_choices is not None and step.call_choices > 1:
        # Its call's latency is the samples' wait; its tokens (if shown) are its own.
        parts.append(f"1 of {step.call_choices} samples")
    if step.prompt_tokens is not None:
        cached = (f", {format_count(step.cached_tokens)} cached"
                  if step.cached_tokens is not None else "")
        parts.append(f"{format_count(step.prompt_tokens, step.prompt_estimated)} in{cached}")
    if step.completion_tokens is not None:
        out = format_count(step.completion_tokens, step.usage_estimated)
        parts.append(f"{out} out" if step.prompt_tokens is not None else f"{out} tok")
    if step.call_id is not None and not (step.call_choices or 0) > 1:
        # A step chosen among a call's samples has no cost of its own: the call's is theirs.
        parts.append(cost_phrase(format_cost(step.cost)))
    if step.logprob is not None:
        parts.append(f"log-prob {step.logprob:.2f}")
    if step.confidence is not None:
        # The token view's figure (l), named as there: "p̄" with a combining macron is drawn
        # as "p¯" by some terminals and by the SVG screenshots.
        parts.append(f"confidence {step.confidence:.0%}")
    if step.truncated:
        parts.append("cut at the token limit")
    if not parts and step.origin == StepOrigin.THINKING:
        return "cut again from the stored reasoning (no call)"  # a re-cut view's step
    return " · ".join(parts) if parts else "model"


def failure_title(description: str) -> str:
    """What a failed worker was doing ("Generating failed"), from its description, which ours
    all give, as a sentence. One that gave none has Textual's ("_load(...)", "<coroutine
    object …>"), which says nothing to a person."""
    return f"{description} failed" if description[:1].isupper() else "Something failed"


def failure_message(error: BaseException | None) -> str:
    """What a worker's error says, on one line and redacted: any exception's text may carry
    what a provider or a library echoed back (a model call's own message is redacted
    already)."""
    from bbm_tui.core.llm import LLMError
    from bbm_tui.core.redact import redact

    message = error.message if isinstance(error, LLMError) else redact(str(error))
    return one_line(message or type(error).__name__, 500)
