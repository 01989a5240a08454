"""The app where what it is given cannot be: a store holding log-probabilities no model could
give, written by an earlier bbm-tui, opens, and so does its token view; such values arriving
are said, never used."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from textual.widgets import OptionList
from ui_helpers import SIZE, make_app, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.store import Store, default_path
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.screens.backtrack import CandidatesScreen
from bbm_tui.ui.screens.tokens import TokenScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack import LOGPROBS, ORIGINAL, QUESTION, SAMPLED, TARGET, responder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def store_from_fixture(version: int) -> Path:
    """The frozen store of schema `version` as the app's own store."""
    path = default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.executescript((FIXTURES / f"store_v{version}.sql").read_text(encoding="utf-8"))
    connection.commit()
    connection.close()
    return path


async def test_a_session_holding_impossible_log_probabilities_opens() -> None:
    """Session 3 of the v9 fixture: a thought whose sum is 7999.88 (its confidence overflowed:
    OverflowError on opening), one whose tokens are NaN and Infinity (the token view stopped:
    StopIteration). Both open, and the token view says there are none to show, and why."""
    store_from_fixture(9)
    app = make_app(session_id=3)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        for number in (1, 2):
            screen.view.selected = number
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
            text = " ".join(str(w.render()) for w in app.screen.query(".dialog-text"))
            assert "No log-probabilities" in text and "no model could give" in text
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen)
        screen.view.selected = 3
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        assert [t.text for t in app.screen.tokens] == ["So the answer is", " 4"]


async def test_the_app_says_when_log_probabilities_could_not_be(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """A sample with NaN among its tokens: its row says its log-probabilities were
    impossible and not used, and the choice goes to the best of the others; a step streamed
    with a value of 3999.94 is kept without them, and a notice says so."""
    values = list(LOGPROBS)
    values[1] = float("nan")
    base = responder()

    def respond(path: str, body: dict) -> Reply:
        if body.get("stream"):
            reply = base(path, body)
            reply.logprob_values = [3999.94]
            return reply
        return Reply(choices=SAMPLED, honor_stop=False, choice_logprobs=values)

    openai_server.responder = respond
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", openai_server.base_url))
    trace.load_recorded(ORIGINAL)
    trace.flag_mistake(2)
    app = make_app(Config(logprobs=True), session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        options = app.screen.query_one(OptionList)
        rows = [str(options.get_option_at_index(i).prompt) for i in range(8)]
        assert "its log-probabilities were impossible: not used" in rows[1]
        assert rows[1].startswith("2. n/a") and "★ chosen" in rows[3]
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4" and not screen.view.running,
                       timeout=30)
        said = [n.message for n in app._notifications]
        assert any("Thought 3 came with log-probabilities no model could give" in m
                   for m in said), said
        assert screen.view.trace.steps[2].logprob is None


async def test_samples_left_with_esc_are_chosen_from_by_the_next_batch(
    store: Store, openai_server: FakeOpenAI, tmp_path: Path, capsys
) -> None:
    """The batch's session of a trace, opened in the app: `b` samples Thought 2, esc leaves
    the samples saved and the trace as it was. The next `backtrack` read that as "no sample
    differed" (kept as it was, every `chosen` false though 7 differ, 0 calls); it now applies
    the rule to the stored samples and continues, sampling nothing again."""
    from bbm_tui.cli import main
    from bbm_tui.core.types import SessionSource
    from tests.strict_json import strict_json_lines

    openai_server.responder = responder()
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", openai_server.base_url),
                                source=SessionSource.BACKTRACK)
    trace.load_recorded(ORIGINAL)
    trace.flag_mistake(2)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen and not screen.view.running)
    assert len(store.candidates(trace.id, trace.steps[0].id, 2)) == 8
    assert store.branch(trace.id)[-1].text == ORIGINAL[-1]
    sampled = sum(1 for request in openai_server.requests if request.body.get("n") == 8)
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text(json.dumps({"input": QUESTION, "steps": ORIGINAL, "answer": "5",
                                  "target": TARGET, "mistake_index": 1}) + "\n")
    out = tmp_path / "out.jsonl"
    assert await asyncio.to_thread(main, [
        "backtrack", "--model", "openai/test", "--api-base", openai_server.base_url, "--input",
        str(source), "--out", str(out), "--locations", "gold", "--no-progress", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tasks"]["multistep_arithmetic"]["delta_accuracy_incorrect"] == 100.0
    assert sum(1 for r in openai_server.requests if r.body.get("n") == 8) == sampled
    [row] = strict_json_lines(out)
    assert [sample["chosen"] for sample in row["samples"]] == [
        index == 1 for index in range(8)]
    assert row["new_steps"] == [ORIGINAL[0], "2 + 2 = 4", "4 * 1 = 4", "So the answer is 4"]
    assert len(store.sessions()) == 1  # the same session, now with both branches
