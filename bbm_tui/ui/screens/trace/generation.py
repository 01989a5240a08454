"""A trace view's generating (n, r): the model writes the next thought, or runs to the answer,
and the stepper's events are shown as they come (a thought streaming token by token, then
finished once its step is committed; the answer; a failure; the end of the run). Backtracking
and rewriting stream their new branch through here too (`stream`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from textual.css.query import NoMatches

from bbm_tui.core import llm
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    OneCallEnded,
    StepDelta,
    StepFailed,
    StepFinished,
    StepRestarted,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.llm.prefix import prefix_refusal
from bbm_tui.core.records import TraceEnd
from bbm_tui.core.store import SessionBusy
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.thinking_backtrack import (
    StoppedBranch,
    go_on_from_stopped,
    prefixer_for,
    stopped_branch,
)
from bbm_tui.ui.screens.trace.host import TraceHost
from bbm_tui.ui.screens.trace.messages import CallsMade
from bbm_tui.ui.screens.trace.prefixing import chat_template, prefix_settings, say_refused
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, thoughts
from bbm_tui.ui.viewmodels.trace import FINISH_MESSAGES
from bbm_tui.ui.widgets.thought import ThoughtView


class Generation:
    """The generating of one trace view. It sets the view's `running` while a run goes on;
    its worker is the view's "generate" group (one at a time; esc cancels it)."""

    def __init__(self, view: TraceHost) -> None:
        self.view = view
        # The thought being streamed, by number: a token goes straight to its view, no query.
        self._streaming: dict[int, ThoughtView] = {}
        # The key that stops a run, as the status line names it while a thought streams:
        # looked up once a run (the keymap's every binding is worked through for it, 0.5 ms
        # a thought; a reasoning cut by sentence starts four or five a second).
        self._stop_key: str | None = None

    def generate(self, max_new_steps: int | None) -> None:
        """One step (1), or a run to the answer (None)."""
        self.view.run_worker(self._generate(max_new_steps), name="generate", group="generate",
                             exclusive=True, exit_on_error=False, description="Generating")

    async def _generate(self, max_new_steps: int | None) -> None:
        view = self.view
        view.running = True
        view.sync_views()
        try:
            if not llm.is_loaded():
                # The first call imports litellm (seconds); never on the event loop.
                view.say("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            stopped = stopped_branch(view.trace)  # known: no query, no trip to a thread a key
            if stopped is None or not await self._go_on(stopped):
                view.say("Generating…")
                await self.stream(view.trace.generate(
                    max_new_steps=max_new_steps, settings=view.context.stepper_settings))
        except SessionBusy as busy:  # another window got to it first: nothing was done
            view.read_only(busy)
        except asyncio.CancelledError:
            view.say_stopped()
            raise
        finally:
            if view.is_attached:  # not when the view itself is going away
                self.end()

    async def _go_on(self, stopped: StoppedBranch) -> bool:
        """A thinking branch stopped before its answer goes on from its reasoning so far: a
        backtracked one as `enter` went on from the sample (a fresh call would start the
        trace again and drop the branch's point), a plain trace's as its call would have (a
        fresh call would throw away the thoughts that came). Where the model cannot go on
        from a prefix (said before any call): a backtracked branch is refused, said why; a
        plain trace starts again as it always could (False: not gone on)."""
        view = self.view
        trace = view.trace
        settings = view.context.stepper_settings
        template = chat_template(settings)
        refusal = await asyncio.to_thread(prefix_refusal, trace.spec, template)
        if refusal is not None and not stopped.backtracked:
            return False
        if refusal is not None:
            say_refused(view, "The backtracked branch does not go on", refusal)
            return True
        # A plain trace goes on at its thinking call's temperature where one was given.
        prefix = prefix_settings(settings, temperature=settings.thinking_temperature)
        prefixer = prefixer_for(trace, template)
        what = "The backtracked branch" if stopped.backtracked else "The trace"
        try:
            view.say(f"{what} goes on after Thought {len(trace.steps)}, where it stopped…")
            await self.stream(go_on_from_stopped(trace, prefixer, stopped, prefix))
        finally:
            await prefixer.aclose()
        return True

    def end(self) -> None:
        """A run ended (finished, failed or stopped): the thought still streaming is dropped
        (its step was never committed), and the view shows what the store has."""
        self.drop_unfinished()
        self.view.running = False
        self.view.sync_views()

    async def stream(self, events: AsyncIterator[object]) -> None:
        self._stop_key = None  # looked up again for this run (the keymap may have changed)
        async for event in events:
            self.on_event(event)

    def on_event(self, event: object) -> None:
        handlers: dict[type, Callable] = {
            StepStarted: self._step_started,
            StepDelta: self._step_delta,
            StepRestarted: self._step_restarted,
            StepFinished: self._step_finished,
            AnswerFound: self._answer_found,
            StepFailed: self._step_failed,
            OneCallEnded: self._one_call_ended,
            TraceFinished: self._trace_finished,
        }
        handlers[type(event)](event)

    def _step_started(self, event: StepStarted) -> None:
        view = self.view
        thought = ThoughtView(event.number, streaming=True)
        thought.set_presenter(view.presenter)
        self._streaming[event.number] = thought
        view.thoughts.follow()
        view.thoughts.add_streaming(thought)
        if self._stop_key is None:
            self._stop_key = view.key("stop")
        view.say(f"Generating Thought {event.number}…  ({self._stop_key} stops)")

    def _step_delta(self, event: StepDelta) -> None:
        thought = self._streaming.get(event.number)
        if thought is not None:
            thought.append(event.text)
            self.view.context.paint_clock.request(self, self._paint_streamed)

    def _paint_streamed(self) -> None:
        """Draw what streamed since the last tick of the app's paint clock (ui/paint_clock.py),
        in the frame of every other trace's."""
        if not self._streaming or not self.view.is_attached:
            return
        try:
            thoughts = self.view.thoughts
        except NoMatches:  # the screen being taken down: its widgets go before the view
            return
        grew = False
        for thought in self._streaming.values():
            grew = thought.paint_appended() or grew
        thoughts.follow()
        if grew and self.view.on_thought_grew is not None:
            self.view.on_thought_grew()

    def _step_restarted(self, event: StepRestarted) -> None:
        thought = self._streaming.get(event.number)
        if thought is not None:
            thought.restart(one_line(event.reason, 80))

    def _step_finished(self, event: StepFinished) -> None:
        view = self.view
        # Committed already: the session's last step is this one.
        step = next((s for s in reversed(view.trace.steps) if s.number == event.number), None)
        thought = self._streaming.pop(event.number, None)
        if step is None or thought is None:
            return
        thought.finish(step, wall_clock=view.context.wall_clock)
        view.thoughts.streaming_finished(thought, selected=view.selected)
        # Its last line (the figures) can be the one that makes the thoughts overflow: the
        # end is followed from then on, as it is from a token's (a trace that just overflowed
        # at its end stayed scrolled to the top, its answer a line out of sight).
        view.thoughts.call_after_refresh(view.thoughts.follow)
        view.post_message(CallsMade(event.call))
        if event.call.impossible_logprobs:
            view.notify(f"Thought {event.number} came with log-probabilities no model could "
                        "give (positive, NaN or infinite): it was kept without them.",
                        severity="warning", markup=False, timeout=6)
        view.thought_finished(event.number)

    def _one_call_ended(self, event: OneCallEnded) -> None:
        """What the one call cost beyond its thoughts (stored already) joins the figures."""
        if event.unkept is not None:
            self.view.post_message(CallsMade(event.unkept))

    def _answer_found(self, event: AnswerFound) -> None:
        self.view.show_answer()

    def _step_failed(self, event: StepFailed) -> None:
        view = self.view
        message = one_line(event.error.message)
        self.drop_unfinished()
        # One place for it: the status line, in red, until the next action.
        view.say(f"Thought {event.number} failed: {message.rstrip('.')}.",
                 then=f"{view.key('step')} tries it again, "
                 f"{view.key('trace_edit_model')} changes the model.", error=True)

    def _trace_finished(self, event: TraceFinished) -> None:
        view = self.view
        trace = view.trace
        if event.reason == TraceEnd.ANSWER:
            verdicts: dict[bool | None, str] = {True: f" {GLYPH_OK} matches the target",
                                                False: f" {GLYPH_MISTAKE} not the target"}
            verdict = verdicts.get(trace.correct, "")
            view.say(f"Finished with an answer{verdict}.", then=view.label_hint())
        elif event.reason == TraceEnd.PAUSED:
            view.say(f"{thoughts(len(trace.steps))}.", then=view.next_hint())
        else:
            template = FINISH_MESSAGES[event.reason]
            # The limit in force: the model dialog may have changed the config's.
            limit = view.context.stepper_settings.step_limit
            view.say(template.format(limit=thoughts(limit), number=len(trace.steps)),
                     error=True)

    def drop_unfinished(self) -> None:
        """Remove the thought being streamed (its step will not be committed)."""
        if self._streaming and self.view.is_attached:
            self.view.context.paint_clock.cancel(self)
        for thought in self._streaming.values():
            self.view.thoughts.drop(thought)
        self._streaming.clear()
