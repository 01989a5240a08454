"""SIGTERM (a `kill`, a logout) and SIGHUP (the terminal closed) end the app the way `q` does, so
that Textual restores the terminal (main screen, mouse off, cursor on) instead of the process
dying in the alternate screen. Exit codes 143 and 129."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import signal
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


def collect_from_now_on() -> None:
    """After the first frame: what the start made (modules, classes, the first screen) is
    moved out of the collector's sight for good (`gc.freeze`), and the collector, paused by
    the command line while the app started, runs again on what is made from now on, on the
    app's own schedule (`YOUNG_OBJECTS`)."""
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_OBJECTS, middle, oldest)
    gc.enable()
