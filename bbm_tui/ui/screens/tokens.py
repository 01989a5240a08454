"""One thought token by token (docs/DESIGN.md §5): each token shaded by how sure the model was
of it, on a scale that reads in 16 colours and with none; the selected token's figures; and on
demand (a) the most likely tokens the provider ranked at its place. The bands and the
confidence figure are core/trace/branches.py's."""

from __future__ import annotations

from math import exp
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core.records import TokenLogprob
from bbm_tui.core.store import Step
from bbm_tui.core.textsafe import printable
from bbm_tui.core.trace.branches import band, confidence
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, styled

# The scale, most sure first. Each band differs from the others in its attributes, not only
# its colour (plain, underline, bold underline, bold italic underline, reverse), so it reads
# in 16 colours and with none (tests/ui/test_ui_branches.py checks it).
BAND_STYLES = ("", "underline", "bold underline $warning", "bold italic underline $warning",
               "reverse $error")
BAND_WORDS = ("p ≥ 0.9", "0.7-0.9", "0.4-0.7", "0.15-0.4", "< 0.15")
# The selected token stands between these marks as well as on the accent's background: a
# background alone is lost without colour, and a reversed band stays reversed under reverse.
PICKED_MARKS = ("‹", "›")
PICKED_STYLE = "bold $accent"
PICKED_BACKGROUND = "on $accent 40%"


def token_text(text: str) -> str:
    """A token as it was written: its spaces kept (" +" is not "+"), a line break or a control
    character shown as a visible stand-in (␤, ␛, ...), never sent to the terminal."""
    return printable(text, keep_newlines=False)


def quoted(text: str) -> Content:
    """A token in quotes, escapes spelled out, so that a space or a line break is seen."""
    return Content(printable(repr(text), keep_newlines=False))


def token_row(tokens: list[TokenLogprob], picked: int) -> Content:
    """The thought as its tokens, each in its band's style, the picked one marked."""
    parts: list[Content] = []
    for index, token in enumerate(tokens):
        style = BAND_STYLES[band(token.logprob)]
        text = token_text(token.text)
        if index == picked:
            parts += [styled(PICKED_MARKS[0], PICKED_STYLE),
                      styled(text, f"{style} {PICKED_BACKGROUND}".strip()),
                      styled(PICKED_MARKS[1], PICKED_STYLE)]
        else:
            parts.append(styled(text, style) if style else Content(text))
    return Content.assemble(*parts)


def percent(logprob: float) -> str:
    """A probability as a percentage; one too small to show in tenths says so ("<0.1%")."""
    probability = exp(logprob)
    return "<0.1%" if 0 < probability < 0.0005 else f"{probability:.1%}"


def describe_alternatives(token: TokenLogprob) -> Content:
    """The most likely tokens at the picked token's place, as the provider ranked them."""
    if not token.alternatives:
        return styled("No alternatives were recorded for this token: the provider sent none, "
                      "or the thought was saved before bbm-tui asked for them.", MUTED)
    rows = [styled(f"The {len(token.alternatives)} most likely tokens here, as the provider "
                   "ranked them:", "bold")]
    for rank, (text, logprob) in enumerate(token.alternatives, start=1):
        written = styled("  ← the one written", "bold") if text == token.text else Content("")
        rows.append(Content.assemble(f"\n {rank}. ", styled(f"{percent(logprob):>6}", "bold"),
                                     f"  log-prob {logprob:>7.3f}  ", quoted(text), written))
    return Content.assemble(*rows)


class TokenScreen(Dialog[None]):
    """One thought's tokens shaded by probability; ← and → pick a token and show its
    figures, a the alternatives the provider sent for it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,l", "close", "close", id="tokens_close"),
        Binding("left,h", "pick(-1)", "previous token", id="token_previous"),
        Binding("right", "pick(1)", "next token", id="token_next"),
        Binding("a", "alternatives", "alternatives", id="token_alternatives"),
    ]
    # Under 32 rows the hint line is left out (dialogs.tcss): the footer names the same
    # keys, and the view, alternatives open, fits 80x24 without scrolling.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (32, "-tall")]

    def __init__(self, step: Step) -> None:
        super().__init__()
        self.step = step
        self.tokens = list(step.tokens or ())
        self.picked = 0
        self.alternatives_open = False

    def compose(self) -> ComposeResult:
        with Vertical(id="tokens", classes="dialog"):
            yield Static(styled(f"Thought {self.step.number}, token by token", "bold"),
                         classes="dialog-title")
            if not self.tokens:
                yield Static(styled("No log-probabilities were recorded for this thought (a "
                                    "provider that sends none, or asked without them: the "
                                    "config's `logprobs`; or the provider's were ones no "
                                    "model could give, such as positive, NaN or infinite, "
                                    "which are never kept).", MUTED), classes="dialog-text")
            else:
                yield Static(id="token-text", classes="dialog-text")
                yield Static(id="token-detail")
                yield Static(id="token-alternatives")
                legend = Content.assemble(*(
                    part for index, words in enumerate(BAND_WORDS)
                    for part in (styled(f" {words} ", BAND_STYLES[index])
                                 if BAND_STYLES[index] else Content(f" {words} "), "  ")
                ))
                yield Static(legend, id="token-legend")
                sure = confidence(self.tokens)
                yield Static(styled(f"confidence {sure:.0%} (geometric mean of the token "
                                    "probabilities) · log-prob sum "
                                    f"{sum(t.logprob for t in self.tokens):.2f}", MUTED))
            yield Static(id="token-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        close = f"{key_for(self, 'tokens_close')} closes"
        hint = close
        if self.tokens:
            self.query_one("#token-text", Static).update(token_row(self.tokens, self.picked))
            token = self.tokens[self.picked]
            self.query_one("#token-detail", Static).update(Content.assemble(
                styled(f"token {self.picked + 1} of {len(self.tokens)}: ", "bold"),
                quoted(token.text),
                f"  log-probability {token.logprob:.3f}, probability {percent(token.logprob)}",
            ))
            alternatives = self.query_one("#token-alternatives", Static)
            alternatives.display = self.alternatives_open
            if self.alternatives_open:
                alternatives.update(describe_alternatives(token))
            more = "hides the alternatives" if self.alternatives_open else (
                "shows the most likely tokens here")
            hint = (f"{key_for(self, 'token_previous')} {key_for(self, 'token_next')} pick a "
                    f"token · {key_for(self, 'token_alternatives')} {more} · {close}")
        self.query_one("#token-hint", Static).update(styled(hint, MUTED))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # A thought with no tokens has none to pick: those keys leave the footer.
        return bool(self.tokens) or action not in ("pick", "alternatives")

    def action_pick(self, delta: int) -> None:
        if self.tokens:
            self.picked = (self.picked + delta) % len(self.tokens)
            self._show()

    def action_alternatives(self) -> None:
        if self.tokens:
            self.alternatives_open = not self.alternatives_open
            self._show()

    def action_close(self) -> None:
        self.dismiss(None)
