"""A trace view's state and the means to show it: the base of `TraceView` (view.py), and all
that its parts (generation.py, labelling.py, finding.py, branching.py, sharing.py) use of it.
The parts hold the view as a `TraceHost`, never as its own class, so that the view imports
them and they never import it (the package's one direction, pyproject.toml).

The state is reactive: setting `running`, `finding`, `finder`, `selected`, `gold_shown`,
`verify_live`, `presenter`, `totals` or `busy_elsewhere` shows it (the view's watchers), and
the ones marked `bindings=True` grey its keys out or back in. A part's workers run on the view
(`run_worker`), so that the view's esc, which cancels its worker groups, stops them too, and
a failure reaches the app's one handler; each worker says what it does (`description`), which
is what the app names when it fails."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from textual.containers import Horizontal
from textual.content import Content
from textual.reactive import var

from bbm_tui.core.store import SessionBusy, Totals
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.ui.context import AppContext, context
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.trace.messages import BranchShown, TitleChanged
from bbm_tui.ui.screens.trace.question_pane import QuestionPane
from bbm_tui.ui.viewmodels.thinking import thoughts_title
from bbm_tui.ui.viewmodels.trace import FinderShown, Judgement, describe_label, statuses
from bbm_tui.ui.widgets.chrome import StatusLine
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import ThoughtList

# A branch longer than this has its session's totals read after the first frame: every call
# of the session summed takes SQLite 57 ms on 10^5 steps, on the way to the first frame (the
# big session opened at 1.8x the small one's time, bench/big_store.py); a small session's
# are read before it, so that its title never shows without them.
TOTALS_LATER_FROM_STEPS = 5_000


def totals_later(trace: TraceSession) -> bool:
    """Whether the trace's view reads its totals itself, after its first frame."""
    return len(trace.steps) > TOTALS_LATER_FROM_STEPS


class TraceHost(Horizontal, can_focus=True):
    """One trace on show. `trace`: its session (the branch on show, its store, its model);
    `totals`: its calls, tokens and cost so far (kept in step with each call, not read
    again)."""

    # Generating: a step, a run, a backtrack's branch, a rewrite's.
    running: var[bool] = var(False, init=False, bindings=True, toggle_class="-running")
    # A mistake finder judging the trace.
    finding: var[bool] = var(False, init=False, bindings=True, toggle_class="-finding")
    # The thought the keys act on (0: none yet).
    selected: var[int] = var(0, init=False)
    # The finder run on show (None: none yet); set again after a change to show it.
    finder: var[FinderShown | None] = var(None, init=False, always_update=True, bindings=True)
    # The dataset's gold label on show (hidden at first, so that it does not bias anyone).
    gold_shown: var[bool] = var(False, init=False)
    # The task verifier marks each thought as it finishes (config: verify_live; V).
    verify_live: var[bool] = var(False, init=False)
    # No latency or token lines, more room between thoughts (a screen's presenter mode).
    presenter: var[bool] = var(False, init=False, toggle_class="-presenter")
    # The session's calls, tokens and cost so far.
    totals: var[Totals] = var(Totals(0, 0, 0, 0.0), init=False)
    # Another bbm-tui generating the session (None: none): read-only here meanwhile.
    busy_elsewhere: var[SessionBusy | None] = var(None, init=False, bindings=True,
                                                  toggle_class="-read-only")

    def __init__(self, trace: TraceSession, totals: Totals | None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace
        # None: not read yet, the view reads them after its first frame (`totals_later`).
        self.totals_known = totals is not None
        self.set_reactive(TraceHost.totals, totals or Totals(0, 0, 0, 0.0))
        # On resume, start at the flagged mistake: that is what a reviewer looks at first.
        self.set_reactive(TraceHost.selected,
                          trace.mistake_number or (1 if trace.steps else 0))
        # The trace-level finder's answer open under its verdict (e).
        self.finder_answer_open = False
        # The selection follows new thoughts until the reader moves it (and again once they
        # go back to the last thought).
        self._moved = False
        # Called when a streaming thought takes a line more: a screen that lines several
        # traces up (side by side) levels them in the same frame, not in a layout of its own.
        self.on_thought_grew: Callable[[], None] | None = None
        # The thoughts pane has a title of its own (not in a column side by side).
        self.thoughts_titled = True

    @property
    def context(self) -> AppContext:
        """The app, as a screen may use it."""
        return context(self)

    def show_title(self) -> None:
        """Tell the screen that what the title shows changed (the model the next step uses,
        the totals, the session's name)."""
        self.post_message(TitleChanged(self))

    # -- what is on show

    @property
    def question_pane(self) -> QuestionPane:
        return self.query_one(QuestionPane)

    @property
    def thoughts(self) -> ThoughtList:
        return self.query_one("#thoughts", ThoughtList)

    def views(self) -> list[ThoughtView]:
        """The finished thoughts on show, in order (a window of the trace; a thought still
        streaming is not one of them)."""
        return self.thoughts.views()

    def _all_views(self) -> list[ThoughtView]:
        streaming = self.thoughts.streaming
        return [*self.views(), *([streaming] if streaming is not None else [])]

    def reveal(self, number: int) -> ThoughtView | None:
        """Thought `number`'s view, bringing it into the window."""
        return self.thoughts.reveal(number)

    def show_label(self) -> None:
        """Glyphs and dimming for the label in force."""
        self._set_statuses(self.views())
        self.question_pane.show_label(self.finder)

    def show_gold(self, gold: Content | None) -> None:
        self.question_pane.show_gold(gold)

    def _set_statuses(self, views: list[ThoughtView]) -> None:
        shown = statuses(self.trace)
        for view in views:
            if view.number <= len(shown):
                view.set_status(shown[view.number - 1])

    def _decorate(self, views: list[ThoughtView]) -> None:
        """Thoughts entering the window: their status, the finder's mark, the selection and
        presenter mode, as the ones already on show have them."""
        self._set_statuses(views)
        marks = self._finder_marks()
        for view in views:
            judgement, raw = marks.get(view.number, (None, None))
            view.set_judgement(judgement, raw)
            view.set_class(view.number == self.selected and not view.streaming, "-selected")
            view.set_presenter(self.presenter)

    def _finder_marks(self) -> dict[int, tuple[Judgement, str | None]]:
        """The finder's mark on each thought it judged, if its run was on this branch."""
        shown = self.finder
        if shown is None:
            return {}
        on_branch = (shown.leaf_step_id is None
                     or self.trace.place_of(shown.leaf_step_id) is not None)
        return shown.judgements(len(self.trace.steps)) if on_branch else {}

    def _show_finder(self) -> None:
        """The finder's marks on the thoughts, its verdict and the agreement on the left."""
        marks = self._finder_marks()
        for view in self.views():
            judgement, raw = marks.get(view.number, (None, None))
            view.set_judgement(judgement, raw)
        self.question_pane.show_finder(self.finder, answer_open=self.finder_answer_open)

    def collapse_answers(self) -> None:
        """Hide every finder's answer open under a thought or its verdict (e)."""
        for view in self.views():
            view.set_expanded(False)
        self.finder_answer_open = False

    def key(self, binding_id: str) -> str:
        """The key bound to `binding_id` now (the user's keymap applied), for a hint."""
        return key_for(self, binding_id)

    def say_stopped(self) -> None:
        self.say("Stopped. The thought being generated was dropped; "
                 f"{self.key('step')} or {self.key('run')} goes on.")

    def next_hint(self) -> str:
        return f"{self.key('step')} for the next one, {self.key('run')} to run to the answer."

    def label_hint(self) -> str:
        """What to do next about the label: give one, or (once given) how to take it back."""
        if self.trace.label is None:
            return (f"Label the trace: {self.key('flag_mistake')} flags the first mistake, "
                    f"{self.key('no_mistake')} says there is none.")
        said = describe_label(self.trace).plain.removeprefix("Label: ")
        return (f"Labelled: {said}; {self.key('undo_label')} undoes it, "
                f"{self.key('find_mistake')} asks a model.")

    def say(self, message: str, *, error: bool = False, then: str = "") -> None:
        """Say what happened (`message`, cut with an ellipsis if the lines are too few) and
        what to do next (`then`, never cut)."""
        self.query_one("#run-status", StatusLine).say(message, then, error=error)

    # -- the selection

    def select(self, number: int, *, center: bool = False) -> None:
        self.selected = min(max(number, 1), len(self.trace.steps))
        view = self.reveal(self.selected)
        if view is not None:
            self.thoughts.scroll_to_thought(view, center=center)

    def _show_selection(self, *, scroll: bool = False) -> ThoughtView | None:
        view = self.reveal(self.selected)  # into the window first
        for shown in self.views():
            # Only the rows it leaves and the row it comes to (a class set checks its name
            # every time, forty views twice a thought finished).
            selected = shown.number == self.selected
            if shown.has_class("-selected") != selected:
                shown.set_class(selected, "-selected")
        if scroll and view is not None:
            self.thoughts.scroll_to_thought(view)
        return view

    def show_answer(self) -> None:
        self.question_pane.show_answer()

    def show_thoughts_title(self) -> None:
        """The thoughts pane's title: a thinking trace says what its steps are cut from (a
        summary says "summary") and by which rule. In a column of models side by side the
        column's border says it (model_column.py), which the screen redraws on TitleChanged."""
        if self.thoughts_titled:
            rule = self.context.stepper_settings.split
            set_panel_title(self.query_one("#thoughts-pane"), thoughts_title(self.trace, rule))
        elif self.trace.spec.mode == "thinking":
            self.post_message(TitleChanged(self))

    def sync_views(self) -> None:
        """Show any committed step that has no view (a commit that finished just as a run was
        stopped), so the view matches the store."""
        self.show_thoughts_title()
        self.thoughts.sync()
        self.show_label()
        self.question_pane.show_answer()
        self._show_finder()
        if self.gold_shown:
            self.load_gold()

    async def show_reloaded(self) -> None:
        """The session was read again from the store (another window saved thoughts): show
        them, the selection following them unless the reader moved it."""
        await self.thoughts.replace_stale()
        self.sync_views()
        if not self._moved:
            self.selected = len(self.trace.steps)
        self._show_selection(scroll=True)

    async def show_branch(self, selected: int, *, follow: bool = False) -> None:
        # Shown once the branch's thoughts are (a stale view must not be revealed first).
        self.set_reactive(TraceHost.selected, min(max(selected, 1), len(self.trace.steps)))
        if follow:
            self._moved = False
        self.post_message(BranchShown())
        await self.thoughts.replace_stale()
        self.sync_views()
        self._show_selection(scroll=True)

    # -- the view's own, with its parts (view.py)

    async def stream(self, events: AsyncIterator[object]) -> None:
        """Show a generation's events as they come (thoughts streaming, finishing, the
        answer, the end), as `r` does."""
        raise NotImplementedError

    def end_generating(self) -> None:
        """A generation ended (finished, failed or stopped): drop the thought still streaming,
        show what the store has, and give the keys back."""
        raise NotImplementedError

    def thought_finished(self, number: int) -> None:
        """Thought `number` was committed and is on show (the selection follows it, the live
        verifier judges it)."""
        raise NotImplementedError

    async def switch_branch(self, step_id: int) -> None:
        """Make the branch through step `step_id` the one on show (a store write, in turn
        with the labels)."""
        raise NotImplementedError

    def read_only(self, busy: SessionBusy) -> None:
        """Another bbm-tui generates the session: read-only here until it stops."""
        raise NotImplementedError

    def load_gold(self) -> None:
        """Read the dataset's gold label and show it."""
        raise NotImplementedError
