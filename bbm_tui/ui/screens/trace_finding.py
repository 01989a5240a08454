"""The trace screen's mistake finding (f, e): a model (or the task's verifier) judges the
trace, each answer saved as it arrives and shown beside its thought; the agreement with the
person's label; the raw answer of a thought on demand."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from textual import work
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core import llm
from bbm_tui.core.judging.finders import FindFinished, StepJudged, TraceJudged
from bbm_tui.core.judging.judges import JUDGES, default_judge, judges_for
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.recording import record_find
from bbm_tui.ui.dialogs import FindRequest, FindScreen
from bbm_tui.ui.text import MUTED, safe, styled
from bbm_tui.ui.viewmodels.trace import (
    FinderShown,
    Judgement,
    agreement_words,
    describe_agreement,
    describe_finder,
    finder_source,
)
from bbm_tui.ui.widgets.chrome import LeanStatic

if TYPE_CHECKING:
    from bbm_tui.ui.screens.trace_parts import TraceScreenParts as _TraceScreen
else:
    _TraceScreen = object


class FindingActions(_TraceScreen):
    """Mixed into `TraceScreen` (ui/screens/trace.py), whose state these use: the session
    (`trace`), the finder on show (`finder`), the selection, the status line and the
    thoughts pane."""

    # -- mistake finding (f): a model judges the trace; every answer is saved as it arrives

    def action_find(self) -> None:
        if not self.trace.steps or self.running or self.finding:
            return
        spec = self.trace.spec
        last = self.finder
        last_judge = JUDGES.get(last.method) if last is not None else None
        if self._last_request is not None:
            default = self._last_request  # as asked last time here, api base included
        elif last is not None and last_judge is not None and last_judge.needs_model:
            # Again as the saved run: the same method, model and judging.
            default = FindRequest(last.method, llm.ModelSpec(last.model, spec.api_base,
                                                             spec.mode), last.judge_all)
        else:
            default = FindRequest(default_judge(self.trace.task), spec)
        methods = judges_for(self.trace.task)

        def chosen(request: FindRequest | None) -> None:
            if request is not None:
                self._last_request = request
                self._find(request)

        self.app.push_screen(FindScreen(methods, default, offline=self.trace.task.is_paper),
                             chosen)

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
            if not llm.is_loaded() and JUDGES[request.method].needs_model:
                self._status("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            self._finder_progress()
            async for event in record_find(
                self.trace.store, session.id, self.trace.task, request.method, session.input,
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
                         f"({self._key('stop')} stops)")
            view = self._view(number) if self._find_follow else None
            if view is not None:
                self._thoughts.scroll_to_thought(view)
        else:
            self._status(f"{who} is reading the whole trace…  ({self._key('stop')} stops)")

    def _finder_summary(self, shown: FinderShown) -> str:
        if shown.parsed is False and not shown.step_level and shown.trace_raw is not None:
            said = f"unparseable: {one_line(shown.trace_raw, 120)}"
        else:
            said = shown.verdict_text()
        parts = [f"Model says: {said}.", agreement_words(shown, self.trace, self._key)]
        show = self._key("show_answer")
        if shown.step_level and shown.cot:
            parts.append(f"{show} on a thought shows the model's reasoning.")
        elif shown.step_level:
            parts.append(f"{show} on a thought shows the model's answer.")
        else:
            parts.append(f"{show} shows the model's answer.")
        return " ".join(part for part in parts if part)

    def _find_failed(self, shown: FinderShown, message: str) -> None:
        shown.state = "failed"
        shown.error = message
        message = one_line(message, 400)
        saved = len(shown.verdicts)
        kept = (f"The {saved} answer{'s' if saved != 1 else ''} before it "
                f"{'are' if saved != 1 else 'is'} saved; the run has no result." if saved
                else "The run has no result.")
        self._status(f"Mistake finding failed: {message.rstrip('.')}.", then=kept, error=True)

    @work(exclusive=True, group="finder-load", exit_on_error=False)
    async def _load_finder(self) -> None:
        """The latest finder run on the branch on show, from the store (on resume, after a
        stop, and whenever another branch is shown): a run stays with the branch it judged,
        as a label does, so another branch shows its own run or none."""
        runs = await asyncio.to_thread(self.trace.store.finder_runs, self.trace.id)
        if self.finding or self.verify_live or not self.is_attached:
            return  # a new run, or the live verifier, is on show
        on_branch = {step.id for step in self.trace.steps}
        mine = [run for run in runs
                if run.leaf_step_id is None or run.leaf_step_id in on_branch]
        self.finder = FinderShown.of_run(mine[-1]) if mine else None
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
