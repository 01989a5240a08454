"""The annotation queue (docs/DESIGN.md §11, issue 12): one trace at a time, labelled with the
paper's protocol. `c` judges the unlocked thought correct and unlocks the next, `x` judges it
incorrect (the trace is then complete, the rest greyed), `enter` submits the complete trace and
opens the next unfinished one. With PRM800K's per-step protocol (PerStepAnnotateScreen) every
thought is rated good, neutral or bad to the end, and a trace finishes as PRM800K's did.

Every action commits through the core's queue (core/annotation/queue.py) in a thread, one at a
time and in the order pressed, so the event loop never waits on the disk.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Static

from bbm_tui.core.annotation.protocol import ProtocolError
from bbm_tui.core.annotation.queue import AnnotationQueue, Suggestion, question_text
from bbm_tui.core.records import WorkStatus
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.context import context
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import GoBack
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.annotate_dialogs import (
    Flag,
    FlagDialog,
    GuidelinesDialog,
    HighlightDialog,
    NoteDialog,
    guidelines_text,
)
from bbm_tui.ui.screens.base import QueueScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import (
    COPY_QUESTION,
    MUTED,
    QUESTION_SHOWN,
    left_out,
    shown_part,
    styled,
)
from bbm_tui.ui.viewmodels.annotate import (
    finish_text,
    highlighted,
    location_text,
    progress_line,
    submitted_line,
    suggestion_lines,
    thought_content,
    thought_state,
)
from bbm_tui.ui.viewmodels.thinking import queued_thinking_note
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar
from bbm_tui.ui.widgets.hanging import HangingStatic


class WheelScroll(VerticalScroll, can_focus=False):
    """Scrolls with the wheel (and the screen's keys); never takes the keys from the screen."""


class ThoughtsPane(WheelScroll):
    """The thoughts of the trace on show."""


def reveal(widget: Widget) -> None:
    """Scroll `widget` into view once it is laid out: a thought mounted with a new trace
    (opened, resumed, reopened by undo) has no place yet, so scrolling at once did nothing
    and the thought to judge could be below the fold."""

    def scroll() -> None:
        if widget.is_attached:
            widget.scroll_visible(animate=False)

    widget.call_after_refresh(scroll)


def _bindings(*, per_step: bool) -> list[BindingType]:
    """The queue's keys; the per-step protocol's rate (c good, n neutral, x bad) and finish
    as PRM800K did. The ids are the same for both (one [keymap] line for both)."""
    if per_step:
        judging: list[BindingType] = [
            Binding("c", "rate(1)", "good", id="annotate_correct",
                    tooltip="Rate the thought good (+1): right, and it helps; the next one "
                    "unlocks"),
            Binding("n", "rate(0)", "neutral", id="annotate_neutral",
                    tooltip="Rate the thought neutral (0): not wrong, but no progress"),
            Binding("x", "rate(-1)", "bad", id="annotate_incorrect",
                    tooltip="Rate the thought bad (-1); the rating goes on to the last "
                    "thought"),
            Binding("enter", "submit", "submit", id="annotate_submit",
                    tooltip="Finish the rated trace (solution, or found_error with a bad "
                    "thought) and open the next"),
        ]
        flag = Binding("f", "flag", "give up", id="annotate_flag",
                       tooltip="Finish without a label: give up or bad problem (ratings kept)")
    else:
        judging = [
            Binding("c", "judge(True)", "correct", id="annotate_correct",
                    tooltip="The unlocked thought is correct: the next one unlocks"),
            Binding("x", "judge(False)", "incorrect", id="annotate_incorrect",
                    tooltip="The unlocked thought is the first mistake: the trace is complete"),
            Binding("enter", "submit", "submit", id="annotate_submit",
                    tooltip="Save the complete trace's label and open the next unfinished "
                    "trace"),
        ]
        flag = Binding("f", "flag", "flag", id="annotate_flag",
                       tooltip="Set this trace aside: bad problem or unsure, with a note")
    return [
        *judging,
        Binding("u", "undo", "undo", id="annotate_undo",
                tooltip="Undo the last judgement (on a fresh trace: reopen the last submitted)"),
        Binding("s", "skip", "skip", id="annotate_skip",
                tooltip="Put this trace off; the queue comes back to it at the end"),
        flag,
        Binding("i", "guidelines", "guidelines", id="annotate_guidelines",
                tooltip="The paper's annotation guidelines for this task"),
        Binding("slash", "highlight", "highlight", id="annotate_highlight",
                tooltip="Highlight a word in the question and every thought"),
        Binding("h", "suggest", "suggest", id="annotate_suggest",
                tooltip="Show the verifier's (or a model's) verdict; the label becomes assisted"),
        Binding("m", "note", "note", id="annotate_note", show=False,
                tooltip="A note on the trace (why its first mistake is one), kept with its "
                "label"),
        Binding("a", "app.agreement", "agreement", id="annotate_agreement", show=False,
                tooltip="The annotators' agreement so far: kappa between each two, as a "
                "matrix"),
        Binding("escape", "back", "back", id="annotate_back", tooltip="Leave the queue"),
        # The ids of the main screen's keys that do the same (one [keymap] line for both).
        Binding("]", "scroll_question(3)", "question ↓", id="question_down", show=False,
                tooltip="Scroll the question down (a long one is cut on a small terminal)"),
        Binding("[", "scroll_question(-3)", "question ↑", id="question_up", show=False,
                tooltip="Scroll the question up"),
        Binding("Q", "copy_question", "copy question", id="copy_question", show=False,
                tooltip="Copy the whole question"),
        Binding("J,shift+down", "scroll_thoughts(3)", "scroll down", id="scroll_down",
                show=False, tooltip="Scroll the thoughts down a few lines"),
        Binding("K,shift+up", "scroll_thoughts(-3)", "scroll up", id="scroll_up",
                show=False, tooltip="Scroll the thoughts up a few lines"),
    ]


class AnnotateScreen(QueueScreen):
    CSS_PATH = stylesheet("annotate")
    HELP_TITLE = "the annotation queue"

    BINDINGS: ClassVar[list[BindingType]] = _bindings(per_step=False)
    # The palette's commands (ui/palette.py): binding id, the command's title.
    PALETTE: ClassVar[dict[str, str]] = {
        "annotate_guidelines": "Annotation guidelines", "annotate_suggest": "Suggest a verdict",
        "annotate_skip": "Skip the trace", "annotate_note": "Note on the trace",
        "annotate_highlight": "Highlight a word",
    }

    def __init__(self, queue: AnnotationQueue) -> None:
        super().__init__(classes="annotate-screen")
        self.queue = queue
        self.word = ""
        self.last_submitted = ""
        self._last_index: int | None = None
        self._one_file = len({trace.path for trace in queue.traces}) == 1
        self.suggestions: list[Suggestion] | None = None
        self._lock = asyncio.Lock()
        self._shown_key = ""
        # What each thought widget shows now (state, highlighted word): a key repaints only
        # the thoughts whose state changed, not the whole trace.
        self._painted: list[tuple[str, str] | None] = []
        self._question_word: str | None = None
        self._painted_question = False
        self._thought_widgets: list[HangingStatic] = []

    def compose(self) -> ComposeResult:
        # What an annotator needs stays in view at 80x24: the question's start (it scrolls
        # when long) with the target under it, and beside them the thoughts with what to do
        # now and the progress pinned under them.
        yield TitleBar(id="title-bar")
        with Horizontal(id="annotate-body"):
            with Vertical(id="annotate-left", classes="panel"):
                with WheelScroll(id="a-question-scroll", classes="question-scroll"):
                    yield Static(id="a-question")
                with WheelScroll(id="a-facts", classes="facts"):
                    yield LeanStatic(id="a-target", classes="fact")
                    yield LeanStatic(id="a-suggestion", classes="fact")
                    yield LeanStatic(id="a-last", classes="fact")
            with Vertical(id="annotate-right", classes="panel"):
                yield ThoughtsPane(id="a-thoughts")
                with Vertical(id="a-status", classes="status"):
                    yield LeanStatic(id="a-state")
                    yield LeanStatic(id="a-progress")
        yield KeysFooter(show_command_palette=False)

    async def on_mount(self) -> None:
        set_panel_title(self.query_one("#annotate-left"), "Question")
        await self.refresh_trace()
        self.call_after_refresh(self._index)

    @work(thread=True, group="annotate-index", exit_on_error=False,
          description="Indexing the queue")
    def _index(self) -> None:
        self.queue.index()

    # -- what is on show

    async def refresh_trace(self) -> None:
        """Show the queue's current trace (rebuilding the thoughts only when it changed)."""
        queue = self.queue
        trace = queue.current
        if trace.key != self._shown_key:
            self._shown_key = trace.key
            self.suggestions = None
            await self._rebuild_thoughts()
        if self._question_word != self.word or not self._painted_question:
            self._show_question()
        self._update_thoughts()
        self._show_facts()

    async def _rebuild_thoughts(self) -> None:
        pane = self.query_one("#a-thoughts", ThoughtsPane)
        await pane.remove_children()
        steps = self.queue.current.row.steps
        self._thought_widgets = [HangingStatic(classes="a-thought") for _ in steps]
        await pane.mount_all(self._thought_widgets)
        self._painted = [None] * len(steps)
        # Set with the trace only: a new title repaints the whole pane, every thought in it.
        # A thinking trace's says what its steps are cut from ("summary" where they are a
        # summary's) and by which rule.
        note = queued_thinking_note(self.queue.current.row)
        set_panel_title(self.query_one("#annotate-right"),
                        f"Thoughts · {len(steps)}" + (f" · {note}" if note else ""))
        self._painted_question = False
        pane.scroll_home(animate=False)

    def _update_thoughts(self) -> None:
        queue = self.queue
        steps = queue.current.row.steps
        judged = queue.judged
        for index, (widget, text) in enumerate(zip(self._thought_widgets, steps, strict=False)):
            state = thought_state(judged, index, len(steps), queue.per_step)
            if self._painted[index] == (state, self.word):
                continue
            self._painted[index] = (state, self.word)
            widget.show(*thought_content(index + 1, text, state, self.word))
            widget.set_class(state == "current", "-current")
            widget.set_class(state == "mistake", "-mistake")
            if state == "current":
                reveal(widget)

    def _show_question(self) -> None:
        self._question_word = self.word
        self._painted_question = True
        trace = self.queue.current
        shown, hidden = shown_part(question_text(trace), QUESTION_SHOWN)
        question = highlighted(shown, self.word)
        self.query_one("#a-question", Static).update(
            question.append(left_out(hidden, COPY_QUESTION)) if hidden else question)
        # The annotator and the file first: at 80 columns the end is cut.
        what = "annotate per-step" if self.queue.per_step else "annotate"
        title = (f"{what} · {one_line(self.queue.annotator, 30)} · "
                 f"{one_line(trace.name, 60)} · {trace.task}")
        self.query_one(TitleBar).set_left(Content(title))

    def _show_facts(self) -> None:
        queue = self.queue
        trace = queue.current
        # The field's formats often give no target (ProcessBench, PRMBench, ...).
        shown, hidden = shown_part(trace.row.target, QUESTION_SHOWN)
        target = highlighted(shown, self.word) if trace.row.target else styled(
            "— (none given)", MUTED)
        self.query_one("#a-target", LeanStatic).show(Content.assemble(
            styled("Target: ", "bold"), target,
            left_out(hidden, "the file has all of it") if hidden else ""))
        self.query_one("#a-state", LeanStatic).show(self._state_text())
        suggestion = self.query_one("#a-suggestion", LeanStatic)
        suggestion.display = self.suggestions is not None
        if self.suggestions is not None:
            lines = "\n".join(suggestion_lines(self.suggestions))
            suggestion.show(Content.assemble(styled("Suggestion (assisted): ", "bold"),
                                             Content(one_line(lines, 400))))
        last = self.query_one("#a-last", LeanStatic)
        # Only while that trace stays submitted: reopened (undo), it is being labelled again
        # and its gold label must not be on screen.
        last.display = bool(self.last_submitted) and self._last_index is not None and \
            queue.work(self._last_index).status == WorkStatus.DONE
        last.show(styled(f"Last: {one_line(self.last_submitted, 300)}", MUTED))
        self.query_one("#a-progress", LeanStatic).show(styled(
            progress_line(queue.progress(), wall_clock=context(self).wall_clock), MUTED))

    def _state_text(self) -> Content:
        """What to do now, with the keys as bound (the user's keymap applied)."""
        queue = self.queue
        work_ = queue.work()
        status = WorkStatus(work_.status)
        if status is WorkStatus.FLAGGED:
            note = f": {work_.note}" if work_.note else ""
            return styled(one_line(f"Flagged ({work_.flag_reason}){note} · "
                                   f"{key_for(self, 'annotate_undo')} to reopen", 300),
                          "$text-warning")
        if status is WorkStatus.DONE:
            from bbm_tui.core.annotation.protocol import location

            text = (f"Submitted: {location_text(location(work_.judged))} · "
                    f"{key_for(self, 'annotate_undo')} to reopen")
            if queue.current.has_gold:
                text += f" · gold: {location_text(queue.current.gold)}"
            return styled(text, "$text-success")
        if queue.complete:
            from bbm_tui.core.annotation.protocol import location

            return styled(f"Complete: {location_text(location(work_.judged))} · "
                          f"{key_for(self, 'annotate_submit')} to submit", "bold $accent")
        unlocked = queue.unlocked
        return styled(f"Judge Thought {(unlocked or 0) + 1}: "
                      f"{key_for(self, 'annotate_correct')} correct · "
                      f"{key_for(self, 'annotate_incorrect')} incorrect", MUTED)

    # -- actions, each committed in order in a thread

    def _act(self, action: Callable[[], str | None]) -> None:
        self._run_action(action)

    @work(group="annotate", exit_on_error=False, description="Saving the annotation")
    async def _run_action(self, action: Callable[[], str | None]) -> None:
        async with self._lock:
            try:
                message = await asyncio.to_thread(action)
            except ProtocolError as error:
                message = str(error)
            if message:
                self.notify(message, severity="warning", markup=False, timeout=4)
            await self.refresh_trace()

    def action_judge(self, correct: bool) -> None:
        self._act(lambda: self.queue.judge(correct))

    def action_submit(self) -> None:
        def submit() -> str | None:
            index = self.queue.position
            submitted = self.queue.submit()
            self._last_index = index
            self.last_submitted = submitted_line(submitted, with_file=not self._one_file)
            if self.queue.first_unfinished() is None:
                return "Every trace of the queue is done."
            return None

        self._act(submit)

    def action_undo(self) -> None:
        self._act(lambda: None if self.queue.undo() else "Nothing to undo.")

    def action_skip(self) -> None:
        self._act(self.queue.skip)

    def action_flag(self) -> None:
        def flagged(flag: Flag | None) -> None:
            if flag is not None:
                self._act(lambda: self.queue.flag(flag.reason, flag.note))

        self.app.push_screen(FlagDialog.for_protocol(self.queue.per_step), flagged)

    def action_note(self) -> None:
        def noted(note: str | None) -> None:
            if note is not None:
                self._act(lambda: self.queue.set_note(note))

        self.app.push_screen(NoteDialog(self.queue.work().note or ""), noted)

    def action_suggest(self) -> None:
        def suggest() -> None:
            self.suggestions = self.queue.suggestions()

        self._act(suggest)

    def action_guidelines(self) -> None:
        task = self.queue.current.task
        text = guidelines_text(task)
        if text is None:
            self.notify(f"The paper has no annotation guidelines for {task} (its labels "
                        "came from a program).", markup=False)
            return
        self.app.push_screen(GuidelinesDialog(f"Guidelines · {task}", text))

    def action_highlight(self) -> None:
        def chosen(word: str | None) -> None:
            if word is not None:
                self.word = word
                self._act(lambda: None)

        self.app.push_screen(HighlightDialog(self.word), chosen)

    def action_scroll_question(self, lines: int) -> None:
        self.query_one("#a-question-scroll", WheelScroll).scroll_relative(
            y=lines, animate=False)

    def action_copy_question(self) -> None:
        question = question_text(self.queue.current)
        self.app.copy_to_clipboard(question)
        self.notify(f"Copied the question ({len(question):,} characters).", markup=False,
                    timeout=3)

    def action_scroll_thoughts(self, lines: int) -> None:
        self.query_one("#a-thoughts", ThoughtsPane).scroll_relative(y=lines, animate=False)

    def action_back(self) -> None:
        self.post_message(GoBack(self))


class PerStepAnnotateScreen(AnnotateScreen, inherit_bindings=False):
    """PRM800K's per-step labelling: every thought rated good (+1), neutral (0) or bad (-1)
    in order, to the end; `enter` finishes a rated trace (`solution`, or `found_error` with a
    bad thought: the first is the trace's first mistake), `f` finishes one without a label
    (give up, or bad problem), its ratings kept. The keys' ids are the paper protocol's (one
    [keymap] line for both), and `n` is neutral."""

    # Its own keys in their order (c, n, x first), not the paper screen's with n after them.
    BINDINGS: ClassVar[list[BindingType]] = _bindings(per_step=True)

    def _state_text(self) -> Content:
        queue = self.queue
        work_ = queue.work()
        status = WorkStatus(work_.status)
        undo = key_for(self, "annotate_undo")
        if status is WorkStatus.FLAGGED:
            note = f": {work_.note}" if work_.note else ""
            return styled(one_line(f"Finished without a label ({work_.flag_reason}){note} · "
                                   f"{undo} to reopen", 300), "$text-warning")
        if status is WorkStatus.DONE:
            text = f"Submitted: {finish_text(work_.judged)} · {undo} to reopen"
            if queue.current.has_gold:
                text += f" · gold: {location_text(queue.current.gold)}"
            return styled(text, "$text-success")
        if queue.complete:
            return styled(f"Rated: {finish_text(work_.judged)} · "
                          f"{key_for(self, 'annotate_submit')} to submit", "bold $accent")
        return styled(f"Rate Thought {(queue.unlocked or 0) + 1}: "
                      f"{key_for(self, 'annotate_correct')} good · "
                      f"{key_for(self, 'annotate_neutral')} neutral · "
                      f"{key_for(self, 'annotate_incorrect')} bad", MUTED)

    def action_rate(self, rating: int) -> None:
        self._act(lambda: self.queue.rate(rating))
