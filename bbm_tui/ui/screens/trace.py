"""The main screen (docs/DESIGN.md §10): the question on the left, the numbered thoughts on the
right, generated live one step at a time and labelled the way the paper's annotators did.

The store is the truth: a thought becomes a finished `ThoughtView` only once its step is
committed (the session commits inside `generate` before passing `StepFinished` on), and a
thought still streaming when a run ends (stop, error) is removed, so what is on screen after
a run is what a resume would show.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from typing import ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import SAMPLES
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    StepDelta,
    StepFailed,
    StepFinished,
    StepRestarted,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.judging.finders import FindFinished, StepJudged, TraceJudged
from bbm_tui.core.prompts.finding import METHODS, methods_for
from bbm_tui.core.store import Label, Totals, default_session_name
from bbm_tui.core.tasks import get_task
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.branches import other_branch, segments
from bbm_tui.core.trace.recording import record_find
from bbm_tui.core.trace.session import BranchMade, TraceSession
from bbm_tui.ui.context import AppContext, context
from bbm_tui.ui.dialogs import ConfirmScreen, FindRequest, FindScreen, MethodChoice
from bbm_tui.ui.messages import SessionMissing
from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.screens.branches import BranchTreeScreen, CompareScreen, TokenScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import (
    GLYPH_MISTAKE,
    GLYPH_OK,
    MUTED,
    format_totals,
    safe,
    safe_line,
    styled,
    thoughts,
)
from bbm_tui.ui.viewmodels.trace import (
    FINISH_MESSAGES,
    FinderShown,
    Judgement,
    agreement_words,
    describe_agreement,
    describe_finder,
    describe_gold,
    describe_label,
    finder_source,
    question_text,
    statuses,
)
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import ThoughtList

_MOVE = Binding.Group("move", compact=True)
_COPY = Binding.Group("copy", compact=True)

class Pane(VerticalScroll, can_focus=False):
    """A scrolling pane that never takes the focus, so that the screen's keys (j/k, arrows)
    always reach the screen; the mouse wheel still scrolls it."""


class TraceScreen(BbmScreen):
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
        Binding("b", "backtrack", "backtrack", id="backtrack",
                tooltip="Backtrack from the flagged (else the selected) thought: sample it "
                "8 times at temperature 1, continue from the best that differs (a new "
                "branch; paper §4)"),
        Binding("w", "rewrite", "rewrite", id="edit_thought", show=False,
                tooltip="Rewrite the selected thought yourself and let the model go on from "
                "it (a new branch)"),
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
                yield Static(safe(question_text(self.trace.session.task,
                                                self.trace.session.input)), id="question")
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
                yield LeanStatic(id="run-status")
        # The palette (ctrl+p) is listed in the help screen; the footer needs the room.
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        self.set_class(ThoughtView.presenter, "-presenter")
        for hidden in ("#finder", "#agreement", "#finder-answer", "#gold"):
            self.query_one(hidden).display = False
        self._show_title()
        self._show_facts()
        self._apply_label()
        self.verify_live = self.bbm_app.config.verify_live
        if self.verify_live:
            self._verify_now()
        else:
            self._load_finder()
        self._show_selection()
        # Scrolled to once laid out (before that, the thought has no place to scroll to).
        self.call_after_refresh(self._show_selection, scroll=True)
        if not self.trace.steps:
            self._status("n generates the next thought, r runs to the answer.")
        elif self.trace.finished:
            self._status(f"The trace has its answer. {self._label_hint()}")
        else:
            self._status(f"{thoughts(len(self.trace.steps))} so far. n for the next one, "
                         "r to run to the answer.")

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
        left = Content.assemble(
            ("bbm-tui ", "bold"), ("— ", MUTED),
            (f"{session.task} ", "bold $accent"), f"{where} ", ("— ", MUTED),
            safe_line(session.model, 40),
        )
        if session.name != default_session_name(session.task, session.dataset_index,
                                                 session.input):
            left = (left.append(" ").append(styled("— ", MUTED))
                    .append(safe_line(session.name, 40)))
        title = self.query_one("#title-bar", TitleBar)
        title.set_left(left)
        title.set_right(Content(format_totals(self.totals)))

    def _show_facts(self) -> None:
        session = self.trace.session
        self.query_one("#question-pane").border_title = f"Question · {get_task(session.task).title}"
        self.query_one("#thoughts-pane").border_title = "Thoughts"
        target = self.query_one("#target", Static)
        target.display = session.target is not None
        if session.target is not None:
            target.update(Content.assemble(("Target: ", "bold"), safe_line(session.target)))
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

    def _label_hint(self) -> str:
        """What to do next about the label: give one, or (once given) how to take it back."""
        if self.trace.label is None:
            return "Label the trace: x flags the first mistake, c says there is none."
        said = describe_label(self.trace).plain.removeprefix("Label: ")
        return f"Labelled: {said}; u undoes it, f asks a model."

    def _status(self, message: str, *, error: bool = False) -> None:
        status = self.query_one("#run-status", LeanStatic)
        status.show(safe(message))
        status.set_class(error, "-error")

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
            self._status(f"Go to Thought {self._typed_number}…  (enter goes, esc forgets)")
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
        except asyncio.CancelledError:
            self._status("Stopped. The thought being generated was dropped; n or r goes on.")
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
        self._status(f"Generating Thought {event.number}…  (esc stops)")

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
        self.notify(message, title=f"Thought {event.number} failed", severity="error",
                    markup=False, timeout=10)
        self._status(f"Thought {event.number} failed: {message} — press n to try it again.",
                     error=True)

    def _trace_finished(self, event: TraceFinished) -> None:
        if event.reason == "answer":
            verdict = {True: f" {GLYPH_OK} matches the target",
                       False: f" {GLYPH_MISTAKE} not the target"}.get(self.trace.correct, "")
            self._status(f"Finished with an answer{verdict}. {self._label_hint()}")
        elif event.reason == "paused":
            self._status(f"{thoughts(len(self.trace.steps))}. n for the next one, r to run to "
                         "the answer.")
        else:
            template = FINISH_MESSAGES[event.reason]
            self._status(template.format(limit=self.bbm_app.config.step_limit,
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

    # -- branches: backtracking (b), a thought rewritten (w), versions of a thought (< >)

    def action_backtrack(self) -> None:
        if self.trace.steps and not (self.running or self.finding):
            self._backtrack(self.trace.mistake_number or self.selected or 1)

    @work(exclusive=True, group="generate", exit_on_error=False)
    async def _backtrack(self, number: int) -> None:
        self._set_running(True)
        try:
            if not llm.is_loaded():
                self._status("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            model = self.trace.spec.model
            self._status(f"Sampling Thought {number} {SAMPLES} times at temperature 1…")
            try:
                ready = await self.trace.resample(number, settings=self.bbm_app.stepper_settings)
                for call in ready.resample.samples.calls:  # saved with the samples
                    self._add_call(call)
                if self.trace.spec.model != model:
                    self.notify(f"{model} can only repeat its recorded trace: backtracking "
                                f"goes on with {self.trace.spec.model}.", markup=False)
                    self._show_title()
            except llm.LLMError as error:
                self._status(f"Backtracking failed: {error.message}", error=True)
                return
            candidate = await self.app.push_screen_wait(CandidatesScreen(ready))
            if ready.resample.chosen is None:
                self._status(f"No sample differs from Thought {number}: the trace is as it "
                             "was (the samples are saved).")
                return
            if candidate is None:
                self._status(f"Kept the trace as it was; the {len(ready.stored)} samples of "
                             f"Thought {number} are saved.")
                return
            await self._continue_branch(self.trace.continue_with(
                candidate, settings=self.bbm_app.stepper_settings))
        except asyncio.CancelledError:
            self._status("Stopped. The thought being generated was dropped; n or r goes on.")
            raise
        finally:
            if self.is_attached:
                self._drop_unfinished()
                self._set_running(False)
                self._sync_views()

    def action_rewrite(self) -> None:
        if self.trace.steps and not (self.running or self.finding):
            self._rewrite(self.selected or 1)

    @work(exclusive=True, group="generate", exit_on_error=False)
    async def _rewrite(self, number: int) -> None:
        text = await self.app.push_screen_wait(
            EditThoughtScreen(number, self.trace.steps[number - 1].text))
        if text is None:
            return
        self._set_running(True)
        try:
            if not llm.is_loaded():
                self._status("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            await self._continue_branch(self.trace.rewrite(
                number, text, settings=self.bbm_app.stepper_settings))
        except asyncio.CancelledError:
            self._status("Stopped. The thought being generated was dropped; n or r goes on.")
            raise
        finally:
            if self.is_attached:
                self._drop_unfinished()
                self._set_running(False)
                self._sync_views()

    async def _continue_branch(self, events: AsyncIterator[object]) -> None:
        """A new branch from Thought k: show it, then stream the rest as `r` does."""
        async for event in events:
            if isinstance(event, BranchMade):
                self.selected = event.step.number
                self._moved = False
                await self._thoughts.replace_stale()
                self._sync_views()
                self._show_selection(scroll=True)
                self._status(f"Thought {event.step.number}: a new version (a new branch; "
                             "< and > show the others). Generating…")
            else:
                self._on_event(event)

    def action_version(self, delta: int) -> None:
        if not self.trace.steps or self.running or self.finding:
            return
        number = self.selected or 1
        versions = self.trace.alternatives(number)
        current = next(i for i, step in enumerate(versions)
                       if step.id == self.trace.steps[number - 1].id)
        if len(versions) == 1:
            self._status(f"Thought {number} has one version only.")
            return
        self._switch_version(number, versions[(current + delta) % len(versions)].id,
                             (current + delta) % len(versions) + 1, len(versions))

    @work(exclusive=True, group="label", exit_on_error=False)
    async def _switch_version(self, number: int, step_id: int, index: int, count: int) -> None:
        async with self._label_lock:
            await asyncio.to_thread(self.trace.switch_to, step_id)
        self.selected = min(number, len(self.trace.steps))
        await self._thoughts.replace_stale()
        self._sync_views()
        self._show_selection(scroll=True)
        self._status(f"Thought {number}: version {index} of {count} "
                     f"({thoughts(len(self.trace.steps))} on this branch).")

    def action_presenter(self) -> None:
        ThoughtView.presenter = not ThoughtView.presenter
        self.set_class(ThoughtView.presenter, "-presenter")
        for view in self._views():
            view._changed()  # the meta line comes or goes: a new height
        self._status("Presenter mode: on. P turns it off." if ThoughtView.presenter
                     else "Presenter mode: off.")

    PACES: ClassVar[tuple[float, ...]] = (10.0, 30.0, 60.0, 0.0)

    def action_pace(self) -> None:
        now = llm.replay_pace()
        later = [pace for pace in self.PACES if pace and pace > now]
        chosen = later[0] if now and later else (0.0 if now else self.PACES[0])
        llm.set_replay_pace(chosen)
        self._status("The offline models now stream " + (
            "at once." if chosen == 0 else f"{chosen:.0f} tokens a second.") + " p changes it.")

    def action_verify_live(self) -> None:
        self.verify_live = not self.verify_live
        if self.verify_live:
            self._status("Live verifier on: the task verifier marks each thought as it "
                         "finishes (✓ ✗ ?; e shows why). V turns it off.")
            self._verify_now()
        else:
            self._status("Live verifier off.")
            self._load_finder()  # back to the saved finder run, if any

    @work(exclusive=True, group="verify_live", exit_on_error=False)
    async def _verify_now(self) -> None:
        """The verifier's verdict on every thought so far, shown as a finder's (not saved:
        f with 'Task verifier' saves a run)."""
        if not self.trace.steps or self.finding:
            return
        from bbm_tui.core.judging.verifier import VERIFIER_MODEL, VERIFY, verify

        steps = list(self.trace.steps)
        session = self.trace.session
        result, verdicts = await asyncio.to_thread(
            verify, session.task, session.input, [step.text for step in steps])
        if not self.verify_live or self.finding:
            return
        shown = FinderShown(VERIFY, VERIFIER_MODEL, True, steps[-1].id)
        for verdict, raw in zip(verdicts, result.raw, strict=True):
            value = verdict.kind.value  # "Yes", "No", or "?" (cannot judge: shown as ?)
            shown.verdicts[verdict.index + 1] = (value if value in ("Yes", "No") else None,
                                                 raw)
        shown.state, shown.parsed = "finished", True
        shown.mistake_number = result.mistake_number
        self.finder = shown
        self._show_finder()

    def action_branch_tree(self) -> None:
        if not self.trace.steps:
            return

        def chosen(step_id: int | None) -> None:
            if step_id is not None:
                self._show_branch(step_id)

        shown = {step.id for step in self.trace.steps}
        self.app.push_screen(BranchTreeScreen(segments(self.trace.tree), shown,
                                              self.trace.session.target), chosen)

    @work(exclusive=True, group="label", exit_on_error=False)
    async def _show_branch(self, step_id: int) -> None:
        if self.running or self.finding:
            return
        async with self._label_lock:
            await asyncio.to_thread(self.trace.switch_to, step_id)
        self.selected = min(self.selected or 1, len(self.trace.steps))
        await self._thoughts.replace_stale()
        self._sync_views()
        self._show_selection(scroll=True)
        self._status(f"A branch of {thoughts(len(self.trace.steps))} on show.")

    def action_compare(self) -> None:
        steps = self.trace.steps
        other = other_branch(self.trace.tree, steps, self.selected)
        if other is None:
            self._status("The session has one branch only: b backtracks, w rewrites a thought.")
            return
        diff = self.trace.tree.diff(steps[-1].id, other)
        self.app.push_screen(CompareScreen(diff, self.trace.session.target))

    def action_tokens(self) -> None:
        if self.trace.steps:
            self._open_tokens(self.trace.steps[(self.selected or 1) - 1].id)

    @work(exclusive=True, group="tokens", exit_on_error=False)
    async def _open_tokens(self, step_id: int) -> None:
        # The list holds steps without their tokens (big traces): read this one's.
        step = await asyncio.to_thread(self.trace.store.step, step_id)
        await self.app.push_screen(TokenScreen(step))

    # -- labelling (store writes in a thread, one at a time and in the order pressed)

    def action_flag(self) -> None:
        if not self.trace.steps:
            self._status("Nothing to flag yet: the trace has no thoughts (n writes one).")
            return
        number = self.selected or 1
        self._label(lambda: self.trace.flag_mistake(number),
                    f"Thought {number} flagged as the first mistake.")

    def action_no_mistake(self) -> None:
        if not self.trace.steps:
            self._status("Nothing to label yet: the trace has no thoughts (n writes one).")
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
        self.notify(message, markup=False, timeout=3)
        if not self.running and not self.finding:
            self._status(message)

    # -- mistake finding (f): a model judges the trace; every answer is saved as it arrives

    def action_find(self) -> None:
        if not self.trace.steps or self.running or self.finding:
            return
        spec = self.trace.spec
        last = self.finder
        if self._last_request is not None:
            default = self._last_request  # as asked last time here, api base included
        elif last is not None and last.method in METHODS:
            # Again as the saved run: the same method, model and judging.
            default = FindRequest(last.method, llm.ModelSpec(last.model, spec.api_base,
                                                             spec.mode), last.judge_all)
        else:
            default = FindRequest("direct-step", spec)
        methods = [MethodChoice(name, METHODS[name].title, METHODS[name].step_level)
                   for name in methods_for(self.trace.session.task)]
        # The task's verifier: a method with no model (core/judging/verifier.py).
        methods.append(MethodChoice("verify", "Task verifier (no model)", True))

        def chosen(request: FindRequest | None) -> None:
            if request is not None:
                self._last_request = request
                self._find(request)

        self.app.push_screen(FindScreen(methods, default), chosen)

    def _set_finding(self, finding: bool) -> None:
        self.finding = finding
        self.set_class(finding, "-finding")
        self.refresh_bindings()

    @work(exclusive=True, group="find", exit_on_error=False)
    async def _find(self, request: FindRequest) -> None:
        steps = list(self.trace.steps)
        if not steps or self.running:
            return
        session = self.trace.session
        for view in self._views():
            view.set_expanded(False)
        self.finder_answer_open = False
        shown = FinderShown(request.method, request.spec.model, request.judge_all, steps[-1].id)
        self.finder = shown
        self._find_follow = True
        self._set_finding(True)
        self._show_finder()
        stopped = False
        try:
            if not llm.is_loaded() and request.method != "verify":
                self._status("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            self._finder_progress()
            async for event in record_find(
                self.trace.store, session.id, session.task, request.method, session.input,
                [step.text for step in steps], request.spec, leaf_step_id=steps[-1].id,
                settings=self.bbm_app.config.finder_settings(), judge_all=request.judge_all,
            ):
                self._on_find_event(shown, event)
        except llm.LLMError as error:
            self._find_failed(shown, error.message)
        except asyncio.CancelledError:
            stopped = True
            shown.state = "stopped"
            self._status("Stopped the mistake finder. Its answers so far are saved; the run "
                         "has no result.")
            raise
        except Exception:
            shown.state = "failed"
            raise  # the app's handler says what it was
        finally:
            if self.is_attached:
                self._set_finding(False)
                self._show_finder()
                if stopped:
                    # An answer being saved as it was stopped is saved all the same: show
                    # what the store has.
                    self._load_finder()

    def _on_find_event(self, shown: FinderShown, event: object) -> None:
        if isinstance(event, StepJudged):
            shown.verdicts[event.number] = (event.verdict, event.raw)
            self._add_call(event.call)
            self._finder_progress()
        elif isinstance(event, TraceJudged):
            shown.trace_raw = event.raw
            self._add_call(event.call)
        elif isinstance(event, FindFinished):
            shown.state = "finished"
            shown.mistake_number = event.result.mistake_number
            shown.parsed = event.result.parsed
            self._show_finder()
            if shown.mistake_number is not None and self._find_follow:
                # To the thought the model faults (unless the reader moved meanwhile): x
                # agrees with it, e shows why.
                self.selected = shown.mistake_number
                self._show_selection()
                view = self._view(shown.mistake_number)
                if view is not None:  # in the middle: the verdicts before it in view too
                    self._thoughts.scroll_to_thought(view, center=True)
            self._status(self._finder_summary(shown))
            return
        self._show_finder()

    def _finder_progress(self) -> None:
        shown = self.finder
        if shown is None or shown.state != "running":
            return
        who = f"The model ({finder_source(shown)})"
        if shown.step_level:
            number = shown.next_number
            if number > len(self.trace.steps):
                return
            self._status(f"{who} is judging Thought {number} of {len(self.trace.steps)}…  "
                         "(esc stops)")
            view = self._view(number) if self._find_follow else None
            if view is not None:
                self._thoughts.scroll_to_thought(view)
        else:
            self._status(f"{who} is reading the whole trace…  (esc stops)")

    def _finder_summary(self, shown: FinderShown) -> str:
        if shown.parsed is False and not shown.step_level and shown.trace_raw is not None:
            said = f"unparseable: {one_line(shown.trace_raw, 120)}"
        else:
            said = shown.verdict_text()
        parts = [f"Model says: {said}.", agreement_words(shown, self.trace)]
        if shown.step_level and shown.cot:
            parts.append("e on a thought shows the model's reasoning.")
        elif shown.step_level:
            parts.append("e on a thought shows the model's answer.")
        else:
            parts.append("e shows the model's answer.")
        return " ".join(part for part in parts if part)

    def _find_failed(self, shown: FinderShown, message: str) -> None:
        shown.state = "failed"
        shown.error = message
        message = one_line(message, 400)
        self.notify(message, title="Mistake finding failed", severity="error", markup=False,
                    timeout=10)
        saved = len(shown.verdicts)
        kept = (f"The {saved} answer{'s' if saved != 1 else ''} before it "
                f"{'are' if saved != 1 else 'is'} saved; the run has no result." if saved
                else "The run has no result.")
        self._status(f"Mistake finding failed: {message.rstrip('.')}. {kept}", error=True)

    @work(exclusive=True, group="finder-load", exit_on_error=False)
    async def _load_finder(self) -> None:
        """The session's latest finder run, from the store (on resume, and after a stop)."""
        runs = await asyncio.to_thread(self.trace.store.finder_runs, self.trace.id)
        if self.finding or self.verify_live or not self.is_attached:
            return  # a new run, or the live verifier, is on show
        self.finder = FinderShown.of_run(runs[-1]) if runs else None
        self._show_finder()

    def _finder_marks(self, shown: FinderShown | None
                      ) -> dict[int, tuple[Judgement, str | None]]:
        """The finder's mark on each thought it judged, if its run was on this branch."""
        if shown is None:
            return {}
        on_branch = shown.leaf_step_id is None or any(
            step.id == shown.leaf_step_id for step in reversed(self.trace.steps))
        return shown.judgements(len(self.trace.steps)) if on_branch else {}

    def _show_finder(self) -> None:
        """The finder's marks on the thoughts, its verdict and the agreement on the left."""
        shown = self.finder
        marks = self._finder_marks(shown)
        for view in self._views():
            judgement, raw = marks.get(view.number, (None, None))
            view.set_judgement(judgement, raw)
        finder = self.query_one("#finder", LeanStatic)
        finder.display = shown is not None
        if shown is not None:
            finder.show(describe_finder(shown, self.trace))
        answer = self.query_one("#finder-answer", Static)
        open_answer = (shown is not None and not shown.step_level
                       and shown.trace_raw is not None and self.finder_answer_open)
        answer.display = open_answer
        if open_answer and shown is not None and shown.trace_raw is not None:
            raw = shown.trace_raw.strip()
            answer.update(Content.assemble(("The model's answer: ", "bold"))
                          .append(safe(raw).stylize(MUTED) if raw
                                  else styled("(an empty answer)", f"italic {MUTED}")))
        self._show_agreement()
        self.refresh_bindings()

    def _show_agreement(self) -> None:
        agreement = describe_agreement(self.finder, self.trace)
        widget = self.query_one("#agreement", LeanStatic)
        widget.display = agreement is not None
        if agreement is not None:
            widget.show(agreement)

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
                self.query_one("#question-pane", VerticalScroll).scroll_to_widget(
                    self.query_one("#finder-answer"), animate=False)
            return
        view = self._view(self.selected)
        if view is None or view.judge_raw is None:
            self.notify(f"The model has not judged Thought {self.selected}.", markup=False,
                        timeout=3)
            return
        view.set_expanded(not view.expanded)
        if view.expanded:
            self.call_after_refresh(
                self.query_one("#thoughts", VerticalScroll).scroll_to_widget, view,
                animate=False)

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
            from bbm_tui.core.dataset import bundled_rows

            rows = await asyncio.to_thread(bundled_rows, session.task)
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

    def action_copy(self) -> None:
        if not self.trace.steps:
            return
        number = self.selected or 1
        self.app.copy_to_clipboard(self.trace.steps[number - 1].text)
        self.notify(f"Copied Thought {number}.", markup=False, timeout=3)

    def action_copy_trace(self) -> None:
        if not self.trace.steps:
            return
        text = "\n".join(f"Thought {step.number}: {step.text}" for step in self.trace.steps)
        self.app.copy_to_clipboard(text)
        self.notify(f"Copied the trace ({thoughts(len(self.trace.steps))}).", markup=False,
                    timeout=3)
