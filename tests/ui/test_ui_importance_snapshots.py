"""Snapshots of the importance view (`I` on a thinking trace; issue 35, item 3): the rollouts
of tests/importance_scenario.py done (bars, the chart along the trace, the top anchors, a
thought's markup-like text shown literally), a run stopped part way (thoughts with no figure
yet), and the dialog before a run; at 80x24, 120x40 and 250x50."""

from __future__ import annotations

import asyncio

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, steady_frame, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.store import Store
from bbm_tui.ui.screens.importance import ImportanceScreen, RolloutsDialog
from bbm_tui.ui.screens.trace import TraceScreen
from tests.importance_scenario import MODEL, STEPS, with_rollouts
from tests.llama_server import FakeLlamaServer

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 50)],
                                ids=["80x24", "120x40", "250x50"])


def app_with_rollouts(llama: FakeLlamaServer, prefixes: int | None = None):  # type: ignore[no-untyped-def]
    async def prepare() -> int:
        with Store.open() as store:
            trace = await with_rollouts(store, llama, prefixes)
            return trace.id

    session_id = asyncio.run(prepare())
    return make_app(Config(model=MODEL, api_base=llama.base_url, mode="thinking"),
                    session_id=session_id)


async def importance_view(pilot: Pilot, *, close_dialog: bool = True) -> ImportanceScreen:
    app = pilot.app
    await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
    screen = app.screen
    assert isinstance(screen, TraceScreen)
    await wait_for(pilot, lambda: len(screen.view.trace.steps) == len(STEPS))
    await pilot.press("I")
    await wait_for(pilot, lambda: isinstance(app.screen, RolloutsDialog), timeout=60)
    view = app.screen_stack[-2]
    assert isinstance(view, ImportanceScreen)
    if close_dialog:
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is view)
    return view


@SIZES
def test_the_importance_view_done(snap_compare, llama: FakeLlamaServer,
                                  size: tuple[int, int]) -> None:
    app = app_with_rollouts(llama)

    async def run_before(pilot: Pilot) -> None:
        view = await importance_view(pilot)
        await wait_for(pilot, lambda: len(view.rows) == 36)
        await steady_frame(pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_the_importance_view_part_done_at_80x24(snap_compare, llama: FakeLlamaServer) -> None:
    """The first five prefixes' rollouts only (a run stopped): thoughts 5 to 8 have no
    figure yet."""
    app = app_with_rollouts(llama, prefixes=5)

    async def run_before(pilot: Pilot) -> None:
        view = await importance_view(pilot)
        await wait_for(pilot, lambda: len(view.rows) == 20)
        await steady_frame(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_the_rollouts_dialog_at_80x24(snap_compare, llama: FakeLlamaServer) -> None:
    """What is left after a stopped run: 16 calls of 36, with the estimate."""
    app = app_with_rollouts(llama, prefixes=5)

    async def run_before(pilot: Pilot) -> None:
        await importance_view(pilot, close_dialog=False)
        await steady_frame(pilot)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
