"""One trace as a widget (docs/DESIGN.md §10): the question on the left, the numbered thoughts
on the right, generated live one step at a time and labelled the way the paper's annotators
did, with the keys that act on it. A screen may hold several (side by side): each has its own
session, state and workers, and its keys act while it (or a widget in it) has the focus.

The store is the truth: a thought becomes a finished `ThoughtView` only once its step is
committed (the session commits inside `generate` before passing `StepFinished` on), and a
thought still streaming when a run ends (stop, error) is removed, so what is on show after a
run is what a resume would show.

The view's state, and the means to show it, are its base class `TraceHost` (host.py). Its keys
(keys.py) are here, the selection and copying too; the rest is done by its parts, each
holding the view as a `TraceHost` and telling it what happened through messages (messages.py):
generating (n, r: generation.py), labelling (x, c, u, g: labelling.py), mistake finding (f,
V: finding.py), the branch keys (b, w, < >, t, v, l: branching.py) and another window
generating the same session (sharing.py). Its styles are styles/trace.tcss, which a screen
that holds a view loads (`TRACE_CSS`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.worker import Worker, WorkerState

from bbm_tui.core import llm
from bbm_tui.core.prompts.thoughts import format_steps
from bbm_tui.core.store import SessionBusy, Totals
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.ui.messages import ModelChosen, WorkerFailed
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.trace.branching import Branching
from bbm_tui.ui.screens.trace.finding import MistakeFinding
from bbm_tui.ui.screens.trace.generation import Generation
from bbm_tui.ui.screens.trace.host import TraceHost
from bbm_tui.ui.screens.trace.keys import TRACE_BINDINGS, TRACE_PALETTE
from bbm_tui.ui.screens.trace.labelling import Labelling
from bbm_tui.ui.screens.trace.messages import CallsMade
from bbm_tui.ui.screens.trace.question_pane import QuestionPane
from bbm_tui.ui.screens.trace.sharing import SharedSession
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import settings_line, thoughts
from bbm_tui.ui.viewmodels.trace import question_text
from bbm_tui.ui.widgets.chrome import StatusLine
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import ThoughtList

# The styles of a trace view: a screen that holds one loads them (CSS_PATH).
TRACE_CSS = stylesheet("trace")


class TraceView(TraceHost):
    """One trace and its keys: its state is `TraceHost`'s (host.py), its parts below."""

    BINDINGS: ClassVar[list[BindingType]] = TRACE_BINDINGS
    PALETTE: ClassVar[dict[str, str]] = TRACE_PALETTE

    def __init__(self, trace: TraceSession, totals: Totals | None, **kwargs) -> None:
        super().__init__(trace, totals, **kwargs)
        self.generation = Generation(self)
        self.finding_part = MistakeFinding(self)
        self.branching = Branching(self)
        self.labelling = Labelling(self)
        self.sharing = SharedSession(self)
        # Digits typed before enter: the number of the thought to go to.
        self._typed_number = ""

    # -- layout

    def compose(self) -> ComposeResult:
        yield QuestionPane(self.trace, id="question-pane", classes="panel")
        # The keys of the focused view act on the thoughts: that pane is marked as focused.
        with Vertical(id="thoughts-pane", classes="panel keys-here"):
            # Only a window of the thoughts is mounted: a trace may have 10^5 of them.
            yield ThoughtList(lambda: self.trace.steps, around=self.selected,
                              wall_clock=self.context.wall_clock,
                              decorate=self._decorate, id="thoughts")
            # Its top border and three lines (trace.tcss): a message is fitted to them.
            yield StatusLine(lines=3, id="run-status")

    def on_mount(self) -> None:
        set_panel_title(self.query_one("#thoughts-pane"), "Thoughts")
        self.show_thoughts_title()
        self.show_label()
        trace = self.trace
        if trace.task_change is not None:
            self.notify(trace.task_change, title=f"Your task {trace.task.name}",
                        severity="warning", timeout=15, markup=False)
        # The task verifiers know the paper's five tasks only.
        self.verify_live = self.context.config.verify_live and trace.task.is_paper
        if not self.verify_live:
            self.finding_part.load()
        self._show_selection()
        # Scrolled to once laid out (before that, the thought has no place to scroll to).
        self.call_after_refresh(self._show_selection, scroll=True)
        self.sharing.check_claim()  # another window generating this session: read-only here
        if not self.totals_known:
            # After the first frame: a read meanwhile would hold the store from the reads
            # the first frame waits for (the thoughts in view), and take a core from it.
            self.call_after_refresh(self.read_totals)
        if not trace.steps:
            self.say(f"{self.key('step')} generates the next thought, "
                     f"{self.key('run')} runs to the answer.")
        elif trace.finished:
            self.say("The trace has its answer.", then=self.label_hint())
        else:
            self.say(f"{thoughts(len(trace.steps))} so far.", then=self.next_hint())

    def on_unmount(self) -> None:
        self.context.session_left(self.trace.id)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # `Worker.StateChanged` does not bubble: a failure goes on to the app's one handler.
        if event.state != WorkerState.ERROR:
            return
        if isinstance(event.worker.error, SessionBusy):
            # Another window got to the session first (a backtrack's, a rewrite's first
            # write): nothing was done; read-only here until it stops.
            self.read_only(event.worker.error)
            return
        self.post_message(WorkerFailed(event.worker))

    def on_resize(self) -> None:
        # Once the panes have their new sizes.
        self.call_after_refresh(self._after_resize)

    def _after_resize(self) -> None:
        """A narrower terminal makes thoughts taller: the selection is scrolled back into
        view, unless the pane follows the end."""
        if self.thoughts.fit_after_resize():
            return
        self.thoughts.keep_in_view(self.thoughts.view(self.selected), moved=self._moved)

    @work(group="reload", exit_on_error=False, description="Reading the session")
    async def reload_session(self) -> None:
        """The session was renamed elsewhere: show its new name."""
        self.trace.session = await asyncio.to_thread(self.trace.store.session, self.trace.id)
        self.show_title()

    @work(group="totals", exclusive=True, exit_on_error=False,
          description="Summing the session's calls")
    async def read_totals(self) -> None:
        """The session's totals, read after the first frame (a big session's, `totals_later`).
        Calls made meanwhile read them again: the last read began after they were saved."""
        totals = await asyncio.to_thread(self.trace.totals)
        self.totals_known = True
        self.totals = totals
        self.show_title()  # also when they equal the placeholder: no change to watch

    # -- the reactive state, shown

    def watch_selected(self) -> None:
        self._show_selection()

    def watch_finder(self) -> None:
        self._show_finder()

    def watch_totals(self) -> None:
        self.show_title()

    def watch_gold_shown(self, shown: bool) -> None:
        if shown:
            self.labelling.load_gold()
        else:
            self.show_gold(None)

    def watch_verify_live(self, live: bool) -> None:
        if live:
            self.finding_part.verify_now()
        else:
            self.finding_part.load()  # back to the saved finder run, if any

    def read_only(self, busy: SessionBusy) -> None:
        """Another bbm-tui generates the session: read-only here until it stops."""
        self.sharing.read_only(busy)

    def watch_presenter(self, presenter: bool) -> None:
        for view in self._all_views():
            view.set_presenter(presenter)  # the meta line comes or goes: a new height

    def on_calls_made(self, message: CallsMade) -> None:
        # Kept in step with the store's totals without a read per step: the calls just
        # committed are exactly the ones that add to them.
        for call in message.calls:
            self._note_caching(call)
        if not self.totals_known:
            self.read_totals()  # they are saved: a read from now on counts them
            return
        totals = self.totals
        for call in message.calls:
            totals = totals.plus(call)
        self.totals = totals

    def _note_caching(self, call: llm.CallRecord) -> None:
        """Say once a run (whichever screen) that a prompt was too short for its model's
        prompt cache."""
        note = llm.below_caching_minimum(call, self.context.stepper_settings.call)
        if note is not None and note not in self.context.notes_said:
            self.context.notes_said.add(note)
            self.notify(note, title="Prompt caching", markup=False, timeout=10)

    def on_branch_shown(self) -> None:
        self.finding_part.load()  # the branch's own run, if any

    # -- selection

    def action_move(self, delta: int) -> None:
        self._select(self.selected + delta)

    def action_first(self) -> None:
        self._select(1)

    def action_last(self) -> None:
        self._select(len(self.trace.steps))

    def action_page(self, direction: int) -> None:
        """A screenful of thoughts up or down: as many as are in view now."""
        self._select(self.selected + direction * max(1, self.thoughts_in_view() - 1))

    def thoughts_in_view(self) -> int:
        pane = self.thoughts
        top, bottom = pane.scroll_y, pane.scroll_y + pane.scrollable_content_region.height
        return sum(1 for view in self.views()
                   if view.virtual_region.y < bottom
                   and view.virtual_region.bottom > top)

    def action_jump(self) -> None:
        """enter after digits: to that thought."""
        typed, self._typed_number = self._typed_number, ""
        if not typed:
            return
        number = int(typed)
        count = len(self.trace.steps)
        if 1 <= number <= count:
            self._select(number)
            self.say(f"Thought {number} of {count}.")
        else:
            self.say(f"There is no Thought {number}: the trace has {count}.", error=True)

    def on_key(self, event: events.Key) -> None:
        # Digits build the number enter jumps to; escape forgets it.
        if event.character is not None and event.character.isdigit() and \
                len(self._typed_number) < 7:
            self._typed_number += event.character
            # esc here is the key itself, not a binding: it is handled just below.
            self.say(f"Go to Thought {self._typed_number}…  "
                     f"({self.key('jump_to_thought')} goes, esc forgets)")
            event.stop()
        elif event.key == "escape" and self._typed_number:
            self._typed_number = ""
            self.say("")
            event.stop()
            event.prevent_default()
        elif self._typed_number and self._goes_to_the_number(event.key):
            # The jump now, not by the key's binding: that runs once the key has bubbled up
            # to the app, after the keys typed next have reached this handler, so "4⏎x"
            # typed fast flagged the thought selected before (x cleared the number first).
            self.action_jump()
            event.stop()
            event.prevent_default()
        elif self._typed_number:
            # Any other key does what it does, and the number is forgotten: it stayed
            # behind a dialog (w, then esc) and made "2" "22" after.
            self._typed_number = ""
            self.say("")

    def _goes_to_the_number(self, key: str) -> bool:
        bound = self.screen.active_bindings.get(key)
        return bound is not None and bound.binding.id == "jump_to_thought"

    def action_scroll_thoughts(self, lines: int) -> None:
        self.thoughts.scroll_relative(y=lines, animate=False)

    def action_scroll_question(self, lines: int) -> None:
        self.question_pane.scroll_relative(y=lines, animate=False)

    def _select(self, number: int) -> None:
        """The reader moves the selection."""
        count = len(self.trace.steps)
        if not count:
            return
        self.finding_part.follow = False  # the reader leads now, not the finder
        self.selected = min(max(number, 1), count)
        self._moved = self.selected != count
        self._show_selection(scroll=True)
        if self.selected == count:
            # At the last thought the reader is back at the end: follow new text again.
            self.thoughts.follow(at_end=True)

    def on_click(self, event: events.Click) -> None:
        # Clicking a thought selects it, as in the paper's UI.
        widget = event.widget
        while widget is not None and not isinstance(widget, ThoughtView):
            widget = widget.parent
        if isinstance(widget, ThoughtView) and not widget.streaming:
            self.selected = widget.number
            self._moved = self.selected != len(self.trace.steps)

    # -- generating

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # None greys a key out in the Footer; the key then does nothing.
        if self.sharing.refuses(action):  # another bbm-tui is generating the session
            return None
        busy = self.running or self.finding
        if action in ("step", "run"):
            return None if busy else True
        # The footer has room for either of these, not both: "esc stop" while busy,
        # "f find" otherwise.
        if action == "stop":
            return busy
        if action == "find":
            return False if busy else (True if self.trace.steps else None)
        if action == "reasoning":
            # Only once there is an answer to show (hidden from the footer until then).
            shown = self.finder
            return shown is not None and (bool(shown.verdicts) or shown.trace_raw is not None)
        if action in ("copy", "copy_trace"):
            return True if self.trace.steps else None
        if action in ("backtrack", "rewrite", "version", "importance"):
            return None if busy or not self.trace.steps else True
        if action == "edit_model":  # a run goes on with the model it started with
            return None if busy else True
        return True

    def action_step(self) -> None:
        self.generation.generate(1)

    def action_run(self) -> None:
        self.generation.generate(None)

    def action_stop(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "generate")
        if self.finding:
            self.workers.cancel_group(self, "find")

    async def stream(self, events: AsyncIterator[object]) -> None:
        await self.generation.stream(events)

    def end_generating(self) -> None:
        self.generation.end()

    def load_gold(self) -> None:
        self.labelling.load_gold()

    def thought_finished(self, number: int) -> None:
        # The selection follows generation until the reader moves it (x right after r flags
        # the newest thought).
        self.show_label()
        if (self.selected == 0 or not self._moved) and self.selected != number:
            self.selected = number  # shown by its watcher
        else:
            self._show_selection()
        if self.verify_live:
            self.finding_part.verify_now()

    # -- the model (ctrl+e): the new-session screen's dialog, from the next step on

    def action_edit_model(self) -> None:
        if self.running or self.finding:
            return
        from bbm_tui.ui.dialogs import ModelChoice, ModelScreen

        def edited(choice: ModelChoice | None) -> None:
            if choice is None or self.running or self.finding:
                return
            self.trace.use_model(choice.spec)  # recorded with the next call
            self.post_message(ModelChosen(choice.spec, choice.settings))
            self.show_title()
            then = (f"{self.key('edit_thought')} rewrites a thought, "
                    f"{self.key('backtrack')} backtracks from one." if self.trace.finished
                    else self.next_hint())
            self.say(f"From the next step on: {one_line(choice.spec.model, 60)} "
                     f"({settings_line(choice.settings)}).", then=then)

        self.app.push_screen(ModelScreen(self.trace.spec, self.context.stepper_settings,
                                         "The model from the next step on"), edited)

    # -- the parts' keys

    def action_find(self) -> None:
        self.finding_part.open_dialog()

    def action_verify_live(self) -> None:
        self.finding_part.toggle_live()

    def action_reasoning(self) -> None:
        """e: the finder's raw answer under the selected thought (step-level), or under its
        verdict on the left (trace-level); again hides it."""
        shown = self.finder
        if shown is None:
            return
        if not shown.step_level:
            self.finder_answer_open = not self.finder_answer_open
            self._show_finder()
            if self.finder_answer_open:
                self.question_pane.scroll_to_finder_answer()
            return
        view = self.reveal(self.selected)
        if view is None or view.judge_raw is None:
            self.notify(f"The model has not judged Thought {self.selected}.", markup=False,
                        timeout=3)
            return
        view.set_expanded(not view.expanded)
        if view.expanded:
            self.call_after_refresh(self.thoughts.scroll_to_widget, view, animate=False)

    def action_backtrack(self) -> None:
        self.branching.backtrack()

    def action_rewrite(self) -> None:
        self.branching.rewrite()

    def action_importance(self) -> None:
        self.branching.importance()

    def action_version(self, delta: int) -> None:
        self.branching.version(delta)

    def action_branch_tree(self) -> None:
        self.branching.open_tree()

    def action_recut(self) -> None:
        self.branching.recut()

    def action_compare(self) -> None:
        self.branching.compare()

    def action_tokens(self) -> None:
        self.branching.open_tokens()

    # -- labelling (labelling.py)

    def action_flag(self) -> None:
        self.labelling.flag()

    def action_no_mistake(self) -> None:
        self.labelling.no_mistake()

    def action_undo(self) -> None:
        self.labelling.undo()

    def action_gold(self) -> None:
        self.gold_shown = not self.gold_shown

    async def switch_branch(self, step_id: int) -> None:
        await self.labelling.switch_branch(step_id)

    # -- copying

    def action_copy_question(self) -> None:
        question = question_text(self.trace.task, self.trace.session.input)
        self.app.copy_to_clipboard(question)
        self.notify(f"Copied the question ({len(question):,} characters).", markup=False,
                    timeout=3)

    def action_copy(self) -> None:
        if not self.trace.steps:
            return
        number = self.selected or 1
        self.app.copy_to_clipboard(self.trace.steps[number - 1].text)
        self.notify(f"Copied Thought {number}.", markup=False, timeout=3)

    def action_copy_trace(self) -> None:
        if not self.trace.steps:
            return
        text = format_steps(self.trace.texts)
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the trace ({thoughts(len(self.trace.steps))}).", markup=False,
                    timeout=3)

