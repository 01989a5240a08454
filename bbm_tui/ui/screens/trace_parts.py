"""What the trace screen's mixins (trace_branching.py, trace_finding.py, trace_sharing.py) use
of the screen they are mixed into, declared for the type checker: `TraceScreen` (trace.py)
has every part below. The mixins derive from this class only while types are checked
(pyright); at run time they derive from `object`, and the screen's own parts are used."""

from __future__ import annotations

import asyncio

from textual.worker import Worker

from bbm_tui.core import llm
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.ui.context import AppContext
from bbm_tui.ui.dialogs import FindRequest
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import ThoughtList


class TraceScreenParts(BbmScreen):
    trace: TraceSession
    selected: int
    running: bool
    finding: bool
    verify_live: bool
    _last_request: FindRequest | None
    _label_lock: asyncio.Lock
    _moved: bool

    @property
    def bbm_app(self) -> AppContext: ...

    @property
    def _thoughts(self) -> ThoughtList: ...

    def _views(self) -> list[ThoughtView]: ...

    def _view(self, number: int) -> ThoughtView | None: ...

    def _key(self, binding_id: str) -> str: ...

    def _next_hint(self) -> str: ...

    def _status(self, message: str, *, error: bool = False, then: str = "") -> None: ...

    def _show_title(self) -> None: ...

    def _show_selection(self, *, scroll: bool = False) -> None: ...

    def _set_running(self, running: bool) -> None: ...

    def _say_stopped(self) -> None: ...

    def _on_event(self, event: object) -> None: ...

    def _add_call(self, call: llm.CallRecord | None) -> None: ...

    def _drop_unfinished(self) -> None: ...

    def _sync_views(self) -> None: ...

    # FindingActions' own, which BranchActions uses.

    def _load_finder(self) -> Worker[None]: ...

    def _show_finder(self) -> None: ...
