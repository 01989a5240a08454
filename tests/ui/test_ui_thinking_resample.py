"""`b` on a thinking trace whose provider cannot go on from a prefix of the reasoning (issue
35): said before any call, the trace as it was."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.screens.trace import TraceScreen
from tests.openai_server import FakeOpenAI, Reply

TASK = "multistep_arithmetic"


async def opened(pilot: Pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def test_b_on_a_deepseek_thinking_trace_says_why_before_any_call(
    store: Store, openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    openai_server.enqueue(Reply(text="So the answer is 5",
                                reasoning="First, 1 + 4 = 6.\n\nThen 6 * 1 = 6."))
    spec = llm.ModelSpec("deepseek/deepseek-reasoner", api_base=openai_server.base_url,
                         mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), spec)
    async for _event in trace.generate():
        pass
    assert trace.texts == ["First, 1 + 4 = 6.", "Then 6 * 1 = 6."]
    calls = len(openai_server.requests)
    app = make_app(Config(model=spec.model, api_base=spec.api_base, mode="thinking"),
                   session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 2)
        await pilot.press("home", "b")
        status = screen.query_one("#run-status")
        await wait_for(pilot, lambda: "is not resampled" in str(status.render()), timeout=60)
        shown = str(status.render())
        assert shown.startswith("Thought 1 is not resampled: DeepSeek's API cannot go on from "
                                "a prefix of the reasoning")
        assert status.has_class("-error")
        assert not screen.view.running
        assert isinstance(pilot.app.screen, TraceScreen)  # no samples dialog
    assert len(openai_server.requests) == calls
    assert len(trace.tree.children(None)) == 1  # no new branch
