"""The trace view as a widget: two on one screen, each with its own session, its own state and
its own workers, the keys acting on the one that has the focus (what side-by-side models need)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal
from ui_helpers import SIZE, make_app, recorded_session, thought, wait_for

from bbm_tui.core.store import Store
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


async def test_two_trace_views_on_one_screen_each_with_its_own_trace_and_keys(
    store: Store
) -> None:
    """n on the focused (left) view writes a thought to its session only; tab gives the keys
    to the right view, whose j and x move its own selection and flag its own trace; each says
    what happened in its own status line; what each did is in the store, under its session."""
    empty = recorded_session(store, steps=[])
    recorded = recorded_session(store)
    count = len(recorded.steps)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.wait_for_store()
        screen = TwoTraces(TraceSession.load(store, empty.id),
                           TraceSession.load(store, recorded.id))
        await app.push_screen(screen)
        left, right = screen.left, screen.right
        await wait_for(pilot, lambda: left.is_mounted and right.is_mounted
                       and screen.focused is left)
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
