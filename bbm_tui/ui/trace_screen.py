"""The main screen (DESIGN §10): the question on the left, the numbered thoughts on the right,
generated live one step at a time and labelled the way the paper's annotators did.

The store is the truth: a thought becomes a finished `ThoughtView` only once its step is
committed (the session commits inside `generate` before passing `StepFinished` on), and a
thought still streaming when a run ends (stop, error) is removed, so what is on screen after
a run is what a resume would show.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core import llm
from bbm_tui.core.session import TraceSession
from bbm_tui.core.stepper import (
    AnswerFound,
    StepDelta,
    StepFailed,
    StepFinished,
    StepRestarted,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.store import Label, Totals, default_session_name
from bbm_tui.core.tasks import get_task
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED, format_totals, safe, safe_line, styled
from bbm_tui.ui.widgets import BbmScreen, KeysFooter, LeanStatic, Status, ThoughtView, TitleBar

_HERE = Path(__file__).parent

if TYPE_CHECKING:
    from bbm_tui.ui.app import BbmApp

_MOVE = Binding.Group("move", compact=True)
_COPY = Binding.Group("copy", compact=True)

FINISH_MESSAGES = {
    "step_limit": "Stopped at the step limit ({limit} thoughts) without an answer.",
    "empty": "The model returned nothing more: the trace ends here, without an answer.",
    "truncated": "Thought {number} was cut at the token limit; the run stopped so you can look.",
}


def question_text(task: str, input_text: str) -> str:
    """The question as the model sees it, minus the "Q: " that only marks it in the prompt."""
    text = get_task(task).question(input_text)
    return text[3:] if text.startswith("Q: ") else text


def statuses(trace: TraceSession) -> list[Status]:
    """The glyph of each thought under the current label (the paper's protocol: steps before
    the first mistake are correct, the rest are not judged)."""
    count = len(trace.steps)
    mistake = trace.mistake_number
    if mistake is not None:
        return ["ok" if n < mistake else "mistake" if n == mistake else "after"
                for n in range(1, count + 1)]
    if trace.no_mistake and trace.label is not None:
        # A "no mistake" verdict covers the steps there were when it was given.
        leaf = next((s.number for s in trace.steps if s.id == trace.label.leaf_step_id), count)
        return ["ok" if n <= leaf else "plain" for n in range(1, count + 1)]
    return ["plain"] * count


def describe_label(trace: TraceSession) -> Content:
    mistake = trace.mistake_number
    if mistake is not None:
        return Content.assemble(
            ("Label: ", "bold"), (f"{GLYPH_MISTAKE} first mistake in Thought {mistake}",
                                  "$text-error"),
        )
    if trace.no_mistake:
        return Content.assemble(("Label: ", "bold"), (f"{GLYPH_OK} no mistake", "$text-success"))
    return Content.assemble(("Label: ", "bold"), ("not labelled yet", MUTED))


class Pane(VerticalScroll, can_focus=False):
    """A scrolling pane that never takes the focus, so that the screen's keys (j/k, arrows)
    always reach the screen; the mouse wheel still scrolls it."""


class TraceScreen(BbmScreen):
    CSS_PATH = _HERE / "trace.tcss"

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
        Binding("x", "flag", "first mistake", id="flag_mistake",
                tooltip="Flag the selected thought as the first mistake"),
        Binding("c", "no_mistake", "no mistake", id="no_mistake",
                tooltip="Label the trace as having no mistake"),
        Binding("u", "undo", "undo", id="undo_label", tooltip="Undo the last label"),
        Binding("y", "copy", "thought", id="copy_thought", group=_COPY,
                tooltip="Copy the selected thought"),
        Binding("Y", "copy_trace", "trace", id="copy_trace", group=_COPY,
                tooltip="Copy the whole trace as 'Thought N: …' lines"),
    ]

    def __init__(self, trace: TraceSession, totals: Totals) -> None:
        super().__init__(classes="trace-screen")
        self.trace = trace
        self.totals = totals
        # On resume, start at the flagged mistake: that is what a reviewer looks at first.
        self.selected = trace.mistake_number or (1 if trace.steps else 0)
        self.running = False
        self._follow_pending = True
        self._label_lock = asyncio.Lock()
        # Thoughts being streamed, by number: a token goes straight to its view, no query.
        self._streaming: dict[int, ThoughtView] = {}

    @property
    def bbm_app(self) -> BbmApp:
        return self.app  # type: ignore[return-value]

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
                yield Static(
                    styled("Do not assume every step is correct because the answer is: a "
                           "trace can reach the right answer after a mistake.", MUTED),
                    id="note",
                )
            with Vertical(id="thoughts-pane", classes="panel"):
                with Pane(id="thoughts"):
                    wall_clock = self.bbm_app.wall_clock
                    for step in self.trace.steps:
                        yield ThoughtView.of_step(step, wall_clock=wall_clock)
                yield LeanStatic(id="run-status")
        # The palette (ctrl+p) is listed in the help screen; the footer needs the room.
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        self._show_title()
        self._show_facts()
        self._apply_label()
        self._show_selection(scroll=True)
        if not self.trace.steps:
            self._status("n generates the next thought, r runs to the answer.")
        elif self.trace.finished:
            self._status("The trace has its answer. Label it: x flags the first mistake, "
                         "c says there is none.")
        else:
            self._status(f"{len(self.trace.steps)} thoughts so far. n for the next one, "
                         "r to run to the answer.")

    @work(group="reload", exit_on_error=False)
    async def reload_session(self) -> None:
        """The session was renamed elsewhere: show its new name."""
        self.trace.session = await asyncio.to_thread(self.trace.store.session, self.trace.id)
        self._show_title()

    def on_screen_resume(self) -> None:
        if self.trace.id in self.bbm_app.deleted_sessions:
            self.bbm_app.replace_deleted(self)

    # -- what is on show

    def _show_title(self) -> None:
        session = self.trace.session
        where = f"#{session.dataset_index}" if session.dataset_index is not None else "typed"
        left = Content.assemble(
            ("bbm-tui", "bold"), (" ─ ", MUTED),
            (session.task, "bold $accent"), " ", where, (" ─ ", MUTED),
            safe_line(session.model, 40),
        )
        if session.name != default_session_name(session.task, session.dataset_index,
                                                 session.input):
            left = left.append(styled(" ─ ", MUTED)).append(safe_line(session.name, 40))
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
            if correct is True:
                line = line.append(styled(f"  {GLYPH_OK} matches the target", "$text-success"))
            elif correct is False:
                line = line.append(styled(f"  {GLYPH_MISTAKE} not the target", "$text-error"))
        self.query_one("#answer", LeanStatic).show(line)

    def _apply_label(self) -> None:
        """Glyphs and dimming for the label in force."""
        views = self._views()
        for view, status in zip(views, statuses(self.trace), strict=False):
            view.set_status(status)
        self.query_one("#label", LeanStatic).show(describe_label(self.trace))

    def _status(self, message: str, *, error: bool = False) -> None:
        status = self.query_one("#run-status", LeanStatic)
        status.show(safe(message))
        status.set_class(error, "-error")

    def _views(self) -> list[ThoughtView]:
        """The finished thoughts, in order (a thought still streaming is not one of them)."""
        return [view for view in self.query(ThoughtView) if not view.streaming]

    def _view(self, number: int) -> ThoughtView | None:
        found = self.query(f"#thought-{number}")
        return found.first(ThoughtView) if found else None

    # -- selection

    def action_move(self, delta: int) -> None:
        count = len(self.trace.steps)
        if not count:
            return
        self.selected = min(max(self.selected + delta, 1), count)
        self._show_selection(scroll=True)
        if self.selected == count:
            # At the last thought the reader is back at the end: follow new text again.
            self._follow(at_end=True)

    def _show_selection(self, *, scroll: bool = False) -> None:
        for view in self.query(ThoughtView):
            view.set_class(view.number == self.selected and not view.streaming, "-selected")
        view = self._view(self.selected)
        if scroll and view is not None:
            self.query_one("#thoughts", VerticalScroll).scroll_to_widget(
                view, animate=False, immediate=True
            )

    def on_click(self, event: events.Click) -> None:
        # Clicking a thought selects it, as in the paper's UI.
        widget = event.widget
        while widget is not None and not isinstance(widget, ThoughtView):
            widget = widget.parent
        if isinstance(widget, ThoughtView) and not widget.streaming:
            self.selected = widget.number
            self._show_selection()

    # -- generating

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # None greys a key out in the Footer; the key then does nothing.
        if action in ("step", "run"):
            return None if self.running else True
        if action == "stop":
            return True if self.running else None
        if action in ("flag", "copy", "no_mistake", "copy_trace"):
            return True if self.trace.steps else None
        return True

    def action_step(self) -> None:
        self._generate(1)

    def action_run(self) -> None:
        self._generate(None)

    def action_stop(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "generate")

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
        self.query_one("#thoughts").mount(view)
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
        self._add_call(event.call)
        self._apply_label()
        if self.selected == 0:
            self.selected = 1
        self._show_selection()

    def _follow(self, *, at_end: bool = False) -> None:
        """Keep new text in view while the reader is at the end of the trace, and only then.

        Textual's anchor does the following (and lets go when the reader scrolls up, and
        takes hold again back at the bottom); it also pins short content to the bottom, so
        it is only set once the thoughts overflow the pane.
        """
        scroll = self.query_one("#thoughts", VerticalScroll)
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
            self._status(f"Finished with an answer{verdict}. Label the trace: x flags the "
                         "first mistake, c says there is none.")
        elif event.reason == "paused":
            self._status(f"{len(self.trace.steps)} thoughts. n for the next one, r to run to "
                         "the answer.")
        else:
            template = FINISH_MESSAGES[event.reason]
            self._status(template.format(limit=self.bbm_app.config.step_limit,
                                         number=len(self.trace.steps)), error=True)

    def _add_call(self, call: llm.CallRecord) -> None:
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
            view.remove()
        self._streaming.clear()

    def _sync_views(self) -> None:
        """Show any committed step that has no view (a commit that finished just as a run was
        stopped), so the screen matches the store."""
        shown = {view.number for view in self.query(ThoughtView) if not view.streaming}
        container = self.query_one("#thoughts")
        for step in self.trace.steps:
            if step.number not in shown:
                container.mount(ThoughtView.of_step(step, wall_clock=self.bbm_app.wall_clock))
        self._apply_label()
        self._show_answer()

    # -- labelling (store writes in a thread, one at a time and in the order pressed)

    def action_flag(self) -> None:
        if not self.trace.steps:
            return
        number = self.selected or 1
        self._label(lambda: self.trace.flag_mistake(number),
                    f"Thought {number} flagged as the first mistake.")

    def action_no_mistake(self) -> None:
        if self.trace.steps:
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
        self.notify(f"Copied the trace ({len(self.trace.steps)} thoughts).", markup=False,
                    timeout=3)
