"""The Textual app: screens, app-wide keys, the store opened off the event loop, and one place
where worker failures become notifications.

Nothing on the way to the first frame imports litellm or reads the dataset: the store opens in
a thread, the dataset is read in a thread when the new-session screen asks for it, and litellm
is imported in a thread once the first frame is on screen (`llm.warm_up`). The other screens,
the dialogs and the store's module are imported when first used, for the same reason: the
first frame pays only for the new-session screen.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from rich.console import RenderableType
from textual import work
from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from bbm_tui.core.config import Config
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.types import ModelSpec
from bbm_tui.ui.compositor import strips_divided_whole_make_no_cycle
from bbm_tui.ui.context import HomeScreen
from bbm_tui.ui.messages import (
    AddModel,
    GoBack,
    ModelChosen,
    OpenModels,
    OpenSession,
    OpenTrace,
    SessionMissing,
    SessionRemoved,
    SessionRenamed,
    WorkerFailed,
)
from bbm_tui.ui.notices import KeepsMessages
from bbm_tui.ui.paint_clock import PaintClock
from bbm_tui.ui.palette import app_commands, help_rows, save_screenshot, screenshot_once_drawn
from bbm_tui.ui.queues import AnnotateRequest, Queues
from bbm_tui.ui.screens.base import SplashScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.served import NOTHING_TO_LEAVE, served_may
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.termination import TerminationSignals
from bbm_tui.ui.text import failure_message, failure_title

if TYPE_CHECKING:
    from bbm_tui.core.store import Store, Totals
    from bbm_tui.core.trace.session import TraceSession
    from bbm_tui.core.trace.side_by_side import SideBySide
    from bbm_tui.ui.dialogs import KeyHelp

EXIT_OK = 0
EXIT_STORE_FAILED = 1


class BbmApp(KeepsMessages):
    """bbm-tui. `wall_clock=False` hides latencies and dates (for screenshots and snapshot
    tests that must not change between runs); `warm_up=False` skips importing litellm in the
    background (tests that never call a model)."""

    CSS_PATH = stylesheet("app")
    TITLE = "bbm-tui"

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "help", id="help", tooltip="Every key, and what it does"),
        Binding("s", "sessions", "sessions", id="sessions",
                tooltip="Saved sessions: resume, rename, delete"),
        Binding("ctrl+n", "new_session", "new", id="new_session", tooltip="Start a new session"),
        Binding("q", "quit", "quit", id="quit", tooltip="Quit (everything finished is saved)"),
        Binding("M", "messages", "messages", id="messages", show=False,
                tooltip="Every notice, warning and error of the session, whole, newest first"),
    ]
    # The command palette's entries for these keys (ui/palette.py).
    PALETTE: ClassVar[dict[str, str]] = {
        "new_session": "New session", "sessions": "Sessions", "help": "Keys",
        "messages": "Messages",
    }

    def __init__(
        self,
        config: Config | None = None,
        *,
        task: str | None = None,
        question: int | None = None,
        session_id: int | None = None,
        model_given: frozenset[str] = frozenset(),
        store_path: Path | None = None,
        warm_up: bool = True,
        wall_clock: bool = True,
        annotate: AnnotateRequest | None = None,
        task_problems: Iterable[str] = (),
        models: Sequence[ModelSpec] = (),
    ) -> None:
        super().__init__()
        strips_divided_whole_make_no_cycle()  # the collector's biggest find while text streams
        self.config = config or Config()
        self.wall_clock = wall_clock
        self.stepper_settings = self.config.stepper_settings()
        # What the new-session screen was last left with, for the next one this run: the
        # model chosen there (None: the config's) and the recorded-trace choice.
        self.chosen_spec: ModelSpec | None = None
        self.recorded_trace = False
        self.store: Store | None = None
        self.store_error: str | None = None
        self.deleted_sessions: set[int] = set()
        self.notes_said: set[str] = set()
        self.presenter = False
        self.paint_clock = PaintClock(self)
        # Sessions made in this run: one left with nothing done in it is deleted (on leaving
        # its screen, and at exit), not left behind in the sessions list.
        self._fresh_sessions: set[int] = set()
        self._panicked = False
        self._store_path = store_path
        self._store_ready = asyncio.Event()
        self._start_task = task
        self._start_question = question
        self._start_session = session_id
        # The model settings typed on the command line ("model", "api_base", "mode"): they
        # apply to the session named by --session, whatever its model (see resumed_spec).
        self._model_given = model_given
        self._signals = TerminationSignals()
        # `bbm-tui annotate` (its files read already) or `bbm-tui adjudicate`.
        self._start_annotate = annotate
        # `bbm-tui serve`'s app in a browser: the signed-in user's screens and nothing else.
        self.served = annotate is not None and annotate.served
        self.served_lead = self.served and annotate is not None and annotate.lead
        self.use_command_palette = not self.served
        # A served app calls no model: litellm (~175 MB, seconds of CPU) is never imported,
        # for each of the team's app processes.
        self._warm = warm_up and not self.served
        self.queues = Queues(self)
        self._after_first_frame: list[Callable[[], None]] = []
        # Task files in the config folder that did not load, each with its message.
        self._task_problems = list(task_problems)
        # `--model A --model B` with --task and --question: the models side by side.
        self._start_models = list(models)

    def get_default_screen(self) -> Screen:
        """The new-session screen, or a line of text while a session given opens."""
        if (self._start_session is None and self._start_question is None
                and self._start_annotate is None):
            return NewSessionScreen(self.config, task=self._start_task)
        return SplashScreen()

    def panic(self, *renderables: RenderableType) -> None:
        # Textual's panic (e.g. its input thread dying) prints the error but leaves the
        # return code unset, so the command would exit 0 after a crash.
        self._panicked = True
        super().panic(*renderables)

    @property
    def return_code(self) -> int | None:
        return 1 if self._panicked else super().return_code

    def call_after_first_frame(self, callback: Callable[[], None]) -> None:
        """Run `callback` once the first frame is on screen (call before `run`)."""
        self._after_first_frame.append(callback)

    def on_mount(self) -> None:
        self._signals.hand_to_loop(self._terminate)
        for callback in self._after_first_frame:
            self.call_after_refresh(callback)
        if self.config.keymap:
            self.set_keymap(self.config.keymap)
            self.call_after_refresh(self._check_keymap)
        # The store opens in a thread, after the first frame: nothing on it needs the store,
        # and the thread would compete with it for the interpreter.
        self.call_after_refresh(self._open_store)
        if self._task_problems:
            self.call_after_refresh(self._say_task_problems)
        if self._start_annotate is not None:
            self.open_queue(self._start_annotate)
        elif self._start_session is not None:
            self.open_session(self._start_session, given=self._model_given)
        elif self._start_question is not None:
            self._show_question(self._start_task or "", self._start_question)
        if self._warm:
            self.call_after_refresh(self._warm_up)

    def termination_signals_held(self) -> contextlib.AbstractContextManager[None]:
        """Around `run()`: a SIGTERM or SIGHUP before it is acted on once it runs."""
        return self._signals.held()

    def _terminate(self, signal_number: int) -> None:
        # After the next refresh: a screen still mounting would fail if the app closed
        # under it (the first screen's on_mount comes after the app's).
        self.call_after_refresh(self.exit, return_code=128 + signal_number)

    def on_unmount(self) -> None:
        if self.store is not None:
            with contextlib.suppress(Exception):
                for session_id in self._fresh_sessions:
                    self.store.delete_session_if_empty(session_id)
            with contextlib.suppress(Exception):
                self.store.close()

    def _say_task_problems(self) -> None:
        count = len(self._task_problems)
        title = "A task file did not load" if count == 1 else f"{count} task files did not load"
        self.notify("\n".join(self._task_problems[:5]) + "\nThe other tasks are listed.",
                    title=title, severity="error", timeout=20, markup=False)

    # -- the store (opened in a thread: it may create folders, migrate, wait on a lock)

    @work(thread=True, group="store", exit_on_error=False, description="Opening the session store")
    def _open_store(self) -> None:
        from bbm_tui.core.store import Store, StoreError

        try:
            store = Store.open(self._store_path)
        except (StoreError, OSError) as error:
            self.call_from_thread(self._store_failed, str(error))
        else:
            self.call_from_thread(self._store_opened, store)

    def _store_opened(self, store: Store) -> None:
        self.store = store
        self._store_ready.set()

    async def _store_failed(self, message: str) -> None:
        self.store_error = message
        self._store_ready.set()
        # On top of whatever is there (popping a screen that is still composing is a race);
        # the app's keys that need the store check `store_error` and do nothing.
        from bbm_tui.ui.dialogs import StoreErrorScreen

        await self.push_screen(StoreErrorScreen(message))

    async def wait_for_store(self) -> Store | None:
        """The store once it is open, or None if it cannot be opened (the error is on show)."""
        await self._store_ready.wait()
        return self.store

    # -- litellm, warmed after the first frame so that the first step does not wait for it

    @work(thread=True, group="warm-up", exit_on_error=False,
          description="Loading the model library")
    def _warm_up(self) -> None:
        from bbm_tui.core import llm

        llm.warm_up()

    # -- worker failures, all in one place

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self._worker_failed(event.worker)

    def on_worker_failed(self, message: WorkerFailed) -> None:
        self._worker_failed(message.worker)

    def _worker_failed(self, worker: Worker) -> None:
        """Say what a worker's error was (the app's own workers' and the screens')."""
        from bbm_tui.core.store import SessionDeleted

        if isinstance(worker.error, SessionDeleted):
            self.session_gone(str(worker.error))
            return
        self.notify(failure_message(worker.error), title=failure_title(worker.description),
                    severity="error", markup=False, timeout=10)

    # -- moving between screens

    def _home_index(self) -> int:
        """Where the app stands: the open trace, else the first new-session screen. Screens
        above it (sessions, a new session over a trace, dialogs) are ones Esc leaves."""
        stack = self.screen_stack
        for index in range(len(stack) - 1, -1, -1):
            if isinstance(stack[index], HomeScreen):
                return index
        return next((index for index, screen in enumerate(stack)
                     if isinstance(screen, NewSessionScreen)), 0)

    async def pop_to(self, depth: int) -> None:
        """Pop screens until `depth` are left (1 = only the bottom one)."""
        while len(self.screen_stack) > depth:
            await self.pop_screen()

    async def _pop_to_home(self) -> None:
        await self.pop_to(self._home_index() + 1)

    async def _show_instead(self, screen: Screen, depth: int) -> None:
        """Leave `depth` screens on the stack and push `screen` over them, in one frame: the
        screens between are never drawn (a session left behind, the bottom screen flashed
        for a frame on their way out; issue 10, item 9)."""
        with self.batch_update():
            await self.pop_to(depth)
            await self.push_screen(screen)

    def can_leave(self, screen: Screen) -> bool:
        stack = self.screen_stack
        return bool(stack) and stack[-1] is screen and len(stack) - 1 > self._home_index()

    # -- what the screens ask for (ui/messages.py)

    def on_open_trace(self, message: OpenTrace) -> None:
        self.open_trace(message.trace, message.totals)

    def on_open_models(self, message: OpenModels) -> None:
        self._show_models(message.race, message.totals)

    def on_add_model(self, message: AddModel) -> None:
        self._add_model(message.trace, message.spec)

    def on_open_session(self, message: OpenSession) -> None:
        self.open_session(message.session_id)

    def on_session_renamed(self, message: SessionRenamed) -> None:
        self.session_renamed(message.session_id)

    def on_model_chosen(self, message: ModelChosen) -> None:
        self.chosen_spec = message.spec
        self.stepper_settings = message.settings

    def on_session_removed(self, message: SessionRemoved) -> None:
        self.deleted_sessions.add(message.session_id)

    def on_go_back(self, message: GoBack) -> None:
        self.leave_screen(message.screen)

    def on_session_missing(self, message: SessionMissing) -> None:
        self.replace_deleted(message.screen)

    def leave_screen(self, screen: Screen) -> None:
        """Esc: back to the screen below, unless this is the one the app stands on. A queue
        (annotation, adjudication) is left for the new-session screen: what was done in it
        is saved already, and below it is that screen or the splash. Served, the user's own
        screen (over the splash) is never left: the lead's adjudication goes back to it."""
        if self.served:
            if self.screen is screen and len(self.screen_stack) > 2:
                self.pop_screen()
            elif self.screen is screen:
                self.notify(NOTHING_TO_LEAVE, markup=False, timeout=5)
            return
        if self.can_leave(screen):
            self.pop_screen()
        elif self.screen is screen and isinstance(screen, HomeScreen):
            self._back_to_new_session(screen)

    def open_trace(self, trace: TraceSession, totals: Totals | None = None) -> None:
        """Show a session on the main screen (an app worker: the caller's screen may go)."""
        self._show_trace(trace, totals)

    @work(exclusive=True, group="open", exit_on_error=False, description="Opening the session")
    async def _show_trace(self, trace: TraceSession, totals: Totals | None) -> None:
        await self._present(trace, totals)

    async def _present(self, trace: TraceSession, totals: Totals | None) -> None:
        from bbm_tui.ui.screens.trace.host import totals_later

        if totals is None and not totals_later(trace):  # else the view reads them itself
            totals = await asyncio.to_thread(trace.totals)
        if trace.created_now:
            self._fresh_sessions.add(trace.id)
        from bbm_tui.ui.screens.trace import TraceScreen

        await self._show_instead(TraceScreen(trace, totals), 1)

    @work(exclusive=True, group="open", exit_on_error=False,
          description="Opening the models side by side")
    async def _show_models(self, race: SideBySide, totals: Totals | None) -> None:
        await self._present_models(race, totals)

    async def _present_models(self, race: SideBySide, totals: Totals | None,
                              *, resume: bool = True) -> None:
        if totals is None:
            totals = await asyncio.to_thread(race.columns[0].totals)
        if race.created_now:
            self._fresh_sessions.add(race.id)
        from bbm_tui.ui.screens.side_by_side import SideBySideScreen

        await self._show_instead(SideBySideScreen(race, totals, resume=resume), 1)

    @work(exclusive=True, group="open", exit_on_error=False, description="Adding the model")
    async def _add_model(self, trace: TraceSession, spec: ModelSpec) -> None:
        """The session on show, given another model: the same session side by side, its
        own trace the first column (no call is made until n or r)."""
        from bbm_tui.core.trace.side_by_side import SideBySide

        race = await asyncio.to_thread(SideBySide.from_trace, trace, spec)
        await self._present_models(race, None, resume=False)

    def session_left(self, session_id: int) -> None:
        if session_id in self._fresh_sessions:
            self._drop_if_empty(session_id)

    @work(thread=True, group="store-write", exit_on_error=False,
          description="Deleting the empty session")
    def _drop_if_empty(self, session_id: int) -> None:
        if self.store is not None and self.store.delete_session_if_empty(session_id):
            self._fresh_sessions.discard(session_id)

    def open_session(self, session_id: int, given: frozenset[str] = frozenset()) -> None:
        self._show_session(session_id, given)

    @work(exclusive=True, group="open", exit_on_error=False, description="Opening the session")
    async def _show_session(self, session_id: int, given: frozenset[str]) -> None:
        store = await self.wait_for_store()
        if store is None:
            return
        from bbm_tui.core.store import StoreError
        from bbm_tui.core.trace.session import TraceSession, resumed_spec

        home = self.screen_stack[self._home_index()]
        if isinstance(home, HomeScreen) and home.shows_session(session_id):
            await self._pop_to_home()  # already open underneath
            return
        try:
            if await asyncio.to_thread(store.model_branches, session_id):
                from bbm_tui.core.trace.side_by_side import SideBySide

                await self._present_models(await asyncio.to_thread(
                    SideBySide.load_resumed, store, session_id, self.configured_spec), None)
                return
            trace = await asyncio.to_thread(TraceSession.load, store, session_id)
            from bbm_tui.ui.screens.trace.host import totals_later

            totals = None if totals_later(trace) else await asyncio.to_thread(trace.totals)
        except StoreError as error:
            self.notify(str(error), title="Cannot open the session", severity="error",
                        markup=False)
            if isinstance(self.screen, SplashScreen):
                await self.push_screen(NewSessionScreen(self.config))
            return
        # Today's settings for the session's model win over the stored ones, as in `run`
        # (the stored api base may be redacted: such a session says it needs it again).
        trace.use_model(resumed_spec(trace.session, self.configured_spec, given))
        await self._present(trace, totals)

    @property
    def configured_spec(self) -> ModelSpec:
        return self.config.model_spec()

    @work(exclusive=True, group="open", exit_on_error=False, description="Opening the question")
    async def _show_question(self, task: str, number: int) -> None:
        """`bbm-tui --task T --question N`: a new session on question N of the dataset."""
        from bbm_tui.ui.screens.new_session import question_trace

        store = await self.wait_for_store()
        if store is None:
            return
        trace = await asyncio.to_thread(question_trace, store, task, number,
                                        self.configured_spec, self._start_models[1:])
        if isinstance(trace, str):
            self.notify(trace, severity="error", markup=False)
            # On the task asked for, if there is one of that name.
            await self.push_screen(NewSessionScreen(self.config, task=task))
            return
        from bbm_tui.core.trace.side_by_side import SideBySide

        if isinstance(trace, SideBySide):
            await self._present_models(trace, None)
        else:
            await self._present(trace, None)

    @work(exclusive=True, group="open", exit_on_error=False,
          description="Leaving the deleted session")
    async def session_gone(self, message: str) -> None:
        """The session on show was deleted elsewhere: say so, stop its calls, show sessions."""
        from bbm_tui.ui.screens.sessions import SessionsScreen

        self.notify(one_line(message, 500), title="The session is gone", severity="error",
                    markup=False, timeout=10)
        for screen in self.screen_stack:
            if isinstance(screen, HomeScreen):
                screen.stop_work()
        with self.batch_update():  # one frame: no flash of the screens on their way out
            await self.pop_to(1)
            if isinstance(self.screen, SplashScreen):
                await self.push_screen(NewSessionScreen(self.config))
            await self.push_screen(SessionsScreen())

    def replace_deleted(self, screen: Screen) -> None:
        """The session on show was deleted from the sessions screen: start afresh."""
        task = screen.home_task if isinstance(screen, HomeScreen) else None
        self._back_to_new_session(screen, task=task)

    def _back_to_new_session(self, screen: Screen, task: str | None = None) -> None:
        """`screen`, on top, gives way to the new-session screen below it (or a new one, where
        the splash is below)."""
        below = self.screen_stack[-2] if len(self.screen_stack) > 1 else None
        if isinstance(below, NewSessionScreen):
            self.pop_screen()
        else:
            self.switch_screen(NewSessionScreen(self.config, task=task))

    # -- annotation queues, adjudication and export (ui/queues.py)

    def open_queue(self, request: AnnotateRequest) -> None:
        self.queues.open(request)

    async def action_annotate(self) -> None:
        """From the palette: ask for the files and the annotator, read them, open the queue."""
        await self.queues.annotate()

    async def action_export(self) -> None:
        """From the palette: every session's labels to a file, as `bbm-tui export` writes it."""
        await self.queues.export()

    async def action_dataset_view(self) -> None:
        from bbm_tui.ui.screens.dataset import open_dataset_view

        await open_dataset_view(self, self._screen_in_view())

    async def action_agreement(self) -> None:
        from bbm_tui.ui.screens.agreement import AgreementScreen

        if self.store_error is None and not isinstance(self.screen, AgreementScreen):
            await self.push_screen(AgreementScreen())

    def action_adjudicate(self) -> None:
        self.queues.adjudicate(served=self.served)

    def session_renamed(self, session_id: int) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, HomeScreen):
                screen.session_renamed(session_id)

    # -- app-wide keys

    async def action_new_session(self) -> None:
        if self.store_error is not None or isinstance(self.screen, NewSessionScreen):
            return
        home = self._home_index()
        base = self.screen_stack[home]
        if isinstance(base, NewSessionScreen):
            await self.pop_to(home + 1)
            return
        task = base.home_task if isinstance(base, HomeScreen) else None
        await self._show_instead(NewSessionScreen(self.config, task=task), home + 1)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.served:
            return served_may(action, lead=self.served_lead)
        # On the sessions screen already, `s` is left out of its Footer.
        return not (action == "sessions" and self._screen_in_view().has_class("sessions"))

    def _screen_in_view(self) -> Screen:
        """The top screen that is not a dialog (a dialog shows the one below it)."""
        return next((screen for screen in reversed(self.screen_stack) if not screen.is_modal),
                    self.screen)

    async def action_sessions(self) -> None:
        from bbm_tui.ui.screens.sessions import SessionsScreen

        if self.store_error is not None or isinstance(self.screen, SessionsScreen):
            return
        await self._show_instead(SessionsScreen(), self._home_index() + 1)

    def action_help(self) -> None:
        from bbm_tui.ui.dialogs import HelpScreen

        if isinstance(self.screen, HelpScreen):
            return
        name = getattr(self.screen, "HELP_TITLE", "this screen")
        self.push_screen(HelpScreen(self.help_rows(), f"Keys on {name}"))

    def help_rows(self) -> list[KeyHelp]:
        """The keys where the focus is, for the help screen (ui/palette.py)."""
        return help_rows(self, self.config.keymap)

    @work(thread=True, exit_on_error=False, description="Checking the keymap")
    def _check_keymap(self) -> None:
        from bbm_tui.ui.keymap import check_keymap

        check_keymap(self)

    def action_save_svg(self) -> None:
        """Save a screenshot once the screen has been drawn again: from the palette, the
        screen below has just come back, and its footer recomposes after the next refresh
        (a screenshot taken at once had an empty footer row)."""
        self.run_worker(screenshot_once_drawn(self), group="screenshot", exit_on_error=False,
                        description="Saving a screenshot")

    def save_svg_now(self) -> None:
        save_screenshot(self)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own "Keys" and "Screenshot" are replaced by ours: one "Keys" entry (the
        # keys as bound, keymap applied) and a screenshot saved where the user's data lives.
        for command in super().get_system_commands(screen):
            if command.title not in ("Keys", "Screenshot"):
                yield command
        yield from app_commands(self, screen)

