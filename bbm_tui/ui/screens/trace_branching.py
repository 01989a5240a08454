"""The trace screen's branch keys (issue 11): backtracking from a thought (b), a thought
rewritten by hand (w), the versions of a thought (< >), the branch tree (t), two branches side
by side (v) and a thought's tokens (l). Each makes or shows a branch; nothing is overwritten."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, ClassVar

from textual import work

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import SAMPLES
from bbm_tui.core.judging.finders import FindFinished, StepJudged
from bbm_tui.core.judging.judges import VERIFIER
from bbm_tui.core.store import StoredCandidate
from bbm_tui.core.trace.branches import BranchOrigin, Segment, other_branch, segments
from bbm_tui.core.trace.session import BranchMade, SamplesReady
from bbm_tui.core.trace.tree import BranchDiff
from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
from bbm_tui.ui.screens.compare import CompareScreen
from bbm_tui.ui.screens.tokens import TokenScreen
from bbm_tui.ui.text import thoughts
from bbm_tui.ui.viewmodels.branches import origin_words
from bbm_tui.ui.viewmodels.trace import FinderShown
from bbm_tui.ui.widgets.thought import ThoughtView

if TYPE_CHECKING:
    from bbm_tui.ui.screens.trace_parts import TraceScreenParts as _TraceScreen
else:
    _TraceScreen = object


class BranchActions(_TraceScreen):
    """Mixed into `TraceScreen` (ui/screens/trace.py), whose state these use: the session
    (`trace`), the selection, whether a run or a finder is going, the status line and the
    thoughts pane."""

    # -- branches: backtracking (b), a thought rewritten (w), versions of a thought (< >)

    def action_backtrack(self) -> None:
        if self.trace.steps and not (self.running or self.finding):
            self._backtrack(self.trace.mistake_number or self.selected or 1)

    @work(exclusive=True, group="generate", exit_on_error=False)
    async def _backtrack(self, number: int) -> None:
        self._set_running(True)
        # The samples dialog opens at once, its rows filled in as the calls return.
        dialog = CandidatesScreen(number, self.trace.steps[number - 1].text, SAMPLES)
        answer: asyncio.Future[StoredCandidate | None] = (
            asyncio.get_running_loop().create_future())

        def picked(candidate: StoredCandidate | None) -> None:
            if not answer.done():
                answer.set_result(candidate)

        self.app.push_screen(dialog, picked)
        sampling = asyncio.ensure_future(self._sample(number, dialog))
        try:
            await asyncio.wait({sampling, answer}, return_when=asyncio.FIRST_COMPLETED)
            if not sampling.done():  # esc before every sample was in
                await _cancelled(sampling)
                self._status(f"Stopped sampling Thought {number}: the trace is as it was, "
                             "and no sample was saved.")
                return
            try:
                ready = sampling.result()
            except llm.LLMError as error:
                if not answer.done():
                    dialog.dismiss(None)
                self._status(f"Backtracking failed: {error.message}", error=True,
                             then=f"{self._key('trace_edit_model')} changes the model.")
                return
            dialog.all_in(ready)
            candidate = await answer
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
            self._say_stopped()
            raise
        finally:
            await _cancelled(sampling)
            if not answer.done() and dialog.is_current:  # the worker itself was stopped
                dialog.dismiss(None)
            if self.is_attached:
                self._drop_unfinished()
                self._set_running(False)
                self._sync_views()

    async def _sample(self, number: int, dialog: CandidatesScreen) -> SamplesReady:
        """Backtracking's samples, each shown in the dialog as it arrives, all saved once in.
        Raises LLMError."""
        if not llm.is_loaded():
            self._status("Loading the model library…")
            await asyncio.to_thread(llm.warm_up)
        model = self.trace.spec.model
        self._status(f"Sampling Thought {number} {SAMPLES} times at temperature 1…  "
                     "(esc stops)")
        ready = await self.trace.resample(number, settings=self.bbm_app.stepper_settings,
                                          on_sample=dialog.arrived)
        for call in ready.resample.samples.calls:  # saved with the samples
            self._add_call(call)
        if self.trace.spec.model != model:
            self._say_handed_over(model, "backtracking")
        self._status(f"Thought {number}: {len(ready.stored)} samples in and saved.")
        return ready

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
        model = self.trace.spec.model
        try:
            if not llm.is_loaded():
                self._status("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            await self._continue_branch(self.trace.rewrite(
                number, text, settings=self.bbm_app.stepper_settings),
                handed_over_from=model)
        except asyncio.CancelledError:
            self._say_stopped()
            raise
        finally:
            if self.is_attached:
                self._drop_unfinished()
                self._set_running(False)
                self._sync_views()

    async def _continue_branch(self, events: AsyncIterator[object],
                               handed_over_from: str | None = None) -> None:
        """A new branch from Thought k: show it, then stream the rest as `r` does.
        `handed_over_from`: the model before the branch was made, to say so when the session
        went on with another (replay/bbm hands over to solver/bbm)."""
        async for event in events:
            if isinstance(event, BranchMade):
                self.selected = event.step.number
                self._moved = False
                self._load_finder()  # the old branch's run stays with it
                await self._thoughts.replace_stale()
                self._sync_views()
                self._show_selection(scroll=True)
                self._status(f"Thought {event.step.number}: a new version (a new branch; "
                             f"{self._key('previous_version')} and "
                             f"{self._key('next_version')} show the others). Generating…")
                if handed_over_from is not None and handed_over_from != self.trace.spec.model:
                    self._say_handed_over(handed_over_from, "the rewrite")
            else:
                self._on_event(event)

    def _say_handed_over(self, model: str, what: str) -> None:
        """The session went on with another model than `model` (replay/bbm can only repeat
        its recording): a note, and the title names the model now in use."""
        self.notify(f"{model} can only repeat its recorded trace: {what} goes on with "
                    f"{self.trace.spec.model} ({self._key('trace_edit_model')} changes the "
                    "model).", markup=False, timeout=8)
        self._show_title()

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
        self._load_finder()  # this branch's own run, if any
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
        if not self.trace.task.is_paper:
            self._status(f"The task verifiers check the paper's five tasks; "
                         f"{self.trace.task.name} is yours. f asks a model instead.")
            return
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
        steps = list(self.trace.steps)
        session = self.trace.session
        shown = FinderShown(VERIFIER.name, VERIFIER.spec(self.trace.spec).model, True,
                            steps[-1].id)
        async for event in VERIFIER.events(session.task, session.input,
                                           [step.text for step in steps], self.trace.spec):
            if isinstance(event, StepJudged):
                # "Cannot judge" has no verdict: shown as an unparsed answer is, ?
                shown.verdicts[event.number] = (event.verdict, event.raw)
            elif isinstance(event, FindFinished):
                shown.mistake_number = event.result.mistake_number
        if not self.verify_live or self.finding:
            return
        shown.state, shown.parsed = "finished", True
        self.finder = shown
        self._show_finder()

    def action_branch_tree(self) -> None:
        if self.trace.steps:
            self._open_branch_tree()

    @work(exclusive=True, group="compare", exit_on_error=False)
    async def _open_branch_tree(self) -> None:
        def chosen(step_id: int | None) -> None:
            if step_id is not None:
                self._show_branch(step_id)

        roots = segments(self.trace.tree)
        # What each segment that parts from others is (its sampling, its calls' models:
        # read from the store).
        origins = await asyncio.to_thread(self._origins, roots)
        shown = {step.id for step in self.trace.steps}
        await self.app.push_screen(BranchTreeScreen(roots, shown, self.trace.session.target,
                                                    origins, self.trace.task), chosen)

    def _origins(self, roots: list[Segment]) -> dict[int, BranchOrigin | None]:
        found: dict[int, BranchOrigin | None] = {}
        stack = [roots]
        while stack:
            level = stack.pop()
            for segment in level:
                if len(level) > 1:
                    found[segment.steps[0].id] = self.trace.branch_origin(segment.steps)
                stack.append(list(segment.children))
        return found

    @work(exclusive=True, group="label", exit_on_error=False)
    async def _show_branch(self, step_id: int) -> None:
        if self.running or self.finding:
            return
        async with self._label_lock:
            await asyncio.to_thread(self.trace.switch_to, step_id)
        self.selected = min(self.selected or 1, len(self.trace.steps))
        self._load_finder()  # this branch's own run, if any
        await self._thoughts.replace_stale()
        self._sync_views()
        self._show_selection(scroll=True)
        self._status(f"A branch of {thoughts(len(self.trace.steps))} on show.")

    def action_compare(self) -> None:
        steps = self.trace.steps
        other = other_branch(self.trace.tree, steps, self.selected)
        if other is None:
            self._status(f"The session has one branch only: {self._key('backtrack')} "
                         f"backtracks, {self._key('edit_thought')} rewrites a thought.")
            return
        self._open_compare(self.trace.tree.diff(steps[-1].id, other))

    @work(exclusive=True, group="compare", exit_on_error=False)
    async def _open_compare(self, diff: BranchDiff) -> None:
        # What each branch is comes from the store (its sampling, its calls' models).
        left = await asyncio.to_thread(self.trace.branch_origin, diff.left)
        right = await asyncio.to_thread(self.trace.branch_origin, diff.right)
        await self.app.push_screen(CompareScreen(diff, self.trace.session.target,
                                                 origin_words(left), origin_words(right),
                                                 self.trace.task))

    def action_tokens(self) -> None:
        if self.trace.steps:
            self._open_tokens(self.trace.steps[(self.selected or 1) - 1].id)

    @work(exclusive=True, group="tokens", exit_on_error=False)
    async def _open_tokens(self, step_id: int) -> None:
        # The list holds steps without their tokens (big traces): read this one's.
        step = await asyncio.to_thread(self.trace.store.step, step_id)
        await self.app.push_screen(TokenScreen(step))


async def _cancelled(task: asyncio.Future) -> None:
    """Cancel `task` if it is still running and wait until it has stopped."""
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
