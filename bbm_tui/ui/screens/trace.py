"""The main screen (docs/DESIGN.md §10): the question on the left, the numbered thoughts on the
right, generated live one step at a time and labelled the way the paper's annotators did.

The store is the truth: a thought becomes a finished `ThoughtView` only once its step is
committed (the session commits inside `generate` before passing `StepFinished` on), and a
thought still streaming when a run ends (stop, error) is removed, so what is on screen after
a run is what a resume would show.

One concern a file: generating, selecting, labelling and copying are here; the branch keys
(b, w, < >, t, v, l) are in trace_branching.py and mistake finding (f, e) in
trace_finding.py, mixed into the screen.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core import llm
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    StepDelta,
    StepFailed,
    StepFinished,
    StepRestarted,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.prompts.thoughts import format_steps
from bbm_tui.core.store import Label, SessionBusy, Totals, default_session_name
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.types import TraceEnd
from bbm_tui.ui.context import AppContext, context
from bbm_tui.ui.dialogs import ConfirmScreen, FindRequest
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import ModelChosen, SessionMissing
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.screens.trace_branching import BranchActions
from bbm_tui.ui.screens.trace_finding import FindingActions
from bbm_tui.ui.screens.trace_sharing import SharedSession
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import (
    COPY_QUESTION,
    GLYPH_MISTAKE,
    GLYPH_OK,
    MUTED,
    QUESTION_SHOWN,
    format_totals,
    safe_cut,
    safe_line,
    settings_line,
    styled,
    thoughts,
)
from bbm_tui.ui.viewmodels.trace import (
    FINISH_MESSAGES,
    FinderShown,
    describe_gold,
    describe_label,
    question_text,
    statuses,
)
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, StatusLine, TitleBar
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import ThoughtList

if TYPE_CHECKING:
    from bbm_tui.core.dataset import TraceRow

_MOVE = Binding.Group("move", compact=True)
_COPY = Binding.Group("copy", compact=True)

class Pane(VerticalScroll, can_focus=False):
    """A scrolling pane that never takes the focus, so that the screen's keys (j/k, arrows)
    always reach the screen; the mouse wheel still scrolls it."""


class TraceScreen(SharedSession, BranchActions, FindingActions, BbmScreen):
    CSS_PATH = stylesheet("trace")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "step", "step", id="step",
                tooltip="Generate the next thought (one model call)"),
        Binding("r", "run", "run", id="run",
                tooltip="Generate thoughts until the answer"),
        Binding("escape", "stop", "stop", id="stop",
                tooltip="Stop; the thought being streamed is dropped"),
        Binding("j,down", "move(1)", "next", id="select_next", group=_MOVE,
                tooltip="Select the next thought"),
        Binding("k,up", "move(-1)", "previous", id="select_previous", group=_MOVE,
                tooltip="Select the previous thought"),
        Binding("G,end", "last", "last", id="select_last", show=False,
                tooltip="Select the last thought (and follow new ones again)"),
        Binding("home", "first", "first", id="select_first", show=False,
                tooltip="Select the first thought"),
        Binding("pagedown", "page(1)", "page down", id="page_down", show=False,
                tooltip="Move the selection down by a screenful of thoughts"),
        Binding("pageup", "page(-1)", "page up", id="page_up", show=False,
                tooltip="Move the selection up by a screenful of thoughts"),
        Binding("enter", "jump", "go to", id="jump_to_thought", show=False,
                tooltip="Type a thought's number, then enter, to select it"),
        Binding("J,shift+down", "scroll_thoughts(3)", "scroll down", id="scroll_down",
                show=False, tooltip="Scroll the thoughts down a few lines (a long thought)"),
        Binding("K,shift+up", "scroll_thoughts(-3)", "scroll up", id="scroll_up",
                show=False, tooltip="Scroll the thoughts up a few lines (a long thought)"),
        Binding("]", "scroll_question(3)", "question ↓", id="question_down", show=False,
                tooltip="Scroll the question pane down"),
        Binding("[", "scroll_question(-3)", "question ↑", id="question_up", show=False,
                tooltip="Scroll the question pane up"),
        Binding("x", "flag", "first mistake", id="flag_mistake",
                tooltip="Flag the selected thought as the first mistake"),
        Binding("c", "no_mistake", "no mistake", id="no_mistake",
                tooltip="Label the trace as having no mistake"),
        Binding("u", "undo", "undo", id="undo_label", tooltip="Undo the last label"),
        Binding("f", "find", "find", id="find_mistake",
                tooltip="Ask a model where the first mistake is (method, model)"),
        Binding("e", "reasoning", "answer", id="show_answer",
                tooltip="Show or hide the model's answer (CoT: its reasoning)"),
        # In the help screen and the palette, not the footer: the gold label stays out of
        # the way of annotators, and the footer has no room for copying.
        Binding("g", "gold", "gold label", id="show_gold", show=False,
                tooltip="Show or hide the dataset's gold label (hidden at first)"),
        Binding("y", "copy", "thought", id="copy_thought", group=_COPY, show=False,
                tooltip="Copy the selected thought"),
        Binding("Y", "copy_trace", "trace", id="copy_trace", group=_COPY, show=False,
                tooltip="Copy the whole trace as 'Thought N: …' lines"),
        Binding("Q", "copy_question", "question", id="copy_question", group=_COPY,
                show=False, tooltip="Copy the whole question"),
        Binding("b", "backtrack", "backtrack", id="backtrack",
                tooltip="Backtrack from the flagged (else the selected) thought: sample it "
                "8 times at temperature 1, continue from the best that differs (a new "
                "branch; paper §4)"),
        Binding("w", "rewrite", "rewrite", id="edit_thought", show=False,
                tooltip="Rewrite the selected thought yourself and let the model go on from "
                "it (a new branch)"),
        Binding("ctrl+e", "edit_model", "model", id="trace_edit_model", show=False,
                tooltip="Change the model, api base, mode or temperature from the next step "
                "on (each call records its model); test the connection"),
        Binding("P", "presenter", "presenter mode", id="presenter_mode", show=False,
                tooltip="Presenter mode on or off: no latency or token lines under the "
                "thoughts, more space between them, for a clean screen in a demo"),
        Binding("p", "pace", "replay pace", id="replay_pace", show=False,
                tooltip="The offline models' streaming pace: 10, 30, 60 tokens a second, or "
                "instant (BBM_TUI_REPLAY_TPS sets it at start)"),
        Binding("V", "verify_live", "live verifier", id="verify_live", show=False,
                tooltip="Turn the task verifier's live marks on or off: each thought is "
                "checked the moment it finishes (e shows why); the config's verify_live"),
        Binding("t", "branch_tree", "branches", id="branch_tree", show=False,
                tooltip="The tree of the session's branches: where they part, each one's "
                "answer and whether it is right; enter shows one"),
        Binding("v", "compare", "compare", id="compare_branches", show=False,
                tooltip="The branch on show beside another (the other version of the "
                "selected thought, else the newest other branch)"),
        Binding("l", "tokens", "tokens", id="token_view", show=False,
                tooltip="The selected thought's tokens shaded by probability"),
        Binding("less_than_sign", "version(-1)", "older version", id="previous_version",
                show=False, tooltip="Show the previous version of the selected thought "
                "(another branch)"),
        Binding("greater_than_sign", "version(1)", "newer version", id="next_version",
                show=False, tooltip="Show the next version of the selected thought "
                "(another branch)"),
    ]

    def __init__(self, trace: TraceSession, totals: Totals) -> None:
        super().__init__(classes="trace-screen")
        self.trace = trace
        self.totals = totals
        # On resume, start at the flagged mistake: that is what a reviewer looks at first.
        self.selected = trace.mistake_number or (1 if trace.steps else 0)
        self.running = False
        self.finding = False
        # The latest finder run on show (None: none yet), its trace-level answer open or not,
        # and whether the gold label is on show.
        self.finder: FinderShown | None = None
        self.finder_answer_open = False
        self.gold_shown = False
        # Keep the thought being judged in view, until the reader moves the cursor.
        self._find_follow = False
        self._last_request: FindRequest | None = None
        self._follow_pending = True
        self._label_lock = asyncio.Lock()
        # Thoughts being streamed, by number: a token goes straight to its view, no query.
        self._streaming: dict[int, ThoughtView] = {}
        # The selection follows new thoughts until the reader moves it (and again once they
        # go back to the last thought).
        self._moved = False
        # Digits typed before enter: the number of the thought to go to.
        self._typed_number = ""
        # The task verifier marks each thought as it finishes (config: verify_live; V).
        self.verify_live = False

    @property
    def bbm_app(self) -> AppContext:
        return context(self)

    # -- layout

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        with Horizontal(id="trace-body"):
            with Pane(id="question-pane", classes="panel"):
                yield Static(safe_cut(self._question(), COPY_QUESTION, QUESTION_SHOWN),
                             id="question")
                yield Static(id="target", classes="fact")
                yield LeanStatic(id="answer", classes="fact")
                yield LeanStatic(id="label", classes="fact")
                yield LeanStatic(id="finder", classes="fact")
                yield LeanStatic(id="agreement", classes="fact")
                yield Static(id="finder-answer", classes="fact")
                yield LeanStatic(id="gold", classes="fact")
                yield Static(
                    styled("Do not assume every step is correct because the answer is: a "
                           "trace can reach the right answer after a mistake.", MUTED),
                    id="note",
                )
            with Vertical(id="thoughts-pane", classes="panel"):
                # Only a window of the thoughts is mounted: a trace may have 10^5 of them.
                yield ThoughtList(lambda: self.trace.steps, around=self.selected,
                                  wall_clock=self.bbm_app.wall_clock,
                                  decorate=self._decorate, id="thoughts")
                # Its top border and three lines (trace.tcss): a message is fitted to them.
                yield StatusLine(lines=3, id="run-status")
        # The palette (ctrl+p) is listed in the help screen; the footer needs the room.
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        self.set_class(ThoughtView.presenter, "-presenter")
        for hidden in ("#finder", "#agreement", "#finder-answer", "#gold"):
            self.query_one(hidden).display = False
        self._show_title()
        self._show_facts()
        self._apply_label()
        # The task verifiers know the paper's five tasks only.
        self.verify_live = self.bbm_app.config.verify_live and self.trace.task.is_paper
        if self.trace.task_change is not None:
            self.notify(self.trace.task_change, title=f"Your task {self.trace.task.name}",
                        severity="warning", timeout=15, markup=False)
        if self.verify_live:
            self._verify_now()
        else:
            self._load_finder()
        self._show_selection()
        # Scrolled to once laid out (before that, the thought has no place to scroll to).
        self.call_after_refresh(self._show_selection, scroll=True)
        self._check_claim()  # another window generating this session: read-only here
        if not self.trace.steps:
            self._status(f"{self._key('step')} generates the next thought, "
                         f"{self._key('run')} runs to the answer.")
        elif self.trace.finished:
            self._status("The trace has its answer.", then=self._label_hint())
        else:
            self._status(f"{thoughts(len(self.trace.steps))} so far.", then=self._next_hint())

    def on_unmount(self) -> None:
        self.bbm_app.session_left(self.trace.id)

    def on_resize(self) -> None:
        # Once the panes have their new sizes.
        self.call_after_refresh(self._after_resize)

    def _after_resize(self) -> None:
        """A taller or wider terminal can fit every thought: the anchor that followed the end
        would then pin them to the bottom, under a blank band. A narrower one makes thoughts
        taller: the selection is scrolled back into view."""
        pane = self._thoughts
        if pane.is_anchored and pane.max_scroll_y == 0:
            pane.anchor(False)
            self._follow_pending = True  # anchored again once the thoughts overflow
            # Forced: with nothing to scroll, Textual would leave the anchor's offset as it was.
            pane.scroll_home(animate=False, immediate=True, force=True)
            return
        view = self._thoughts.view(self.selected)
        if view is None or (pane.is_anchored and not self._moved):
            return  # following the end: the anchor keeps the last thought in view
        top, bottom = pane.scroll_y, pane.scroll_y + pane.scrollable_content_region.height
        region = view.virtual_region
        if region.y < top or region.bottom > bottom:
            pane.scroll_to_thought(view)

    @work(group="reload", exit_on_error=False)
    async def reload_session(self) -> None:
        """The session was renamed elsewhere: show its new name."""
        self.trace.session = await asyncio.to_thread(self.trace.store.session, self.trace.id)
        self._show_title()

    def on_screen_resume(self) -> None:
        if self.trace.id in self.bbm_app.deleted_sessions:
            self.post_message(SessionMissing(self))

    # -- what is on show

    def _show_title(self) -> None:
        session = self.trace.session
        where = f"#{session.dataset_index}" if session.dataset_index is not None else "typed"
        # "bbm-tui — word_sorting #3 — replay/bbm". Each run of one style ends with its space
        # and none starts with one: librsvg drops a run's leading spaces in screenshots.
        what = Content.assemble(
            (f"{session.task} ", "bold $accent"), f"{where} ", ("— ", MUTED),
            # The model the next step will use (the model dialog, or backtracking's hand-over
            # from replay/bbm, may have changed it since the session's first step).
            safe_line(self.trace.spec.model, 40),
        )
        if session.name != default_session_name(session.task, session.dataset_index,
                                                 session.input):
            what = (what.append(" ").append(styled("— ", MUTED))
                    .append(safe_line(session.name, 40)))
        app_name = Content.assemble(("bbm-tui ", "bold"), ("— ", MUTED))
        title = self.query_one("#title-bar", TitleBar)
        # Narrow, the app's name goes first, so that the model stays whole.
        title.set_left(app_name + what, what)
        title.set_right(Content(format_totals(self.totals)))

    def _show_facts(self) -> None:
        session = self.trace.session
        task = self.trace.task
        title = Content.assemble("Question · ", safe_line(task.title, 40))
        if self.trace.task_change is not None:  # said in full in a notice on opening
            title = title.append(styled(" · file changed", "$text-warning"))
        elif not task.is_paper:
            title = title.append(styled(" · yours", MUTED))
        self.query_one("#question-pane").border_title = title
        self.query_one("#thoughts-pane").border_title = "Thoughts"
        target = self.query_one("#target", Static)
        target.display = session.target is not None
        if session.target is not None:
            target.update(Content.assemble(("Target: ", "bold"), safe_cut(
                session.target, "the export has all of it", QUESTION_SHOWN, line=True)))
        self._show_answer()

    def _show_answer(self) -> None:
        answer = self.trace.answer
        line = Content.assemble(("Answer: ", "bold"))
        if answer is None:
            line = line.append(styled("—", MUTED))
        else:
            line = line.append(safe_line(answer))
            correct = self.trace.correct
            # The spaces go with the answer: a styled run that starts with spaces loses them
            # when librsvg draws a screenshot ("(A)✗ not the target").
            if correct is True:
                line = line.append("  ").append(
                    styled(f"{GLYPH_OK} matches the target", "$text-success"))
            elif correct is False:
                line = line.append("  ").append(
                    styled(f"{GLYPH_MISTAKE} not the target", "$text-error"))
        self.query_one("#answer", LeanStatic).show(line)

    def _apply_label(self) -> None:
        """Glyphs and dimming for the label in force."""
        self._set_statuses(self._views())
        self.query_one("#label", LeanStatic).show(describe_label(self.trace))
        self._show_agreement()

    def _set_statuses(self, views: list[ThoughtView]) -> None:
        shown = statuses(self.trace)
        for view in views:
            if view.number <= len(shown):
                view.set_status(shown[view.number - 1])

    def _decorate(self, views: list[ThoughtView]) -> None:
        """Thoughts entering the window: their status, the finder's mark and the selection,
        as the ones already on show have them."""
        self._set_statuses(views)
        shown = self.finder
        marks = self._finder_marks(shown)
        for view in views:
            judgement, raw = marks.get(view.number, (None, None))
            view.set_judgement(judgement, raw)
            view.set_class(view.number == self.selected and not view.streaming, "-selected")

    def _key(self, binding_id: str) -> str:
        """The key bound to `binding_id` now (the user's keymap applied), for a hint."""
        return key_for(self, binding_id)

    def _say_stopped(self) -> None:
        self._status("Stopped. The thought being generated was dropped; "
                     f"{self._key('step')} or {self._key('run')} goes on.")

    def _next_hint(self) -> str:
        return (f"{self._key('step')} for the next one, {self._key('run')} to run to the "
                "answer.")

    def _label_hint(self) -> str:
        """What to do next about the label: give one, or (once given) how to take it back."""
        if self.trace.label is None:
            return (f"Label the trace: {self._key('flag_mistake')} flags the first mistake, "
                    f"{self._key('no_mistake')} says there is none.")
        said = describe_label(self.trace).plain.removeprefix("Label: ")
        return (f"Labelled: {said}; {self._key('undo_label')} undoes it, "
                f"{self._key('find_mistake')} asks a model.")

    def _status(self, message: str, *, error: bool = False, then: str = "") -> None:
        """Say what happened (`message`, cut with an ellipsis if the lines are too few) and
        what to do next (`then`, never cut)."""
        self.query_one("#run-status", StatusLine).say(message, then, error=error)

    @property
    def _thoughts(self) -> ThoughtList:
        return self.query_one("#thoughts", ThoughtList)

    def _views(self) -> list[ThoughtView]:
        """The finished thoughts on show, in order (a window of the trace; a thought still
        streaming is not one of them)."""
        return self._thoughts.views()

    def _view(self, number: int) -> ThoughtView | None:
        """Thought `number`'s view, bringing it into the window."""
        return self._thoughts.reveal(number)

    # -- selection

    def action_move(self, delta: int) -> None:
        self._select(self.selected + delta)

    def action_first(self) -> None:
        self._select(1)

    def action_last(self) -> None:
        self._select(len(self.trace.steps))

    def action_page(self, direction: int) -> None:
        """A screenful of thoughts up or down: as many as are in view now."""
        self._select(self.selected + direction * max(1, self._thoughts_in_view() - 1))

    def _thoughts_in_view(self) -> int:
        pane = self._thoughts
        top, bottom = pane.scroll_y, pane.scroll_y + pane.scrollable_content_region.height
        return sum(1 for view in self._views()
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
            self._status(f"Thought {number} of {count}.")
        else:
            self._status(f"There is no Thought {number}: the trace has {count}.", error=True)

    def on_key(self, event: events.Key) -> None:
        # Digits build the number enter jumps to; escape forgets it.
        if event.character is not None and event.character.isdigit() and \
                len(self._typed_number) < 7:
            self._typed_number += event.character
            # esc here is the key itself, not a binding: it is handled just below.
            self._status(f"Go to Thought {self._typed_number}…  "
                         f"({self._key('jump_to_thought')} goes, esc forgets)")
            event.stop()
        elif event.key == "escape" and self._typed_number:
            self._typed_number = ""
            self._status("")
            event.stop()
            event.prevent_default()

    def action_scroll_thoughts(self, lines: int) -> None:
        self._thoughts.scroll_relative(y=lines, animate=False)

    def action_scroll_question(self, lines: int) -> None:
        self.query_one("#question-pane", VerticalScroll).scroll_relative(y=lines, animate=False)

    def _select(self, number: int) -> None:
        count = len(self.trace.steps)
        if not count:
            return
        self._find_follow = False  # the reader leads now, not the finder
        self.selected = min(max(number, 1), count)
        self._moved = self.selected != count
        self._show_selection(scroll=True)
        if self.selected == count:
            # At the last thought the reader is back at the end: follow new text again.
            self._follow(at_end=True)

    def _show_selection(self, *, scroll: bool = False) -> None:
        view = self._view(self.selected)  # into the window first
        for shown in self._views():
            shown.set_class(shown.number == self.selected, "-selected")
        if scroll and view is not None:
            self._thoughts.scroll_to_thought(view)

    def on_click(self, event: events.Click) -> None:
        # Clicking a thought selects it, as in the paper's UI.
        widget = event.widget
        while widget is not None and not isinstance(widget, ThoughtView):
            widget = widget.parent
        if isinstance(widget, ThoughtView) and not widget.streaming:
            self.selected = widget.number
            self._moved = self.selected != len(self.trace.steps)
            self._show_selection()

    # -- generating

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # None greys a key out in the Footer; the key then does nothing.
        if self.writing_refused(action):  # another bbm-tui is generating the session
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
        if action in ("backtrack", "rewrite", "version"):
            return None if busy or not self.trace.steps else True
        if action == "edit_model":  # a run goes on with the model it started with
            return None if busy else True
        return True

    def action_step(self) -> None:
        self._generate(1)

    def action_run(self) -> None:
        self._generate(None)

    def action_stop(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "generate")
        if self.finding:
            self.workers.cancel_group(self, "find")

    def _set_running(self, running: bool) -> None:
        self.running = running
        self.set_class(running, "-running")
        self.refresh_bindings()

    @work(exclusive=True, group="generate", exit_on_error=False)
    async def _generate(self, max_new_steps: int | None) -> None:
        self._set_running(True)
        self._sync_views()
        try:
            if not llm.is_loaded():
                # The first call imports litellm (seconds); never on the event loop.
                self._status("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            self._status("Generating…")
            async for event in self.trace.generate(
                max_new_steps=max_new_steps, settings=self.bbm_app.stepper_settings
            ):
                self._on_event(event)
        except SessionBusy as busy:  # another window got to it first: nothing was done
            self.read_only(busy)
        except asyncio.CancelledError:
            self._say_stopped()
            raise
        finally:
            if self.is_attached:  # not when the screen itself is going away
                self._drop_unfinished()
                self._set_running(False)
                self._sync_views()

    def _on_event(self, event: object) -> None:
        handlers: dict[type, Callable] = {
            StepStarted: self._step_started,
            StepDelta: self._step_delta,
            StepRestarted: self._step_restarted,
            StepFinished: self._step_finished,
            AnswerFound: self._answer_found,
            StepFailed: self._step_failed,
            TraceFinished: self._trace_finished,
        }
        handlers[type(event)](event)

    def _step_started(self, event: StepStarted) -> None:
        view = ThoughtView(event.number, streaming=True)
        self._streaming[event.number] = view
        self._follow()
        self._thoughts.add_streaming(view)
        self._status(f"Generating Thought {event.number}…  ({self._key('stop')} stops)")

    def _step_delta(self, event: StepDelta) -> None:
        view = self._streaming.get(event.number)
        if view is not None:
            self._follow()
            view.append(event.text)

    def _step_restarted(self, event: StepRestarted) -> None:
        view = self._streaming.get(event.number)
        if view is not None:
            view.restart(one_line(event.reason, 80))

    def _step_finished(self, event: StepFinished) -> None:
        # Committed already: the session's last step is this one.
        step = next((s for s in reversed(self.trace.steps) if s.number == event.number), None)
        view = self._streaming.pop(event.number, None)
        if step is None or view is None:
            return
        view.finish(step, wall_clock=self.bbm_app.wall_clock)
        self._thoughts.streaming_finished(view)
        self._add_call(event.call)
        if event.call.impossible_logprobs:
            self.notify(f"Thought {event.number} came with log-probabilities no model could "
                        "give (positive, NaN or infinite): it was kept without them.",
                        severity="warning", markup=False, timeout=6)
        self._apply_label()
        if self.selected == 0 or not self._moved:
            # The selection follows generation until the reader moves it: x right after r
            # flags the newest thought.
            self.selected = event.number
        self._show_selection()
        if self.verify_live:
            self._verify_now()

    def _follow(self, *, at_end: bool = False) -> None:
        """Keep new text in view while the reader is at the end of the trace, and only then.

        Textual's anchor does the following (and lets go when the reader scrolls up, and
        takes hold again back at the bottom); it also pins short content to the bottom, so
        it is only set once the thoughts overflow the pane.
        """
        scroll = self._thoughts
        if not scroll.at_end:
            return  # the window is elsewhere in a long trace: nothing to follow there
        if scroll.is_anchored and not at_end:
            return
        if scroll.max_scroll_y == 0:
            self._follow_pending = True  # everything fits: follow once it no longer does
        elif at_end or self._follow_pending or scroll.scroll_y >= scroll.max_scroll_y - 1:
            self._follow_pending = False
            scroll.anchor()

    def _answer_found(self, event: AnswerFound) -> None:
        self._show_answer()

    def _step_failed(self, event: StepFailed) -> None:
        message = one_line(event.error.message, 400)
        self._drop_unfinished()
        # One place for it (issue 10, item 12): the status line, in red, until the next action.
        self._status(f"Thought {event.number} failed: {message.rstrip('.')}.",
                     then=f"{self._key('step')} tries it again, "
                     f"{self._key('trace_edit_model')} changes the model.", error=True)

    def _trace_finished(self, event: TraceFinished) -> None:
        if event.reason == TraceEnd.ANSWER:
            verdicts: dict[bool | None, str] = {True: f" {GLYPH_OK} matches the target",
                                                False: f" {GLYPH_MISTAKE} not the target"}
            verdict = verdicts.get(self.trace.correct, "")
            self._status(f"Finished with an answer{verdict}.", then=self._label_hint())
        elif event.reason == TraceEnd.PAUSED:
            self._status(f"{thoughts(len(self.trace.steps))}.", then=self._next_hint())
        else:
            template = FINISH_MESSAGES[event.reason]
            # The limit in force: the model dialog may have changed the config's.
            limit = self.bbm_app.stepper_settings.step_limit
            self._status(template.format(limit=thoughts(limit),
                                         number=len(self.trace.steps)), error=True)

    def _add_call(self, call: llm.CallRecord | None) -> None:
        if call is None:  # a verdict no model gave (the task verifiers)
            return
        # Kept in step with the store's totals without a read per step: the call just
        # committed is exactly the one that adds to them.
        self.totals = Totals(
            self.totals.calls + 1,
            self.totals.prompt_tokens + (call.prompt_tokens or 0),
            self.totals.completion_tokens + (call.completion_tokens or 0),
            self.totals.cost + (call.cost or 0.0),
            self.totals.estimated_calls + call.usage_estimated,
        )
        self._show_title()

    def _drop_unfinished(self) -> None:
        for view in self._streaming.values():
            self._thoughts.drop(view)
        self._streaming.clear()

    def _sync_views(self) -> None:
        """Show any committed step that has no view (a commit that finished just as a run was
        stopped), so the screen matches the store."""
        self._thoughts.sync()
        self._apply_label()
        self._show_answer()
        self._show_finder()
        if self.gold_shown:
            self._load_gold()

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
            self._show_title()
            then = (f"{self._key('edit_thought')} rewrites a thought, "
                    f"{self._key('backtrack')} backtracks from one." if self.trace.finished
                    else self._next_hint())
            self._status(f"From the next step on: {one_line(choice.spec.model, 60)} "
                         f"({settings_line(choice.settings)}).", then=then)

        self.app.push_screen(ModelScreen(self.trace.spec, self.bbm_app.stepper_settings,
                                         "The model from the next step on"), edited)

    # -- labelling (store writes in a thread, one at a time and in the order pressed)

    def action_flag(self) -> None:
        if not self.trace.steps:
            self._status("Nothing to flag yet: the trace has no thoughts "
                         f"({self._key('step')} writes one).")
            return
        number = self.selected or 1
        self._label(lambda: self.trace.flag_mistake(number),
                    f"Thought {number} flagged as the first mistake.")

    def action_no_mistake(self) -> None:
        if not self.trace.steps:
            self._status("Nothing to label yet: the trace has no thoughts "
                         f"({self._key('step')} writes one).")
            return
        if self.trace.correct is False:
            # A wrong answer with no mistake in the steps is possible, but rare: ask.
            question = Content.assemble(
                "The answer ", ("is wrong", "bold"), " (",
                safe_line(self.trace.answer or ""), " ≠ ",
                safe_line(self.trace.session.target or ""),
                "). Label the trace as having no mistake anyway?",
            )

            def answered(sure: bool | None) -> None:
                if sure:
                    self._mark_no_mistake()

            self.app.push_screen(ConfirmScreen(question, "No mistake"), answered)
            return
        self._mark_no_mistake()

    def _mark_no_mistake(self) -> None:
        self._label(self.trace.mark_no_mistake, "Labelled: no mistake in this trace.")

    def action_undo(self) -> None:
        self._label(self.trace.undo_label, None)

    @work(group="label", exit_on_error=False)
    async def _label(self, change: Callable[[], Label | None], message: str | None) -> None:
        async with self._label_lock:
            had_label = self.trace.label is not None
            await asyncio.to_thread(change)
        self._apply_label()
        if message is None:
            message = ("Label undone: " + describe_label(self.trace).plain.removeprefix("Label: ")
                       if had_label else "There is no label to undo.")
        # The status line says it; a toast only while that line reports a run in progress.
        if self.running or self.finding:
            self.notify(message, markup=False, timeout=3)
        else:
            self._status(message)

    # -- the dataset's gold label (g), hidden by default so that it does not bias anyone

    def action_gold(self) -> None:
        self.gold_shown = not self.gold_shown
        if self.gold_shown:
            self._load_gold()
        else:
            self.query_one("#gold").display = False

    @work(exclusive=True, group="gold", exit_on_error=False)
    async def _load_gold(self) -> None:
        session = self.trace.session
        recorded = None
        if session.dataset_index is not None:
            rows = await asyncio.to_thread(_listed_questions, session.task)
            if 0 <= session.dataset_index < len(rows):
                row = rows[session.dataset_index]
                if row.input == session.input:
                    recorded = list(row.steps)
        if not self.gold_shown:
            return
        gold = self.query_one("#gold", LeanStatic)
        gold.display = True
        gold.show(describe_gold(self.trace, recorded))

    # -- copying

    def _question(self) -> str:
        return question_text(self.trace.task, self.trace.session.input)

    def action_copy_question(self) -> None:
        question = self._question()
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


def _listed_questions(task_name: str) -> tuple[TraceRow, ...]:
    """The questions listed for a task (the paper's dataset, or a task file's `questions`),
    none where the task or its file is gone: a session's gold label is read from there."""
    from bbm_tui.core.dataset import DatasetError, question_rows
    from bbm_tui.core.tasks import UnknownTaskError

    try:
        return question_rows(task_name)
    except (UnknownTaskError, DatasetError):
        return ()
