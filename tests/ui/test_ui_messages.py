"""The messages screen (issue 34, item 12): every notice, warning and error of the session,
whole and newest first, one key (M) away; the status line may cut a message, the screen never
does."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, steady_frame, wait_for

from bbm_tui.core.llm import ModelSpec
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.dialogs import MessagesScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.chrome import StatusLine


def unknown_trace(store: Store) -> int:
    """A trace replay/bbm does not know: its next step fails with a long reason."""
    trace = TraceSession.create(store, NewTrace("word_sorting", "zebra apple"), ModelSpec())
    trace.load_recorded(["z comes after a.", "Now the list is sorted."])
    return trace.id


async def failed_step_then_a_notice(pilot: Pilot) -> TraceScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen) and app.screen.is_mounted)
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await pilot.press("n")
    await wait_for(pilot, lambda: not screen.view.running
                   and screen.query_one("#run-status").has_class("-error"))
    await pilot.press("Q")  # copies the question: a notice
    await pilot.pause()
    return screen


def messages_text(app) -> str:
    screen = app.screen
    assert isinstance(screen, MessagesScreen)
    return "\n".join(str(widget.render()) for widget in screen.query(".message"))


async def test_a_cut_error_is_whole_on_the_messages_screen_newest_first(store: Store) -> None:
    session_id = unknown_trace(store)
    app = make_app(session_id=session_id)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await failed_step_then_a_notice(pilot)
        shown = str(screen.query_one("#run-status").render())
        assert "…" in shown  # cut at 80x24
        whole = screen.query_one("#run-status", StatusLine).said
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, MessagesScreen))
        text = " ".join(messages_text(app).split())
        assert " ".join(whole.split()) in text
        assert text.index("Copied the question") < text.index("Thought 3 failed")
        assert "error" in text and "notice" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 50)],
                         ids=["80x24", "120x40", "250x50"])
def test_messages_screen(snap_compare, size: tuple[int, int]) -> None:
    with Store.open() as store:
        session_id = unknown_trace(store)

    async def run_before(pilot: Pilot) -> None:
        await failed_step_then_a_notice(pilot)
        pilot.app.clear_notifications()  # the toast is gone; its message is kept
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, MessagesScreen))
        await steady_frame(pilot)

    assert snap_compare(make_app(session_id=session_id), terminal_size=size,
                        run_before=run_before)
