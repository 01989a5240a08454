"""`I` on a thinking trace (issue 35, item 3, in the app): the dialog with the calls and the
estimate, the rollouts run against the suite's llama-server (tests/llama_server.py) whose
answers depend on which steps the prompt keeps, the bars filled in from them (the figures
computed here by hand from the server's rules), esc keeping what is done, a second run making
no finished rollout again, the confirmation above the command's limit, and the refusal of a
provider that cannot go on from a prefix, with no request made."""

from __future__ import annotations

import json
from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import Input
from ui_helpers import make_app, wait_for

from bbm_tui.core import llm
from bbm_tui.core.batch.anchors import rollouts_path
from bbm_tui.core.config import Config
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.types import SplitRule
from bbm_tui.ui.dialogs.confirm import ConfirmScreen
from bbm_tui.ui.screens.importance import ImportanceScreen, RolloutsDialog, StepsTable
from bbm_tui.ui.screens.trace import TraceScreen
from tests.llama_server import FakeLlamaServer
from tests.openai_server import FakeOpenAI, Reply

TASK = "multistep_arithmetic"
QUESTION = "((1 + 1) * 2) ="
STEPS = ["First, 1 + 1 = 2.", "Then 2 * 2 = 4, the whole of it.",
         "Wait, let me check: 2 * 2 is 4.", "So it is 4 in the end."]
REASONING = "\n\n".join(STEPS)


def rule_answer(kept: int, rollout: int) -> str:
    """The server's rules: keeping step 2 (index 1) makes every answer right; without it
    only rollout 0 is right."""
    if kept >= 2:
        return "4"
    return "4" if rollout == 0 else "5"


def rule_first_step(kept: int, rollout: int) -> str:
    """Even rollouts write the original step again; odd ones something else."""
    if kept < len(STEPS) and rollout % 2 == 0:
        return STEPS[kept]
    return f"Something else entirely, number {rollout}."


def script(server: FakeLlamaServer) -> None:
    def continuation(prompt: str, body: dict[str, Any]) -> str:
        kept = len(split_text(prompt.split("<think>\n", 1)[1], SplitRule.PARAGRAPH))
        rollout = body["seed"]
        return (rule_first_step(kept, rollout) + "\n\n</think>\n\nSo the answer is "
                + rule_answer(kept, rollout))

    server.continuation = continuation


async def thinking_trace(store: Store, server: FakeOpenAI,
                         model: str = "openai/tiny") -> TraceSession:
    server.enqueue(Reply(text="So the answer is 4", reasoning=REASONING))
    spec = llm.ModelSpec(model, api_base=server.base_url, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, QUESTION, "4"), spec)
    async for _event in trace.generate():
        pass
    assert trace.texts == STEPS
    return trace


def app_on(trace: TraceSession) -> Any:
    spec = trace.spec
    return make_app(Config(model=spec.model, api_base=spec.api_base, mode="thinking"),
                    session_id=trace.id)


async def opened(pilot: Pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: len(screen.view.trace.steps) == len(STEPS))
    return screen


async def dialog_up(pilot: Pilot) -> tuple[ImportanceScreen, RolloutsDialog]:
    await pilot.press("I")
    # Its plan is written once it is mounted, after it became the screen (under load a test
    # read the line still empty).
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, RolloutsDialog)
                   and bool(str(pilot.app.screen.query_one("#rollouts-plan").render())),
                   timeout=60)
    view = pilot.app.screen_stack[-2]
    dialog = pilot.app.screen
    assert isinstance(view, ImportanceScreen) and isinstance(dialog, RolloutsDialog)
    return view, dialog


async def set_field(pilot: Pilot, dialog: RolloutsDialog, selector: str, value: str) -> None:
    field = dialog.query_one(selector, Input)
    field.value = value
    await pilot.pause()


def screen_text(app: Any) -> str:
    """The screen's text, its styles' runs joined (the SVG screenshot, tags left out)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace(
        "\xa0", " ")


def rollout_keys(server: FakeLlamaServer) -> list[tuple[int, int]]:
    """(steps kept, rollout) of each /completion the server was asked for."""
    return [(len(split_text(record.body["prompt"].split("<think>\n", 1)[1],
                            SplitRule.PARAGRAPH)), record.body["seed"])
            for record in server.requests if record.path == "/completion"]


async def test_I_rolls_out_each_prefix_and_fills_the_bars(
        store: Store, llama: FakeLlamaServer) -> None:
    script(llama)
    trace = await thinking_trace(store, llama)
    app = app_on(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        await opened(pilot)
        view, dialog = await dialog_up(pilot)
        plan = str(dialog.query_one("#rollouts-plan").render())
        # (4 steps + 1) prefixes x M = 4, nothing done yet; no call made before the start.
        assert plan.startswith("20 calls") and "tokens (estimated)" in plan
        assert rollout_keys(llama) == []
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(view.rows) == 20 and not view.running, timeout=60)
        # By hand: without step 2 one rollout in four is right, with it all four.
        assert [step.importance for step in view.steps] == pytest.approx(
            [0.0, 0.75, 0.0, 0.0])
        assert view.steps[1].answers_resampled == {"4": 1, "5": 3}
        # Drawn on the next frame.
        await wait_for(pilot, lambda: "Thought 2" in screen_text(pilot.app))
        shown = screen_text(pilot.app)
        # Step 2's bar: 0.75 of 20 cells (wide) is 15.
        assert "█" * 15 in shown and "█" * 16 not in shown
        assert "+0.75" in shown and "Thought 2" in shown
        status = str(view.query_one("#importance-status").render())
        assert status.startswith("Done: 20 new rollouts, 20 in all")
    path = rollouts_path(store.path, trace.id, trace.spec.model)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) == 20 and path.stat().st_mode & 0o777 == 0o600
    assert sorted(rollout_keys(llama)) == sorted((kept, rollout) for kept in range(5)
                                                 for rollout in range(4))


async def test_esc_stops_keeping_what_is_done_and_a_second_run_makes_none_again(
        store: Store, llama: FakeLlamaServer) -> None:
    script(llama)
    trace = await thinking_trace(store, llama)
    llama.latency_s = 0.4
    app = app_on(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await opened(pilot)
        view, dialog = await dialog_up(pilot)
        await set_field(pilot, dialog, "#rollouts-concurrency", "1")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(view.rows) >= 3, timeout=60)
        # Filled in live: the table on screen counts the rollouts in so far, mid-run.
        table = view.query_one(StepsTable)
        await wait_for(pilot, lambda: view.running and table.steps[0].resampled >= 1)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=30)
        kept = len(view.rows)
        assert 3 <= kept < 20
        status = str(view.query_one("#importance-status").render())
        assert status.startswith(f"Stopped: {kept} new rollouts kept")
        assert isinstance(pilot.app.screen, ImportanceScreen)  # stopped, not gone back
        path = rollouts_path(store.path, trace.id, trace.spec.model)
        done = [(row["prefix"], row["rollout"]) for row in
                map(json.loads, path.read_text().splitlines())]
        assert len(done) == kept
        # esc again: back to the trace; I again shows what is done and asks for the rest.
        await pilot.press("escape")
        await wait_for(pilot, lambda: pilot.app.screen is screen)
        llama.requests.clear()
        llama.latency_s = 0.0
        view, dialog = await dialog_up(pilot)
        assert len(view.rows) == kept
        plan = str(dialog.query_one("#rollouts-plan").render())
        assert plan.startswith(f"{20 - kept} calls")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(view.rows) == 20 and not view.running, timeout=60)
        # No finished rollout was asked for again.
        assert not set(rollout_keys(llama)) & set(done)
        assert len(rollout_keys(llama)) == 20 - kept
        assert [step.importance for step in view.steps] == pytest.approx(
            [0.0, 0.75, 0.0, 0.0])


async def test_a_run_above_the_limit_asks_first(store: Store, llama: FakeLlamaServer) -> None:
    script(llama)
    trace = await thinking_trace(store, llama)
    app = app_on(trace)
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot)
        _view, dialog = await dialog_up(pilot)
        await set_field(pilot, dialog, "#rollouts-m", "50")  # 5 prefixes x 50 = 250 calls
        assert str(dialog.query_one("#rollouts-plan").render()).startswith("250 calls")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ConfirmScreen))
        assert "250 calls is more than 200" in screen_text(pilot.app)
        await pilot.press("n")
        await wait_for(pilot, lambda: pilot.app.screen is dialog)
        await pilot.pause(0.5)
    assert rollout_keys(llama) == []


async def test_I_on_a_provider_that_cannot_go_on_says_why_before_any_call(
        store: Store, openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-test")
    trace = await thinking_trace(store, openai_server, "deepseek/deepseek-reasoner")
    calls = len(openai_server.requests)
    app = app_on(trace)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await pilot.press("I")
        status = screen.query_one("#run-status")
        await wait_for(pilot, lambda: "importance is measured" in str(status.render()),
                       timeout=60)
        assert str(status.render()).startswith(
            "No thought's importance is measured: DeepSeek's API cannot go on from a prefix "
            "of the reasoning")
        assert status.has_class("-error")
        assert pilot.app.screen is screen
    assert len(openai_server.requests) == calls


async def test_I_on_a_step_at_a_time_trace_says_it_needs_a_thinking_one(store: Store) -> None:
    trace = TraceSession.create(store, NewTrace(TASK, QUESTION, "4"),
                                llm.ModelSpec("solver/bbm"))
    async for _event in trace.generate(max_new_steps=1):
        pass
    app = make_app(Config(model="solver/bbm"), session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
        screen = pilot.app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: bool(screen.view.trace.steps))
        await pilot.press("I")
        status = screen.query_one("#run-status")
        await wait_for(pilot, lambda: "thinking model's trace" in str(status.render()))
        assert pilot.app.screen is screen


async def test_I_runs_offline_on_solver_thinking(store: Store) -> None:
    """solver/thinking goes on from a prefix of its own reasoning (no key, no server): every
    prefix's rollouts are made and each thought gets its figure, the trace's slip or check
    among the anchors."""
    from bbm_tui.core.dataset import bundled_rows

    row = bundled_rows(TASK)[4]  # the README's thinking demo: a slip it may not catch
    spec = llm.ModelSpec("solver/thinking", mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target, 4), spec)
    async for _event in trace.generate():
        pass
    steps = len(trace.steps)
    app = make_app(Config(model=spec.model, mode="thinking"), session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
        screen = pilot.app.screen
        assert isinstance(screen, TraceScreen)
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == steps)
        view, dialog = await dialog_up(pilot)
        assert str(dialog.query_one("#rollouts-plan").render()).startswith(
            f"{(steps + 1) * 4} calls")
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(view.rows) == (steps + 1) * 4 and not view.running,
                       timeout=120)
        assert all(step.kept == step.resampled == 4 for step in view.steps)
        assert all(step.importance is not None for step in view.steps)
        assert any(step.importance for step in view.steps), [
            step.importance for step in view.steps]
