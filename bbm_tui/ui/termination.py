"""SIGTERM (a `kill`, a logout) and SIGHUP (the terminal closed) end the app the way `q` does, so
that Textual restores the terminal (main screen, mouse off, cursor on) instead of the process
dying in the alternate screen. Exit codes 143 and 129."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
import time
from collections.abc import Callable, Iterator

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class TerminationSignals:
    """The app's termination signals: noted while it starts (`held`), handed to its event loop
    once it runs (`hand_to_loop`)."""

    def __init__(self) -> None:
        self._early: list[int] = []

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """Around `run()`: note a SIGTERM or SIGHUP that comes before the app's on_mount hands
        them to the event loop. The driver puts the terminal in the alternate screen well
        before then, and the default action (dying there) would leave it so."""
        def note(signal_number: int, _frame: object) -> None:
            self._early.append(signal_number)

        previous = {number: signal.signal(number, note) for number in SIGNALS}
        try:
            yield
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def hand_to_loop(self, terminate: Callable[[int], None]) -> None:
        """From now on the running event loop calls `terminate` with the signal's number; one
        that came while the app started is acted on now."""
        loop = asyncio.get_running_loop()
        for signal_number in SIGNALS:
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal_number, terminate, signal_number)
        if self._early:
            terminate(self._early[0])


# How many objects the collector lets be made (and not yet freed) before it looks at the
# youngest ones (Python's default: 700). Painting streamed text makes Textual's strips, segments
# and cache entries by the thousand each second, most of them freed within a few frames; at
# 700 the young collections ran 50 times a second with two models side by side and passed the
# caches' entries on to the older generations, whose full passes (40-150 ms each, mid-stream)
# took the collector's share of two columns to three or four times one column's.
YOUNG_OBJECTS = 10_000

# The older generations' passes (the middle one: what outlived ten young passes; the full one:
# everything not frozen) are run by the app when it is idle, a little before Python's own
# schedule would run them. Python runs one when an allocation crosses a count, wherever that
# falls: on the sessions screen it fell inside a key two to four times in 170 keys, a middle
# pass costing 10-50 ms of CPU on top of the key's own 7-30 ms (worst `down` 45-74 ms CPU, worst
# key until settled 104-230 ms on main at load 1.1-4.9); taken in a pause after a key, the
# worst `down` is 18-22 ms CPU and the worst key until settled 80-129 ms, a `pgdn` that loads
# the next page (issue 36, bench/big_store.py). Why early rather than instead: Python's
# schedule of middle passes stays as it is, so an app that is never idle (two columns
# streaming) collects its young and middle garbage as before, and its full pass on a schedule
# of its own (`DEFERRED_FULL_PASS`); the thresholds are set once, at the first frame, so
# nothing is to be put back when an app ends. Why not all young passes too: 10,000 objects
# take ~1 ms, less than a frame.
IDLE_TICK_S = 0.010  # how often the app's thread is looked at while a pass is near due
QUIET_CPU_S = 0.0005  # at most this much CPU of the app's thread in a tick: a quiet tick
# A middle pass is taken after this many quiet ticks in a row (40 ms): longer than the gap
# between two frames of streamed text (33 ms at 30 frames a second), so that a stream, which
# is never idle, leaves the passes to Python's schedule (taken at every short gap, the middle
# passes came up to 3.7 times as often, and Python's full passes with them: a thinking
# stream's CPU a second 247-294 -> 295-321 ms, bench/thinking_stream.py --quick at load
# 4.3-9.4); shorter than the pause after a key on the sessions screen.
MIDDLE_PASS_QUIET_TICKS = 4
# How many young passes before the middle one is due the app takes it early. The sessions
# screen's `s` makes four, a page crossed one or two, and a run of keys with no quiet tick
# between them more: at 4, ten of the sessions part's thirteen middle passes were still
# Python's; at 8 every one during the keys was taken idle (bench/big_store.py --quick, traced
# with gc.callbacks).
EARLY_PASSES = 8
# A full pass is taken early only in a real pause (this many quiet ticks in a row, 200 ms): it
# walks everything the app holds, and Python runs it only once what outlived the middle passes
# grew by a quarter of what the last one kept (a rule `gc.collect` skips), so full passes taken
# at every short pause could be several times Python's while text streams. Without a real
# pause, Python's own schedule and its rule run it, ten times as seldom (`DEFERRED_FULL_PASS`).
FULL_PASS_QUIET_TICKS = 20
# Python's own full pass is put off to this many middle passes (its default: 10), while the app
# takes one when idle at Python's usual count (`FULL_PASS_AFTER`). A full pass walks everything
# the app made since its first frame (a long thinking trace's ~220 thoughts: 190-530 ms of CPU
# at once), and a stream never leaves the app idle, so Python's schedule ran it mid-stream: one
# in a 4 s window took a round of bench/thinking_stream.py from ~0.9x to 1.62x. At 100 a stream
# still has a full pass, bounding its memory, ten times as seldom: what outlived the middle
# passes (garbage in cycles among it) waits for it, which the peak RSS of a whole stream
# measured (docs/benchmarks.md, thinking_stream's row).
DEFERRED_FULL_PASS = 100
FULL_PASS_AFTER = 10  # middle passes: when an idle app takes its full pass (Python's default)


def collect_from_now_on() -> None:
    """After the first frame: what the start made (modules, classes, the first screen) is
    moved out of the collector's sight for good (`gc.freeze`), and the collector, paused by
    the command line while the app started, runs again on what is made from now on, on the
    app's own schedule (`YOUNG_OBJECTS`, Python's full pass put off to `DEFERRED_FULL_PASS`,
    and the older passes when idle: `IdleCollector`)."""
    gc.freeze()
    _, middle, _ = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, DEFERRED_FULL_PASS)
    gc.enable()
    with contextlib.suppress(RuntimeError):  # no event loop: Python's schedule alone
        IdleCollector.start(asyncio.get_running_loop())


class IdleCollector:
    """Runs the collector's middle pass when the app's thread has been idle for a few ticks
    (`QUIET_CPU_S` of CPU in each `IDLE_TICK_S`, `MIDDLE_PASS_QUIET_TICKS` in a row) and the
    next young pass, or one of the few after it, would set off such a pass (`EARLY_PASSES`);
    when Python's next would be a full pass, that one in a real pause only
    (`FULL_PASS_QUIET_TICKS`). It looks only while such a pass is near due (told by the
    collector itself, after each pass), so an idle app is not woken; it changes no threshold,
    so nothing is put back when the app ends; and it leaves the collector alone while someone
    has turned it off (a bulk load in a thread)."""

    _running: IdleCollector | None = None  # the latest app's; a new one replaces it

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._handle: asyncio.Handle | None = None
        self._cpu = 0.0
        self._quiet_ticks = 0  # ticks in a row with next to no CPU
        self.passes: list[int] = []  # the generations it collected, for tests and benchmarks

    @classmethod
    def start(cls, loop: asyncio.AbstractEventLoop) -> IdleCollector:
        if cls._running is not None:
            cls._running.stop()
        cls._running = collector = cls(loop)
        gc.callbacks.append(collector._after_a_pass)
        collector._after_a_pass("stop", {})
        return collector

    def stop(self) -> None:
        with contextlib.suppress(ValueError):
            gc.callbacks.remove(self._after_a_pass)
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _after_a_pass(self, phase: str, _info: dict[str, int]) -> None:
        """The collector's callback (in whichever thread collected): start looking once an
        older pass is near due."""
        if phase != "stop" or self._handle is not None or self.due() is None:
            return
        if self._loop.is_closed():
            self.stop()  # its app is long gone
            return
        self._quiet_ticks = 0  # a new look: the time before it is not known
        self._handle = self._loop.call_soon_threadsafe(self._look)

    def _look(self) -> None:
        self._cpu = time.thread_time()
        self._handle = self._loop.call_later(IDLE_TICK_S, self._tick)

    def _tick(self) -> None:
        due = self.due()
        quiet = time.thread_time() - self._cpu <= QUIET_CPU_S
        self._quiet_ticks = self._quiet_ticks + 1 if quiet else 0
        if due is None:  # Python's own schedule ran it (a busy app)
            self._handle = None
            return
        needed = MIDDLE_PASS_QUIET_TICKS if due == 1 else FULL_PASS_QUIET_TICKS
        if self._quiet_ticks >= needed and gc.isenabled():
            self._handle = None
            gc.collect(due)  # its callback finds nothing due now
            self.passes.append(due)
            return
        self._look()

    @staticmethod
    def due() -> int | None:
        """The older generation whose pass is due within `EARLY_PASSES` young passes, if
        any: 2 when `FULL_PASS_AFTER` middle passes have run since the last full one (Python's
        own full pass waits for `DEFERRED_FULL_PASS`: an idle app takes it at the usual count,
        a busy one, streaming, has it put off)."""
        _, middle, oldest = gc.get_threshold()
        _, young_passes, middle_passes = gc.get_count()
        if young_passes + EARLY_PASSES <= middle:
            return None
        return 2 if middle_passes >= min(oldest, FULL_PASS_AFTER) else 1
