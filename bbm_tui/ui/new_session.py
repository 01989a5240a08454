"""The new-session screen: a task, a question (from the bundled dataset, by number or search, or
typed in), and the model to ask. Start creates the session in a thread and opens it."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import (
    Button,
    Checkbox,
    ContentSwitcher,
    Footer,
    Input,
    Label,
    OptionList,
    Select,
    Static,
    Tab,
    Tabs,
    TextArea,
)
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import TraceRow, bundled_rows
from bbm_tui.core.session import NewTrace, TraceSession
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASKS, get_task
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.text import MUTED, safe, safe_line, styled
from bbm_tui.ui.widgets import BbmScreen, TitleBar

if TYPE_CHECKING:
    from bbm_tui.ui.app import BbmApp

_NUMBER = re.compile(r"^#?\s*(\d+)$")


@dataclass(frozen=True)
class Entry:
    """One dataset question in the picker."""

    index: int
    row: TraceRow
    haystack: str  # lower-case text searched by the filter


@dataclass(frozen=True)
class StartRequest:
    trace: NewTrace
    spec: llm.ModelSpec
    recorded_steps: list[str] | None = None


def create_trace(store: Store, request: StartRequest) -> TraceSession:
    """Blocking: create the session (and load the recorded trace); run it in a thread."""
    trace = TraceSession.create(store, request.trace, request.spec)
    if request.recorded_steps:
        trace.load_recorded(request.recorded_steps)
    return trace


def dataset_request(
    task: str, index: int, row: TraceRow, spec: llm.ModelSpec, *, recorded: bool
) -> StartRequest:
    trace = NewTrace(
        task=task,
        input=row.input,
        target=row.target,
        dataset_index=index,
        gold_mistake_index=row.mistake_index,
    )
    return StartRequest(trace, spec, list(row.steps) if recorded else None)


def filter_entries(entries: list[Entry], query: str) -> list[Entry]:
    """Entries matching every word of `query`; a bare number (or #number) puts that question
    first, then any whose text contains the digits."""
    query = query.strip()
    if not query:
        return entries
    number = _NUMBER.match(query)
    words = query.lower().lstrip("#").split()
    matches = [entry for entry in entries if all(word in entry.haystack for word in words)]
    if number is None:
        return matches
    wanted = int(number.group(1))
    exact = [entry for entry in entries if entry.index == wanted]
    return exact + [entry for entry in matches if entry.index != wanted]


def entry_prompt(entry: Entry) -> Content:
    return Content.assemble(
        (f"#{entry.index:<4}", "bold $accent"),
        " ",
        safe_line(entry.row.input, 46),
        ("  → ", MUTED),
        (one_line(entry.row.target, 28), "$text-success"),
    )


class NewSessionScreen(BbmScreen):
    """Pick what to work on. Enter on a question (or ctrl+r, or Start) opens it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "start", "start", id="new_start",
                tooltip="Create the session and open it"),
        Binding("ctrl+t", "toggle_source", "dataset/typed", id="new_toggle_source",
                tooltip="Switch between a dataset question and a typed one"),
        Binding("slash", "search", "search", id="new_search",
                tooltip="Search the dataset's questions (or type a number)"),
        Binding("escape", "back", "back", id="new_back",
                tooltip="Back to the screen below (when there is one)"),
    ]

    # The list, not the search box, has the focus at first, so that single keys
    # (s sessions, ? help, q quit) work at once; / goes to the search.
    AUTO_FOCUS = "#questions"

    def __init__(self, config: Config, *, task: str | None = None) -> None:
        super().__init__(id="new-session")
        self._config = config
        self.task_name = task if task in TASKS else next(iter(TASKS))
        self._entries: list[Entry] = []
        self._shown: list[Entry] = []

    @property
    def bbm_app(self) -> BbmApp:
        return self.app  # type: ignore[return-value]

    def compose(self) -> ComposeResult:
        yield TitleBar(styled("bbm-tui ─ new session", "bold"), id="title-bar")
        with Horizontal(id="new-body"):
            with Vertical(id="question-side", classes="panel"):
                yield Label("Task", classes="field-label")
                yield Select(
                    [(task.title, task.name) for task in TASKS.values()],
                    value=self.task_name, allow_blank=False, id="task",
                )
                # Tabs + ContentSwitcher rather than TabbedContent: that one switches back
                # to whichever pane holds the focus, which fights a programmatic switch.
                yield Tabs(Tab("From the dataset", id="dataset"),
                           Tab("Type a question", id="typed"), id="source")
                with ContentSwitcher(initial="source-dataset", id="source-panes"):
                    with Vertical(id="source-dataset"):
                        yield Input(
                            placeholder="/ to search the questions, or type a number (e.g. 17)",
                            id="search",
                        )
                        yield Static(id="match-count", classes="hint")
                        yield OptionList(id="questions")
                        yield Static(id="question-preview")
                    with Vertical(id="source-typed"):
                        yield Static(id="typed-hint", classes="hint")
                        yield TextArea(id="typed-input", soft_wrap=True, show_line_numbers=False)
                        yield Input(placeholder="Target answer (optional)", id="typed-target")
            with Vertical(id="model-side", classes="panel"):
                yield Label("Model (any litellm model string)", classes="field-label")
                yield Input(value=self._config.model, id="model",
                            tooltip="replay/bbm replays the bundled dataset offline")
                yield Label("API base", classes="field-label")
                yield Input(value=self._config.api_base or "",
                            placeholder="the provider's default", id="api-base")
                yield Label("Mode", classes="field-label")
                yield Select(
                    [("chat", "chat"), ("completion (base models)", "completion")],
                    value=self._config.mode if self._config.mode in llm.MODES else "chat",
                    allow_blank=False, id="mode",
                )
                yield Checkbox("Load the recorded trace", id="recorded",
                               tooltip="The dataset's own steps, to label without generating")
                yield Static(styled("for labelling fast, without generating", MUTED),
                             classes="hint", id="recorded-hint")
                yield Button("Start", variant="primary", id="start",
                             tooltip="Create the session and open it (ctrl+r)")
                yield Static(id="new-status", classes="hint")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#question-side").border_title = "Question"
        self.query_one("#model-side").border_title = "Model"
        self.query_one("#questions", OptionList).loading = True
        self._show_typed_hint()
        self._load_rows(self.task_name)

    @on(Tabs.TabActivated, "#source")
    def _source_switched(self, event: Tabs.TabActivated) -> None:
        source = event.tab.id or "dataset"
        self.query_one("#source-panes", ContentSwitcher).current = f"source-{source}"
        if not self.query_one("#source", Tabs).has_focus:
            self.query_one("#typed-input" if source == "typed" else "#questions").focus()

    def action_toggle_source(self) -> None:
        tabs = self.query_one("#source", Tabs)
        tabs.active = "dataset" if tabs.active == "typed" else "typed"

    def action_search(self) -> None:
        self.query_one("#source", Tabs).active = "dataset"
        self.query_one("#search", Input).focus()

    # -- the dataset's questions (read in a thread: the first read parses a JSONL file)

    @on(Select.Changed, "#task")
    def _task_changed(self, event: Select.Changed) -> None:
        if event.value == self.task_name or not isinstance(event.value, str):
            return
        self.task_name = event.value
        self.query_one("#questions", OptionList).loading = True
        self._show_typed_hint()
        self._load_rows(self.task_name)

    @work(thread=True, exclusive=True, group="dataset", exit_on_error=False)
    def _load_rows(self, task: str) -> None:
        rows = bundled_rows(task)
        entries = [
            Entry(index, row, f"{row.input}\n{row.target}".lower())
            for index, row in enumerate(rows)
        ]
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._rows_loaded, task, entries)

    def _rows_loaded(self, task: str, entries: list[Entry]) -> None:
        if task != self.task_name:
            return
        self._entries = entries
        self.query_one("#questions", OptionList).loading = False
        self._apply_filter()

    @on(Input.Changed, "#search")
    def _search_changed(self) -> None:
        self._apply_filter()

    def _apply_filter(self) -> None:
        query = self.query_one("#search", Input).value
        self._shown = filter_entries(self._entries, query)
        questions = self.query_one("#questions", OptionList)
        questions.clear_options()
        questions.add_options(
            Option(entry_prompt(entry), id=str(entry.index)) for entry in self._shown
        )
        total = len(self._entries)
        count = f"{total} questions"
        if query.strip():
            count = f"{len(self._shown)} of {count}"
        self.query_one("#match-count", Static).update(
            styled(f"{count} · enter on a question starts it", MUTED)
        )
        if self._shown:
            questions.highlighted = 0
        self._show_preview()

    @on(OptionList.OptionHighlighted, "#questions")
    def _question_highlighted(self) -> None:
        self._show_preview()

    @on(Input.Submitted, "#search")
    def _search_submitted(self) -> None:
        if self._shown:
            self.query_one("#questions", OptionList).focus()

    @on(OptionList.OptionSelected, "#questions")
    def _question_selected(self) -> None:
        self.action_start()

    def selected_entry(self) -> Entry | None:
        highlighted = self.query_one("#questions", OptionList).highlighted
        if highlighted is None or not 0 <= highlighted < len(self._shown):
            return None
        return self._shown[highlighted]

    def _show_preview(self) -> None:
        entry = self.selected_entry()
        preview = self.query_one("#question-preview", Static)
        if entry is None:
            preview.update(styled("No question matches.", MUTED))
            return
        preview.update(Content.assemble(
            (f"#{entry.index}  ", "bold $accent"),
            safe(entry.row.input),
            ("\nTarget: ", "bold"),
            safe_line(entry.row.target),
        ))

    def _show_typed_hint(self) -> None:
        prefix = get_task(self.task_name).question_prefix or "(nothing: the text is the question)"
        self.query_one("#typed-hint", Static).update(Content.assemble(
            ("The model is asked: ", MUTED),
            (prefix, "bold"),
            ("+ your text", MUTED),
        ))

    # -- starting

    @on(Button.Pressed, "#start")
    def _start_pressed(self) -> None:
        self.action_start()

    def action_start(self) -> None:
        request = self._request()
        if request is not None:
            self.query_one("#new-status", Static).update(styled("Opening…", MUTED))
            self._start(request)

    def _request(self) -> StartRequest | None:
        """What the form says, or None (after saying what is missing)."""
        model = self.query_one("#model", Input).value.strip()
        if not model:
            return self._refuse("Give a model (e.g. replay/bbm, the offline replay).")
        api_base = self.query_one("#api-base", Input).value.strip() or None
        mode = self.query_one("#mode", Select).value
        spec = llm.ModelSpec(model, api_base, mode if mode in llm.MODES else "chat")  # type: ignore[arg-type]
        if self.query_one("#source", Tabs).active == "typed":
            text = self.query_one("#typed-input", TextArea).text.strip()
            if not text:
                return self._refuse("Type a question first.")
            target = self.query_one("#typed-target", Input).value.strip() or None
            return StartRequest(NewTrace(task=self.task_name, input=text, target=target), spec)
        entry = self.selected_entry()
        if entry is None:
            return self._refuse("Pick a question first.")
        recorded = self.query_one("#recorded", Checkbox).value
        return dataset_request(self.task_name, entry.index, entry.row, spec, recorded=recorded)

    def _refuse(self, message: str) -> None:
        self.notify(message, severity="warning", markup=False)
        return None

    @work(exclusive=True, group="start", exit_on_error=False)
    async def _start(self, request: StartRequest) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            self.query_one("#new-status", Static).update(
                styled("The session store is not available.", "$text-error")
            )
            return
        trace = await asyncio.to_thread(create_trace, store, request)
        self.bbm_app.open_trace(trace)

    def action_back(self) -> None:
        self.bbm_app.leave_screen(self)
