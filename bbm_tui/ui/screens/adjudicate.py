"""Adjudication (issue 12, item 5): the traces the annotators disagree on, one at a time, each
annotator's first mistake beside its thought and the candidates listed on the left. A digit
accepts a candidate; `x` sets the selected thought instead, `c` "no mistake"; the choice is
recorded as the adjudicated label (core/annotation/adjudication.py) in a thread."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core.annotation.adjudication import AdjudicationQueue
from bbm_tui.core.store import Session, Step
from bbm_tui.core.tasks import get_task
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.messages import GoBack
from bbm_tui.ui.screens.annotate import ThoughtsPane
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import MUTED, safe, styled
from bbm_tui.ui.viewmodels.annotate import location_text
from bbm_tui.ui.widgets.chrome import KeysFooter, TitleBar
from bbm_tui.ui.widgets.hanging import HangingStatic


def _accept(digit: int, show: bool) -> Binding:
    return Binding(str(digit), f"accept({digit - 1})", f"accept {digit}",
                   id=f"adjudicate_accept_{digit}", show=show,
                   tooltip=f"Accept candidate {digit} as the adjudicated label")


class AdjudicateScreen(BbmScreen):
    CSS_PATH = stylesheet("annotate")
    is_home = True

    BINDINGS: ClassVar[list[BindingType]] = [
        *(_accept(digit, digit <= 2) for digit in range(1, 10)),
        Binding("j,down", "select(1)", "next", id="adjudicate_select_next",
                tooltip="Select the next thought"),
        Binding("k,up", "select(-1)", "previous", id="adjudicate_select_previous",
                tooltip="Select the previous thought"),
        Binding("x", "set_selected", "set mistake", id="adjudicate_set_mistake",
                tooltip="The selected thought is the first mistake (adjudicated)"),
        Binding("c", "set_none", "no mistake", id="adjudicate_no_mistake",
                tooltip="The trace has no mistake (adjudicated)"),
        Binding("u", "undo", "undo", id="adjudicate_undo",
                tooltip="Withdraw this trace's adjudicated label"),
        Binding("n", "move(1)", "next trace", id="adjudicate_next_trace",
                tooltip="The next trace in the queue"),
        Binding("p", "move(-1)", "prev trace", id="adjudicate_previous_trace",
                tooltip="The previous trace in the queue"),
        Binding("escape", "back", "back", id="adjudicate_back", tooltip="Leave"),
    ]

    def __init__(self, queue: AdjudicationQueue) -> None:
        super().__init__(classes="adjudicate-screen")
        self.queue = queue
        self.selected = 0
        self._lock = asyncio.Lock()
        self._session: Session | None = None
        self._steps: list[Step] = []
        self._shown: int | None = None

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        with Horizontal(id="adjudicate-body"):
            with VerticalScroll(id="adjudicate-left", classes="panel", can_focus=False):
                yield Static(id="j-question")
                yield Static(id="j-target", classes="fact")
                yield Static(id="j-candidates", classes="fact")
                yield Static(id="j-state", classes="fact")
            yield ThoughtsPane(id="j-thoughts", classes="panel")
        yield KeysFooter(show_command_palette=False)

    def on_mount(self) -> None:
        self._act(lambda: None)

    # -- loading and showing

    def _load(self) -> None:
        """In a thread: the session and steps of the item on show."""
        item = self.queue.current
        if self._shown != item.session_id:
            self._session = self.queue.store.session(item.session_id)
            self._steps = self.queue.store.branch(item.session_id)
            self.selected = min(item.choices[0] or 0, max(len(self._steps) - 1, 0)) \
                if item.choices else 0

    async def _show(self) -> None:
        item = self.queue.current
        session = self._session
        if session is None:
            return
        rebuild = self._shown != item.session_id
        self._shown = item.session_id
        settled = sum(entry.settled for entry in self.queue.items)
        self.query_one(TitleBar).set_left(Content(
            f"adjudicate · {session.task} · {one_line(session.name, 50)} · "
            f"{self.queue.position + 1} of {len(self.queue.items)} · {settled} settled"))
        self.query_one("#j-question", Static).update(
            safe(get_task(session.task).question(session.input)))
        self.query_one("#j-target", Static).update(Content.assemble(
            styled("Target: ", "bold"), safe(session.target or "—")))
        lines = [Content.styled("Candidates", "bold")]
        for number, choice in enumerate(item.choices, start=1):
            names = ", ".join(name for name, found in sorted(item.candidates.items())
                              if found == choice)
            lines.append(Content.assemble(styled(f"{number}  ", "bold $accent"),
                                          Content(f"{location_text(choice)}  "),
                                          styled(one_line(names, 80), MUTED)))
        self.query_one("#j-candidates", Static).update(Content("\n").join(lines))
        state = ("Adjudicated: " + location_text(item.adjudicated)  # type: ignore[arg-type]
                 if item.settled else "Not adjudicated yet")
        self.query_one("#j-state", Static).update(
            styled(state, "$text-success" if item.settled else MUTED))
        if rebuild:
            pane = self.query_one("#j-thoughts", ThoughtsPane)
            await pane.remove_children()
            await pane.mount_all(HangingStatic(gutter_width=4, classes="a-thought")
                                 for _ in self._steps)
        self._show_thoughts()

    def _show_thoughts(self) -> None:
        pane = self.query_one("#j-thoughts", ThoughtsPane)
        item = self.queue.current
        marks: dict[int, list[str]] = {}
        for name, found in sorted(item.candidates.items()):
            if found is not None:
                marks.setdefault(found, []).append(name)
        for index, (widget, step) in enumerate(zip(
                pane.query(".a-thought").results(HangingStatic), self._steps, strict=False)):
            gutter = styled(f"{index + 1:>3} ", MUTED)
            parts = [safe(step.text)]
            if index in marks:
                parts.append(styled(f"  ✗ {one_line(', '.join(marks[index]), 60)}",
                                    "bold $text-error"))
            if item.settled and item.adjudicated == index:
                parts.append(styled("  ⚑ adjudicated", "bold $text-success"))
            widget.show(gutter, Content.assemble(*parts))
            widget.set_class(index == self.selected, "-current")
            widget.set_class(index in marks, "-mistake")
            if index == self.selected:
                widget.scroll_visible(animate=False)

    # -- actions

    def _act(self, action: Callable[[], object]) -> None:
        self._run_action(action)

    @work(group="adjudicate", exit_on_error=False)
    async def _run_action(self, action: Callable[[], object]) -> None:
        async with self._lock:
            try:
                await asyncio.to_thread(action)
            except ValueError as error:
                self.notify(str(error), severity="warning", markup=False)
            await asyncio.to_thread(self._load)
            await self._show()

    def action_accept(self, index: int) -> None:
        choices = self.queue.current.choices
        if index >= len(choices):
            self.notify(f"There are {len(choices)} candidates.", markup=False)
            return
        self._act(lambda: self.queue.settle(choices[index]))

    def action_set_selected(self) -> None:
        selected = self.selected
        self._act(lambda: self.queue.settle(selected))

    def action_set_none(self) -> None:
        self._act(lambda: self.queue.settle(None))

    def action_undo(self) -> None:
        self._act(self.queue.undo)

    def action_move(self, delta: int) -> None:
        self._act(lambda: self.queue.move(delta))

    def action_select(self, delta: int) -> None:
        if self._steps:
            self.selected = max(0, min(len(self._steps) - 1, self.selected + delta))
            self._show_thoughts()

    def action_back(self) -> None:
        self.post_message(GoBack(self))
