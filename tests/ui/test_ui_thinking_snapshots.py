"""Snapshots of a thinking trace (issue 32): streaming (finished thoughts above the one still
streaming, held at the server so the frame is always the same), flagged and judged by the
task's verifier, and side by side with a step-at-a-time model; at 80x24, 120x40 and 250x50."""

from __future__ import annotations

from typing import Any, cast

import pytest
from textual.pilot import Pilot
from ui_helpers import footers_current, make_app, steady_frame, still_cursors, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.trace.side_by_side import SideBySide
from bbm_tui.ui.app import BbmApp
from bbm_tui.ui.screens.side_by_side import SideBySideScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.openai_server import FakeOpenAI, Reply

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 50)],
                                ids=["80x24", "120x40", "250x50"])
TASK = "multistep_arithmetic"
QUESTION = 4
THINKING = llm.ModelSpec("solver/thinking", mode="thinking")
REASONING = (
    "Okay, so I need the value of the whole expression. Let me split it into two parts, "
    "A and B, and work each out on its own.\n\n"
    "A = (4 + 2 * 3) = (4 + 6) = 10. That one is easy.\n\n"
    "B = (9 - 5 + 1) = 5. Hmm, 9 - 5 is 4, and 4 + 1 is 5.\n\n"
    "Wait, let me check A again: 2 * 3 is 6, and 4 + 6 is 10. Yes."
)


async def steady_while_streaming(pilot: Pilot, timeout: float = 10.0) -> None:
    """steady_frame's settling, without waiting for the generating worker (held at the
    server while the snapshot is taken)."""
    app = pilot.app
    previous = None
    for _ in range(int(timeout / 0.1)):
        app.clear_notifications()
        still_cursors(pilot)
        await pilot.pause(0.1)
        frame = app.export_screenshot()
        if frame == previous and footers_current(cast(BbmApp, app)):
            return
        previous = frame
    raise AssertionError("the screen never settled (it kept changing)")


def top(column: Any, number: int) -> int | None:
    """The screen row Thought `number` starts on in a column (None: not mounted)."""
    view = column.view.thoughts.view(number)
    return None if view is None else view.region.y


def thinking_trace(store: Store) -> TraceSession:
    row = bundled_rows(TASK)[QUESTION]
    return TraceSession.create(store, NewTrace(TASK, row.input, row.target, QUESTION),
                               THINKING)


@SIZES
def test_a_thinking_trace_streaming(snap_compare, openai_server: FakeOpenAI,
                                    size: tuple[int, int]) -> None:
    """Three thoughts finished, the fourth streaming: the stream stalls there (the server
    holds it past the snapshot)."""
    openai_server.enqueue(Reply(text="So the answer is 50", reasoning=REASONING,
                                stall_after=72, stall_s=60.0))
    spec = llm.ModelSpec("openai/qwen3-8b", api_base=openai_server.base_url, mode="thinking")
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace(TASK, "((4 + 2 * 3) * (9 - 5 + 1)) =",
                                                    "50"), spec)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: len(view.trace.steps) == 3
                       and view.thoughts.streaming is not None
                       and "Wait, let me check A" in view.thoughts.streaming._raw,
                       timeout=30)
        await steady_while_streaming(pilot)

    app = make_app(Config(model=spec.model, api_base=spec.api_base, mode="thinking"),
                   session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_a_thinking_trace_flagged_and_verified(snap_compare, size: tuple[int, int]) -> None:
    """solver/thinking's trace, the task's verifier judging each thought (V), the person's
    flag on Thought 3."""
    with Store.open() as store:
        trace = thinking_trace(store)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: view.trace.finished and not view.running, timeout=60)
        await pilot.press("V")
        await wait_for(pilot, lambda: view.finder is not None
                       and view.finder.state == "finished" and not view.finding, timeout=30)
        await pilot.press("home", "j", "j", "x")
        await wait_for(pilot, lambda: view.trace.mistake_number == 3)
        await steady_frame(pilot)

    app = make_app(Config(model=THINKING.model, mode="thinking"), session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_a_thinking_model_beside_a_step_at_a_time_one(snap_compare,
                                                      size: tuple[int, int]) -> None:
    row = bundled_rows(TASK)[QUESTION]
    with Store.open() as store:
        session = SideBySide.create(store, NewTrace(TASK, row.input, row.target, QUESTION),
                                    [THINKING, llm.ModelSpec("solver/bbm")])

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen)
                       and app.screen.is_mounted, timeout=30)
        screen = app.screen
        assert isinstance(screen, SideBySideScreen)
        await wait_for(pilot, lambda: all(c.view.is_mounted for c in screen.columns))
        await pilot.press("r")
        await wait_for(pilot, lambda: all(c.trace.finished and not c.view.running
                                          for c in screen.columns), timeout=60)
        # Thought 1 selected, the columns scrolled to their top: the same frame however the
        # columns' follow of their end was timed under load.
        await pilot.press("home")
        await wait_for(pilot, lambda: screen.columns[0].view.selected == 1)
        # And levelled: Thought 2 starts on one screen row in both columns, by the
        # screen's own levelling (no call of it here).
        await wait_for(pilot, lambda: len({top(c, 2) for c in screen.columns}) == 1)
        await steady_frame(pilot)

    app = make_app(session_id=session.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@SIZES
def test_an_o_series_trace_with_no_reasoning_text(snap_compare, openai_server: FakeOpenAI,
                                                  size: tuple[int, int]) -> None:
    """OpenAI's o4-mini through chat completions (the local OpenAI server): no reasoning
    text, so the pane says "no reasoning text", the thoughts are the answer's paragraphs, and
    the line under the answer says none was sent and counts the reasoning tokens."""
    openai_server.enqueue(Reply(text="The first part is 4 + 6 = 10.\n\nThe second is 5.\n\n"
                                "10 * 5 = 50. So the answer is 50", reasoning_tokens=1536))
    spec = llm.ModelSpec("openai/o4-mini", api_base=openai_server.base_url, mode="thinking")
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace(TASK, "((4 + 2 * 3) * (9 - 5 + 1)) =",
                                                    "50"), spec)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: view.trace.finished and not view.running, timeout=30)
        await wait_for(pilot, lambda: "1,536" in str(view.query_one("#reasoning").render()))
        await steady_frame(pilot)

    app = make_app(Config(model=spec.model, api_base=spec.api_base, mode="thinking"),
                   session_id=trace.id)
    assert snap_compare(app, terminal_size=size, run_before=run_before)
