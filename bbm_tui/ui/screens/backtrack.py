"""The dialogs of backtracking (issue 11; docs/DESIGN.md §5): the samples for a thought, with
their log-probabilities, the ones dropped as the original again and the paper's choice, from
which the person takes the chosen one or another; and a thought rewritten by hand. Both
answer with what to continue from; the trace screen makes the branch and streams the rest."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from bbm_tui.core.store import StoredCandidate
from bbm_tui.core.trace.session import SamplesReady
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe_line, styled

GLYPH_CHOSEN = "★"


def describe_sample(index: int, candidate: StoredCandidate, chosen: bool) -> Content:
    """One sample as a row: its number, log-probability, text and what became of it."""
    score = "n/a" if candidate.logprob is None else f"{candidate.logprob:.2f}"
    mark = (styled(f"{GLYPH_CHOSEN} chosen", "bold $text-success") if chosen
            else styled("= the original (dropped)", MUTED) if candidate.dropped
            else styled("(says nothing)", MUTED) if not candidate.text.strip()
            else Content(""))
    text = safe_line(candidate.text, 200) if candidate.text.strip() else styled("(empty)", MUTED)
    return Content.assemble(f"{index + 1}. ", styled(f"{score:<8}", "bold"), text, "  ", mark)


class CandidatesScreen(Dialog[StoredCandidate | None]):
    """The samples for Thought k; Enter continues from the highlighted one (the paper's
    choice at first), Esc leaves the trace as it was (the samples stay saved)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "keep the trace", id="candidates_cancel"),
    ]

    def __init__(self, ready: SamplesReady) -> None:
        super().__init__()
        self.ready = ready

    def compose(self) -> ComposeResult:
        resample = self.ready.resample
        how = {"logprob": "the highest log-probability of those that differ",
               "first": "the first that differs (the provider sent no log-probabilities)"}
        with Vertical(id="candidates", classes="dialog"):
            yield Static(styled(f"Thought {self.ready.number}, sampled "
                                f"{len(self.ready.stored)} times at temperature 1", "bold"),
                         classes="dialog-title")
            yield Static(Content.assemble(styled("Original: ", "bold"),
                                          safe_line(resample.original, 200)),
                         classes="dialog-text")
            options = [
                Option(describe_sample(index, candidate, index == resample.chosen),
                       id=f"sample-{index}",
                       disabled=candidate.dropped or not candidate.text.strip())
                for index, candidate in enumerate(self.ready.stored)
            ]
            yield OptionList(*options, id="candidates-list")
            cancel = key_for(self, "candidates_cancel")
            if resample.chosen is None:
                hint = (f"No sample differs from Thought {self.ready.number}: the trace stays "
                        f"as it was. {cancel} closes")
            else:
                rule = how[resample.chosen_by or "first"]
                # enter is the list's own key (it selects), not a binding.
                hint = (f"{GLYPH_CHOSEN} the paper's choice: {rule}. enter continues from the "
                        f"highlighted one (a new branch) · {cancel} keeps the trace")
            yield Static(styled(hint, MUTED), classes="dialog-hint")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.focus()
        if self.ready.resample.chosen is not None:
            options.highlighted = self.ready.resample.chosen

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.ready.stored[event.option_index])

    def action_cancel(self) -> None:
        self.dismiss(None)


class EditThoughtScreen(Dialog[str | None]):
    """Thought k rewritten by hand (one line); Enter continues from it on a new branch."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="edit_cancel"),
    ]

    def __init__(self, number: int, text: str) -> None:
        super().__init__()
        self.number = number
        self.text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="edit-thought", classes="dialog"):
            yield Static(styled(f"Rewrite Thought {self.number}", "bold"),
                         classes="dialog-title")
            yield Input(value=self.text, id="edit-input")
            yield Static(styled(f"enter keeps it as a new version of Thought {self.number} "
                                "(the original stays on its branch) and the model goes on "
                                f"from it · {key_for(self, 'edit_cancel')} to cancel", MUTED),
                         classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        text = " ".join(event.value.split())  # a thought is one line
        if not text:
            self.notify("A thought needs some text.", severity="warning", markup=False)
            return
        if text == " ".join(self.text.split()):
            self.notify("Unchanged: nothing to branch.", severity="warning", markup=False)
            return
        self.dismiss(text)

    def action_cancel(self) -> None:
        self.dismiss(None)
