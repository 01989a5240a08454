"""The base of every screen of the app."""

from __future__ import annotations

from textual.screen import Screen
from textual.worker import Worker, WorkerState

from bbm_tui.ui.messages import WorkerFailed


class BbmScreen(Screen[None]):
    """A screen whose workers' failures go to the app's one handler: `Worker.StateChanged`
    does not bubble, so the screen passes a failure on as a message (ui/messages.py)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.post_message(WorkerFailed(event.worker))
