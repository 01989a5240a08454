"""A trace view's branch keys: backtracking from a thought (b), a thought rewritten by hand
(w), the versions of a thought (< >), the branch tree (t), two branches side by side (v) and a
thought's tokens (l). Each makes or shows a branch; nothing is overwritten."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import SAMPLES
from bbm_tui.core.llm.prefix import Prefixer, PrefixSettings
from bbm_tui.core.records import SessionSource
from bbm_tui.core.store import StoredCandidate
from bbm_tui.core.trace.branches import BranchOrigin, Segment, other_branch, segments
from bbm_tui.core.trace.session import BranchMade, SamplesReady
from bbm_tui.core.trace.thinking_backtrack import (
    NotContinuable,
    ThinkingSamples,
    continue_thinking,
    prefixer_for,
    resample_thinking,
    thinking_refusal,
)
from bbm_tui.core.trace.tree import BranchDiff
from bbm_tui.core.types import SplitRule
from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
from bbm_tui.ui.screens.compare import CompareScreen
from bbm_tui.ui.screens.tokens import TokenScreen
from bbm_tui.ui.screens.trace.host import TraceHost
from bbm_tui.ui.screens.trace.messages import CallsMade
from bbm_tui.ui.screens.trace.prefixing import chat_template, prefix_settings, say_refused
from bbm_tui.ui.text import thoughts
from bbm_tui.ui.viewmodels.branches import origin_words
from bbm_tui.ui.viewmodels.thinking import NEXT_RULE, RULE_WORDS


@dataclass
class _ThinkingBacktrack:
    """One `b` on a thinking trace: the model going on from prefixes of its reasoning, the
    samples' settings, and the samples once in (what going on from one needs)."""

    prefixer: Prefixer
    settings: PrefixSettings
    samples: ThinkingSamples | None = None


class Branching:
    """The branch keys of one trace view. Backtracking and rewriting generate as `r` does:
    their workers are the view's "generate" group (one at a time, esc stops them), they set
    the view's `running`, and the new branch streams through the view (`stream`)."""

    def __init__(self, view: TraceHost) -> None:
        self.view = view

    def _can_branch(self) -> bool:
        view = self.view
        return bool(view.trace.steps) and not (view.running or view.finding)

    # -- b: backtracking

    def backtrack(self) -> None:
        view = self.view
        if self._can_branch():
            number = view.trace.mistake_number or view.selected or 1
            view.run_worker(self._backtrack(number), name="backtrack", group="generate",
                            exclusive=True, exit_on_error=False, description="Backtracking")

    async def _backtrack(self, number: int) -> None:
        view = self.view
        trace = view.trace
        thinking: _ThinkingBacktrack | None = None
        if await asyncio.to_thread(trace.split_rule) is not None:
            thinking = await self._thinking_backtrack(number)
            if thinking is None:  # refused, said why
                return
        view.running = True
        # The samples dialog opens at once, its rows filled in as the calls return.
        dialog = CandidatesScreen(number, trace.steps[number - 1].text, SAMPLES)
        answer: asyncio.Future[StoredCandidate | None] = (
            asyncio.get_running_loop().create_future())

        def picked(candidate: StoredCandidate | None) -> None:
            if not answer.done():
                answer.set_result(candidate)

        view.app.push_screen(dialog, picked)
        sampling = asyncio.ensure_future(
            self._sample(number, dialog) if thinking is None
            else self._sample_thinking(number, dialog, thinking))
        try:
            await asyncio.wait({sampling, answer}, return_when=asyncio.FIRST_COMPLETED)
            if not sampling.done():  # esc before every sample was in
                await _cancelled(sampling)
                view.say(f"Stopped sampling Thought {number}: the trace is as it was, and no "
                         "sample was saved.")
                return
            try:
                ready = sampling.result()
            except (llm.LLMError, NotContinuable) as error:
                if not answer.done():
                    dialog.dismiss(None)
                message = error.message if isinstance(error, llm.LLMError) else str(error)
                view.say(f"Backtracking failed: {message}", error=True,
                         then=f"{view.key('trace_edit_model')} changes the model.")
                return
            dialog.all_in(ready)
            candidate = await answer
            if ready.resample.chosen is None:
                view.say(f"No sample differs from Thought {number}: the trace is as it was "
                         "(the samples are saved).")
                return
            if candidate is None:
                view.say(f"Kept the trace as it was; the {len(ready.stored)} samples of "
                         f"Thought {number} are saved.")
                return
            if thinking is None:
                events = trace.continue_with(candidate,
                                             settings=view.context.stepper_settings)
            else:
                assert thinking.samples is not None
                events = continue_thinking(trace, thinking.prefixer, thinking.samples,
                                           candidate, thinking.settings)
            await self._continue_branch(events)
        except asyncio.CancelledError:
            view.say_stopped()
            raise
        finally:
            await _cancelled(sampling)
            if not answer.done() and dialog.is_current:  # the worker itself was stopped
                dialog.dismiss(None)
            if thinking is not None:
                await thinking.prefixer.aclose()
            if view.is_attached:
                view.end_generating()

    async def _thinking_backtrack(self, number: int) -> _ThinkingBacktrack | None:
        """What resampling a step of a thinking trace needs: the model going on from a prefix
        of its reasoning (issue 35). None, said before any call, where it cannot: Anthropic,
        OpenAI, Gemini and DeepSeek's API, a summary, a reasoning not yet whole."""
        view = self.view
        trace = view.trace
        if not llm.is_loaded():
            await asyncio.to_thread(llm.warm_up)
        settings = view.context.stepper_settings
        template = chat_template(settings)
        refusal = await asyncio.to_thread(thinking_refusal, trace, template)
        if refusal is not None:
            say_refused(view, f"Thought {number} is not resampled", refusal)
            return None
        # The paper's samples at temperature 1.
        return _ThinkingBacktrack(prefixer_for(trace, template), prefix_settings(settings))

    async def _sample(self, number: int, dialog: CandidatesScreen) -> SamplesReady:
        """Backtracking's samples, each shown in the dialog as it arrives, all saved once in.
        Raises LLMError."""
        view = self.view
        trace = view.trace
        if not llm.is_loaded():
            view.say("Loading the model library…")
            await asyncio.to_thread(llm.warm_up)
        model = trace.spec.model
        view.say(f"Sampling Thought {number} {SAMPLES} times at temperature 1…  (esc stops)")
        ready = await trace.resample(number, settings=view.context.stepper_settings,
                                     on_sample=dialog.arrived)
        view.post_message(CallsMade(*ready.resample.samples.calls))  # saved with the samples
        if trace.spec.model != model:
            self._say_handed_over(model, "backtracking", dialog)
        view.say(f"Thought {number}: {len(ready.stored)} samples in and saved.")
        return ready

    async def _sample_thinking(self, number: int, dialog: CandidatesScreen,
                               thinking: _ThinkingBacktrack) -> SamplesReady:
        """A thinking step's samples, each from the raw reasoning before it, shown in the
        dialog as it arrives, all saved once in. Raises LLMError, NotContinuable."""
        view = self.view
        trace = view.trace
        rule = await asyncio.to_thread(trace.split_rule)
        if dialog.is_attached:
            dialog.show_note(f"Each goes on from the raw reasoning before it, cut by the "
                             f"{rule} rule.")
        view.say(f"Sampling Thought {number} {SAMPLES} times at temperature 1 from the "
                 "reasoning before it…  (esc stops)")
        samples = await resample_thinking(trace, thinking.prefixer, number, thinking.settings,
                                          on_sample=dialog.arrived)
        thinking.samples = samples
        view.post_message(CallsMade(*samples.ready.resample.samples.calls))
        view.say(f"Thought {number}: {len(samples.ready.stored)} samples in and saved.")
        return samples.ready

    # -- I: each thought's importance (a thinking trace; ui/screens/importance.py)

    def importance(self) -> None:
        view = self.view
        if self._can_branch():
            view.run_worker(self._open_importance(), name="importance", group="compare",
                            exclusive=True, exit_on_error=False,
                            description="Opening the importance view")

    async def _open_importance(self) -> None:
        """The importance view of the branch on show, once it is known to be a thinking
        trace whose model can go on from a prefix of its reasoning (said before any call
        otherwise)."""
        from bbm_tui.core.batch.anchors import rollouts_path, session_trace
        from bbm_tui.core.batch.backtrack_thinking import NotAThinkingTrace
        from bbm_tui.ui.screens.importance import ImportanceScreen, ImportanceSource

        view = self.view
        trace = view.trace
        reasoning = await asyncio.to_thread(trace.reasoning)
        rule = await asyncio.to_thread(trace.split_rule)
        if reasoning is None or rule is None:
            view.say("Each thought's importance is measured on a thinking model's trace "
                     "(--mode thinking): this trace's steps are its own calls.")
            return
        if not llm.is_loaded():
            await asyncio.to_thread(llm.warm_up)
        # What `b` on a thinking trace refuses, refused here too, before any call: a model
        # that cannot go on from a prefix, a summary, a reasoning not stored whole yet.
        settings = view.context.stepper_settings
        template = chat_template(settings)
        refusal = await asyncio.to_thread(thinking_refusal, trace, template)
        if refusal is not None:
            say_refused(view, "No thought's importance is measured", refusal)
            return
        session = trace.session
        try:
            anchored = session_trace(session.task, session.input, session.target or "",
                                     trace.answer, reasoning.text, rule)
        except NotAThinkingTrace as error:
            view.say(f"No thought's importance is measured: {error}.", error=True)
            return
        # As the trace's title says it: a question of the dataset by its number, else typed
        # in the app or read from a file.
        where = (f"#{session.dataset_index}" if session.dataset_index is not None
                 else "typed" if session.source == SessionSource.APP else "from a file")
        path = rollouts_path(trace.store.path, trace.id, trace.spec.model)
        prefix = prefix_settings(settings, logprobs=False)
        await view.app.push_screen(ImportanceScreen(ImportanceSource(
            anchored, trace.spec, path, f"{session.task} {where}", prefix, template)))

    # -- w: a thought rewritten by hand

    def rewrite(self) -> None:
        view = self.view
        if self._can_branch():
            view.run_worker(self._rewrite(view.selected or 1), name="rewrite",
                            group="generate", exclusive=True, exit_on_error=False,
                            description="Rewriting the thought")

    async def _rewrite(self, number: int) -> None:
        view = self.view
        trace = view.trace
        text = await view.app.push_screen_wait(
            EditThoughtScreen(number, trace.steps[number - 1].text))
        if text is None:
            return
        view.running = True
        model = trace.spec.model
        try:
            if not llm.is_loaded():
                view.say("Loading the model library…")
                await asyncio.to_thread(llm.warm_up)
            await self._continue_branch(trace.rewrite(
                number, text, settings=view.context.stepper_settings), handed_over_from=model)
        except asyncio.CancelledError:
            view.say_stopped()
            raise
        finally:
            if view.is_attached:
                view.end_generating()

    async def _continue_branch(self, events: AsyncIterator[object],
                               handed_over_from: str | None = None) -> None:
        """A new branch from Thought k: show it, then stream the rest as `r` does.
        `handed_over_from`: the model before the branch was made, to say so when the session
        went on with another (replay/bbm hands over to solver/bbm)."""
        view = self.view

        async def after_the_branch() -> AsyncIterator[object]:
            async for event in events:
                if not isinstance(event, BranchMade):
                    yield event
                    continue
                await view.show_branch(event.step.number, follow=True)
                view.say(f"Thought {event.step.number}: a new version (a new branch; "
                         f"{view.key('previous_version')} and {view.key('next_version')} "
                         "show the others). Generating…")
                if handed_over_from is not None and handed_over_from != view.trace.spec.model:
                    self._say_handed_over(handed_over_from, "the rewrite")

        await view.stream(after_the_branch())

    def _say_handed_over(self, model: str, what: str,
                         dialog: CandidatesScreen | None = None) -> None:
        """The session went on with another model than `model` (replay/bbm can only repeat
        its recording): a note (in the samples' dialog while it is up: a toast covered its
        legend at 80x24), and the title names the model now in use."""
        view = self.view
        now = view.trace.spec.model
        if dialog is not None and dialog.is_attached:
            # One line of the dialog at 80 columns.
            dialog.show_note(f"{now} samples and goes on: {model} can only repeat its "
                             "recording.")
        else:
            view.notify(f"{model} can only repeat its recorded trace: {what} goes on with "
                        f"{now} ({view.key('trace_edit_model')} changes the model).",
                        markup=False, timeout=8)
        view.show_title()

    # -- < >: the versions of a thought

    def version(self, delta: int) -> None:
        view = self.view
        if not self._can_branch():
            return
        number = view.selected or 1
        versions = view.trace.alternatives(number)
        current = next(i for i, step in enumerate(versions)
                       if step.id == view.trace.steps[number - 1].id)
        if len(versions) == 1:
            view.say(f"Thought {number} has one version only.")
            return
        index = (current + delta) % len(versions)
        view.run_worker(self._switch_version(number, versions[index].id, index + 1,
                                             len(versions)),
                        name="switch_version", group="label", exclusive=True,
                        exit_on_error=False, description="Showing the other version")

    async def _switch_version(self, number: int, step_id: int, index: int, count: int) -> None:
        view = self.view
        await view.switch_branch(step_id)
        await view.show_branch(min(number, len(view.trace.steps)))
        view.say(f"Thought {number}: version {index} of {count} "
                 f"({thoughts(len(view.trace.steps))} on this branch).")

    # -- t: the branch tree

    def open_tree(self) -> None:
        if self.view.trace.steps:
            self.view.run_worker(self._open_tree(), name="branch_tree", group="compare",
                                 exclusive=True, exit_on_error=False,
                                 description="Reading the branches")

    async def _open_tree(self) -> None:
        view = self.view
        trace = view.trace

        def chosen(step_id: int | None) -> None:
            if step_id is not None:
                view.run_worker(self._show_branch(step_id), name="show_branch", group="label",
                                exclusive=True, exit_on_error=False,
                                description="Showing the branch")

        # Every step of every branch, read at once (in a thread): the tree shows them all,
        # and a question a step to the store would take seconds on 10^5 of them.
        roots = await asyncio.to_thread(lambda: segments(trace.tree.in_memory()))
        # What each segment that parts from others is (its sampling, its calls' models:
        # read from the store).
        origins = await asyncio.to_thread(self._origins, roots)
        shown = set(trace.steps.ids)
        await view.app.push_screen(BranchTreeScreen(roots, shown, trace.session.target,
                                                    origins, trace.task), chosen)

    def _origins(self, roots: list[Segment]) -> dict[int, BranchOrigin | None]:
        found: dict[int, BranchOrigin | None] = {}
        stack = [roots]
        while stack:
            level = stack.pop()
            for segment in level:
                if len(level) > 1:
                    found[segment.steps[0].id] = self.view.trace.branch_origin(segment.steps)
                stack.append(list(segment.children))
        return found

    async def _show_branch(self, step_id: int) -> None:
        view = self.view
        if view.running or view.finding:
            return
        await view.switch_branch(step_id)
        await view.show_branch(view.selected or 1)
        view.say(f"A branch of {thoughts(len(view.trace.steps))} on show.")

    # -- S: a thinking trace's reasoning cut by another rule (no new call)

    def recut(self) -> None:
        view = self.view
        if view.running or view.finding:
            return
        rule = view.trace.split_rule()
        if rule is None:
            view.say("Only a thinking model's reasoning is cut into steps (--mode thinking): "
                     "this trace's steps are its own calls.")
            return
        view.run_worker(self._recut(NEXT_RULE[rule]), name="recut", group="label",
                        exclusive=True, exit_on_error=False,
                        description="Cutting the reasoning again")

    async def _recut(self, rule: SplitRule) -> None:
        view = self.view
        done = await asyncio.to_thread(view.trace.recut, rule)
        if not done:
            view.say("The reasoning is stored whole when its call ends; cut it again then.")
            return
        await view.show_branch(1)
        view.show_thoughts_title()
        view.say(f"The reasoning cut into {RULE_WORDS[rule]}: {thoughts(len(view.trace.steps))}"
                 f", no new call.", then=f"{view.key('recut_reasoning')} cuts it again.")

    # -- v: two branches side by side

    def compare(self) -> None:
        view = self.view
        steps = view.trace.steps
        other = other_branch(view.trace.tree, steps, view.selected)
        if other is None:
            view.say(f"The session has one branch only: {view.key('backtrack')} backtracks, "
                     f"{view.key('edit_thought')} rewrites a thought.")
            return
        view.run_worker(self._open_compare(view.trace.tree.diff(steps[-1].id, other)),
                        name="compare", group="compare", exclusive=True, exit_on_error=False,
                        description="Comparing the branches")

    async def _open_compare(self, diff: BranchDiff) -> None:
        trace = self.view.trace
        # What each branch is comes from the store (its sampling, its calls' models).
        left = await asyncio.to_thread(trace.branch_origin, diff.left)
        right = await asyncio.to_thread(trace.branch_origin, diff.right)
        await self.view.app.push_screen(CompareScreen(diff, trace.session.target,
                                                      origin_words(left), origin_words(right),
                                                      trace.task))

    # -- l: a thought's tokens

    def open_tokens(self) -> None:
        view = self.view
        if view.trace.steps:
            step_id = view.trace.steps[(view.selected or 1) - 1].id
            view.run_worker(self._open_tokens(step_id), name="tokens", group="tokens",
                            exclusive=True, exit_on_error=False,
                            description="Reading the thought's tokens")

    async def _open_tokens(self, step_id: int) -> None:
        # The list holds steps without their tokens (big traces): read this one's.
        step = await asyncio.to_thread(self.view.trace.store.step, step_id)
        await self.view.app.push_screen(TokenScreen(step))


async def _cancelled(task: asyncio.Future) -> None:
    """Cancel `task` if it is still running and wait until it has stopped."""
    if not task.done():
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
