"""`b` on a thinking trace in the app (issue 35, item 2): the samples of a step, each from the
raw reasoning before it, shown in the paper's backtracking dialog (log-probabilities, the
original's repeats dropped, the paper's choice starred); enter goes on from one to the answer
on a new branch, streamed as thinking steps, the original kept; the tree and compare show
both. Over HTTP against the suite's llama-server, and offline with solver/thinking (no key).
Snapshots of the thinking samples dialog at 80x24 and 120x40."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList
from ui_helpers import make_app, steady_frame, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.resample_thinking import StepSample, ThinkingResample
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.llm.offline import thinking
from bbm_tui.core.llm.prefix import PrefixSettings
from bbm_tui.core.records import CallRecord, TokenLogprob
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, SamplesReady, TraceSession
from bbm_tui.core.trace.thinking_backtrack import _as_resample
from bbm_tui.core.types import SplitRule, StepOrigin
from bbm_tui.ui.app import BbmApp
from bbm_tui.ui.screens.backtrack import CandidatesScreen
from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
from bbm_tui.ui.screens.compare import CompareScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.screens.trace.view import TraceView
from tests.llama_server import FakeLlamaServer
from tests.openai_server import Reply

# The question, the thinking trace and the server's script of the core tests of `b` on it.
from tests.test_thinking_branch import QUESTION, REASONING, TARGET, TASK, script


async def generated(trace: TraceSession) -> TraceSession:
    async for _event in trace.generate():
        pass
    return trace


async def served_thinking_trace(store: Store, server: FakeLlamaServer) -> TraceSession:
    server.enqueue(Reply(text="So the answer is 6", reasoning=REASONING))
    spec = llm.ModelSpec("openai/qwen3", api_base=server.base_url, mode="thinking")
    return await generated(TraceSession.create(store, NewTrace(TASK, QUESTION, TARGET), spec))


def served_app(llama: FakeLlamaServer, session_id: int, **config: Any) -> BbmApp:
    """The app on session `session_id`, its model the suite's llama-server's thinking one."""
    return make_app(Config(model="openai/qwen3", api_base=llama.base_url, mode="thinking",
                           **config), session_id=session_id)


# The offline thinking model's app (no key).
OFFLINE = Config(model=thinking.MODEL, mode="thinking")


async def offline_trace_with_a_slip(store: Store) -> tuple[TraceSession, int]:
    """solver/thinking's trace of a labelled question whose answer is wrong, and the number
    of the thought it slipped on."""
    row = next(row for row in bundled_rows(TASK)
               if row.labelled and row.mistake_index is not None and row.answer != row.target)
    assert row.mistake_index is not None
    spec = llm.ModelSpec(thinking.MODEL, mode="thinking")
    trace = await generated(TraceSession.create(store, NewTrace(TASK, row.input, row.target),
                                                spec))
    return trace, 2 + row.mistake_index


async def opened(pilot: Pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def samples_in(pilot: Pilot) -> CandidatesScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CandidatesScreen)
                   and pilot.app.screen.all_arrived, timeout=60)
    screen = pilot.app.screen
    assert isinstance(screen, CandidatesScreen)
    return screen


async def the_new_branch_stopped(pilot: Pilot, llama: FakeLlamaServer) -> TraceScreen:
    """b on Thought 2 of the trace open, enter on the starred sample, and esc while the new
    branch goes on, once its Thought 2 is in."""
    screen = await opened(pilot)
    view = screen.view
    await wait_for(pilot, lambda: len(view.trace.steps) == 4)
    await pilot.press("home", "j", "b")
    await samples_in(pilot)
    llama.token_delay_s = 2.0  # slow enough to stop it half-way
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and len(view.trace.steps) == 2 and view.running, timeout=60)
    await pilot.press("escape")
    await wait_for(pilot, lambda: not view.running, timeout=60)
    return screen


async def r_goes_on_in_one_call(pilot: Pilot, llama: FakeLlamaServer, view: TraceView,
                                answer: str, texts: list[str]) -> None:
    """r on the stopped trace `view` shows: it goes on to `answer` in one call (the template
    applied, then one completion; the server's requests before r are let go), its thoughts
    `texts`, those that came before r kept as they were."""
    kept = [step.id for step in view.trace.steps]
    llama.requests.clear()
    await pilot.press("r")
    await wait_for(pilot, lambda: not view.running and view.trace.answer == answer, timeout=60)
    assert view.trace.texts == texts
    assert [step.id for step in view.trace.steps[:len(kept)]] == kept
    assert [record.path for record in llama.requests] == ["/apply-template", "/completion"]


def rows(dialog: CandidatesScreen) -> list[str]:
    options = dialog.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_b_enter_goes_on_from_a_thinking_sample_on_a_new_branch(
        store: Store, llama: FakeLlamaServer) -> None:
    trace = await served_thinking_trace(store, llama)
    original = [step.id for step in trace.steps]
    script(llama)
    llama.requests.clear()
    app = served_app(llama, trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        view = screen.view
        await wait_for(pilot, lambda: len(view.trace.steps) == 4)
        await pilot.press("home", "j", "x")  # Thought 2 flagged: b starts there
        await wait_for(pilot, lambda: view.trace.mistake_number == 2)
        await pilot.press("b")
        dialog = await samples_in(pilot)
        shown = rows(dialog)
        assert len(shown) == 8
        # The original's step ("1 + 1 = 3.") is dropped wherever it came back; each row
        # begins with its own number ("3. "), so the step is told apart by its text.
        assert all("= the original (dropped)" in row for row in shown if "= 3" in row)
        assert any("= 3" in row for row in shown)
        starred = [row for row in shown if "★ chosen" in row]
        assert len(starred) == 1 and "1 + 1 = 2." in starred[0] and "-5.00" in starred[0]
        assert "raw reasoning before it" in str(
            dialog.query_one("#candidates-note").render())
        prompts = {record.body["prompt"] for record in llama.requests
                   if record.path == "/completion"}
        assert len(prompts) == 1 and prompts.pop().endswith("<think>\nPlan: add, then "
                                                           "multiply.  \n\n")
        llama.token_delay_s = 0.4  # the rest streams a token at a time
        await pilot.press("enter")
        # Live: Thought 3 is in while the rest of the reasoning still streams.
        await wait_for(pilot, lambda: len(view.trace.steps) >= 3 and view.running,
                       timeout=60)
        assert view.trace.answer is None
        await wait_for(pilot, lambda: view.trace.answer == "4" and not view.running,
                       timeout=60)
        assert isinstance(pilot.app.screen, TraceScreen)
        assert view.trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4.",
                                    "So 4."]
        assert view.trace.steps[1].origin == StepOrigin.BACKTRACK
        assert [view_.number for view_ in view.thoughts.views()] == [1, 2, 3, 4]
        assert view.trace.label is None  # the flag stays on the original branch
        # The original branch is kept, with its flag.
        assert [step.id for step in view.trace.tree.path(original[-1])] == original
        # t: the tree shows both branches; v: the two side by side.
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, BranchTreeScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CompareScreen))
        compare = pilot.app.screen
        assert isinstance(compare, CompareScreen)
        assert {tuple(step.text for step in compare.diff.left),
                tuple(step.text for step in compare.diff.right)} == {
            ("1 + 1 = 3.", "3 * 2 = 6.", "So 6."), ("1 + 1 = 2.", "2 * 2 = 4.", "So 4.")}
        await pilot.press("escape")
    reasoning = TraceSession.load(store, trace.id).reasoning()
    assert reasoning is not None and reasoning.complete
    assert reasoning.text == "Plan: add, then multiply.  \n\n1 + 1 = 2. \n\n2 * 2 = 4.\n\nSo 4."


async def test_esc_while_sampling_keeps_the_trace_and_saves_nothing(
        store: Store, llama: FakeLlamaServer) -> None:
    trace = await served_thinking_trace(store, llama)
    llama.latency_s = 30.0  # the samples never come back in time
    app = served_app(llama, trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 4)
        await pilot.press("home", "j", "b")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CandidatesScreen))
        await wait_for(pilot, lambda: any(r.path == "/completion" for r in llama.requests),
                       timeout=30)
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                       and not screen.view.running, timeout=30)
        assert "Stopped sampling Thought 2" in str(screen.query_one("#run-status").render())
    assert store.candidates(trace.id, trace.steps[0].id, 2) == []
    assert len(TraceSession.load(store, trace.id).tree.leaves()) == 1


async def test_esc_while_the_new_branch_streams_keeps_what_came(
        store: Store, llama: FakeLlamaServer) -> None:
    """esc while the new branch goes on: the thoughts in so far stay on the new branch (its
    reasoning not whole yet, so not re-cut nor resampled), the original as it was."""
    trace = await served_thinking_trace(store, llama)
    original = [step.id for step in trace.steps]
    script(llama)
    app = served_app(llama, trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        view = (await the_new_branch_stopped(pilot, llama)).view
        assert view.trace.texts[:2] == ["Plan: add, then multiply.", "1 + 1 = 2."]
        assert view.trace.answer is None
    reopened = TraceSession.load(store, trace.id)
    assert [step.id for step in reopened.tree.path(original[-1])] == original
    reasoning = reopened.reasoning()
    assert reasoning is not None and not reasoning.complete
    assert reasoning.text.startswith("Plan: add, then multiply.  \n\n1 + 1 = 2. \n\n")


async def test_r_on_a_stopped_backtracked_branch_goes_on_from_where_it_stopped(
        store: Store, llama: FakeLlamaServer) -> None:
    """esc while the new branch goes on, then r: the branch goes on from its reasoning so far
    (the server receives the template, the opened reasoning and exactly the branch's steps,
    raw), below the steps that came, to the answer; no fresh call, no third branch."""
    trace = await served_thinking_trace(store, llama)
    script(llama)
    app = served_app(llama, trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        view = (await the_new_branch_stopped(pilot, llama)).view
        assert view.trace.steps[1].origin == StepOrigin.BACKTRACK
        llama.token_delay_s = 0.0
        await r_goes_on_in_one_call(pilot, llama, view, "4", [
            "Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4.", "So 4."])
        assert [thought.number for thought in view.thoughts.views()] == [1, 2, 3, 4]
    assert len(llama.prompts) == 1 and llama.prompts[0].endswith(
        "<think>\nPlan: add, then multiply.  \n\n1 + 1 = 2. \n\n")
    assert llama.requests[1].body["temperature"] == 0.0
    reopened = TraceSession.load(store, trace.id)
    assert len(reopened.tree.leaves()) == 2
    reasoning = reopened.reasoning()
    assert reasoning is not None and reasoning.complete
    assert reasoning.text == "Plan: add, then multiply.  \n\n1 + 1 = 2. \n\n2 * 2 = 4.\n\nSo 4."


async def test_b_on_solver_thinking_needs_no_key(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline thinking model: b on its slip, the samples offline, enter goes on from the
    starred one to an answer on a new branch, streamed as thinking steps."""
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
    trace, slip = await offline_trace_with_a_slip(store)
    steps = len(trace.steps)
    app = make_app(OFFLINE, session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        view = screen.view
        await wait_for(pilot, lambda: len(view.trace.steps) == steps)
        await pilot.press("home", *["j"] * (slip - 1), "x")
        await wait_for(pilot, lambda: view.trace.mistake_number == slip)
        await pilot.press("b")
        dialog = await samples_in(pilot)
        if dialog.ready is not None and dialog.ready.resample.chosen is None:
            pytest.skip("all eight samples were the original (1 in ~1,500)")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not view.running and view.trace.finished, timeout=60)
        assert view.trace.steps[slip - 1].origin == StepOrigin.BACKTRACK
        assert view.trace.steps[slip - 1].id not in {step.id for step in trace.steps}
        assert view.trace.answer is not None
    reopened = TraceSession.load(store, trace.id)
    assert len(reopened.tree.leaves()) == 2
    reasoning = reopened.reasoning()
    assert reasoning is not None and reasoning.complete
    assert [step.strip() for step in split_text(reasoning.text, SplitRule.PARAGRAPH)] == \
        reopened.texts


def thinking_samples(store: Store) -> tuple[int, SamplesReady]:
    """A thinking trace and eight samples of its Thought 2 as a server sends them, stored."""
    trace = TraceSession.create(store, NewTrace(TASK, QUESTION, TARGET),
                                llm.ModelSpec("openai/qwen3", "http://127.0.0.1:9",
                                              mode="thinking"))
    reasoning = store.add_reasoning(trace.id, "openai/qwen3", "raw",
                                    text="")
    raws = split_text(REASONING, SplitRule.PARAGRAPH)
    from bbm_tui.core.store.steps import ReasoningSlice

    parent = None
    for number, raw in enumerate(raws, start=1):
        parent = store.add_step(trace.id, parent_id=parent and parent.id, number=number,
                                text=raw.strip(), origin=str(StepOrigin.THINKING),
                                view=ReasoningSlice(reasoning.id, "paragraph", raw))
    texts = ["1 + 1 = 3.\r\n\n", "One and one make two, not three. \n\n", "1 + 1 = 2. \n\n",
             "1 + 1 = 3.\r\n\n", "So 1 + 1 is 2, then. \n\n", "1 + 1 = 2. \n\n",
             "Hmm, one plus one: two. \n\n", "1 + 1 = 3.\r\n\n"]

    def sample(raw: str) -> StepSample:
        tokens = [TokenLogprob(piece, -0.8) for piece in raw.split(" ")]
        call = CallRecord(model="openai/qwen3", params={}, latency_s=0.5, prompt_tokens=40,
                          completion_tokens=len(tokens), cost=None,
                          logprobs=[token.logprob for token in tokens], finish_reason="stop",
                          tokens=tokens)
        return StepSample(raw, tokens, False, call)

    samples = [sample(raw) for raw in texts]
    dropped = [raw.strip() == "1 + 1 = 3." for raw in texts]
    resample = _as_resample(ThinkingResample(2, raws[1], samples, dropped, 2, "logprob"),
                            PrefixSettings())
    loaded = TraceSession.load(store, trace.id)
    stored = loaded.store_samples(resample, loaded.steps[0].id)
    return trace.id, SamplesReady(2, resample, stored)


def _dialog_snapshot(snap_compare, size: tuple[int, int]) -> bool:
    with Store.open() as store:
        session_id, ready = thinking_samples(store)

    async def run_before(pilot: Pilot) -> None:
        await opened(pilot)
        dialog = CandidatesScreen.showing(ready)
        pilot.app.push_screen(dialog)
        await wait_for(pilot, lambda: pilot.app.screen is dialog and dialog.is_mounted)
        dialog.show_note("Each goes on from the raw reasoning before it, cut by the "
                         "paragraph rule.")
        await steady_frame(pilot)

    return snap_compare(make_app(session_id=session_id), terminal_size=size,
                        run_before=run_before)


def test_thinking_samples_dialog_at_80x24(snap_compare) -> None:
    assert _dialog_snapshot(snap_compare, (80, 24))


def test_thinking_samples_dialog_at_120x40(snap_compare) -> None:
    assert _dialog_snapshot(snap_compare, (120, 40))


async def test_r_on_a_stopped_backtracked_branch_goes_on_offline(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """solver/thinking, no key: b on its slip, enter, esc while the new branch streams, r:
    the branch goes on from what came to an answer, its steps kept, its reasoning whole."""
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
    trace, slip = await offline_trace_with_a_slip(store)
    steps = len(trace.steps)
    app = make_app(OFFLINE, session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        view = screen.view
        await wait_for(pilot, lambda: len(view.trace.steps) == steps)
        await pilot.press("home", *["j"] * (slip - 1), "b")
        dialog = await samples_in(pilot)
        if dialog.ready is not None and dialog.ready.resample.chosen is None:
            pytest.skip("all eight samples were the original (1 in ~1,500)")
        monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "4")  # slow enough to stop it half-way
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                       and len(view.trace.steps) == slip + 1 and view.running, timeout=60)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=60)
        assert view.trace.answer is None
        kept = [step.id for step in view.trace.steps]
        assert view.trace.steps[slip - 1].origin == StepOrigin.BACKTRACK
        monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
        await pilot.press("r")
        await wait_for(pilot, lambda: not view.running and view.trace.finished, timeout=60)
        assert [step.id for step in view.trace.steps[:len(kept)]] == kept
        assert len(view.trace.steps) > len(kept)
    reopened = TraceSession.load(store, trace.id)
    assert len(reopened.tree.leaves()) == 2
    reasoning = reopened.reasoning()
    assert reasoning is not None and reasoning.complete
    assert [step.strip() for step in split_text(reasoning.text, SplitRule.PARAGRAPH)] == \
        reopened.texts


async def test_r_on_a_stopped_thinking_trace_goes_on_from_its_reasoning_so_far(
        store: Store, llama: FakeLlamaServer) -> None:
    """A thinking trace (no b) stopped by esc once Thought 2 is in, then r: it goes on from its
    reasoning so far as a stopped backtracked branch does (the server receives the template,
    the opened reasoning and exactly the trace's steps, raw; at the trace's temperature),
    below the steps that came, to the answer; no fresh call, no second branch."""
    spec = llm.ModelSpec("openai/qwen3", api_base=llama.base_url, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, QUESTION, TARGET), spec)
    # A reasoning piece a second: esc lands between Thought 2 and Thought 3.
    llama.enqueue(Reply(text="So the answer is 6", reasoning=REASONING, chunk_delay_s=1.0))
    llama.continuation = lambda prompt, body: "3 * 2 = 6. \n\nSo 6.</think>\n\nSo the answer is 6"
    app = served_app(llama, trace.id, temperature=0.6)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: len(view.trace.steps) == 2 and view.running, timeout=60)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=60)
        stopped = view.trace.reasoning()
        assert stopped is not None and not stopped.complete
        assert view.trace.texts == ["Plan: add, then multiply.", "1 + 1 = 3."]
        # Kept in step as the thoughts came: what the store says, loaded afresh.
        assert view.trace.stopped is not None and not view.trace.stopped.backtracked
        assert TraceSession.load(store, trace.id).stopped == view.trace.stopped
        await r_goes_on_in_one_call(pilot, llama, view, "6", [
            "Plan: add, then multiply.", "1 + 1 = 3.", "3 * 2 = 6.", "So 6."])
    assert len(llama.prompts) == 1 and llama.prompts[0].endswith(
        "<think>\nPlan: add, then multiply.  \n\n1 + 1 = 3.\r\n\n")
    assert llama.requests[1].body["temperature"] == 0.6
    reopened = TraceSession.load(store, trace.id)
    assert len(reopened.tree.leaves()) == 1
    reasoning = reopened.reasoning()
    assert reasoning is not None and reasoning.complete and reasoning.id == stopped.id
    assert reasoning.text == REASONING


async def test_r_on_a_stopped_solver_thinking_trace_goes_on_offline(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The offline thinking model, stopped by esc after some thoughts, then r: it goes on
    from its reasoning so far, into the same reasoning (a fresh call wrote a reasoning of its
    own; solver/thinking writes the same thoughts again, so the store took them for the ones
    it had and the branch looked the same), to an answer, on the same branch."""
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "4")  # slow enough to stop it half-way
    row = bundled_rows(TASK)[0]
    spec = llm.ModelSpec(thinking.MODEL, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target), spec)
    app = make_app(OFFLINE, session_id=trace.id)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await opened(pilot)
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: len(view.trace.steps) >= 2 and view.running, timeout=60)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=60)
        kept = [step.id for step in view.trace.steps]
        stopped = view.trace.reasoning()
        assert not view.trace.finished and stopped is not None and not stopped.complete
        assert TraceSession.load(store, trace.id).stopped == view.trace.stopped is not None
        monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
        await pilot.press("r")
        await wait_for(pilot, lambda: not view.running and view.trace.finished, timeout=60)
        assert [step.id for step in view.trace.steps[:len(kept)]] == kept
        assert view.trace.answer is not None
    reopened = TraceSession.load(store, trace.id)
    assert len(reopened.tree.leaves()) == 1
    reasoning = reopened.reasoning()
    assert reasoning is not None and reasoning.complete and reasoning.id == stopped.id
    assert reasoning.text.startswith(stopped.text)
    assert [step.strip() for step in split_text(reasoning.text, SplitRule.PARAGRAPH)] == \
        reopened.texts
