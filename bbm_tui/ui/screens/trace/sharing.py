"""A trace view when another bbm-tui is generating the same session (another window, a `run`):
two windows on one session are one session. The store holds who is generating it
(`Store.claim_session`, store v13); the view, told so when it opens the session or when its own
generation is refused (SessionBusy), shows the session read-only (its `busy_elsewhere`): the
keys that would write steps (n, r, b, w) do nothing and the status line says why. This part
watches the store, shows the other window's thoughts as they are saved, and gives the session
back once the other one stops (or dies: a claim lapses with its holder)."""

from __future__ import annotations

import asyncio

from textual.timer import Timer

from bbm_tui.core.store import SessionBusy
from bbm_tui.ui.screens.trace.host import TraceHost
from bbm_tui.ui.text import thoughts

# How often a read-only view looks at the store: new thoughts, and whether it is free.
WATCH_S = 1.0

# The actions that write steps: refused while another bbm-tui generates the session.
WRITING_ACTIONS = frozenset({"step", "run", "backtrack", "rewrite"})


class SharedSession:
    """Whether another bbm-tui generates the session of one trace view, and the view's watch
    on the store meanwhile. It sets the view's `busy_elsewhere`."""

    def __init__(self, view: TraceHost) -> None:
        self.view = view
        self._watching: Timer | None = None

    def check_claim(self) -> None:
        """On opening: is another bbm-tui generating this session right now?"""
        self.view.run_worker(self._check_claim(), name="check_claim", group="claim",
                             exit_on_error=False, description="Reading who generates the "
                             "session")

    async def _check_claim(self) -> None:
        trace = self.view.trace
        holder = await asyncio.to_thread(trace.store.claim_holder, trace.id, trace.owner)
        if holder is not None:
            self.read_only(holder)

    def read_only(self, busy: SessionBusy) -> None:
        """Show the session read-only while `busy`'s holder generates it."""
        view = self.view
        view.busy_elsewhere = busy
        view.say(f"{busy} (the thoughts it saves appear here).", error=True)
        if self._watching is None:
            self._watching = view.set_interval(WATCH_S, self._look_at_the_store)

    def _look_at_the_store(self) -> None:
        self.view.run_worker(self._read_the_store(), name="watch_claim", group="claim",
                             exclusive=True, exit_on_error=False,
                             description="Reading the session")

    async def _read_the_store(self) -> None:
        view = self.view
        trace = view.trace
        holder, head = await asyncio.to_thread(
            lambda: (trace.store.claim_holder(trace.id, trace.owner),
                     trace.store.session(trace.id).head_step_id))
        if head != trace.head_id and not (view.running or view.finding):
            await asyncio.to_thread(trace.reload)
            await view.show_reloaded()
        if holder is not None:
            view.busy_elsewhere = holder
            return
        self._free_again()

    def _free_again(self) -> None:
        view = self.view
        if self._watching is not None:
            self._watching.stop()
            self._watching = None
        view.busy_elsewhere = None
        view.say(f"The other bbm-tui stopped generating this session: it is yours again "
                 f"({thoughts(len(view.trace.steps))}). {view.next_hint()}")

    def refuses(self, action: str) -> bool:
        """Whether `action` writes steps while another bbm-tui generates the session."""
        return self.view.busy_elsewhere is not None and action in WRITING_ACTIONS
