"""A trace view's mistake finding (f, V): a model (or the task's verifier) judges the trace,
each answer saved as it arrives and shown beside its thought (the view's `finder`); the
latest saved run of the branch on show; the live verifier's marks as thoughts finish."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from bbm_tui.core import llm
from bbm_tui.core.judging.finders import CallRetried, FindFinished, StepJudged, TraceJudged
from bbm_tui.core.judging.judges import JUDGES, VERIFIER, default_judge, judges_for
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.recording import record_find
from bbm_tui.ui.dialogs import FindRequest, FindScreen
from bbm_tui.ui.screens.trace.host import TraceHost
from bbm_tui.ui.screens.trace.messages import CallsMade
from bbm_tui.ui.viewmodels.trace import (
    FinderShown,
    agreement_words,
    finder_source,
    finder_who,
)


class MistakeFinding:
    """The mistake finder of one trace view: it sets the view's `finding` while it runs and
    its `finder` (the run on show) as answers arrive; the calls it makes go to the view's
    totals as `CallsMade`."""

    def __init__(self, view: TraceHost) -> None:
        self.view = view
        # As asked last time here (the dialog's default next time), api base included.
        self.last_request: FindRequest | None = None
        # Keep the thought being judged in view, until the reader moves the selection.
        self.follow = False
        # "retry 2 of 4 (timed out)" while a call of the run on show is being made again.
        self.retrying = ""

    # -- f: a model judges the trace; every answer is saved as it arrives

    def open_dialog(self) -> None:
        view = self.view
        trace = view.trace
        if not trace.steps or view.running or view.finding:
            return
        spec = trace.spec
        last = view.finder
        last_judge = JUDGES.get(last.method) if last is not None else None
        if self.last_request is not None:
            default = self.last_request
        elif last is not None and last_judge is not None and last_judge.needs_model:
            # Again as the saved run: the same method, model and judging.
            default = FindRequest(last.method, llm.ModelSpec(last.model, spec.api_base,
                                                             spec.mode), last.judge_all)
        else:
            default = FindRequest(default_judge(trace.task), spec)

        def chosen(request: FindRequest | None) -> None:
            if request is not None:
                judge = JUDGES.get(request.method)
                # A judge with no model (the task verifier) is asked as its own ("verifier"):
                # the next dialog offers the model and judging the dialog had, not that.
                self.last_request = request if judge is None or judge.needs_model else \
                    replace(request, spec=default.spec, judge_all=default.judge_all)
                self.find(request)

        view.app.push_screen(FindScreen(judges_for(trace.task), default,
                                        offline=trace.task.is_paper), chosen)

    def find(self, request: FindRequest) -> None:
        self.view.run_worker(self._find(request), name="find", group="find", exclusive=True,
                             exit_on_error=False, description="Mistake finding")

    async def _find(self, request: FindRequest) -> None:
        view = self.view
        trace = view.trace
        steps = list(trace.steps)
        if not steps or view.running:
            return
        session = trace.session
        view.collapse_answers()
        shown = FinderShown(request.method, request.spec.model, request.judge_all, steps[-1].id)
        self.follow = True
        self.retrying = ""
        view.finding = True
        view.finder = shown
        stopped = False
        try:
            if not llm.is_loaded() and JUDGES[request.method].needs_model:
                view.say("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            self._say_progress()
            async for event in record_find(
                trace.store, session.id, trace.task, request.method, session.input,
                [step.text for step in steps], request.spec, leaf_step_id=steps[-1].id,
                settings=view.context.config.finder_settings(), judge_all=request.judge_all,
                on_retry=self._retried,
            ):
                self._on_event(shown, event)
        except llm.LLMError as error:
            self._failed(shown, error.message)
        except asyncio.CancelledError:
            stopped = True
            shown.state = "stopped"
            view.say("Stopped the mistake finder. Its answers so far are saved; the run has "
                     "no result.")
            raise
        except Exception:
            shown.state = "failed"
            raise  # the app's handler says what it was
        finally:
            if view.is_attached:
                view.finding = False
                view.finder = view.finder  # shown as it ended
                if stopped:
                    # An answer being saved as it was stopped is saved all the same: show
                    # what the store has.
                    self.load()

    def _on_event(self, shown: FinderShown, event: object) -> None:
        view = self.view
        self.retrying = ""  # the call that was retried has answered
        if isinstance(event, StepJudged):
            shown.verdicts[event.number] = (event.verdict, event.raw)
            view.post_message(CallsMade(event.call))
            self._say_progress()
        elif isinstance(event, TraceJudged):
            shown.trace_raw = event.raw
            view.post_message(CallsMade(event.call))
        elif isinstance(event, FindFinished):
            shown.state = "finished"
            shown.mistake_number = event.result.mistake_number
            shown.parsed = event.result.parsed
            view.finder = shown
            if shown.mistake_number is not None and self.follow:
                # To the thought the model faults (unless the reader moved meanwhile), in the
                # middle, the verdicts before it in view too: x agrees with it, e shows why.
                view.select(shown.mistake_number, center=True)
            view.say(self._summary(shown))
            return
        view.finder = shown

    def _retried(self, retry: CallRetried) -> None:
        """A call of the run is being made again: the status line says so until it answers."""
        self.retrying = retry.words()
        self._say_progress()

    def _say_progress(self) -> None:
        view = self.view
        shown = view.finder
        if shown is None or shown.state != "running":
            return
        who = ("The task verifier" if finder_who(shown) == "Verifier"
               else f"The model ({finder_source(shown)})")
        count = len(view.trace.steps)
        retrying = f" {self.retrying}" if self.retrying else ""
        stops = f"  ({view.key('stop')} stops)"
        if not shown.step_level:
            view.say(f"{who} is reading the whole trace…{retrying}{stops}")
            return
        number = shown.next_number
        if number > count:
            return
        view.say(f"{who} is judging Thought {number} of {count}…{retrying}{stops}")
        thought = view.reveal(number) if self.follow else None
        if thought is not None:
            view.thoughts.scroll_to_thought(thought)

    def _summary(self, shown: FinderShown) -> str:
        view = self.view
        if shown.parsed is False and not shown.step_level and shown.trace_raw is not None:
            said = f"unparseable: {one_line(shown.trace_raw, 120)}"
        else:
            said = shown.verdict_text()
        parts = [f"{finder_who(shown)} says: {said}.",
                 agreement_words(shown, view.trace, view.key)]
        show = view.key("show_answer")
        if finder_who(shown) == "Verifier":
            parts.append(f"{show} on a thought shows the verifier's reason.")
        elif shown.step_level and shown.cot:
            parts.append(f"{show} on a thought shows the model's reasoning.")
        elif shown.step_level:
            parts.append(f"{show} on a thought shows the model's answer.")
        else:
            parts.append(f"{show} shows the model's answer.")
        return " ".join(part for part in parts if part)

    def _failed(self, shown: FinderShown, message: str) -> None:
        shown.state = "failed"
        shown.error = message
        message = one_line(message)  # whole: the status line fits it, M shows it all
        saved = len(shown.verdicts)
        kept = (f"The {saved} answer{'s' if saved != 1 else ''} before it "
                f"{'are' if saved != 1 else 'is'} saved; the run has no result." if saved
                else "The run has no result.")
        self.view.say(f"Mistake finding failed: {message.rstrip('.')}.", then=kept, error=True)

    # -- the saved run

    def load(self) -> None:
        """Show the latest finder run on the branch on show, from the store (on resume, after
        a stop, and whenever another branch is shown): a run stays with the branch it judged,
        as a label does, so another branch shows its own run or none."""
        self.view.run_worker(self._load(), name="load_finder", group="finder-load",
                             exclusive=True, exit_on_error=False,
                             description="Reading the finder runs")

    async def _load(self) -> None:
        view = self.view
        trace = view.trace
        runs = await asyncio.to_thread(trace.store.finder_runs, trace.id)
        if view.finding or view.verify_live or not view.is_attached:
            return  # a new run, or the live verifier, is on show
        mine = [run for run in runs
                if run.leaf_step_id is None or trace.place_of(run.leaf_step_id) is not None]
        view.finder = FinderShown.of_run(mine[-1]) if mine else None

    # -- V: the task verifier's live marks

    def toggle_live(self) -> None:
        view = self.view
        task = view.trace.task
        if not task.is_paper:
            view.say(f"The task verifiers check the paper's five tasks; {task.name} is "
                     "yours. f asks a model instead.")
            return
        view.verify_live = not view.verify_live
        if view.verify_live:
            view.say("Live verifier on: the task verifier marks each thought as it finishes "
                     "(✓ ✗ ?; e shows why). V turns it off.")
        else:
            view.say("Live verifier off.")

    def verify_now(self) -> None:
        """The verifier's verdict on every thought so far, shown as a finder's (not saved: f
        with 'Task verifier' saves a run)."""
        self.view.run_worker(self._verify(), name="verify_live", group="verify_live",
                             exclusive=True, exit_on_error=False,
                             description="The live verifier")

    async def _verify(self) -> None:
        view = self.view
        trace = view.trace
        if not trace.steps or view.finding:
            return
        steps = list(trace.steps)
        session = trace.session
        shown = FinderShown(VERIFIER.name, VERIFIER.spec(trace.spec).model, True,
                            steps[-1].id)
        async for event in VERIFIER.events(session.task, session.input,
                                           [step.text for step in steps], trace.spec):
            if isinstance(event, StepJudged):
                # "Cannot judge" has no verdict: shown as an unparsed answer is, ?
                shown.verdicts[event.number] = (event.verdict, event.raw)
            elif isinstance(event, FindFinished):
                shown.mistake_number = event.result.mistake_number
        if not view.verify_live or view.finding:
            return
        shown.state, shown.parsed = "finished", True
        view.finder = shown
