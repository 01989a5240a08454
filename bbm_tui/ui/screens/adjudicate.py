"""Adjudication (issue 12, item 5): the traces the annotators disagree on, one at a time, each
annotator's first mistake beside its thought and the candidates listed on the left. A digit
accepts a candidate; `x` sets the selected thought instead, `c` "no mistake"; the choice is
recorded as the adjudicated label (core/annotation/adjudication.py) in a thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core.annotation.adjudication import AdjudicationQueue
from bbm_tui.core.store import Session, Step
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.session import session_task
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import GoBack
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.annotate import ThoughtsPane, WheelScroll, reveal
from bbm_tui.ui.screens.base import QueueScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import COPY_QUESTION, MUTED, QUESTION_SHOWN, safe, safe_cut, styled
from bbm_tui.ui.viewmodels.annotate import location_text
from bbm_tui.ui.viewmodels.thinking import stored_thinking_note
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar
from bbm_tui.ui.widgets.hanging import HangingStatic


def _accept(digit: int, show: bool) -> Binding:
    return Binding(str(digit), f"accept({digit - 1})", f"accept {digit}",
                   id=f"adjudicate_accept_{digit}", show=show,
                   tooltip=f"Accept candidate {digit} as the adjudicated label")


class AdjudicateScreen(QueueScreen):
    CSS_PATH = stylesheet("annotate")
    HELP_TITLE = "the adjudication screen"

    BINDINGS: ClassVar[list[BindingType]] = [
        *(_accept(digit, digit <= 2) for digit in range(1, 10)),
        Binding("j,down", "select(1)", "next", id="adjudicate_select_next",
                tooltip="Select the next thought"),
        Binding("k,up", "select(-1)", "previous", id="adjudicate_select_previous",
                tooltip="Select the previous thought"),
        Binding("x", "set_selected", "set mistake", id="adjudicate_set_mistake",
                tooltip="The selected thought is the first mistake (adjudicated)"),
        Binding("c", "set_none", "no mistake", id="adjudicate_no_mistake",
                tooltip="The trace has no mistake (adjudicated)"),
        Binding("u", "undo", "undo", id="adjudicate_undo",
                tooltip="Withdraw this trace's adjudicated label"),
        Binding("n", "move(1)", "next trace", id="adjudicate_next_trace",
                tooltip="The next trace in the queue (at the last one, it says so: no wrapping)"),
        Binding("p", "move(-1)", "prev trace", id="adjudicate_previous_trace",
                tooltip="The previous trace in the queue (no wrapping)"),
        Binding("a", "app.agreement", "agreement", id="adjudicate_agreement", show=False,
                tooltip="The annotators' agreement: kappa between each two, as a matrix"),
        Binding("escape", "back", "back", id="adjudicate_back", tooltip="Leave"),
        Binding("]", "scroll_question(3)", "question ↓", id="question_down", show=False,
                tooltip="Scroll the question down (a long one is cut on a small terminal)"),
        Binding("[", "scroll_question(-3)", "question ↑", id="question_up", show=False,
                tooltip="Scroll the question up"),
        Binding("Q", "copy_question", "copy question", id="copy_question", show=False,
                tooltip="Copy the whole question"),
    ]
    # The palette's commands (ui/palette.py): binding id, the command's title.
    PALETTE: ClassVar[dict[str, str]] = {
        "adjudicate_next_trace": "Next trace", "adjudicate_previous_trace": "Previous trace",
    }

    def __init__(self, queue: AdjudicationQueue) -> None:
        super().__init__(classes="adjudicate-screen")
        self.queue = queue
        self.selected = 0
        self._lock = asyncio.Lock()
        self._session: Session | None = None
        self._steps: list[Step] = []
        self._question = ""
        self._note = ""  # a thinking trace's: what its steps are cut from, by which rule
        self._shown: int | None = None

    def compose(self) -> ComposeResult:
        # As on the annotation screen: at 80x24 the question's start, the target and the
        # candidates on the left, the thoughts and the state on the right, all in view.
        yield TitleBar(id="title-bar")
        with Horizontal(id="adjudicate-body"):
            with Vertical(id="adjudicate-left", classes="panel"):
                with WheelScroll(id="j-question-scroll", classes="question-scroll"):
                    yield Static(id="j-question")
                with WheelScroll(id="j-facts", classes="facts"):
                    yield LeanStatic(id="j-candidates", classes="fact")
                    yield LeanStatic(id="j-target", classes="fact")
            with Vertical(id="adjudicate-right", classes="panel"):
                yield ThoughtsPane(id="j-thoughts")
                with Vertical(id="j-status", classes="status"):
                    yield LeanStatic(id="j-state")
                    yield LeanStatic(id="j-position")
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        self._act(lambda: None)

    # -- loading and showing

    def _load(self) -> None:
        """In a thread: the session and steps of the item on show."""
        item = self.queue.current
        if self._shown != item.session_id:
            self._session = self.queue.store.session(item.session_id)
            self._steps = self.queue.store.branch(item.session_id)
            # A task of one's own as the session was made with it (its file may be gone).
            task, _ = session_task(self.queue.store, self._session)
            self._question = task.question(self._session.input)
            self._note = stored_thinking_note(self.queue.store, self._steps)
            self.selected = min(item.choices[0] or 0, max(len(self._steps) - 1, 0)) \
                if item.choices else 0

    async def _show(self) -> None:
        item = self.queue.current
        session = self._session
        if session is None:
            return
        rebuild = self._shown != item.session_id
        self._shown = item.session_id
        self.query_one(TitleBar).set_left(Content(
            f"adjudicate · {one_line(session.name, 50)} · {session.task}"))
        if rebuild:  # a new title repaints the whole pane
            set_panel_title(self.query_one("#adjudicate-left"), "Question")
            set_panel_title(self.query_one("#adjudicate-right"),
                            f"Thoughts · {len(self._steps)}"
                            + (f" · {self._note}" if self._note else ""))
            self.query_one("#j-question", Static).update(
                safe_cut(self._question, COPY_QUESTION, QUESTION_SHOWN))
        self.query_one("#j-target", LeanStatic).show(Content.assemble(
            styled("Target: ", "bold"),
            safe_cut(session.target or "—", "the export has all of it", QUESTION_SHOWN)))
        self.query_one("#j-candidates", LeanStatic).show(self._candidates_text())
        self.query_one("#j-state", LeanStatic).show(self._state_text())
        self.query_one("#j-position", LeanStatic).show(self._position_text())
        if rebuild:
            pane = self.query_one("#j-thoughts", ThoughtsPane)
            await pane.remove_children()
            await pane.mount_all(HangingStatic(gutter_width=4, classes="a-thought")
                                 for _ in self._steps)
        self._show_thoughts()

    def _position_text(self) -> Content:
        """Where the queue stands; once every trace is settled, the summary."""
        summary = self.queue.summary()
        where = f"Trace {self.queue.position + 1} of {summary.total}"
        if summary.all_settled:
            return Content.assemble(styled(f"{where} · ", MUTED),
                                    styled(f"All settled: {summary.text()}", "$text-success"))
        return styled(f"{where} · {summary.settled} settled", MUTED)

    def _candidates_text(self) -> Content:
        item = self.queue.current
        lines = [Content.styled("Candidates", "bold")]
        for number, choice in enumerate(item.choices, start=1):
            names = ", ".join(name for name, found in sorted(item.candidates.items())
                              if found == choice)
            lines.append(Content.assemble(styled(f"{number}  ", "bold $accent"),
                                          Content(f"{location_text(choice)}  "),
                                          styled(one_line(names, 80), MUTED)))
        return Content("\n").join(lines)

    def _state_text(self) -> Content:
        """The adjudicated label, or how to give one (the keys as bound)."""
        item = self.queue.current
        if not isinstance(item.adjudicated, str):  # settled (UNSET is the one str it takes)
            undo = key_for(self, "adjudicate_undo")
            chosen = location_text(item.adjudicated)
            return styled(f"Adjudicated: {chosen} · {undo} to withdraw", "$text-success")
        first = key_for(self, "adjudicate_accept_1")
        last = key_for(self, f"adjudicate_accept_{max(1, min(len(item.choices), 9))}")
        accept = first if last in ("", first) else f"{first}-{last}"
        mistake = key_for(self, "adjudicate_set_mistake")
        none = key_for(self, "adjudicate_no_mistake")
        return styled(f"Not adjudicated yet: {accept} accepts a candidate · {mistake} the "
                      f"selected thought · {none} no mistake", MUTED)

    def _show_thoughts(self) -> None:
        pane = self.query_one("#j-thoughts", ThoughtsPane)
        item = self.queue.current
        marks: dict[int, list[str]] = {}
        for name, found in sorted(item.candidates.items()):
            if found is not None:
                marks.setdefault(found, []).append(name)
        for index, (widget, step) in enumerate(zip(
                pane.query(".a-thought").results(HangingStatic), self._steps, strict=False)):
            gutter = styled(f"{index + 1:>3} ", MUTED)
            parts = [safe(step.text)]
            if index in marks:
                parts.append(styled(f"  ✗ {one_line(', '.join(marks[index]), 60)}",
                                    "bold $text-error"))
            if item.settled and item.adjudicated == index:
                parts.append(styled("  ⚑ adjudicated", "bold $text-success"))
            widget.show(gutter, Content.assemble(*parts))
            widget.set_class(index == self.selected, "-current")
            widget.set_class(index in marks, "-mistake")
            if index == self.selected:
                reveal(widget)

    # -- actions

    def _act(self, action: Callable[[], object],
             then: Callable[[object], None] | None = None) -> None:
        self._run_action(action, then)

    @work(group="adjudicate", exit_on_error=False, description="Saving the adjudication")
    async def _run_action(self, action: Callable[[], object],
                          then: Callable[[object], None] | None) -> None:
        async with self._lock:
            try:
                result = await asyncio.to_thread(action)
            except ValueError as error:
                self.notify(str(error), severity="warning", markup=False)
            else:
                if then is not None:
                    then(result)
            await asyncio.to_thread(self._load)
            await self._show()

    def action_accept(self, index: int) -> None:
        choices = self.queue.current.choices
        if index >= len(choices):
            self.notify(f"There are {len(choices)} candidates.", markup=False)
            return
        self._settle(choices[index])

    def action_set_selected(self) -> None:
        self._settle(self.selected)

    def action_set_none(self) -> None:
        self._settle(None)

    def _settle(self, location: int | None) -> None:
        """Adjudicate the trace on show; a settled one is replaced only once the person says
        so (a stray key on a trace looked at again lost its label unasked)."""
        item = self.queue.current
        number = self.queue.position + 1
        if not item.settled:
            self._act(lambda: self.queue.settle(location),
                      lambda following: self._said_settled(number, location, following))
            return
        if item.adjudicated == location:
            self.notify(f"Trace {number} is adjudicated as {location_text(location)} already.",
                        markup=False, timeout=4)
            return
        from bbm_tui.ui.dialogs import ConfirmScreen

        settled = location_text(item.adjudicated if not isinstance(item.adjudicated, str)
                                else None)
        question = Content.assemble(
            styled(f"Trace {number} is adjudicated as {settled}.", "bold"),
            f"\nReplace it with {location_text(location)}?")

        def answered(replace: bool | None) -> None:
            if replace:
                self._act(lambda: self.queue.settle(location),
                          lambda following: self._said_settled(number, location, following))

        self.app.push_screen(ConfirmScreen(question, "Replace"), answered)

    def _said_settled(self, number: int, location: int | None, following: object) -> None:
        """Where the queue went after a label: the next unsettled trace, or the summary."""
        done = f"Trace {number} adjudicated as {location_text(location)}."
        if isinstance(following, int):
            self.notify(f"{done} On to trace {following + 1} of {len(self.queue.items)}, "
                        "the next not settled.", markup=False, timeout=5)
            return
        summary = self.queue.summary()
        self.notify(f"{done} {summary.text()}. {key_for(self, 'adjudicate_back')} leaves; "
                    "every label stays saved.", title="All traces settled", markup=False,
                    timeout=10)

    def action_undo(self) -> None:
        self._act(self.queue.undo)

    def action_move(self, delta: int) -> None:
        if self.queue.move(delta):
            self._act(lambda: None)
            return
        count = len(self.queue.items)
        if delta > 0:
            back = key_for(self, "adjudicate_previous_trace")
            self.notify(f"Trace {count} of {count} is the last; {back} goes back.",
                        markup=False, timeout=4)
        else:
            on = key_for(self, "adjudicate_next_trace")
            self.notify(f"Trace 1 of {count} is the first; {on} goes on.", markup=False,
                        timeout=4)

    def action_select(self, delta: int) -> None:
        if self._steps:
            self.selected = max(0, min(len(self._steps) - 1, self.selected + delta))
            self._show_thoughts()

    def action_scroll_question(self, lines: int) -> None:
        self.query_one("#j-question-scroll", WheelScroll).scroll_relative(
            y=lines, animate=False)

    def action_copy_question(self) -> None:
        if self._session is None:
            return
        question = self._question
        self.app.copy_to_clipboard(question)
        self.notify(f"Copied the question ({len(question):,} characters).", markup=False,
                    timeout=3)

    def action_back(self) -> None:
        self.post_message(GoBack(self))
