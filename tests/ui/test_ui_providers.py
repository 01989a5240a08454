"""The app's step over each provider's own wire (litellm's `anthropic/…`, `gemini/…`,
`ollama/…`, `ollama_chat/…` and `openai/…` adapters against the local servers of
tests/*_server.py): `n` writes the dataset's next thought, one line, as the provider streamed
it; and backtracking on a provider without log-probabilities says, in the samples dialog,
that the first differing sample was taken and why."""

from __future__ import annotations

import pytest
from textual.widgets import Static
from ui_helpers import SIZE, make_app, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.ui.screens.backtrack import CandidatesScreen
from tests.fake_server import dataset_responder
from tests.test_providers_cli import RUN_MODES, backtrack_responder
from tests.test_providers_http import BY_NAME, WIRES, Wire, connect
from tests.ui.test_ui_backtrack import open_trace, option_texts, samples_in, served_trace
from tests.ui.test_ui_trace_keys import finished_views, open_recorded

TASK = "tracking_shuffled_objects"


@pytest.mark.parametrize("wire", WIRES, ids=lambda wire: wire.name)
async def test_n_steps_over_each_wire(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, wire: Wire,
) -> None:
    server, _ = connect(request, wire, monkeypatch)
    server.responder = dataset_responder
    config = Config(model=wire.model, api_base=server.base_url,
                    mode=RUN_MODES.get(wire.name, "chat"))
    app = make_app(config, task=TASK, question=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: not screen.view.running and len(screen.view.trace.steps) == 1,
                       timeout=20)
        first = bundled_rows(TASK)[0].steps[0]
        assert [step.text for step in store.branch(screen.view.trace.id)] == [first]
        assert [view.text for view in finished_views(app)] == [first]
    [record] = server.requests
    # Where the provider stops at the line break it ended the stream; else the app closed it.
    assert record.finished or record.client_closed_early


async def test_the_samples_dialog_says_why_the_first_differing_sample_was_taken(
    store: Store, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch,
) -> None:
    wire = BY_NAME["anthropic"]
    server, _ = connect(request, wire, monkeypatch)
    server.responder = backtrack_responder(logprobs=False)
    trace = served_trace(store, server, model=wire.model)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_trace(pilot)
        await pilot.press("b")
        dialog = await samples_in(pilot)
        assert isinstance(dialog, CandidatesScreen)
        hint = str(dialog.query_one("#candidates-hint", Static).render())
        assert ("log-probabilities: none from this provider; the first differing sample was "
                "taken") in " ".join(hint.split())
        texts = option_texts(app)
        first = next(index for index, text in enumerate(texts)
                     if "(dropped)" not in text and "(empty)" not in text)
        assert "★ chosen" in texts[first]
        assert all("n/a" in text for text in texts)
    assert not any("logprobs" in record.body for record in server.requests)
