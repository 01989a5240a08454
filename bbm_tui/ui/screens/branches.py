"""The views of a session's branches and of one thought's tokens (issue 11): the tree of the
whole session (branch points, each branch's end with its answer and whether it is right), two
branches side by side (the shared thoughts folded), and a thought's tokens shaded by how
sure the model was. What they show is computed in core/trace/branches.py."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static, Tree

from bbm_tui.core.store import Step
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.branches import Segment, band, confidence, outcome
from bbm_tui.core.trace.tree import BranchDiff
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED, safe_line, styled


def _answer_words(step: Step, target: str | None) -> tuple[str, str]:
    right = outcome(step, target)
    if step.answer is None:
        return "no answer yet", MUTED
    if right is None:
        return f"answer {one_line(step.answer, 30)}", ""
    mark = f"{GLYPH_OK} right" if right else f"{GLYPH_MISTAKE} wrong"
    return f"answer {one_line(step.answer, 30)} {mark}", "green" if right else "red"


class BranchTreeScreen(Dialog[int | None]):
    """Every branch of the session as a tree of segments; Enter shows the branch through the
    highlighted segment (its newest end)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,t", "close", "close", id="tree_close"),
    ]

    def __init__(self, roots: list[Segment], shown: set[int], target: str | None) -> None:
        super().__init__()
        self.roots = roots
        self.shown = shown  # the ids of the steps of the branch on show
        self.target = target

    def compose(self) -> ComposeResult:
        with Vertical(id="branch-tree", classes="dialog"):
            yield Static(styled("The session's branches", "bold"), classes="dialog-title")
            tree: Tree[int] = Tree(Text("Question"), id="branch-tree-view")
            tree.show_root = False
            for segment in self.roots:
                self._add(tree.root, segment)
            tree.root.expand_all()
            yield tree
            yield Static(styled("● the branch on show · enter shows the branch through the "
                                f"highlighted part · {key_for(self, 'tree_close')} closes",
                                MUTED), classes="dialog-hint")

    def _add(self, parent, segment: Segment) -> None:
        node = parent.add(self._label(segment), data=segment.end.id, expand=True)
        for child in segment.children:
            self._add(node, child)

    def _label(self, segment: Segment) -> Text:
        span = (f"Thought {segment.first}" if segment.first == segment.last
                else f"Thoughts {segment.first}-{segment.last}")
        label = Text()
        label.append("● " if segment.end.id in self.shown else "  ", style="bold")
        label.append(span, style="bold")
        label.append(f"  {one_line(segment.steps[0].text, 48)}")
        if not segment.children:
            words, style = _answer_words(segment.end, self.target)
            label.append(f"  → {words}", style=style or "dim")
        elif len(segment.children) > 1:
            label.append(f"  ({len(segment.children)} versions of Thought {segment.last + 1})",
                         style="dim")
        return label

    def on_mount(self) -> None:
        self.query_one(Tree).focus()

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        if event.node.data is not None:
            self.dismiss(event.node.data)

    def action_close(self) -> None:
        self.dismiss(None)


class CompareScreen(Dialog[None]):
    """Two branches side by side: the thoughts they share folded, then each one's own, with
    both answers and which is right."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,v", "close", "close", id="compare_close"),
    ]

    def __init__(self, diff: BranchDiff, target: str | None) -> None:
        super().__init__()
        self.diff = diff
        self.target = target

    def compose(self) -> ComposeResult:
        shared = len(self.diff.shared)
        with Vertical(id="compare", classes="dialog"):
            yield Static(styled("Two branches side by side", "bold"), classes="dialog-title")
            same = "Thought 1 is" if shared == 1 else f"Thoughts 1-{shared} are"
            folded = ("They part at Thought 1." if not shared else
                      f"{same} the same on both (folded); they part at Thought {shared + 1}.")
            yield Static(styled(folded, MUTED), classes="dialog-text")
            with Horizontal(id="compare-columns"):
                for title, steps in (("On show", self.diff.left), ("The other", self.diff.right)):
                    with VerticalScroll(classes="compare-column"):
                        yield Static(styled(title, "bold"))
                        for step in steps:
                            yield Static(Content.assemble(styled(f"{step.number} ", "bold"),
                                                          safe_line(step.text)),
                                         classes="compare-step")
                        end = steps[-1] if steps else (self.diff.shared[-1] if shared else None)
                        if end is not None:
                            words, style = _answer_words(end, self.target)
                            colour = {"green": "$text-success", "red": "$text-error"}.get(
                                style, MUTED)
                            yield Static(styled(words, f"bold {colour}"), classes="compare-end")
            yield Static(styled(f"{key_for(self, 'compare_close')} closes", MUTED),
                         classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)


# The token view's scale: it reads in 16 colours and without colour too (plain, underline,
# bold underline, bold italic underline, reverse).
BAND_STYLES = ("", "underline", "bold underline $warning", "bold italic underline $warning",
               "reverse $error")
BAND_WORDS = ("p ≥ 0.9", "0.7-0.9", "0.4-0.7", "0.15-0.4", "< 0.15")


class TokenScreen(Dialog[None]):
    """One thought's tokens shaded by probability; ← and → pick a token and show its
    figure and the alternatives the provider sent."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,l", "close", "close", id="tokens_close"),
        Binding("left,h", "pick(-1)", "previous token", id="token_previous"),
        Binding("right", "pick(1)", "next token", id="token_next"),
    ]

    def __init__(self, step: Step) -> None:
        super().__init__()
        self.step = step
        self.tokens = list(step.tokens or ())
        self.picked = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="tokens", classes="dialog"):
            yield Static(styled(f"Thought {self.step.number}, token by token", "bold"),
                         classes="dialog-title")
            if not self.tokens:
                yield Static(styled("No log-probabilities were recorded for this thought (a "
                                    "provider that sends none, or asked without them: the "
                                    "config's `logprobs`).", MUTED), classes="dialog-text")
            else:
                yield Static(id="token-text", classes="dialog-text")
                yield Static(id="token-detail")
                legend = Content.assemble(*(
                    part for index, words in enumerate(BAND_WORDS)
                    for part in (styled(f" {words} ", BAND_STYLES[index])
                                 if BAND_STYLES[index] else Content(f" {words} "), "  ")
                ))
                yield Static(legend, id="token-legend")
                sure = confidence(self.tokens)
                yield Static(styled(f"confidence {sure:.0%} (the geometric mean of the token "
                                    "probabilities) · sum of log-probabilities "
                                    f"{sum(t.logprob for t in self.tokens):.2f}", MUTED))
            yield Static(styled(f"{key_for(self, 'token_previous')} "
                                f"{key_for(self, 'token_next')} pick a token · "
                                f"{key_for(self, 'tokens_close')} closes", MUTED),
                         classes="dialog-hint")

    def on_mount(self) -> None:
        self._show()

    def _show(self) -> None:
        if not self.tokens:
            return
        parts = []
        for index, token in enumerate(self.tokens):
            style = BAND_STYLES[band(token.logprob)]
            if index == self.picked:
                style = f"{style} on $accent 40%".strip()
            text = one_line(token.text)
            parts.append(styled(text, style) if style else Content(text))
        self.query_one("#token-text", Static).update(Content.assemble(*parts))
        token = self.tokens[self.picked]
        from math import exp

        self.query_one("#token-detail", Static).update(Content.assemble(
            styled(f"token {self.picked + 1} of {len(self.tokens)}: ", "bold"),
            safe_line(repr(token.text)),
            f"  log-probability {token.logprob:.3f}, probability {exp(token.logprob):.1%}",
            styled("  · alternatives: none recorded (asked for the top 1 only)", MUTED),
        ))

    def action_pick(self, delta: int) -> None:
        if self.tokens:
            self.picked = (self.picked + delta) % len(self.tokens)
            self._show()

    def action_close(self) -> None:
        self.dismiss(None)
