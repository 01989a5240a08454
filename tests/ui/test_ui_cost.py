"""The cost a user sees in the app (issue 20, item 5): under each thought its input (and the
part read from the prompt cache), its output and its cost; in the title the session's calls,
input / cached / output tokens and cost; a column in the sessions list; "cost —" where no
price is known, never "$0.0000"; a note, once, when a prompt is too short to cache. A session
reopened shows what was shown live. Real HTTP to the Anthropic-wire test server, which caches
as Anthropic does."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable
from ui_helpers import SIZE, make_app, notifications, thought, wait_for

from bbm_tui.core import llm
from bbm_tui.core.accounting import format_cost
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.text import format_totals
from tests.fake_server import PromptCache, dataset_responder

MODEL = "anthropic/claude-sonnet-4-5"


def new_trace(store: Store, server, model: str = MODEL) -> TraceSession:
    row = bundled_rows("word_sorting")[0]
    return TraceSession.create(store, NewTrace("word_sorting", row.input, row.target),
                               llm.ModelSpec(model, server.base_url))


async def open_trace(pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    return pilot.app.screen


def title_right(screen: TraceScreen) -> str:
    return str(screen.query_one("#title-bar .title-right").render())


async def step(pilot, screen: TraceScreen, count: int) -> None:
    await pilot.press("n")
    await wait_for(pilot, lambda: not screen.view.running and len(screen.view.trace.steps) == count,
                   timeout=30)


@pytest.fixture
def caching_server(anthropic_server, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=400)
    anthropic_server.responder = dataset_responder
    return anthropic_server


async def test_each_thought_and_the_title_show_tokens_and_cost_as_reopened(
    store: Store, caching_server,
) -> None:
    trace = new_trace(store, caching_server)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        for count in (1, 2, 3):
            await step(pilot, screen, count)
        live = [thought(screen, number).meta for number in (1, 2, 3)]
        live_title = title_right(screen)
        steps = store.branch(trace.id)
        for meta, saved in zip(live, steps, strict=True):
            assert f"{saved.prompt_tokens:,} in, {saved.cached_tokens:,} cached" in meta
            assert f"{saved.completion_tokens:,} out" in meta
            assert meta.endswith(f" · {format_cost(saved.cost)}") and saved.cost > 0
        # The second step reads what the first wrote; the title sums every call.
        assert steps[1].cached_tokens > 0
        totals = store.totals(trace.id)
        assert live_title == format_totals(totals)
        # ("~" marks the counts when a stream was closed before its output was counted.)
        assert live_title.startswith("3 calls · ")
        assert f"{totals.prompt_tokens:,} in / {totals.cached_tokens:,} cached / " in live_title
        assert "$" in live_title and "$0.0000" not in live_title
    reopened = make_app(session_id=trace.id)
    async with reopened.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        assert [thought(screen, number).meta for number in (1, 2, 3)] == live
        assert title_right(screen) == live_title
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(reopened.screen, SessionsScreen)
                       and reopened.screen.query_one(DataTable).row_count == 1)
        grid = reopened.screen.query_one(DataTable)
        cost = grid.get_row_at(0)[list(grid.columns).index("cost")].plain
        assert cost == live_title.rsplit(" · ", 1)[1]


async def test_a_model_without_a_price_shows_cost_unknown(store: Store, openai_server) -> None:
    openai_server.responder = dataset_responder
    trace = new_trace(store, openai_server, "openai/my-local-model")
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await step(pilot, screen, 1)
        assert thought(screen, 1).meta.endswith("cost —")
        assert title_right(screen).endswith("· cost —")
        assert "$0" not in title_right(screen)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one(DataTable).row_count == 1)
        grid = app.screen.query_one(DataTable)
        assert grid.get_row_at(0)[list(grid.columns).index("cost")].plain == "—"


async def test_a_prompt_below_the_caching_minimum_is_noted_once(store: Store,
                                                               anthropic_server,
                                                               monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=4096)
    anthropic_server.responder = dataset_responder
    trace = new_trace(store, anthropic_server, "anthropic/claude-haiku-4-5")
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        for count in (1, 2):
            await step(pilot, screen, count)
        said = [note for note in notifications(app) if note.startswith("Prompt caching")]
        assert said == ["Prompt caching: anthropic/claude-haiku-4-5 caches only prompts of "
                        "4,096 tokens or more: shorter ones were sent uncached (a trace's "
                        "prompt grows with each thought, and is cached once past that)"]


async def test_at_80_columns_the_model_stays_whole_and_the_cost_in_view(
    store: Store, caching_server,
) -> None:
    """"word_sorting typed — anthropic/claude-sonnet-4-5" takes more than half of 80
    columns: the figures shorten (to the cost alone) rather than cut the model the next step
    uses; at 120 columns every figure is shown beside it."""
    from bbm_tui.core.store import Totals

    trace = new_trace(store, caching_server)
    # bench/prompt_cache.py's 20-step trace.
    totals = Totals(20, 40_705, 1_248, 0.044, estimated_calls=20, cached_tokens=36_678)
    for size, shown in (((80, 24), "$0.0440"), (SIZE, format_totals(totals))):
        app = make_app(session_id=trace.id)
        async with app.run_test(size=size) as pilot:
            screen = await open_trace(pilot)
            screen.view.totals = totals
            screen.show_title()
            await pilot.pause()
            left = screen.query_one("#title-bar .title-left")
            text = str(left.render())
            assert text.endswith(f"word_sorting typed — {MODEL}"), text
            assert left.content_size.width >= len(text)  # shown whole, not cut
            assert title_right(screen) == shown
