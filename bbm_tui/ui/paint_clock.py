"""Streamed text is painted on one clock for the whole app, at most `PER_SECOND` times a second.

A token arrives on its own (a model streams 30-100 a second) and painting it is a frame: the
widget's lines, the compositor, the terminal's update. One trace paints about a frame a token
either way; but two models side by side stream out of step, and painting each token as it came
made a frame for each column's tokens: 50-55 frames a second for two columns at 30 tokens a
second each, against one column's 31. On one clock, the tokens that came between two ticks,
from every trace, share the next tick's frame.

The clock ticks while anything streams, and pauses at the first tick with nothing to paint; a
token that comes while it is paused waits at most until the tick it would have had (a slow
model's tokens come far apart, so each is painted as it comes)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer

PER_SECOND = 30.0


class PaintClock:
    """Paints asked for (`request`) run together, at most `per_second` times a second."""

    def __init__(self, app: App, per_second: float = PER_SECOND) -> None:
        self._app = app
        self._period = 1.0 / per_second
        # The paint each asker wants at the next tick (one per asker: a later request of the
        # same asker replaces its earlier one, which would paint the same).
        self._due: dict[Hashable, Callable[[], None]] = {}
        # One timer for the app's life, paused while nothing is due: a paused interval timer
        # that is resumed after its tick time went by ticks at once, so the first token after
        # a quiet spell is not held back. (A timer made for each tick cost a task each.)
        self._timer: Timer | None = None

    def request(self, asker: Hashable, paint: Callable[[], None]) -> None:
        """Run `paint` at the clock's next tick."""
        self._due[asker] = paint
        if self._timer is None:
            self._timer = self._app.set_interval(self._period, self._tick, name="paint clock")
        else:
            self._timer.resume()

    def cancel(self, asker: Hashable) -> None:
        """Forget `asker`'s paint (what it would paint is gone)."""
        self._due.pop(asker, None)

    def _tick(self) -> None:
        """Run every paint asked for since the last tick."""
        due, self._due = self._due, {}
        if not due and self._timer is not None:
            self._timer.pause()
        for paint in due.values():
            paint()
