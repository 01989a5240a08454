"""Several models on one question, side by side (docs/DESIGN.md §15): one trace view per model
in columns, streaming at once, their thoughts level by number.

Each column is a `TraceView` (ui/screens/trace/) on one model's branch of the session, so that
every key of a single trace acts in the focused column as it does there (x, c, u, f, e, b, w,
< >, t, v, l, y...); its border says the model, its state and what it cost, and under its
thoughts its answer with ✓/✗, its label and a finder's verdict (the view's own facts, less the
question, which is shown once above the columns). The screen's own keys act on every column:
n and r generate in each that has no answer yet, esc stops them all; tab, shift+tab and the
arrows move between columns; m adds a model; P (presenter mode) and p (the offline models'
pace) are for the whole screen. A column that fails says why in its own status line and
leaves the others running.

A thought number sits at one height in every column: each row takes the height of the
tallest of its thoughts in the columns on show, and the focused column leads: the others mount
its window of thought numbers (widgets/thought_list.py) and take its scroll offset, a column
with fewer thoughts keeping the blank of the ones it has not down to the focused one's last (a
gap, not a shift). The focused column keeps no blank of its own, so that following its end, or
its selection, never scrolls it into one. Columns narrower than MIN_COLUMN_WIDTH are not
shown: the others are one key away, and a line says how many.
"""

from __future__ import annotations

import asyncio
from dataclasses import fields, replace
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import ActiveBinding, Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.reactive import var
from textual.timer import Timer
from textual.widgets import Static

from bbm_tui.core import llm
from bbm_tui.core.records import ModelBranchState
from bbm_tui.core.store import Totals
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.trace.session import OtherModelsBranch, TraceSession
from bbm_tui.core.trace.side_by_side import MAX_MODELS, SideBySide
from bbm_tui.ui.compositor import ScrollAfterLayoutCompositor
from bbm_tui.ui.context import context
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import SessionMissing, WorkerFailed
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.screens.model_column import ModelColumn
from bbm_tui.ui.screens.trace.messages import TitleChanged
from bbm_tui.ui.screens.trace.screen import PACES
from bbm_tui.ui.screens.trace.view import TRACE_CSS, TraceView
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import COPY_QUESTION, MUTED, safe_cut, safe_line, styled, totals_forms
from bbm_tui.ui.viewmodels.columns import (
    columns_on_show,
    more_line,
    parting_line,
    row_heights,
)
from bbm_tui.ui.viewmodels.trace import question_text
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar

# From this many rows, the question above the columns shows more lines.
TALL = 36
# While any column streams, its rows are levelled again this often (a streaming thought grows
# a line now and then; levelling on every token would cost a layout per token).
LEVEL_EVERY_S = 0.2


class SideBySideScreen(BbmScreen):
    """A screen on a session of several models: a home screen of the app (ui/context.py,
    `HomeScreen`)."""

    CSS_PATH: ClassVar = [TRACE_CSS, stylesheet("side_by_side")]
    HELP_TITLE = "the side-by-side screen"
    KEYED_WIDGETS = (TraceView,)

    BINDINGS: ClassVar[list[BindingType]] = [
        # Before the focused column's own n, r and esc: on every column.
        Binding("n", "step_all", "step all", id="step", priority=True,
                tooltip="Every column without an answer generates its next thought"),
        Binding("r", "run_all", "run all", id="run", priority=True,
                tooltip="Every column without an answer runs to its answer, at once"),
        Binding("escape", "stop_all", "stop all", id="stop", priority=True,
                tooltip="Stop every column (the thoughts being streamed are dropped)"),
        Binding("tab", "column(1)", "next column", id="next_column", priority=True,
                tooltip="The next model's column: its keys act there (x, c, f, b, e, l...)"),
        Binding("right", "column(1)", "next column", id="next_column_arrow", priority=True,
                show=False, tooltip="The next model's column"),
        Binding("shift+tab", "column(-1)", "previous column", id="previous_column",
                priority=True, show=False, tooltip="The previous model's column"),
        Binding("left,h", "column(-1)", "previous column", id="previous_column_arrow",
                priority=True, show=False, tooltip="The previous model's column"),
        Binding("m", "add_model", "add model", id="add_model",
                tooltip=f"Another model on the question, in a column of its own (at most "
                f"{MAX_MODELS})"),
        Binding("]", "scroll_question(2)", "question ↓", id="question_down", priority=True,
                show=False, tooltip="Scroll the question down"),
        Binding("[", "scroll_question(-2)", "question ↑", id="question_up", priority=True,
                show=False, tooltip="Scroll the question up"),
        Binding("P", "presenter", "presenter mode", id="presenter_mode", show=False,
                tooltip="Presenter mode on or off, in every column: no latency or token "
                "lines under the thoughts, more space between them"),
        Binding("p", "pace", "replay pace", id="replay_pace", show=False,
                tooltip="The offline models' streaming pace: 10, 30, 60 tokens a second, or "
                "instant"),
    ]

    # For every column (given to their views).
    presenter: var[bool] = var(False, init=False, toggle_class="-presenter")

    def __init__(self, race: SideBySide, totals: Totals, *, resume: bool = True) -> None:
        super().__init__(classes="side-by-side")
        # A scroll right after a layout (the columns following a line one of them gained)
        # repaints what it moved, not the whole screen.
        self._compositor = ScrollAfterLayoutCompositor()
        self.race = race
        self.totals_at_start = totals
        self.columns = [ModelColumn(trace, totals, position)
                        for position, trace in enumerate(race.columns)]
        self._first_shown = 0
        self._shown = range(len(self.columns))
        self._focused = 0
        # The columns that were streaming when the session was left: they go on once laid
        # out (read now, before any key could start a run).
        self._resuming = race.resuming() if resume else []
        self._leveller: Timer | None = None
        self._scrolling = False

    # -- layout

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        trace = self.race.columns[0]
        question = Content.assemble(
            safe_cut(question_text(trace.task, trace.session.input), COPY_QUESTION))
        if trace.session.target is not None:
            question = question.append(styled("  Target: ", "bold")).append(
                safe_line(trace.session.target, 60))
        with VerticalScroll(id="sbs-question", can_focus=False):
            yield Static(question, id="sbs-question-text")
        with Horizontal(id="columns"):
            yield from self.columns
        yield LeanStatic(id="sbs-summary")
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        for column in self.columns:
            self._follow_column(column)
        self.presenter = context(self).presenter
        # The focused column's border follows the theme (it is an inline style).
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._show_headers())
        self.set_class(self.size.height >= TALL, "-tall")
        self._place_columns()
        self._set_lead()
        self.set_focus(self.columns[0].view, scroll_visible=False)
        self.show_title()
        self.call_after_refresh(self._after_first_layout)

    def _follow_column(self, column: ModelColumn) -> None:
        """The screen follows the column's runs and scrolling, and gives it presenter mode."""
        column.view.presenter = self.presenter
        column.view.thoughts.on_window_moved = self._window_moved
        # A thought that takes a line more is levelled in the frame that draws it: levelled
        # only by the timer, each line cost the columns a second layout.
        column.view.on_thought_grew = self.level_rows
        self.watch(column.view, "running", self._running_changed, init=False)
        self.watch(column.view.thoughts, "scroll_y", self._scroll_follower(column), init=False)
        # Its scrollbar comes or goes (its thoughts overflow, or no longer): every thought's
        # width changes by the bar's, and with it the lines it wraps to. Levelled only at the
        # end of the runs, a thought that gained a line after the last levelling (the bar
        # came with the last thoughts, laid out after it) left its row unlevel until the
        # next run (seen under load: the columns' Thought 2 a line apart).
        self.watch(column.view.thoughts, "show_vertical_scrollbar", self._widths_changed,
                   init=False)
        # Its facts grow (a finder's verdict) or shrink: every column's facts as tall (the
        # pane's content, its filler included, changes height either way).
        self.watch(column.view.question_pane, "virtual_size", self._facts_changed, init=False)

    def _widths_changed(self) -> None:
        self.call_after_refresh(self.level_rows)

    def _facts_changed(self) -> None:
        self.call_after_refresh(self.level_facts)

    def _scroll_follower(self, column: ModelColumn):
        return lambda: self._scrolled(column)

    def _set_lead(self) -> None:
        """The focused column leads: the others show its window of thought numbers and are
        scrolled with it (widgets/thought_list.py)."""
        lead = self.columns[self._focused].view.thoughts
        lead.follow_lead(None)
        for column in self.columns:
            if column.position != self._focused:
                column.view.thoughts.follow_lead(lead)

    def _window_moved(self) -> None:
        """The focused column's window moved (a jump, new thoughts): the others take it."""
        if self._focused < len(self.columns):
            lead = self.columns[self._focused].view.thoughts
            for column in self.columns:
                if column.position != self._focused:
                    column.view.thoughts.follow_lead(lead)
        self.call_after_refresh(self.level_rows)

    def _after_first_layout(self) -> None:
        self.level_rows()
        self._show_headers()  # their figures fitted to the columns' widths
        for column in self.columns:
            branch = column.trace.model_branch
            if branch is not None and branch.state == ModelBranchState.FAILED \
                    and not column.trace.finished:
                column.view.say(f"Failed: {one_line(branch.error or 'no reason given', 300)}",
                                then=f"{self._key('step')} tries again.", error=True)
        resuming, self._resuming = self._resuming, []
        for column in self.columns:
            if column.trace in resuming and not column.view.running:
                column.view.action_run()

    def on_resize(self) -> None:
        # A tall terminal shows more of the question.
        self.set_class(self.size.height >= TALL, "-tall")
        self._place_columns()
        self.call_after_refresh(self.level_rows)
        self.call_after_refresh(self._show_headers)  # their figures fitted to the new widths

    def _place_columns(self) -> None:
        """Show the columns that fit (the focused one among them), say how many do not."""
        shown = columns_on_show(len(self.columns), self.size.width or 80, self._focused,
                                self._first_shown)
        self._first_shown = shown.start
        for column in self.columns:
            column.display = column.position in shown
        self._shown = shown
        self._show_headers()

    def _show_headers(self) -> None:
        wall_clock = context(self).wall_clock
        for column in self.columns:
            column.show_header(focused=column.position == self._focused,
                               wall_clock=wall_clock)
        self._show_summary()

    def _show_summary(self) -> None:
        """The line under the columns: where the traces part, and the columns not on show."""
        parts = [parting_line([column.trace.texts for column in self.columns]),
                 more_line(self._shown, len(self.columns), self._key("next_column"))]
        line = " · ".join(part for part in parts if part)
        summary = self.query_one("#sbs-summary", LeanStatic)
        summary.display = bool(line)
        summary.show(styled(line, MUTED))

    # -- levelling the rows

    def level_rows(self) -> None:
        """Every column's thoughts level by number (see the module's docstring), then the
        columns scroll to where the focused one is, once laid out so."""
        shown = [column for column in self.columns if column.display]
        rows = row_heights([column.natural_heights() for column in shown])
        gap = 1 if self.presenter else 0
        lead = self.columns[self._focused]
        for column in shown:
            column.level(rows, gap, lead)
        self.level_facts()
        self.call_after_refresh(self._after_levelling)

    def _after_levelling(self) -> None:
        """Laid out level: a streaming column whose rows just overflowed its pane follows its
        end (the levelling, not its own text, can be what made it overflow), and the columns
        scroll with the focused one."""
        for column in self.columns:
            if column.display and column.view.running:
                column.view.thoughts.follow()
        self._scrolled(self.columns[self._focused])

    def level_facts(self) -> None:
        """The facts under every column's thoughts as tall as the tallest, so that the
        thoughts panes keep one height and their rows stay level."""
        shown = [column for column in self.columns if column.display]
        if not shown:
            return
        tallest = max(column.facts_height() for column in shown)
        most = shown[0].view.question_pane.styles.max_height
        if most is not None and most.is_cells:
            tallest = min(tallest, int(most.value))
        for column in shown:
            column.level_facts(tallest)

    def _running_changed(self) -> None:
        self._show_headers()
        self.show_title()
        running = any(column.view.running for column in self.columns)
        if running and self._leveller is None:
            self._leveller = self.set_interval(LEVEL_EVERY_S, self.level_rows)
        elif not running and self._leveller is not None:
            self._leveller.stop()
            self._leveller = None
            # Once more when the last thoughts are laid out: a column's last thoughts are
            # mounted as its run ends (sync_views), and a thought with no width yet is left
            # out of the levelling after this refresh (seen under load: the rows stayed
            # unlevel until the next run).
            self.set_timer(LEVEL_EVERY_S, self.level_rows)
        self.call_after_refresh(self.level_rows)

    def _scrolled(self, column: ModelColumn) -> None:
        """The columns scroll together with the focused one."""
        if self._scrolling or column.position != self._focused:
            return
        y = column.view.thoughts.scroll_y
        self._scrolling = True
        try:
            for other in self.columns:
                # One already there is left alone: a scroll_to, even to where it is, lets go
                # of its anchor, and a column following its end then lagged a line behind
                # the focused one after each line, caught up by a scroll (a frame) of its own.
                if other is not column and other.display and other.view.thoughts.scroll_y != y:
                    other.view.thoughts.scroll_to(y=y, animate=False, immediate=True)
        finally:
            self._scrolling = False

    # -- the home screen's part (ui/context.py, HomeScreen)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """The screen's own keys first (n, r, esc, tab, m: on every column, between them),
        then the focused column's: the footer shows as many as fit, in that order."""
        active = super().active_bindings
        ours = {key: item for key, item in active.items() if item.node is self}
        return {**ours, **{key: item for key, item in active.items() if item.node is not self}}

    @property
    def home_task(self) -> str | None:
        return self.race.session.task

    def shows_session(self, session_id: int) -> bool:
        return self.race.id == session_id

    def session_renamed(self, session_id: int) -> None:
        if self.shows_session(session_id):
            for column in self.columns:
                column.view.reload_session()

    def stop_work(self) -> None:
        self.workers.cancel_node(self)
        for column in self.columns:
            self.workers.cancel_node(column.view)

    def on_screen_resume(self) -> None:
        if self.race.id in context(self).deleted_sessions:
            self.post_message(SessionMissing(self))

    # -- the title and the headers

    def on_title_changed(self, message: TitleChanged) -> None:
        message.stop()
        self._show_headers()
        self.show_title()
        self.call_after_refresh(self.level_rows)

    def session_totals(self) -> Totals:
        """The session's calls so far: those before the screen opened and each column's
        since (a column's view counts the calls it makes on top of the same start)."""
        start = self.totals_at_start
        sums: dict[str, object] = {}
        models = set(start.unpriced_models)
        for field in fields(Totals):
            if field.name == "unpriced_models":
                continue
            base = getattr(start, field.name)
            sums[field.name] = base + sum(getattr(column.view.totals, field.name) - base
                                          for column in self.columns)
        for column in self.columns:
            models.update(column.view.totals.unpriced_models)
        return replace(start, **sums, unpriced_models=tuple(sorted(models)))

    def show_title(self) -> None:
        session = self.race.session
        where = f"#{session.dataset_index}" if session.dataset_index is not None else "typed"
        what = Content.assemble((f"{session.task} ", "bold $accent"), f"{where} ",
                                ("— ", MUTED))
        app_name = Content.assemble(("bbm-tui ", "bold"), ("— ", MUTED))
        long = what + f"{len(self.columns)} models side by side"
        short = what + f"{len(self.columns)} models"
        title = self.query_one("#title-bar", TitleBar)
        title.set_left(app_name + long, long, short, keep=short.cell_length)
        title.set_right(*(Content(form) for form in totals_forms(self.session_totals())))

    # -- keys on every column

    def _key(self, binding_id: str) -> str:
        return key_for(self, binding_id)

    def _waiting(self) -> list[ModelColumn]:
        """The columns that can generate: no run going on, no answer yet, not read-only."""
        return [column for column in self.columns
                if not column.view.running and not column.view.finding
                and not column.trace.finished and column.view.busy_elsewhere is None]

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("step_all", "run_all"):
            return True if self._waiting() else None
        if action == "stop_all":
            return any(column.view.running or column.view.finding for column in self.columns)
        if action == "add_model":
            return True if len(self.columns) < MAX_MODELS else None
        return True

    def action_step_all(self) -> None:
        for column in self._waiting():
            column.view.action_step()

    def action_run_all(self) -> None:
        for column in self._waiting():
            column.view.action_run()

    def action_stop_all(self) -> None:
        stopped = [column for column in self.columns if column.view.running]
        for column in self.columns:
            column.view.action_stop()
        if stopped:
            self._mark_stopped([column.trace for column in stopped])

    def _mark_stopped(self, traces: list[TraceSession]) -> None:
        async def mark() -> None:
            for trace in traces:
                await asyncio.to_thread(trace.mark_stopped)
            self._show_headers()

        self.run_worker(mark(), group="store-write", exit_on_error=False,
                        description="Saving that the models were stopped")

    def action_column(self, delta: int) -> None:
        self.focus_column((self._focused + delta) % len(self.columns))

    def focus_column(self, position: int) -> None:
        """Give the keys to column `position`, keeping the thought number selected."""
        before = self.columns[self._focused].view
        self._focused = position
        self._set_lead()
        column = self.columns[position]
        if column.trace.steps and before.selected:
            column.view.select(before.selected)
        self._place_columns()
        self.set_focus(column.view, scroll_visible=False)
        self.call_after_refresh(self._scrolled, column)
        self.call_after_refresh(self.level_rows)

    def on_descendant_focus(self) -> None:
        """A click in a column gives it the keys too."""
        focused = self.focused
        for column in self.columns:
            if focused is not None and (focused is column.view or column.view in
                                        focused.ancestors):
                if column.position != self._focused:
                    self._focused = column.position
                    self._set_lead()
                    self._show_headers()
                    self.call_after_refresh(self.level_rows)
                return

    def action_scroll_question(self, lines: int) -> None:
        self.query_one("#sbs-question").scroll_relative(y=lines, animate=False)

    # -- m: another model

    def action_add_model(self) -> None:
        if len(self.columns) >= MAX_MODELS:
            return
        from bbm_tui.ui.dialogs import ModelChoice, ModelScreen

        def chosen(choice: ModelChoice | None) -> None:
            if choice is not None:
                self._add_column(choice.spec)

        spec = llm.ModelSpec("solver/bbm") if all(
            column.trace.spec.model != "solver/bbm" for column in self.columns) else \
            self.columns[self._focused].trace.spec
        self.app.push_screen(ModelScreen(spec, context(self).stepper_settings,
                                         "Another model beside these"), chosen)

    def _add_column(self, spec: llm.ModelSpec) -> None:
        async def add() -> None:
            trace = await asyncio.to_thread(self.race.add_model, spec)
            column = ModelColumn(trace, self.totals_at_start, len(self.columns))
            self.columns.append(column)
            await self.query_one("#columns").mount(column)
            self._follow_column(column)
            self.focus_column(column.position)
            # Again once drawn: the screen, coming back from the dialog, gives the focus
            # back to where it was.
            self.call_after_refresh(self.focus_column, column.position)
            self.show_title()
            column.view.say(f"{one_line(spec.model, 60)} joins the question: "
                            f"{self._key('run')} runs every column, "
                            f"{self._key('step')} steps them.")

        self.run_worker(add(), group="add-model", exclusive=True, exit_on_error=False,
                        description="Adding the model")

    # -- a branch of another model, asked for in a column (the tree view's enter)

    def on_worker_failed(self, message: WorkerFailed) -> None:
        error = message.worker.error
        if not isinstance(error, OtherModelsBranch):
            return  # the app says what failed
        message.stop()
        target = next((column for column in self.columns
                       if column.trace.model_branch_id == error.model_branch_id), None)
        if target is None:
            self.notify("That branch belongs to no model of this session.", markup=False)
            return
        self.focus_column(target.position)

        async def show() -> None:
            await target.view.switch_branch(error.leaf_id)
            await target.view.show_branch(len(target.trace.steps), follow=True)

        target.view.run_worker(show(), group="label", exclusive=True, exit_on_error=False,
                               description="Showing the branch")
        target.view.say(f"That branch is {one_line(target.trace.spec.model, 60)}'s: "
                        "on show in its column.")

    # -- presenter mode (P) and the offline models' pace (p), for every column

    def watch_presenter(self, presenter: bool) -> None:
        for column in self.columns:
            column.view.presenter = presenter
        self.call_after_refresh(self.level_rows)

    def action_presenter(self) -> None:
        self.presenter = not self.presenter
        context(self).presenter = self.presenter
        self.columns[self._focused].view.say(
            "Presenter mode: on, in every column. P turns it off." if self.presenter
            else "Presenter mode: off.")

    def action_pace(self) -> None:
        now = llm.replay_pace()
        later = [pace for pace in PACES if pace and pace > now]
        chosen = later[0] if now and later else (0.0 if now else PACES[0])
        llm.set_replay_pace(chosen)
        self.columns[self._focused].view.say("The offline models now stream " + (
            "at once." if chosen == 0 else f"{chosen:.0f} tokens a second.") + " p changes it.")

