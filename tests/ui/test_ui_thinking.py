"""A thinking model's trace in the app (issue 32): its reasoning streams in as numbered
thoughts (finished ones appear while the next still streams), the pane says what the steps
are cut from ("summary" where it is one), x flags, a finder judges the steps, S re-cuts the
reasoning with no new call, a session reopens as it was, and a thinking model runs beside a
step-at-a-time one, side by side."""

from __future__ import annotations

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, run_finder, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.trace.side_by_side import SideBySide
from bbm_tui.core.types import SplitRule, StepOrigin
from bbm_tui.ui.panels import FOCUS_MARKER
from bbm_tui.ui.screens.side_by_side import SideBySideScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.openai_server import FakeOpenAI, Reply

TASK = "multistep_arithmetic"
QUESTION = 4
THINKING = Config(model="solver/thinking", mode="thinking")


def pane_title(screen: TraceScreen) -> str:
    """The thoughts pane's title without the focus marker (the pane has the trace view's keys,
    so it is marked as focused)."""
    return str(screen.view.query_one("#thoughts-pane").border_title).removeprefix(FOCUS_MARKER)


async def opened(pilot: Pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def test_a_thinking_trace_streams_as_numbered_thoughts_and_is_flagged_and_recut(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "150")
    app = make_app(THINKING, task=TASK, question=QUESTION)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        view = screen.view
        await wait_for(pilot, lambda: pane_title(screen) == "Thoughts · reasoning · paragraphs")
        await pilot.press("r")
        # Thoughts finish while the reasoning still streams: live, not at the end.
        await wait_for(pilot, lambda: len(view.trace.steps) >= 2
                       and view.thoughts.streaming is not None, timeout=60)
        assert view.running
        await wait_for(pilot, lambda: not view.running, timeout=90)
        trace = view.trace
        assert trace.finished and trace.answer is not None
        assert all(step.origin == StepOrigin.THINKING for step in trace.steps)
        assert [v.number for v in view.thoughts.views()] == list(
            range(1, len(trace.steps) + 1))
        assert view.totals.calls == 1
        paragraphs = trace.texts
        # x flags the selected thought as the first mistake.
        await pilot.press("home", "j", "x")
        await wait_for(pilot, lambda: trace.mistake_number == 2)
        # S: the same reasoning cut into sentences, no new call.
        await pilot.press("S")
        await wait_for(pilot, lambda: trace.split_rule() == SplitRule.SENTENCE)
        await wait_for(pilot, lambda: pane_title(screen)
                       == "Thoughts · reasoning · sentences")
        assert len(trace.texts) > len(paragraphs) and trace.answer is not None
        assert store.totals(trace.id).calls == 1
        await pilot.press("S", "S")  # lines, then paragraphs again: the first view
        await wait_for(pilot, lambda: trace.split_rule() == SplitRule.PARAGRAPH)
        assert trace.texts == paragraphs and trace.mistake_number == 2
        session_id = trace.id
    # Reopened, the session is as it was: the paragraphs, the flag.
    app = make_app(THINKING, session_id=session_id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: pane_title(screen) == "Thoughts · reasoning · paragraphs")
        assert screen.view.trace.texts == paragraphs
        assert screen.view.trace.mistake_number == 2


async def test_a_finder_judges_a_thinking_traces_steps(
    store: Store, openai_server: FakeOpenAI
) -> None:
    row = bundled_rows(TASK)[QUESTION]
    trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target, QUESTION),
                                llm.ModelSpec("solver/thinking", mode="thinking"))
    async for _event in trace.generate():
        pass
    openai_server.enqueue(Reply(text="2"))
    app = make_app(THINKING, session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await run_finder(pilot, "direct-trace", model="openai/judge",
                         api_base=openai_server.base_url)
        finder = screen.view.finder
        assert finder is not None and finder.state == "finished"
        assert finder.mistake_number == 2 and finder.parsed
        # The finder was shown the thinking trace's steps as the paper's numbered thoughts.
        prompt = openai_server.requests[-1].body["messages"][-1]["content"]
        assert f"Thought 1: {trace.steps[0].text}" in prompt
        assert f"Thought 2: {trace.steps[1].text}" in prompt


async def test_a_summary_is_said_so_beside_the_steps(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.enqueue(Reply(text="So the answer is 5",
                                reasoning="**Adding the parts**\n\nThe sum is 5."))
    spec = llm.ModelSpec("openai/claude-sonnet-4-5", api_base=openai_server.base_url,
                         mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), spec)
    app = make_app(Config(model=spec.model, api_base=spec.api_base, mode="thinking"),
                   session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: pane_title(screen) == "Thoughts · summary · paragraphs")
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        assert screen.view.trace.texts == ["**Adding the parts**", "The sum is 5."]
        assert pane_title(screen) == "Thoughts · summary · paragraphs"


async def test_a_thinking_model_beside_a_step_at_a_time_one(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "400")
    row = bundled_rows(TASK)[QUESTION]
    specs = [llm.ModelSpec("solver/thinking", mode="thinking"), llm.ModelSpec("solver/bbm")]
    session = SideBySide.create(store, NewTrace(TASK, row.input, row.target, QUESTION), specs)
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await app.wait_for_store()
        app.open_session(session.id)
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen)
                       and app.screen.is_mounted, timeout=30)
        screen = app.screen
        assert isinstance(screen, SideBySideScreen)
        thinking, stepper = screen.columns
        await wait_for(pilot, lambda: thinking.view.is_mounted and stepper.view.is_mounted)
        assert thinking.title.plain.endswith("(paragraphs)")
        await pilot.press("r")
        await wait_for(pilot, lambda: thinking.trace.finished and stepper.trace.finished
                       and not thinking.view.running and not stepper.view.running,
                       timeout=120)
        assert thinking.trace.answer == stepper.trace.answer == row.target
        assert all(s.origin == StepOrigin.THINKING for s in thinking.trace.steps)
        assert all(s.origin == StepOrigin.MODEL for s in stepper.trace.steps)
        # The keys of a single trace act in the focused column: x on the thinking one.
        await pilot.press("home", "x")
        await wait_for(pilot, lambda: thinking.trace.mistake_number == 1)


async def test_the_model_dialog_switches_a_session_to_thinking(store: Store) -> None:
    from textual.widgets import Checkbox, Input

    from bbm_tui.ui.dialogs import ModelScreen

    app = make_app(task=TASK, question=QUESTION)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: screen.view.is_mounted)
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        dialog = app.screen
        dialog.query_one("#model", Input).value = "solver/thinking"
        dialog.query_one("#thinking", Checkbox).value = True
        dialog.query_one("#completion", Checkbox).value = True
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ModelScreen)  # both: refused, the dialog stays
        dialog.query_one("#completion", Checkbox).value = False
        dialog.query_one("#model", Input).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.view.trace.spec == llm.ModelSpec("solver/thinking", mode="thinking")
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=60)
        assert all(s.origin == StepOrigin.THINKING for s in screen.view.trace.steps)
        await wait_for(pilot, lambda: pane_title(screen) == "Thoughts · reasoning · paragraphs")


async def test_the_temperature_reaches_a_thinking_call_and_the_dialog_can_leave_it_out(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """The config's temperature is sent with a thinking call from the app; the model dialog
    shows it for thinking, and emptied, the next call sends none (the provider's default),
    while the step-at-a-time temperature is left as it was."""
    from textual.widgets import Input

    from bbm_tui.ui.dialogs import ModelScreen

    for _ in range(2):
        openai_server.enqueue(Reply(text="So the answer is 5", reasoning="A is 5.\n\nDone."))
    spec = llm.ModelSpec("openai/qwen3-8b", api_base=openai_server.base_url, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), spec)
    config = Config(model=spec.model, api_base=spec.api_base, mode="thinking", temperature=0.7)
    app = make_app(config, session_id=trace.id)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: screen.view.is_mounted)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        assert openai_server.requests[-1].body["temperature"] == 0.7
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        field = app.screen.query_one("#temperature", Input)
        assert field.value == "0.7"
        field.value = ""
        app.screen.query_one("#model", Input).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        settings = screen.view.context.stepper_settings
        assert settings.thinking_temperature is None and settings.call.temperature == 0.7
    row = bundled_rows(TASK)[QUESTION]
    again = TraceSession.create(store, NewTrace(TASK, row.input, row.target, QUESTION), spec)
    app = make_app(Config(model=spec.model, api_base=spec.api_base, mode="thinking"),
                   session_id=again.id)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: screen.view.is_mounted)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        assert "temperature" not in openai_server.requests[-1].body


async def test_a_summary_beside_a_step_at_a_time_model_says_summary(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """Side by side, a thinking column whose provider sends a summary says "summary" in its
    border, before its run and after it (from the stored reasoning's kind)."""
    openai_server.enqueue(Reply(text="So the answer is 5",
                                reasoning="**Adding the parts**\n\nThe sum is 5."))
    specs = [llm.ModelSpec("openai/claude-sonnet-4-5", api_base=openai_server.base_url,
                           mode="thinking"), llm.ModelSpec("solver/bbm")]
    session = SideBySide.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), specs)
    app = make_app()
    async with app.run_test(size=(160, 40)) as pilot:
        await app.wait_for_store()
        app.open_session(session.id)
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen)
                       and app.screen.is_mounted, timeout=30)
        screen = app.screen
        assert isinstance(screen, SideBySideScreen)
        summary, _stepper = screen.columns
        await wait_for(pilot, lambda: "summary · paragraphs" in summary.title.plain)
        await pilot.press("r")
        await wait_for(pilot, lambda: summary.trace.finished and not summary.view.running,
                       timeout=60)
        assert summary.trace.texts == ["**Adding the parts**", "The sum is 5."]
        await wait_for(pilot, lambda: "summary · paragraphs" in summary.title.plain)


O_SERIES_ANSWER = ("The first part is 1 + 4 = 5.\n\nTimes 1 it stays 5.\n\n"
                   "So the answer is 5")


def o_series_trace(store: Store, openai_server: FakeOpenAI) -> TraceSession:
    """OpenAI's o4-mini through chat completions: no reasoning text, 512 reasoning tokens."""
    openai_server.enqueue(Reply(text=O_SERIES_ANSWER, reasoning_tokens=512))
    spec = llm.ModelSpec("openai/o4-mini", api_base=openai_server.base_url, mode="thinking")
    return TraceSession.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), spec)


def reasoning_line(screen: TraceScreen) -> str:
    shown = screen.view.query_one("#reasoning")
    return str(shown.render()) if shown.display else ""


async def test_an_o_series_trace_says_no_reasoning_text_came_and_counts_its_tokens(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """o-series send no reasoning text over chat completions: the pane says so from the start
    (not "summary" or "reasoning"), the thoughts are the answer's paragraphs, and the line
    under the answer says no text came and how many reasoning tokens were counted."""
    trace = o_series_trace(store, openai_server)
    app = make_app(Config(model=trace.spec.model, api_base=trace.spec.api_base,
                          mode="thinking"), session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: pane_title(screen)
                       == "Thoughts · no reasoning text · paragraphs")
        await wait_for(pilot, lambda: reasoning_line(screen) != "")
        assert reasoning_line(screen) == ("Reasoning: no reasoning text sent by the provider; "
                                          "the thoughts are cut from the answer")
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        assert screen.view.trace.texts == ["The first part is 1 + 4 = 5.",
                                           "Times 1 it stays 5.", "So the answer is 5"]
        assert pane_title(screen) == "Thoughts · no reasoning text · paragraphs"
        await wait_for(pilot, lambda: "512" in reasoning_line(screen))
        assert reasoning_line(screen) == (
            "Reasoning: no reasoning text sent by the provider; the thoughts are cut from the "
            "answer · 512 reasoning tokens (in the cost)")
        assert openai_server.requests[-1].body.get("reasoning_effort") is None
