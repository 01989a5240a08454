"""The trace view as a widget: two on one screen, each with its own session, its own state and
its own workers, the keys acting on the one that has the focus (what side-by-side models need)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from ui_helpers import SIZE, make_app, palette_commands, recorded_session, thought, wait_for

from bbm_tui.core.store import SessionBusy, Store
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.screens.trace import TraceView
from bbm_tui.ui.screens.trace.view import TRACE_CSS
from bbm_tui.ui.widgets.chrome import KeysFooter


class TwoTraces(BbmScreen):
    """A test screen: two trace views side by side, the left one focused first."""

    CSS_PATH = TRACE_CSS
    DEFAULT_CSS = "TwoTraces TraceView { width: 1fr; }"

    def __init__(self, left: TraceSession, right: TraceSession) -> None:
        super().__init__()
        self.left = TraceView(left, left.totals(), id="left")
        self.right = TraceView(right, right.totals(), id="right")

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield self.left
            yield self.right
        yield KeysFooter()

    def on_mount(self) -> None:
        self.set_focus(self.left)


def status(view: TraceView) -> str:
    return str(view.query_one("#run-status").render())


async def two_traces(pilot, store: Store) -> TwoTraces:
    """The test screen over the app, on a session with no thought (left) and the dataset's
    recorded trace (right)."""
    app = pilot.app
    await app.wait_for_store()
    left = recorded_session(store, steps=[])
    right = recorded_session(store)
    screen = TwoTraces(TraceSession.load(store, left.id), TraceSession.load(store, right.id))
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.left.is_mounted and screen.right.is_mounted
                   and screen.focused is screen.left)
    return screen


def enabled(screen: BbmScreen, key: str) -> bool | None:
    """Whether the key acts now where the focus is (None: not bound there, or hidden)."""
    active = screen.active_bindings.get(key)
    return None if active is None else active.enabled


def screen_is(app, screen: BbmScreen) -> bool:
    return app.screen is screen and screen.is_mounted


async def test_two_trace_views_on_one_screen_each_with_its_own_trace_and_keys(
    store: Store
) -> None:
    """n on the focused (left) view writes a thought to its session only; tab gives the keys
    to the right view, whose j and x move its own selection and flag its own trace; each says
    what happened in its own status line; what each did is in the store, under its session."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await two_traces(pilot, store)
        left, right = screen.left, screen.right
        empty, recorded = left.trace, right.trace
        count = len(recorded.steps)
        assert (left.selected, right.selected) == (0, 1)

        await pilot.press("n")
        await wait_for(pilot, lambda: len(left.trace.steps) == 1 and not left.running,
                       timeout=30)
        assert thought(left, 1).text == left.trace.steps[0].text
        assert len(right.trace.steps) == count and not right.running
        assert left.selected == 1 and left.totals.calls == 1 and right.totals.calls == 0
        assert "1 thought" in status(left) and "1 thought" not in status(right)

        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.focused is right)
        await pilot.press("j", "x")
        await wait_for(pilot, lambda: right.trace.mistake_number == 2)
        assert right.selected == 2 and left.selected == 1
        assert left.trace.label is None
        assert "Thought 2 flagged as the first mistake" in status(right)
        assert "flagged" not in status(left)
        assert thought(right, 2).has_class("-selected")
        assert thought(left, 1).has_class("-selected")
        assert not thought(right, 1).has_class("-selected")

        # Back to the left view: its keys act on its own trace again.
        await pilot.press("shift+tab")
        await wait_for(pilot, lambda: screen.focused is left)
        await pilot.press("c")
        await wait_for(pilot, lambda: left.trace.label is not None)
        assert left.trace.mistake_number is None and right.trace.mistake_number == 2

    assert len(store.steps_of(empty.id)) == 1
    assert store.session(recorded.id).head_step_id == recorded.head_id
    assert TraceSession.load(store, recorded.id).mistake_number == 2
    assert TraceSession.load(store, empty.id).mistake_number is None


async def test_a_views_flags_are_reactive_and_grey_its_own_keys_only(store: Store) -> None:
    """Setting a view's `finding` (as its finder does) marks that view (-finding) and greys
    its n and r, shows its esc, while the other view's keys stay as they were; clearing it
    gives them back. `busy_elsewhere` greys the keys that write steps."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await two_traces(pilot, store)
        left, right = screen.left, screen.right
        assert enabled(screen, "n") and enabled(screen, "escape") is None
        right.finding = True
        await pilot.pause()
        assert right.has_class("-finding") and not left.has_class("-finding")
        assert enabled(screen, "n")  # the focused (left) view is not busy
        right.focus()
        await wait_for(pilot, lambda: enabled(screen, "n") is False)
        assert enabled(screen, "r") is False and enabled(screen, "escape")
        right.finding = False
        await wait_for(pilot, lambda: enabled(screen, "n") is True)
        assert enabled(screen, "escape") is None and not right.has_class("-finding")
        right.busy_elsewhere = SessionBusy(right.trace.id, 1, "elsewhere", here=False)
        await wait_for(pilot, lambda: enabled(screen, "n") is False)
        assert right.has_class("-read-only") and enabled(screen, "x")
        await pilot.press("n")
        await pilot.pause(0.2)
        assert not right.running and store.totals(right.trace.id).calls == 0


async def test_the_palette_runs_a_command_on_the_focused_view(store: Store) -> None:
    """The palette's trace commands are the bindings' (their help the tooltip), and each acts
    on the view that has the focus: "Flag the first mistake" with the right view focused
    flags the right trace, not the left one."""
    from bbm_tui.ui.keys import declared_bindings

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        screen = await two_traces(pilot, store)
        left, right = screen.left, screen.right
        await pilot.press("tab", "j", "j")
        await wait_for(pilot, lambda: screen.focused is right and right.selected == 3)
        tooltips = {binding.id: binding.tooltip for binding in declared_bindings(TraceView)}
        commands = palette_commands(app, screen)
        for binding_id, title in TraceView.PALETTE.items():
            assert commands[title].help == tooltips[binding_id] != "", title
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
        await pilot.press(*"Flag the first mistake")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_for(pilot, lambda: right.trace.mistake_number == 3)
        assert left.trace.label is None and app.screen is screen


class TwoTracesHome(TwoTraces):
    """The test screen as a screen the app stands on: `HomeScreen`, nothing else."""

    HELP_TITLE = "two traces"

    @property
    def home_task(self) -> str | None:
        return self.right.trace.session.task

    def shows_session(self, session_id: int) -> bool:
        return session_id in (self.left.trace.id, self.right.trace.id)

    def session_renamed(self, session_id: int) -> None:
        for view in (self.left, self.right):
            if view.trace.id == session_id:
                view.reload_session()

    def stop_work(self) -> None:
        for view in (self.left, self.right):
            self.workers.cancel_node(view)


async def test_any_screen_can_be_the_apps_home_through_the_protocol(store: Store) -> None:
    """A screen of two traces that implements `HomeScreen` is where the app stands: ctrl+n
    starts a new session on its task over it and esc comes back to it; opening a session it
    shows comes back to it too; its help is titled by its `HELP_TITLE` and lists the focused
    view's keys, its own and the app's."""
    from bbm_tui.ui.context import HomeScreen
    from bbm_tui.ui.dialogs import HelpScreen
    from bbm_tui.ui.screens.new_session import NewSessionScreen
    from bbm_tui.ui.screens.trace import TraceScreen

    word_sorting = recorded_session(store, "word_sorting", 3)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.wait_for_store()
        home = TwoTracesHome(TraceSession.load(store, recorded_session(store).id),
                             TraceSession.load(store, word_sorting.id))
        await app.push_screen(home)
        await wait_for(pilot, lambda: screen_is(app, home) and home.focused is home.left)
        assert isinstance(home, HomeScreen)
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        assert app.screen.task_name == "word_sorting"
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen_is(app, home))
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        app.open_session(word_sorting.id)
        await wait_for(pilot, lambda: screen_is(app, home))
        assert not any(isinstance(screen, TraceScreen) for screen in app.screen_stack)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        title = help_screen.query_one(".dialog-title")
        await wait_for(pilot, lambda: str(title.render()) == "Keys on two traces")
        ids = {row.binding_id for row in help_screen.rows}
        assert {"step", "flag_mistake", "new_session", "help"} <= ids

