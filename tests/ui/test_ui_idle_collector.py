"""The collector's older passes run when the app is idle (ui/termination.py IdleCollector):
garbage that only such a pass finds (a cycle that outlived a young pass) is collected once the
app has been idle a moment, with no key and no allocation to set the pass off, and not while
someone has turned the collector off (a bulk load)."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Iterator

import pytest
from ui_helpers import make_app, wait_for

from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.ui.termination import EARLY_PASSES, IdleCollector, collect_from_now_on


class Cycle:
    """An object that refers to itself: reference counting never frees it, only the
    collector."""

    def __init__(self) -> None:
        self.me = self


@pytest.fixture
def collector_put_back() -> Iterator[None]:
    """The process's collector as it was (collect_from_now_on freezes and sets a threshold).
    litellm is imported first: its import ends with a gc.freeze() (core/llm/loader.py), and
    one still under way in a thread an earlier test of this worker started would freeze the
    test's garbage out of every pass (a CI run caught that: never collected)."""
    litellm_module()  # waits for an import under way, or makes its own
    # An earlier test's app (any that ran collect_from_now_on) leaves its collector as the
    # running one: waiting for "a collector" would then go on before this app's first frame,
    # whose gc.freeze() froze the test's garbage out of every pass (ci54 caught that).
    if IdleCollector._running is not None:
        IdleCollector._running.stop()
        IdleCollector._running = None
    threshold, enabled = gc.get_threshold(), gc.isenabled()
    yield
    if IdleCollector._running is not None:
        IdleCollector._running.stop()
        IdleCollector._running = None
    gc.unfreeze()
    gc.set_threshold(*threshold)
    (gc.enable if enabled else gc.disable)()


async def collected(found: weakref.ref[Cycle], within: float = 20.0) -> bool:
    """Whether the cycle is freed within `within` seconds of the app running idle: looked at
    with plain sleeps, as Pilot's pauses would keep the app's thread busy themselves."""
    deadline = time.monotonic() + within
    while found() is not None and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    return found() is None


def garbage_in_the_middle_generation() -> weakref.ref[Cycle]:
    """A cycle that survived a young pass while it was in use and is garbage now: only a
    middle (or full) pass can find it. Then the young passes an app would make until such a
    pass is near due, as the sessions screen's keys make them."""
    cycle = Cycle()
    found = weakref.ref(cycle)
    gc.collect(0)  # held by this frame: it survives, into the middle generation
    del cycle
    while gc.get_count()[1] + EARLY_PASSES <= gc.get_threshold()[1]:
        gc.collect(0)
    return found


@pytest.mark.usefixtures("collector_put_back")
async def test_a_cycle_the_young_passes_missed_is_collected_once_the_app_is_idle() -> None:
    app = make_app()
    app.call_after_first_frame(collect_from_now_on)  # as run_app does
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: IdleCollector._running is not None)
        found = garbage_in_the_middle_generation()
        assert found() is not None, "collected before the app was idle: the test shows nothing"
        # No key, nothing streamed: Python's own schedule would wait for allocations that do
        # not come; the app takes the pass in its idle moment.
        assert await collected(found)
        assert IdleCollector._running is not None and IdleCollector._running.passes


@pytest.mark.usefixtures("collector_put_back")
async def test_the_idle_collector_waits_while_the_collector_is_turned_off() -> None:
    app = make_app()
    app.call_after_first_frame(collect_from_now_on)
    async with app.run_test() as pilot:
        await wait_for(pilot, lambda: IdleCollector._running is not None)
        gc.disable()  # as a bulk load does around its work (core/store/steps.py)
        found = garbage_in_the_middle_generation()
        assert not await collected(found, within=0.5), "collected while the collector was off"
        gc.enable()
        assert await collected(found)
