"""The dialogs of backtracking (docs/DESIGN.md §5): the samples for a thought as they arrive,
with their log-probabilities, the ones dropped as the original again and, once all are in, the
paper's choice, from which the person takes the chosen one or another; and a thought rewritten
by hand. Both answer with what to continue from; the trace screen makes the branch and streams
the rest."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from bbm_tui.core.generation.backtrack import SampleArrived
from bbm_tui.core.store import StoredCandidate
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.session import SamplesReady
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe_line, styled
from bbm_tui.ui.viewmodels.branches import from_the_difference, word_diff

GLYPH_CHOSEN = "★"
GLYPH_WAITING = "…"
HOW_CHOSEN = {"logprob": "the highest log-probability of those that differ",
              "first": "the first that differs"}
# The words of a sample that differ from the original: bold and underlined, so that they read
# without colour too (as in the comparison, v).
DIFFERS = "bold underline $text-warning"


def sample_mark(text: str, dropped: bool, chosen: bool, after: str = "") -> Content:
    """What became of a sample, `after` (the space before what follows) in its style: a run
    that starts with spaces loses them in a screenshot (librsvg)."""
    mark, style = ((f"{GLYPH_CHOSEN} chosen", "bold $text-success") if chosen
                   else ("= the original (dropped)", MUTED) if dropped
                   else ("(says nothing)", MUTED) if not text.strip()
                   else ("", ""))
    return styled(mark + after, style) if mark else Content("")


def marked(runs: list[tuple[str, bool]]) -> Content:
    """word_diff's runs (of one_line text) with the words that differ marked."""
    return Content.assemble(*(styled(text, DIFFERS) if differs else Content(text)
                              for text, differs in runs))


def describe_sample(index: int, original: str, text: str, logprob: float | None,
                    dropped: bool, chosen: bool, impossible: bool = False) -> Content:
    """One sample as a row of the list: its number, log-probability, what became of it, and
    its text from a few words before where it differs from the original (the differing
    words marked; the row is cut at the width, the highlighted sample is shown whole
    under the list). A sample whose log-probabilities no model could give has none (and is
    never chosen by them); the row says so."""
    score = "n/a" if logprob is None else f"{logprob:.2f}"
    mark = sample_mark(text, dropped, chosen, after="  ")
    if impossible:
        mark = Content.assemble(mark, styled("(its log-probabilities were impossible: not "
                                             "used)  ", "$text-warning"))
    if not text.strip():
        shown = styled("(empty)", MUTED)
    else:
        shown = marked(from_the_difference(word_diff(one_line(original), one_line(text))[1]))
    return Content.assemble(f"{index + 1}. ", styled(f"{score:<8}", "bold"), mark, shown)


def waiting_row(index: int) -> Content:
    return Content.assemble(f"{index + 1}. ", styled(f"{GLYPH_WAITING} waiting for its call",
                                                     MUTED))


class CandidatesScreen(Dialog[StoredCandidate | None]):
    """The samples for Thought k, shown as they arrive (each in its own row, those that are
    the original again marked at once), each from where it differs from the original; the
    highlighted one whole under the list (↑ ↓ show the others). Once all are in and saved,
    the paper's choice is starred and Enter continues from the highlighted one. Esc leaves
    the trace as it was: the trace screen stops the sampling if it is still going (nothing
    saved), else the samples stay saved."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "keep the trace", id="candidates_cancel"),
        # The highlighted sample's box is a few lines (four at 80x24) and a long sample goes
        # on below them: the page keys read it. Before the list's own page keys, which have
        # nothing to do here (every row is in view).
        Binding("pagedown", "read_sample(1)", "the rest of the sample", id="candidates_more",
                priority=True),
        Binding("pageup", "read_sample(-1)", "back up the sample", id="candidates_back",
                priority=True, show=False),
    ]
    # Under 32 rows the dialog fits by drawing less chrome (dialogs.tcss).
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (32, "-tall")]

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
                                          safe_line(self.original)),
                         id="candidates-original")
            yield Static(id="candidates-note")
            yield OptionList(*(Option(waiting_row(index), id=f"sample-{index}", disabled=True)
                               for index in range(self.count)), id="candidates-list")
            with VerticalScroll(id="candidates-detail"):
                yield Static(id="candidates-whole")
            yield Static(self._hint(), id="candidates-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()
        if self.ready is not None:
            self._show_all(self.ready)
        else:
            for sample in self.samples.values():
                self._show_sample(sample)
        self._rows_live = True
        self._show_whole()

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
        # ↑ ↓ and enter are the list's own keys (not bindings).
        if ready is None:
            return styled("Each sample shows as its call returns, the words that differ "
                          "underlined (↑ ↓ each whole); the paper's choice once all are in · "
                          f"{cancel} stops the sampling (nothing is saved)", MUTED)
        if ready.resample.chosen is None:
            return styled(f"No sample differs from Thought {self.number}: the trace stays as "
                          f"it was. {cancel} closes", MUTED)
        # The paper's rule, or why it could not be applied: never silently the first.
        why = ready.resample.without_logprobs
        rule = why or "the paper's choice: " + HOW_CHOSEN[ready.resample.chosen_by or "first"]
        if ready.resample.partly_scored:
            rule = f"{rule} ({ready.resample.partly_scored})"
        # The footer says what esc does; ↑ ↓ and enter are the list's own keys.
        return styled(f"{GLYPH_CHOSEN} {rule} · ↑ ↓ each whole · enter goes on from the "
                      "highlighted one (a new branch)", MUTED)

    def show_note(self, note: str) -> None:
        """A line under the original about the sampling (which model writes the samples):
        in the dialog, where a toast covered its legend at 80x24."""
        line = self.query_one("#candidates-note", Static)
        line.update(styled(note, MUTED))
        line.display = True
        self.add_class("-noted")  # at 80x24 the whole sample gives it a line (dialogs.tcss)

    def arrived(self, sample: SampleArrived) -> None:
        """One sample is in: its row shows it (dropped or not); the choice waits for all."""
        if self.ready is not None:
            return
        self.samples[sample.position] = sample
        if self._rows_live:
            self._show_sample(sample)

    def _show_sample(self, sample: SampleArrived) -> None:
        candidate = sample.candidate
        options = self.query_one(OptionList)
        options.replace_option_prompt_at_index(
            sample.position, describe_sample(sample.position, self.original, candidate.text,
                                             candidate.logprob, sample.dropped, False,
                                             candidate.impossible_logprobs))
        if not sample.dropped and candidate.text.strip():
            # To look at whole while the others come; enter waits for all of them.
            options.enable_option_at_index(sample.position)
            if options.highlighted is None:
                options.highlighted = sample.position
        self.query_one("#candidates-title", Static).update(self._title())
        self._show_whole()

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
                index, self.original, candidate.text, candidate.logprob, candidate.dropped,
                index == ready.resample.chosen, impossible))
            if not (candidate.dropped or not candidate.text.strip()):
                options.enable_option_at_index(index)
        if ready.resample.chosen is not None:
            options.highlighted = ready.resample.chosen
        self.query_one("#candidates-title", Static).update(self._title())
        self.query_one("#candidates-hint", Static).update(self._hint())
        self._show_whole()

    def on_option_list_option_highlighted(self) -> None:
        self._show_whole()
        self.query_one("#candidates-detail", VerticalScroll).scroll_home(animate=False)

    def on_resize(self) -> None:
        # A sample that went on beyond its box may fit it now, or the other way round.
        self.call_after_refresh(self.refresh_bindings)

    def action_read_sample(self, direction: int) -> None:
        detail = self.query_one("#candidates-detail", VerticalScroll)
        if direction > 0:
            detail.scroll_page_down(animate=False)
        else:
            detail.scroll_page_up(animate=False)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The page keys are in the footer only while the sample goes on beyond its box.
        if action == "read_sample":
            detail = self.query_one("#candidates-detail", VerticalScroll)
            return detail.display and detail.max_scroll_y > 0
        return True

    def _show_whole(self) -> None:
        """The highlighted sample whole, wrapped, the words that differ from the original
        marked."""
        whole = self.query_one("#candidates-whole", Static)
        highlighted = self.query_one(OptionList).highlighted
        found = self._sample_at(highlighted) if highlighted is not None else None
        self.query_one("#candidates-detail").display = found is not None
        if found is None or highlighted is None:
            return
        text = found[0]
        # Its number, log-probability and mark are on its highlighted row above.
        whole.update(Content.assemble(
            styled(f"{highlighted + 1}. ", "bold"),
            marked(word_diff(one_line(self.original), one_line(text))[1])))
        # Whether it goes on beyond its box is known once it is laid out.
        self.call_after_refresh(self.refresh_bindings)

    def _sample_at(self, position: int) -> tuple[str, float | None, bool, bool] | None:
        """The text, log-probability, dropped and chosen of the sample at `position`, if in."""
        if self.ready is not None:
            stored = self.ready.stored[position]
            return (stored.text, stored.logprob, stored.dropped,
                    position == self.ready.resample.chosen)
        sample = self.samples.get(position)
        if sample is None:
            return None
        return sample.candidate.text, sample.candidate.logprob, sample.dropped, False

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
