"""The collector's older passes run when the app is idle (ui/termination.py IdleCollector):
garbage that only such a pass finds (a cycle that outlived a young pass) is collected once the
app has been idle a moment, with no key and no allocation to set the pass off, and not while
someone has turned the collector off (a bulk load). Python's own full pass is put off while a
stream keeps the app busy, and the app takes it once the stream has ended."""

from __future__ import annotations

import asyncio
import gc
import time
import weakref
from collections.abc import Callable, Iterator

import pytest
from ui_helpers import make_app, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.termination import (
    EARLY_PASSES,
    FULL_PASS_AFTER,
    IdleCollector,
    collect_from_now_on,
)


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


class Passes:
    """The collector's passes of one generation (gc.callbacks), each noted with whether the
    stream was running when it ended."""

    def __init__(self, generation: int, running: Callable[[], bool]) -> None:
        self.generation, self.running = generation, running
        self.seen: list[bool] = []

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "stop" and info["generation"] == self.generation:
            self.seen.append(self.running())


async def made_while_streaming(objects: int) -> list[list[int]]:
    """Containers made in slices between the stream's chunks (the event loop runs on), as the
    app makes them while it streams: Python's own schedule passes over them."""
    made: list[list[int]] = []
    while len(made) < objects:
        made.extend([] for _ in range(2_000))
        await asyncio.sleep(0)
    return made


@pytest.mark.usefixtures("collector_put_back")
async def test_no_full_pass_while_a_stream_runs_and_one_once_it_has_ended(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full pass walks all the app made since its first frame (a long reasoning's hundreds
    of thoughts: 190-530 ms at once), and Python's schedule ran one mid-stream when its count
    of middle passes came round. Here the count is brought to where Python's next middle pass
    would be a full one, with garbage in the oldest generation and enough new objects (kept,
    as the thoughts are) for Python's own rule, while a thinking model streams: Python's
    middle passes run, no full pass; once the stream has ended, the idle app takes the full
    pass and the garbage is gone."""
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "20")  # the stream outlasts the passes below
    app = make_app(Config(model="solver/thinking", mode="thinking"),
                   task="multistep_arithmetic", question=4)
    app.call_after_first_frame(collect_from_now_on)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: IdleCollector._running is not None
                       and isinstance(app.screen, TraceScreen))
        screen = app.screen
        assert isinstance(screen, TraceScreen)
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: view.running and view.thoughts.streaming is not None,
                       timeout=60)
        gc.collect()  # the oldest generation holds only what is made from now on
        cycle = Cycle()
        found = weakref.ref(cycle)
        kept = await made_while_streaming(100_000)  # more than a quarter of what it holds
        for _ in range(FULL_PASS_AFTER):  # into the oldest generation, the count come round
            gc.collect(1)
        del cycle
        full, middle = Passes(2, lambda: view.running), Passes(1, lambda: view.running)
        gc.callbacks.extend((full, middle))
        try:
            while len(middle.seen) < 2:  # Python's own middle passes, as streaming makes them
                assert view.running, "the stream ended before the passes: the test shows nothing"
                kept.extend(await made_while_streaming(20_000))
            assert full.seen == [], "a full pass while the stream ran"
            assert found() is not None
            view.action_stop()
            await wait_for(pilot, lambda: not view.running)
            # The young passes a few keys would make, the middle pass near: the idle app
            # takes its pass, a full one.
            while gc.get_count()[1] + EARLY_PASSES <= gc.get_threshold()[1]:
                gc.collect(0)
            assert await collected(found)
            assert full.seen and not any(full.seen)
            assert IdleCollector._running is not None and 2 in IdleCollector._running.passes
        finally:
            gc.callbacks.remove(full)
            gc.callbacks.remove(middle)
        del kept
