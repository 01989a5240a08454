"""The main screen: one trace view (view.py) under a title bar, over the footer. What is the
screen's own: the title (the session, the model the next step uses, the running totals),
presenter mode (P, for every trace on the screen) and the offline models' pace (p); the
rest, every key that acts on the trace, is the view's."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.content import Content
from textual.reactive import var

from bbm_tui.core import llm
from bbm_tui.core.records import SessionSource
from bbm_tui.core.store import Totals, default_session_name
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.ui.context import context
from bbm_tui.ui.messages import AddModel, SessionMissing
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.screens.trace.messages import TitleChanged
from bbm_tui.ui.screens.trace.view import TRACE_CSS, TraceView
from bbm_tui.ui.text import MUTED, safe_line, styled, totals_forms
from bbm_tui.ui.widgets.chrome import KeysFooter, TitleBar

# The offline models' streaming paces that p goes through, in tokens a second (0: at once).
PACES = (10.0, 30.0, 60.0, 0.0)


class TraceScreen(BbmScreen):
    """A screen on one session: a home screen of the app (ui/context.py, `HomeScreen`)."""

    CSS_PATH = TRACE_CSS
    HELP_TITLE = "the main screen"
    KEYED_WIDGETS = (TraceView,)

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("P", "presenter", "presenter mode", id="presenter_mode", show=False,
                tooltip="Presenter mode on or off: no latency or token lines under the "
                "thoughts, more space between them, for a clean screen in a demo"),
        Binding("p", "pace", "replay pace", id="replay_pace", show=False,
                tooltip="The offline models' streaming pace: 10, 30, 60 tokens a second, or "
                "instant (BBM_TUI_REPLAY_TPS sets it at start)"),
        Binding("m", "add_model", "add model", id="add_model", show=False,
                tooltip="Another model on the same question, side by side: this trace "
                "becomes the first column, the new model the second"),
    ]

    # For every trace view on the screen (bound to theirs).
    presenter: var[bool] = var(False, init=False, toggle_class="-presenter")

    def __init__(self, trace: TraceSession, totals: Totals | None) -> None:
        """`totals`: the session's calls so far; None: the view reads them after its first
        frame (a big session's, host.py `totals_later`)."""
        super().__init__(classes="trace-screen")
        self._view = TraceView(trace, totals, id="trace")

    @property
    def view(self) -> TraceView:
        """The trace on show."""
        return self._view

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        yield self._view.data_bind(TraceScreen.presenter)
        # The palette (ctrl+p) is listed in the help screen; the footer needs the room.
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        # The view's keys act while it has the focus: from the first key on (Textual's own
        # focus on a new screen comes later, and a key before it would reach no binding).
        self.set_focus(self._view, scroll_visible=False)
        # Presenter mode stays on from one session to the next (a demo goes through several).
        self.presenter = context(self).presenter
        self.show_title()

    def on_screen_resume(self) -> None:
        if self._view.trace.id in context(self).deleted_sessions:
            self.post_message(SessionMissing(self))

    # -- the home screen's part (ui/context.py, HomeScreen)

    @property
    def home_task(self) -> str | None:
        return self._view.trace.session.task

    def shows_session(self, session_id: int) -> bool:
        return self._view.trace.id == session_id

    def session_renamed(self, session_id: int) -> None:
        if self.shows_session(session_id):
            self._view.reload_session()

    def stop_work(self) -> None:
        self.workers.cancel_node(self)
        self.workers.cancel_node(self._view)

    # -- the title

    def on_title_changed(self, message: TitleChanged) -> None:
        message.stop()
        self.show_title()

    def show_title(self) -> None:
        trace, totals = self._view.trace, self._view.totals
        session = trace.session
        # A question of the dataset by its number; else typed in the app, or read from a
        # file (import, an annotation queue, run or backtrack --input), never "typed" then.
        where = (f"#{session.dataset_index}" if session.dataset_index is not None
                 else "typed" if session.source == SessionSource.APP else "from a file")
        # "bbm-tui — word_sorting #3 — replay/bbm". Each run of one style ends with its space
        # and none starts with one: librsvg drops a run's leading spaces in screenshots.
        what = Content.assemble(
            (f"{session.task} ", "bold $accent"), f"{where} ", ("— ", MUTED),
            # The model the next step will use (the model dialog, or backtracking's hand-over
            # from replay/bbm, may have changed it since the session's first step).
            safe_line(trace.spec.model, 40),
        )
        model_end = what.cell_length
        if session.name != default_session_name(session.task, session.dataset_index,
                                                 session.input):
            what = (what.append(" ").append(styled("— ", MUTED))
                    .append(safe_line(session.name, 40)))
        app_name = Content.assemble(("bbm-tui ", "bold"), ("— ", MUTED))
        title = self.query_one("#title-bar", TitleBar)
        # Narrow, the app's name goes first, then the figures shorten, so that the model stays
        # whole.
        title.set_left(app_name + what, what, keep=model_end)
        # Nothing until a big session's totals are read (just after the first frame).
        title.set_right(*(Content(form) for form in totals_forms(totals)
                          if self._view.totals_known))

    # -- m: another model beside this one (the session goes side by side)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "add_model":  # not while this trace is being generated or judged
            return None if self._view.running or self._view.finding else True
        return True

    def action_add_model(self) -> None:
        from bbm_tui.ui.dialogs import ModelChoice, ModelScreen

        trace = self._view.trace

        def chosen(choice: ModelChoice | None) -> None:
            if choice is not None and not (self._view.running or self._view.finding):
                self.post_message(AddModel(trace, choice.spec))

        # The offline pair is the likeliest: the solver beside the replay.
        spec = llm.ModelSpec("solver/bbm") if trace.spec.model != "solver/bbm" else trace.spec
        self.app.push_screen(ModelScreen(spec, context(self).stepper_settings,
                                         "Another model beside this one"), chosen)

    # -- presenter mode (P) and the offline models' pace (p)

    def action_presenter(self) -> None:
        self.presenter = not self.presenter
        context(self).presenter = self.presenter
        self._view.say("Presenter mode: on. P turns it off." if self.presenter
                       else "Presenter mode: off.")

    def action_pace(self) -> None:
        now = llm.replay_pace()
        later = [pace for pace in PACES if pace and pace > now]
        chosen = later[0] if now and later else (0.0 if now else PACES[0])
        llm.set_replay_pace(chosen)
        self._view.say("The offline models now stream " + (
            "at once." if chosen == 0 else f"{chosen:.0f} tokens a second.") + " p changes it.")
