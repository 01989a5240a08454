"""The trace screen when another bbm-tui is generating the same session (another window, a
`run`): two windows on one session are one session. The store holds who is generating it
(`Store.claim_session`, store v13); this screen, told so when it opens the session or when
its own generation is refused (SessionBusy), shows the session read-only: the keys that would
write steps (n, r, b, w) do nothing and the status line says why. It watches the store, shows
the other window's thoughts as they are saved, and takes the session back once the other one
stops (or dies: a claim lapses with its holder)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, ClassVar

from textual import work
from textual.timer import Timer

from bbm_tui.core.store import SessionBusy
from bbm_tui.ui.text import thoughts

# How often a read-only screen looks at the store: new thoughts, and whether it is free.
WATCH_S = 1.0

if TYPE_CHECKING:
    from bbm_tui.ui.screens.trace_parts import TraceScreenParts as _TraceScreen
else:
    _TraceScreen = object


class SharedSession(_TraceScreen):
    """Mixed into `TraceScreen` (ui/screens/trace.py), whose session (`trace`), status line,
    thoughts pane and key checks these use."""

    # The actions that write steps: refused while another bbm-tui generates the session.
    WRITING_ACTIONS: ClassVar[frozenset[str]] = frozenset(
        {"step", "run", "backtrack", "rewrite"})

    busy_elsewhere: SessionBusy | None = None
    _watching: Timer | None = None

    @work(group="claim", exit_on_error=False)
    async def _check_claim(self) -> None:
        """On opening: is another bbm-tui generating this session right now?"""
        holder = await asyncio.to_thread(self.trace.store.claim_holder, self.trace.id,
                                         self.trace.owner)
        if holder is not None:
            self.read_only(holder)

    def read_only(self, busy: SessionBusy) -> None:
        """Show the session read-only while `busy`'s holder generates it."""
        self.busy_elsewhere = busy
        self.set_class(True, "-read-only")
        self.refresh_bindings()
        self._status(f"{busy} (the thoughts it saves appear here).", error=True)
        if self._watching is None:
            self._watching = self.set_interval(WATCH_S, self._watch_claim)

    def _watch_claim(self) -> None:
        self._look_at_the_store()

    @work(exclusive=True, group="claim", exit_on_error=False)
    async def _look_at_the_store(self) -> None:
        trace = self.trace
        holder, head = await asyncio.to_thread(
            lambda: (trace.store.claim_holder(trace.id, trace.owner),
                     trace.store.session(trace.id).head_step_id))
        if head != trace.head_id and not (self.running or self.finding):
            await asyncio.to_thread(trace.reload)
            await self._thoughts.replace_stale()
            self._sync_views()
            if not self._moved:
                self.selected = len(trace.steps)
            self._show_selection(scroll=True)
        if holder is not None:
            self.busy_elsewhere = holder
            return
        self._free_again()

    def _free_again(self) -> None:
        self.busy_elsewhere = None
        if self._watching is not None:
            self._watching.stop()
            self._watching = None
        self.set_class(False, "-read-only")
        self.refresh_bindings()
        self._status(f"The other bbm-tui stopped generating this session: it is yours again "
                     f"({thoughts(len(self.trace.steps))}). {self._next_hint()}")

    def writing_refused(self, action: str) -> bool:
        """Whether `action` writes steps while another bbm-tui generates the session."""
        return self.busy_elsewhere is not None and action in self.WRITING_ACTIONS
