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
import gc
import signal
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeGuard, cast

from rich.console import RenderableType
from textual import work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from bbm_tui.core.config import Config
from bbm_tui.core.tasks import task_names
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.types import ModelSpec
from bbm_tui.ui.keys import bindings_as_bound
from bbm_tui.ui.messages import (
    GoBack,
    ModelChosen,
    OpenSession,
    OpenTrace,
    SessionMissing,
    SessionRemoved,
    SessionRenamed,
    WorkerFailed,
)
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import MUTED, styled

if TYPE_CHECKING:
    from bbm_tui.core.annotation.queue import QueuedTrace
    from bbm_tui.core.store import Store, Totals
    from bbm_tui.core.trace.session import TraceSession
    from bbm_tui.ui.dialogs import KeyHelp
    from bbm_tui.ui.screens.trace import TraceScreen


def _trace_screen_class() -> type[TraceScreen]:
    from bbm_tui.ui.screens.trace import TraceScreen

    return TraceScreen


def _is_trace_screen(screen: object) -> TypeGuard[TraceScreen]:
    # Without importing the module: nothing can be one before it was imported.
    module = sys.modules.get("bbm_tui.ui.screens.trace")
    return module is not None and isinstance(screen, module.TraceScreen)


def _is_home_screen(screen: object) -> bool:
    """A screen the app stands on (Esc does not leave it): a trace, or a queue (annotation,
    adjudication: their screens say so with `is_home`)."""
    return _is_trace_screen(screen) or bool(getattr(screen, "is_home", False))

EXIT_OK = 0
EXIT_STORE_FAILED = 1

# What a failed worker was doing, for the notification's title.
_WORKER_TITLES = {
    "_generate": "Generating failed",
    "_label": "Saving the label failed",
    "_start": "Starting the session failed",
    "_load_rows": "Reading the dataset failed",
    "_warm_up": "Loading the model library failed",
    "reload": "Listing the sessions failed",
    "_rename": "Renaming failed",
    "_delete": "Deleting failed",
    "_show_session": "Opening the session failed",
    "_show_question": "Opening the question failed",
    "_show_trace": "Opening the session failed",
    "_find": "Mistake finding failed",
    "_load_finder": "Reading the finder runs failed",
    "_load_gold": "Reading the gold label failed",
    "_export": "Exporting failed",
    "_show_queue": "Opening the queue failed",
    "_read_queue": "Reading the files failed",
    "_run_action": "Saving the annotation failed",
}


@dataclass(frozen=True)
class AnnotateRequest:
    """A queue to open at start: an annotator over traces read already (`bbm-tui annotate`),
    or, with `adjudicate`, the traces the annotators disagree on."""

    annotator: str
    traces: list[QueuedTrace] = field(default_factory=list)
    adjudicate: bool = False
    # The labelling protocol: the paper's, or PRM800K's per-step one.
    protocol: str = "paper"

    def __repr__(self) -> str:
        # Short: a worker's description is built from its arguments' reprs, and the default
        # one of 10^4 traces took over a second (bench/annotate_queue.py).
        what = "adjudicate" if self.adjudicate else f"{len(self.traces)} traces"
        return f"AnnotateRequest({self.annotator!r}, {what})"


class SplashScreen(Screen[None]):
    """The bottom screen while a session given on the command line opens."""

    def compose(self) -> ComposeResult:
        yield Static(styled("bbm-tui · opening…", MUTED), id="splash")


class BbmApp(App[int]):
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
    ]

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
    ) -> None:
        super().__init__()
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
        self._warm = warm_up
        self._early_signals: list[int] = []
        # `bbm-tui annotate` (its files read already) or `bbm-tui adjudicate`.
        self._start_annotate = annotate
        self._after_first_frame: list[Callable[[], None]] = []
        # Task files in the config folder that did not load, each with its message.
        self._task_problems = list(task_problems)

    def get_default_screen(self) -> Screen:
        """The bottom screen: the new-session screen itself (no screen before it to pay
        for), or a line of text while a session given on the command line opens."""
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
        self._handle_termination()
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

    def _handle_termination(self) -> None:
        """SIGTERM (a `kill`, a logout) and SIGHUP (the terminal closed) end the app the way
        `q` does, so that Textual restores the terminal (main screen, mouse off, cursor on)
        instead of the process dying in the alternate screen. Exit codes 143 and 129."""
        loop = asyncio.get_running_loop()
        for signal_number in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal_number, self._terminate, signal_number)
        if self._early_signals:  # one came while the app started: act on it now
            self._terminate(self._early_signals[0])

    @contextlib.contextmanager
    def termination_signals_held(self) -> Iterator[None]:
        """Around `run()`: note a SIGTERM or SIGHUP that comes before on_mount hands them to
        the event loop. The driver puts the terminal in the alternate screen well before
        then, and the default action (dying there) would leave it so."""
        def note(signal_number: int, _frame: object) -> None:
            self._early_signals.append(signal_number)

        numbers = (signal.SIGTERM, signal.SIGHUP)
        previous = {number: signal.signal(number, note) for number in numbers}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

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

    @work(thread=True, group="store", exit_on_error=False)
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

    @work(thread=True, group="warm-up", exit_on_error=False)
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
        error = worker.error
        from bbm_tui.core.llm import LLMError
        from bbm_tui.core.store import SessionBusy, SessionDeleted

        if isinstance(error, SessionDeleted):
            self.session_gone(str(error))
            return
        if isinstance(error, SessionBusy):  # another window is generating the session
            for screen in self.screen_stack:
                trace = getattr(screen, "trace", None)
                if _is_trace_screen(screen) and trace is not None and (
                        trace.id == error.session_id):
                    screen.read_only(error)
            return
        if isinstance(error, LLMError):
            message = error.message  # redacted already
        else:
            # Any exception's text may carry what a provider or a library echoed back.
            from bbm_tui.core.redact import redact

            message = redact(str(error)) or type(error).__name__
        title = _WORKER_TITLES.get(worker.name, "Something failed")
        self.notify(one_line(message, 500), title=title, severity="error", markup=False,
                    timeout=10)

    # -- moving between screens

    def _home_index(self) -> int:
        """Where the app stands: the open trace, else the first new-session screen. Screens
        above it (sessions, a new session over a trace, dialogs) are ones Esc leaves."""
        stack = self.screen_stack
        for index in range(len(stack) - 1, -1, -1):
            if _is_home_screen(stack[index]):
                return index
        return next((index for index, screen in enumerate(stack)
                     if isinstance(screen, NewSessionScreen)), 0)

    async def _pop_to(self, depth: int) -> None:
        """Pop screens until `depth` are left (1 = only the bottom one)."""
        while len(self.screen_stack) > depth:
            await self.pop_screen()

    async def _pop_to_home(self) -> None:
        await self._pop_to(self._home_index() + 1)

    async def _show_instead(self, screen: Screen, depth: int) -> None:
        """Leave `depth` screens on the stack and push `screen` over them, in one frame: the
        screens between are never drawn (a session left behind, the bottom screen flashed
        for a frame on their way out; issue 10, item 9)."""
        with self.batch_update():
            await self._pop_to(depth)
            await self.push_screen(screen)

    def can_leave(self, screen: Screen) -> bool:
        stack = self.screen_stack
        return bool(stack) and stack[-1] is screen and len(stack) - 1 > self._home_index()

    # -- what the screens ask for (ui/messages.py)

    def on_open_trace(self, message: OpenTrace) -> None:
        self.open_trace(message.trace, message.totals)

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
        is saved already, and below it is that screen or the splash."""
        if self.can_leave(screen):
            self.pop_screen()
        elif self.screen is screen and getattr(screen, "is_home", False):
            self._back_to_new_session(screen)

    def open_trace(self, trace: TraceSession, totals: Totals | None = None) -> None:
        """Show a session on the main screen (an app worker: the caller's screen may go)."""
        self._show_trace(trace, totals)

    @work(exclusive=True, group="open", exit_on_error=False)
    async def _show_trace(self, trace: TraceSession, totals: Totals | None) -> None:
        await self._present(trace, totals)

    async def _present(self, trace: TraceSession, totals: Totals | None) -> None:
        if totals is None:
            totals = await asyncio.to_thread(trace.totals)
        if trace.created_now:
            self._fresh_sessions.add(trace.id)
        await self._show_instead(_trace_screen_class()(trace, totals), 1)

    def session_left(self, session_id: int) -> None:
        if session_id in self._fresh_sessions:
            self._drop_if_empty(session_id)

    @work(thread=True, group="store-write", exit_on_error=False)
    def _drop_if_empty(self, session_id: int) -> None:
        if self.store is not None and self.store.delete_session_if_empty(session_id):
            self._fresh_sessions.discard(session_id)

    def open_session(self, session_id: int, given: frozenset[str] = frozenset()) -> None:
        self._show_session(session_id, given)

    @work(exclusive=True, group="open", exit_on_error=False)
    async def _show_session(self, session_id: int, given: frozenset[str]) -> None:
        store = await self.wait_for_store()
        if store is None:
            return
        from bbm_tui.core.store import StoreError
        from bbm_tui.core.trace.session import TraceSession, resumed_spec

        home = self.screen_stack[self._home_index()]
        if _is_trace_screen(home) and home.trace.id == session_id:
            await self._pop_to_home()  # already open underneath
            return
        try:
            trace = await asyncio.to_thread(TraceSession.load, store, session_id)
            totals = await asyncio.to_thread(trace.totals)
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

    @work(exclusive=True, group="open", exit_on_error=False)
    async def _show_question(self, task: str, number: int) -> None:
        """`bbm-tui --task T --question N`: a new session on question N of the dataset."""
        from bbm_tui.core.dataset import DatasetError, question_rows
        from bbm_tui.ui.screens.new_session import create_trace, dataset_request

        store = await self.wait_for_store()
        if store is None:
            return
        if task not in task_names():
            problem = f"Unknown task {task!r}" if task else "--question needs --task"
            self.notify(f"{problem}; the tasks: {', '.join(task_names())}", severity="error",
                        markup=False)
            await self.push_screen(NewSessionScreen(self.config))
            return
        try:
            rows = await asyncio.to_thread(question_rows, task)
        except DatasetError as error:
            rows, problem = (), str(error)
        else:
            problem = (f"{task} has questions 0 to {len(rows) - 1}, not {number}." if rows
                       else f"{task} lists no questions (`questions` in its task file).")
        if not 0 <= number < len(rows):
            self.notify(problem, severity="error", markup=False)
            await self.push_screen(NewSessionScreen(self.config, task=task))
            return
        spec = self.config.model_spec()
        request = dataset_request(task, number, rows[number], spec, recorded=False)
        trace = await asyncio.to_thread(create_trace, store, request)
        await self._present(trace, None)

    @work(exclusive=True, group="open", exit_on_error=False)
    async def session_gone(self, message: str) -> None:
        """The session on show was deleted by another process: say so, stop everything on
        its screen (no more calls), and go to the sessions screen."""
        from bbm_tui.ui.screens.sessions import SessionsScreen

        self.notify(one_line(message, 500), title="The session is gone", severity="error",
                    markup=False, timeout=10)
        for screen in self.screen_stack:
            if _is_trace_screen(screen):
                self.workers.cancel_node(screen)
        with self.batch_update():  # one frame: no flash of the screens on their way out
            await self._pop_to(1)
            if isinstance(self.screen, SplashScreen):
                await self.push_screen(NewSessionScreen(self.config))
            await self.push_screen(SessionsScreen())

    def replace_deleted(self, screen: Screen) -> None:
        """The session on show was deleted from the sessions screen: start afresh."""
        task = screen.trace.session.task if _is_trace_screen(screen) else None
        self._back_to_new_session(screen, task=task)

    def _back_to_new_session(self, screen: Screen, task: str | None = None) -> None:
        """`screen`, on top, gives way to the new-session screen below it (or a new one, where
        the splash is below)."""
        below = self.screen_stack[-2] if len(self.screen_stack) > 1 else None
        if isinstance(below, NewSessionScreen):
            self.pop_screen()
        else:
            self.switch_screen(NewSessionScreen(self.config, task=task))

    # -- annotation queues (issue 12)

    def open_queue(self, request: AnnotateRequest) -> None:
        self._show_queue(request)

    @work(exclusive=True, group="open", exit_on_error=False)
    async def _show_queue(self, request: AnnotateRequest) -> None:
        store = await self.wait_for_store()
        if store is None:
            return
        if request.adjudicate:
            from bbm_tui.core.annotation.adjudication import AdjudicationQueue
            from bbm_tui.ui.screens.adjudicate import AdjudicateScreen

            adjudication = await asyncio.to_thread(AdjudicationQueue.open, store)
            if not adjudication.items:
                self.notify("No trace to adjudicate: the annotators agree everywhere (or "
                            "fewer than two labelled any trace).", markup=False, timeout=8)
                if isinstance(self.screen, SplashScreen):
                    await self.push_screen(NewSessionScreen(self.config))
                return
            await self._pop_to(1)
            await self.push_screen(AdjudicateScreen(adjudication))
            return
        from bbm_tui.core.annotation.queue import AnnotationQueue
        from bbm_tui.ui.screens.annotate import AnnotateScreen, PerStepAnnotateScreen

        queue = await asyncio.to_thread(AnnotationQueue, store, request.annotator,
                                        request.traces, protocol_name=request.protocol)
        await self._pop_to(1)
        screen = PerStepAnnotateScreen if queue.per_step else AnnotateScreen
        await self.push_screen(screen(queue))

    async def action_annotate(self) -> None:
        """From the palette: ask for the files and the annotator, read them, open the queue."""
        from bbm_tui.ui.screens.annotate_dialogs import OpenQueueDialog, QueueRequest

        if self.store_error is not None:
            return

        async def chosen(request: QueueRequest | None) -> None:
            if request is not None:
                self._read_queue(request)

        from bbm_tui.core.types import DEFAULT_ANNOTATOR

        await self.push_screen(OpenQueueDialog(DEFAULT_ANNOTATOR), chosen)

    @work(exclusive=True, group="open", exit_on_error=False)
    async def _read_queue(self, request) -> None:  # QueueRequest
        from bbm_tui.core.annotation.queue import read_queue_file
        from bbm_tui.core.dataset import DatasetError
        from bbm_tui.core.tasks import UnknownTaskError

        try:
            traces = [trace for path in request.paths
                      for trace in await asyncio.to_thread(read_queue_file, Path(path))]
        except (DatasetError, UnknownTaskError) as error:
            self.notify(str(error), title="Cannot annotate", severity="error", markup=False,
                        timeout=10)
            return
        self.open_queue(AnnotateRequest(request.annotator, traces))

    async def action_export(self) -> None:
        """From the palette: every session's labels to a file, as `bbm-tui export` writes it."""
        from bbm_tui.core.annotation.export import FORMATS
        from bbm_tui.ui.screens.annotate_dialogs import ExportDialog, ExportRequest

        if self.store_error is not None:
            return

        def chosen(request: ExportRequest | None) -> None:
            if request is not None:
                self._export(request.fmt, Path(request.path).expanduser())

        await self.push_screen(ExportDialog(FORMATS), chosen)

    @work(thread=True, group="export", exit_on_error=False)
    def _export(self, fmt: str, path: Path) -> None:
        from bbm_tui.core.annotation.export import export_file
        from bbm_tui.core.dataset import DatasetError

        store = self.store
        if store is None:
            return
        try:
            result = export_file(store, fmt, path)
        except DatasetError as error:  # refused: the message names the file and why
            self.call_from_thread(self.notify, str(error), title="Not exported",
                                  severity="error", markup=False, timeout=10)
            return
        except OSError as error:
            self.call_from_thread(self.notify, f"{path}: cannot write: {error.strerror}",
                                  title="Not exported", severity="error", markup=False)
            return
        note = f" ({result.skipped} unlabelled left out)" if result.skipped else ""
        self.call_from_thread(self.notify, f"{result.written} written to {path}{note}",
                              title="Exported", markup=False)

    def action_adjudicate(self) -> None:
        if self.store_error is None:
            self.open_queue(AnnotateRequest("", adjudicate=True))

    def session_renamed(self, session_id: int) -> None:
        for screen in self.screen_stack:
            if _is_trace_screen(screen) and screen.trace.id == session_id:
                screen.reload_session()

    # -- app-wide keys

    async def action_new_session(self) -> None:
        if self.store_error is not None or isinstance(self.screen, NewSessionScreen):
            return
        home = self._home_index()
        base = self.screen_stack[home]
        if isinstance(base, NewSessionScreen):
            await self._pop_to(home + 1)
            return
        task = base.trace.session.task if _is_trace_screen(base) else None
        await self._show_instead(NewSessionScreen(self.config, task=task), home + 1)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
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
        name = {"TraceScreen": "the main screen", "NewSessionScreen": "the new-session screen",
                "SessionsScreen": "the sessions screen",
                "AnnotateScreen": "the annotation queue",
                "AdjudicateScreen": "the adjudication screen"}.get(type(self.screen).__name__,
                                                             "this screen")
        self.push_screen(HelpScreen(self.help_rows(), f"Keys on {name}"))

    def help_rows(self) -> list[KeyHelp]:
        """The keys of the current screen, one row per action, as the keymap has them: those
        greyed or hidden in the footer for now (esc while nothing runs) too. Textual's own
        scrolling and focus keys are left out; quit and the palette stay."""
        from bbm_tui.ui.dialogs import KeyHelp

        keys: dict[str, list[str]] = {}
        names: dict[str, tuple[str, str, str]] = {}
        for binding in self._screen_bindings():
            if binding.id is None and binding.action != "quit":
                continue
            display = self.get_key_display(binding)
            if display not in keys.setdefault(binding.action, []):
                keys[binding.action].append(display)
            if binding.id is not None or binding.action not in names:
                names[binding.action] = (binding.description, binding.tooltip,
                                         binding.id or "")
        rows = [
            KeyHelp(" / ".join(displays), *names[action]) for action, displays in keys.items()
        ]
        if self.ENABLE_COMMAND_PALETTE:
            rows.append(KeyHelp(self.get_key_display(Binding(self.COMMAND_PALETTE_BINDING, "")),
                                "palette", "Every command by name"))
        return rows

    def _screen_bindings(self) -> list[Binding]:
        """Every binding of the current screen, then the app's, as the user's keymap has them
        (the footer hides some for now, e.g. esc while nothing runs: help shows them all).
        Built from the classes' BINDINGS, Textual's public declaration of them."""
        return bindings_as_bound((type(self.screen), type(self)), self.config.keymap)

    # -- the command palette (ctrl+p): the main actions by name

    @work(thread=True, exit_on_error=False)
    def _check_keymap(self) -> None:
        from bbm_tui.ui.keymap import keymap_problems, screen_bindings

        problems = keymap_problems(self.config.keymap, screen_bindings(), self.BINDINGS,
                                   self.config.path)
        if problems:
            self.call_from_thread(self.notify, "\n".join(problems[:5]), title="Keymap",
                                  severity="error", timeout=20, markup=False)

    def action_save_svg(self) -> None:
        """Save a screenshot once the screen has been drawn again: from the palette, the
        screen below has just come back, and its footer recomposes after the next refresh
        (a screenshot taken at once had an empty footer row)."""
        self.call_after_refresh(self.call_after_refresh, self.save_svg_now)

    def save_svg_now(self) -> None:
        folder = screenshot_folder()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(path=str(folder))
        except OSError as error:
            self.notify(f"The screenshot could not be saved in {folder}: {error.strerror}",
                        severity="error", markup=False)
            return
        self.notify(f"Screenshot saved: {path}", markup=False, timeout=6)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # Textual's own "Keys" and "Screenshot" are replaced by ours: one "Keys" entry (the
        # keys as bound, keymap applied) and a screenshot saved where the user's data lives.
        for command in super().get_system_commands(screen):
            if command.title not in ("Keys", "Screenshot"):
                yield command
        yield SystemCommand("Screenshot", "Save an SVG of the screen in the data folder",
                            self.action_save_svg)
        yield SystemCommand("New session", "Pick a task and a question", self.action_new_session)
        yield SystemCommand("Sessions", "Resume, rename or delete a saved session",
                            self.action_sessions)
        yield SystemCommand("Keys", "Every key on this screen", self.action_help)
        yield SystemCommand("Annotate files", "Label dataset-format files with the paper's "
                            "protocol, as one annotator", self.action_annotate)
        yield SystemCommand("Adjudicate", "Settle the traces the annotators disagree on",
                            self.action_adjudicate)
        yield SystemCommand("Export labels", "Every session's labels to a file (JSONL, "
                            "the field's step-level formats, DPO pairs, Markdown, CSV)",
                            self.action_export)
        if _is_trace_screen(screen):
            screen = cast("TraceScreen", screen)
            yield SystemCommand("Step once", "Generate the next thought", screen.action_step)
            yield SystemCommand("Run to the answer", "Generate until the answer",
                                screen.action_run)
            yield SystemCommand("Stop", "Stop generating", screen.action_stop)
            yield SystemCommand("Flag the first mistake", "The selected thought",
                                screen.action_flag)
            yield SystemCommand("No mistake", "Label the trace as correct throughout",
                                screen.action_no_mistake)
            yield SystemCommand("Undo the label", "Withdraw the last label", screen.action_undo)
            yield SystemCommand("Find the mistake", "Ask a model to find the first mistake",
                                screen.action_find)
            yield SystemCommand("Show the model's answer",
                                "The finder's answer on the selected thought",
                                screen.action_reasoning)
            yield SystemCommand("Gold label", "Show or hide the dataset's gold label",
                                screen.action_gold)
            yield SystemCommand("Copy the trace", "As 'Thought N: …' lines",
                                screen.action_copy_trace)
            yield SystemCommand("Backtrack", "Resample the flagged thought and continue from "
                                "the best sample that differs (a new branch)",
                                screen.action_backtrack)
            yield SystemCommand("Rewrite the thought", "Your own version of the selected "
                                "thought; the model goes on from it", screen.action_rewrite)
            yield SystemCommand("Branches", "The tree of the session's branches",
                                screen.action_branch_tree)
            yield SystemCommand("Compare branches", "The branch on show beside another",
                                screen.action_compare)
            yield SystemCommand("Tokens", "The selected thought's tokens by probability",
                                screen.action_tokens)
            yield SystemCommand("Live verifier", "The task verifier marks each new thought",
                                screen.action_verify_live)


def screenshot_folder() -> Path:
    """Screenshots go beside the session store, in the platform's data folder."""
    from bbm_tui.core.store import default_path

    return default_path().parent / "screenshots"


def run_app(
    config: Config,
    task: str | None = None,
    question: int | None = None,
    session_id: int | None = None,
    model_given: frozenset[str] = frozenset(),
    annotate: AnnotateRequest | None = None,
    task_problems: Iterable[str] = (),
) -> int:
    """Run the app; the exit code is non-zero when the session store could not be opened."""
    app = BbmApp(config, task=task, question=question, session_id=session_id,
                 model_given=model_given, annotate=annotate, task_problems=task_problems)
    app.call_after_first_frame(_collect_from_now_on)
    with app.termination_signals_held():
        app.run()
    if app.store_error is not None:
        # Said again once the app's screen is gone, so that the message stays in view.
        from bbm_tui.core.redact import redact
        from bbm_tui.core.textsafe import printable

        print(f"bbm-tui: {printable(redact(app.store_error))}", file=sys.stderr)
        return EXIT_STORE_FAILED
    return app.return_code or EXIT_OK


def _collect_from_now_on() -> None:
    """After the first frame: what the start made (modules, classes, the first screen) is
    moved out of the collector's sight for good (`gc.freeze`), and the collector, paused by
    the command line while the app started, runs again on what is made from now on."""
    gc.freeze()
    gc.enable()
