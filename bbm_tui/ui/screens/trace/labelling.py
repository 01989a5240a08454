"""A trace view's labels: the person's (x flags the first mistake, c says there is none, u
undoes), saved in a thread one at a time and in the order pressed, and the dataset's gold
label (g), hidden at first so that it does not bias anyone."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from textual.content import Content

from bbm_tui.core.store import Label
from bbm_tui.ui.dialogs import ConfirmScreen
from bbm_tui.ui.screens.trace.host import TraceHost
from bbm_tui.ui.text import safe_line
from bbm_tui.ui.viewmodels.trace import describe_gold, describe_label

if TYPE_CHECKING:
    from bbm_tui.core.dataset import TraceRow


class Labelling:
    """The labels of one trace view. Its store writes take turns (`lock`) with the other
    writes the view makes in the order pressed (showing another branch)."""

    def __init__(self, view: TraceHost) -> None:
        self.view = view
        self.lock = asyncio.Lock()

    # -- x, c, u

    def flag(self) -> None:
        view = self.view
        trace = view.trace
        if not trace.steps:
            view.say("Nothing to flag yet: the trace has no thoughts "
                     f"({view.key('step')} writes one).")
            return
        number = view.selected or 1
        self._label(lambda: trace.flag_mistake(number),
                    f"Thought {number} flagged as the first mistake.")

    def no_mistake(self) -> None:
        view = self.view
        trace = view.trace
        if not trace.steps:
            view.say("Nothing to label yet: the trace has no thoughts "
                     f"({view.key('step')} writes one).")
            return
        if trace.correct is False:
            # A wrong answer with no mistake in the steps is possible, but rare: ask.
            question = Content.assemble(
                "The answer ", ("is wrong", "bold"), " (", safe_line(trace.answer or ""),
                " ≠ ", safe_line(trace.session.target or ""),
                "). Label the trace as having no mistake anyway?",
            )

            def answered(sure: bool | None) -> None:
                if sure:
                    self._mark_no_mistake()

            view.app.push_screen(ConfirmScreen(question, "No mistake"), answered)
            return
        self._mark_no_mistake()

    def _mark_no_mistake(self) -> None:
        self._label(self.view.trace.mark_no_mistake, "Labelled: no mistake in this trace.")

    def undo(self) -> None:
        self._label(self.view.trace.undo_label, None)

    def _label(self, change: Callable[[], Label | None], message: str | None) -> None:
        self.view.run_worker(self._save(change, message), name="label", group="label",
                             exit_on_error=False, description="Saving the label")

    async def _save(self, change: Callable[[], Label | None], message: str | None) -> None:
        view = self.view
        trace = view.trace
        async with self.lock:
            had_label = trace.label is not None
            await asyncio.to_thread(change)
        view.show_label()
        if message is None:
            message = ("Label undone: " + describe_label(trace).plain.removeprefix("Label: ")
                       if had_label else "There is no label to undo.")
        # The status line says it; a toast only while that line reports a run in progress.
        if view.running or view.finding:
            view.notify(message, markup=False, timeout=3)
        else:
            view.say(message)

    async def switch_branch(self, step_id: int) -> None:
        """Make the branch through step `step_id` the one on show, in turn with the labels."""
        async with self.lock:
            await asyncio.to_thread(self.view.trace.switch_to, step_id)

    # -- g: the dataset's gold label

    def load_gold(self) -> None:
        self.view.run_worker(self._load_gold(), name="load_gold", group="gold",
                             exclusive=True, exit_on_error=False,
                             description="Reading the gold label")

    async def _load_gold(self) -> None:
        view = self.view
        session = view.trace.session
        recorded = None
        if session.dataset_index is not None:
            rows = await asyncio.to_thread(_listed_questions, session.task)
            if 0 <= session.dataset_index < len(rows):
                row = rows[session.dataset_index]
                if row.input == session.input:
                    recorded = list(row.steps)
        if view.gold_shown:
            view.show_gold(describe_gold(view.trace, recorded))


def _listed_questions(task_name: str) -> tuple[TraceRow, ...]:
    """The questions listed for a task (the paper's dataset, or a task file's `questions`),
    none where the task or its file is gone: a session's gold label is read from there."""
    from bbm_tui.core.dataset import DatasetError, question_rows
    from bbm_tui.core.tasks import UnknownTaskError

    try:
        return question_rows(task_name)
    except (UnknownTaskError, DatasetError):
        return ()
