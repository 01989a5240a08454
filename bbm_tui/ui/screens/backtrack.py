"""The dialogs of backtracking (docs/DESIGN.md §5): the samples for a thought as they arrive,
with their log-probabilities, the ones dropped as the original again and, once all are in, the
paper's choice, from which the person takes the chosen one or another; and a thought rewritten
by hand. Both answer with what to continue from; the trace screen makes the branch and streams
the rest."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from bbm_tui.core.generation.backtrack import SampleArrived
from bbm_tui.core.store import StoredCandidate
from bbm_tui.core.trace.session import SamplesReady
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe_line, styled

GLYPH_CHOSEN = "★"
GLYPH_WAITING = "…"
HOW_CHOSEN = {"logprob": "the highest log-probability of those that differ",
              "first": "the first that differs"}


def describe_sample(index: int, text: str, logprob: float | None, dropped: bool,
                    chosen: bool, impossible: bool = False) -> Content:
    """One sample as a row: its number, log-probability, text and what became of it. A
    sample whose log-probabilities no model could give has none (and is never chosen by
    them); the row says so."""
    score = "n/a" if logprob is None else f"{logprob:.2f}"
    mark = (styled(f"{GLYPH_CHOSEN} chosen", "bold $text-success") if chosen
            else styled("= the original (dropped)", MUTED) if dropped
            else styled("(says nothing)", MUTED) if not text.strip()
            else Content(""))
    if impossible:
        mark = Content.assemble(mark, styled(" (its log-probabilities were impossible: "
                                             "not used)", "$text-warning"))
    shown = safe_line(text, 200) if text.strip() else styled("(empty)", MUTED)
    return Content.assemble(f"{index + 1}. ", styled(f"{score:<8}", "bold"), shown, "  ", mark)


def waiting_row(index: int) -> Content:
    return Content.assemble(f"{index + 1}. ", styled(f"{GLYPH_WAITING} waiting for its call",
                                                     MUTED))


class CandidatesScreen(Dialog[StoredCandidate | None]):
    """The samples for Thought k, shown as they arrive (each in its own row, those that are
    the original again marked at once); once all are in and saved, the paper's choice is
    starred and Enter continues from the highlighted one. Esc leaves the trace as it was: the
    trace screen stops the sampling if it is still going (nothing saved), else the samples
    stay saved."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "keep the trace", id="candidates_cancel"),
    ]

    def __init__(self, number: int, original: str, count: int) -> None:
        super().__init__()
        self.number = number
        self.original = original
        self.count = count
        # The samples in so far, by position: kept from before the dialog is mounted too.
        self.samples: dict[int, SampleArrived] = {}
        self.ready: SamplesReady | None = None
        # Set once on_mount has shown what had come before: from then on each arrival is
        # shown as it comes. (`is_mounted` turns true only after every Mount handler, the
        # base Dialog's too, so a sample arriving in between was shown by neither.)
        self._rows_live = False

    @classmethod
    def showing(cls, ready: SamplesReady) -> CandidatesScreen:
        """The dialog with every sample in and saved (as after `all_in`)."""
        screen = cls(ready.number, ready.resample.original, len(ready.stored))
        screen.ready = ready
        return screen

    @property
    def all_arrived(self) -> bool:
        return self.ready is not None

    @property
    def arrived_count(self) -> int:
        return len(self.ready.stored) if self.ready is not None else len(self.samples)

    def compose(self) -> ComposeResult:
        with Vertical(id="candidates", classes="dialog"):
            yield Static(self._title(), id="candidates-title", classes="dialog-title")
            yield Static(Content.assemble(styled("Original: ", "bold"),
                                          safe_line(self.original, 200)),
                         classes="dialog-text")
            yield OptionList(*(Option(waiting_row(index), id=f"sample-{index}", disabled=True)
                               for index in range(self.count)), id="candidates-list")
            yield Static(self._hint(), id="candidates-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        if self.ready is not None:
            self._show_all(self.ready)
        else:
            for sample in self.samples.values():
                self._show_sample(sample)
        self._rows_live = True

    def _title(self) -> Content:
        if self.ready is not None:
            return styled(f"Thought {self.number}, sampled {self.count} times at "
                          "temperature 1", "bold")
        return Content.assemble(
            styled(f"Thought {self.number}, sampling {self.count} times at temperature 1",
                   "bold"),
            styled(f" · {self.arrived_count} of {self.count} in…", MUTED))

    def _hint(self) -> Content:
        ready = self.ready
        cancel = key_for(self, "candidates_cancel")
        if ready is None:
            return styled("Each sample shows as its call returns; the paper's choice once all "
                          f"are in. {cancel} stops the sampling (nothing is saved)", MUTED)
        if ready.resample.chosen is None:
            return styled(f"No sample differs from Thought {self.number}: the trace stays as "
                          f"it was. {cancel} closes", MUTED)
        # The paper's rule, or why it could not be applied: never silently the first.
        why = ready.resample.without_logprobs
        rule = why or "the paper's choice: " + HOW_CHOSEN[ready.resample.chosen_by or "first"]
        if ready.resample.partly_scored:
            rule = f"{rule} ({ready.resample.partly_scored})"
        # enter is the list's own key (it selects), not a binding.
        return styled(f"{GLYPH_CHOSEN} {rule}. enter continues from the highlighted one (a new "
                      f"branch) · {cancel} keeps the trace", MUTED)

    def arrived(self, sample: SampleArrived) -> None:
        """One sample is in: its row shows it (dropped or not); the choice waits for all."""
        if self.ready is not None:
            return
        self.samples[sample.position] = sample
        if self._rows_live:
            self._show_sample(sample)

    def _show_sample(self, sample: SampleArrived) -> None:
        candidate = sample.candidate
        self.query_one(OptionList).replace_option_prompt_at_index(
            sample.position, describe_sample(sample.position, candidate.text,
                                             candidate.logprob, sample.dropped, False,
                                             candidate.impossible_logprobs))
        self.query_one("#candidates-title", Static).update(self._title())

    def all_in(self, ready: SamplesReady) -> None:
        """Every sample is in and saved: the paper's choice starred and highlighted, the
        samples that can be continued from selectable."""
        self.ready = ready
        if self._rows_live:
            self._show_all(ready)

    def _show_all(self, ready: SamplesReady) -> None:
        options = self.query_one(OptionList)
        sampled = ready.resample.samples.candidates
        for index, candidate in enumerate(ready.stored):
            impossible = index < len(sampled) and sampled[index].impossible_logprobs
            options.replace_option_prompt_at_index(index, describe_sample(
                index, candidate.text, candidate.logprob, candidate.dropped,
                index == ready.resample.chosen, impossible))
            if not (candidate.dropped or not candidate.text.strip()):
                options.enable_option_at_index(index)
        if ready.resample.chosen is not None:
            options.highlighted = ready.resample.chosen
        self.query_one("#candidates-title", Static).update(self._title())
        self.query_one("#candidates-hint", Static).update(self._hint())

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        if self.ready is not None:
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
