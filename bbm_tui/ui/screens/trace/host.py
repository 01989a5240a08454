"""What the parts of a trace view (finding.py, branching.py) may use of the view, declared as a
protocol: they hold the view as a `TraceHost`, never as its class, so that the view imports
them and they never import it (the package's one direction, pyproject.toml).

A part's workers run on the view (`run_worker`), so that the view's esc, which cancels its
worker groups, stops them too, and a failure reaches the app's one handler; each worker says
what it does (`description`), which is what the app names when it fails."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from textual.app import App
    from textual.content import Content
    from textual.message import Message
    from textual.worker import Worker

    from bbm_tui.core.trace.session import TraceSession
    from bbm_tui.ui.context import AppContext
    from bbm_tui.ui.viewmodels.trace import FinderShown
    from bbm_tui.ui.widgets.thought import ThoughtView
    from bbm_tui.ui.widgets.thought_list import ThoughtList


class TraceHost(Protocol):
    """A trace view, as its parts see it."""

    # The session on show (its branch on show, its store, its model).
    trace: TraceSession
    # The view's reactive state: setting one shows it (and greys keys out or back in).
    running: bool  # generating: a step, a run, a backtrack's branch, a rewrite's
    finding: bool  # a mistake finder is judging the trace
    selected: int  # the thought the keys act on (0: none yet)
    verify_live: bool  # the task verifier marks each thought as it finishes
    finder: FinderShown | None  # the finder run on show (set it again to show a change)
    presenter: bool  # no latency or token lines under the thoughts

    @property
    def app(self) -> App[Any]: ...

    @property
    def is_attached(self) -> bool: ...

    @property
    def context(self) -> AppContext:
        """The app, as a screen may use it."""
        ...

    @property
    def thoughts(self) -> ThoughtList:
        """The thoughts pane."""
        ...

    def views(self) -> list[ThoughtView]:
        """The finished thoughts on show, in order."""
        ...

    def reveal(self, number: int) -> ThoughtView | None:
        """Thought `number`'s view, bringing it into the window."""
        ...

    def select(self, number: int, *, center: bool = False) -> None:
        """Select thought `number` and scroll it into view (`center`: to the middle)."""
        ...

    def collapse_answers(self) -> None:
        """Hide every finder's answer open under a thought or its verdict (e)."""
        ...

    def key(self, binding_id: str) -> str:
        """The key bound to `binding_id` now (the user's keymap applied), for a hint."""
        ...

    def say(self, message: str, *, error: bool = False, then: str = "") -> None:
        """The status line: what happened, and what to do next."""
        ...

    def say_stopped(self) -> None: ...

    def next_hint(self) -> str:
        """The keys that go on generating, as the status line says them."""
        ...

    def label_hint(self) -> str:
        """The keys that label the trace (or undo its label), as the status line says them."""
        ...

    def show_label(self) -> None:
        """The label in force: the thoughts' glyphs and dimming, the label on the left."""
        ...

    def show_answer(self) -> None:
        """The trace's answer and whether it matches the target, on the left."""
        ...

    def show_gold(self, gold: Content | None) -> None:
        """The dataset's gold label on the left (None: hidden)."""
        ...

    def sync_views(self) -> None:
        """Show what the store has: any committed step with no view, the label, the answer,
        the finder's marks."""
        ...

    def thought_finished(self, number: int) -> None:
        """Thought `number` was committed and is on show (the selection follows it, the live
        verifier judges it)."""
        ...

    def show_title(self) -> None:
        """Tell the screen that the title changed (the model the next step uses)."""
        ...

    async def stream(self, events: AsyncIterator[object]) -> None:
        """Show a generation's events as they come (thoughts streaming, finishing, the
        answer, the end), as `r` does."""
        ...

    async def switch_branch(self, step_id: int) -> None:
        """Make the branch through step `step_id` the one on show (a store write, in turn
        with the labels)."""
        ...

    async def show_branch(self, selected: int, *, follow: bool = False) -> None:
        """The branch on show changed: show its thoughts and select `selected` (`follow`:
        the selection follows new thoughts again)."""
        ...

    def end_generating(self) -> None:
        """A generation ended (finished, failed or stopped): drop the thought still streaming,
        show what the store has, and give the keys back."""
        ...

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...

    def post_message(self, message: Message) -> bool: ...

    def run_worker(self, work: Any, name: str | None = "", group: str = "default",
                   description: str = "", exit_on_error: bool = True, start: bool = True,
                   exclusive: bool = False, thread: bool = False) -> Worker[Any]: ...
