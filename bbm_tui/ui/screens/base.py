"""The base of every screen of the app."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker


class BbmScreen(Screen[None]):
    """A screen whose workers' failures go to the app's one handler (`Worker.StateChanged`
    does not bubble, so each node that owns workers passes it on)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.app.on_worker_state_changed(event)  # type: ignore[attr-defined]


