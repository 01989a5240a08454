"""The new-session screen: a task, a question (from the bundled dataset, by number or search, or
typed in), and the model to ask. Start creates the session in a thread and opens it."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widget import Widget
from textual.widgets import Button, Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from bbm_tui.core.config import Config
from bbm_tui.core.tasks import TASK_NAMES, get_task, task_names, task_titles
from bbm_tui.core.textsafe import one_line
from bbm_tui.core.types import MODES, ModelSpec
from bbm_tui.ui.context import AppContext, context
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import GoBack, ModelChosen, OpenModels, OpenTrace
from bbm_tui.ui.panels import FOCUS_COMING, mark_panels, set_panel_title
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.text import MUTED, safe, safe_line, settings_line, styled
from bbm_tui.ui.widgets.chrome import KeysFooter, TitleBar

if TYPE_CHECKING:
    # At run time these are imported where used: this module is on the way to the first
    # frame, and they are not.
    from textual.timer import Timer
    from textual.widgets import Checkbox

    from bbm_tui.core.dataset import TraceRow
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import NewTrace, TraceSession
    from bbm_tui.core.trace.side_by_side import SideBySide
    from bbm_tui.core.types import StepperSettings

_NUMBER = re.compile(r"^#?\s*(\d+)$")
# Models beside the first one, side by side (four columns in all: MAX_MODELS).
MAX_BESIDE = 3
# Seconds the highlight must rest on a task before its questions load.
TASK_SETTLE_S = 0.15


@dataclass(frozen=True)
class Entry:
    """One dataset question in the picker."""

    index: int
    row: TraceRow
    haystack: str  # lower-case text searched by the filter


@dataclass(frozen=True)
class StartRequest:
    """What the Start button asks for: the trace, its model and any recorded steps; the
    models beside it, each in a column of its own (none: a session of one model)."""

    trace: NewTrace
    spec: ModelSpec
    recorded_steps: list[str] | None = None
    beside: tuple[ModelSpec, ...] = ()


def create_trace(store: Store, request: StartRequest) -> TraceSession | SideBySide:
    """Blocking: create the session (and load the recorded trace, in the first model's
    column where there are several); run it in a thread."""
    from bbm_tui.core.trace.session import TraceSession
    from bbm_tui.core.trace.side_by_side import SideBySide

    trace = TraceSession.create(store, request.trace, request.spec)
    if request.recorded_steps:
        trace.load_recorded(request.recorded_steps)
    if not request.beside:
        return trace
    race = SideBySide.from_trace(trace, request.beside[0])
    for spec in request.beside[1:]:
        race.add_model(spec)
    return race


def dataset_request(
    task: str, index: int, row: TraceRow, spec: ModelSpec, *, recorded: bool,
    beside: Sequence[ModelSpec] = (),
) -> StartRequest:
    """A session on row `index` of the questions listed for the task: the paper's dataset, or
    a task file's `questions` (a row there may carry no target, steps or label)."""
    from bbm_tui.core.trace.session import NewTrace

    trace = NewTrace(
        task=task,
        input=row.input,
        target=row.target or None,
        dataset_index=index,
        gold_mistake_index=row.mistake_index if row.labelled else None,
    )
    return StartRequest(trace, spec, list(row.steps) if recorded else None, tuple(beside))


def question_trace(store: Store, task: str, number: int, spec: ModelSpec,
                   beside: Sequence[ModelSpec] = ()) -> TraceSession | SideBySide | str:
    """Blocking: a new session on question `number` of the task (`bbm-tui --task T --question
    N`), with the models `beside` the first side by side, or what is wrong with asking for
    it."""
    from bbm_tui.core.dataset import DatasetError, question_rows

    if task not in task_names():
        problem = f"Unknown task {task!r}" if task else "--question needs --task"
        return f"{problem}; the tasks: {', '.join(task_names())}"
    try:
        rows = question_rows(task)
    except DatasetError as error:
        return str(error)
    if not 0 <= number < len(rows):
        return (f"{task} has questions 0 to {len(rows) - 1}, not {number}." if rows
                else f"{task} lists no questions (`questions` in its task file).")
    return create_trace(store, dataset_request(task, number, rows[number], spec,
                                               recorded=False, beside=beside))


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


def task_option(name: str, title: str) -> Content:
    """A task in the list: its title, and a task of one's own marked as the user's."""
    if name in TASK_NAMES:
        return Content(title)
    return Content.assemble(safe_line(title, 30), (" · yours", MUTED))


def entry_prompt(entry: Entry) -> Content:
    return Content.assemble(
        (f"#{entry.index:<4}", "bold $accent"),
        " ",
        safe_line(entry.row.input, 46),
        ("  → ", MUTED),
        (one_line(entry.row.target, 28), "$text-success"),
    )


def spec_line(spec: ModelSpec, settings: StepperSettings | None = None) -> Content:
    """The model the session will ask: name, mode, and the api base when there is one (a
    password or key in it never shown); under it, how it generates."""
    line = Content.assemble(safe_line(spec.model, 40).stylize("bold"), (f" · {spec.mode}", MUTED))
    if spec.api_base:
        from bbm_tui.core.redact import redact_url  # after the first frame (the model pane)

        shown = redact_url(spec.api_base) or ""
        line = line.append(styled(" · ", MUTED)).append(safe_line(shown, 40))
    if spec.router:
        line = line.append(styled(" · router ", MUTED)).append(
            safe_line(Path(spec.router).name, 40))
    if settings is not None:
        line = line.append("\n").append(styled(settings_line(settings), MUTED))
    return line


def recorded_label(on: bool) -> str:
    return "Recorded trace: on" if on else "Recorded trace: off"


class NewSessionScreen(BbmScreen):
    """Pick what to work on: a task, then a dataset question (enter starts it), or a typed
    question (ctrl+t); the model comes from the config and can be changed here (ctrl+e).

    This is the app's first frame, so it holds only what picking a question needs: every
    widget on it is paid for before anything shows, and the typed question and the model
    settings are dialogs built when asked for.
    """

    HELP_TITLE = "the new-session screen"
    # Under 30 rows (80x24) the task and model pane is compact (app.tcss): every task, the
    # model and Start in view without scrolling.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (30, "-tall")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "start", "start", id="new_start",
                tooltip="Create the session on the highlighted question and open it"),
        Binding("ctrl+t", "type_question", "type a question", id="new_type_question",
                tooltip="Type a question of your own instead of a dataset one"),
        Binding("ctrl+e", "edit_model", "model", id="new_edit_model",
                tooltip="Change the model, the api base or the mode for this session"),
        Binding("ctrl+o", "add_beside", "models beside", id="new_add_beside", show=False,
                tooltip="Another model on the same question, side by side in a column of "
                "its own (a second, a third, a fourth); again once four are set clears them"),
        Binding("slash", "search", "search", id="new_search",
                tooltip="Search the dataset's questions (or type a number)"),
        Binding("escape", "back", "back", id="new_back",
                tooltip="Back to the screen below (when there is one)"),
        Binding("ctrl+d", "dataset_view", "charts", id="new_dataset_view", show=False,
                tooltip="Charts of the task's questions file: where the first mistakes are, "
                "trace lengths, counts"),
    ]
    # The palette's commands (ui/palette.py): binding id, the command's title.
    PALETTE: ClassVar[dict[str, str]] = {
        "new_start": "Start the session", "new_type_question": "Type a question",
        "new_edit_model": "Change the model", "new_search": "Search the questions",
    }

    # The question list, not the search box, has the focus at first, so that single keys
    # (s sessions, ? help, q quit) work at once; / goes to the search.
    AUTO_FOCUS = "#questions"

    def __init__(self, config: Config, *, task: str | None = None) -> None:
        super().__init__(classes="new-session")  # no id: two may be stacked for a moment
        mode = config.mode if config.mode in MODES else "chat"
        self.spec = ModelSpec(config.model, config.api_base, mode, router=config.router)
        titles = task_titles()
        self.task_name = task if task in titles else next(iter(titles))
        self._entries: list[Entry] = []
        self._shown: list[Entry] = []
        # Why the task's questions could not be read (a task file's questions file).
        self._rows_problem: str | None = None
        self._task_timer: Timer | None = None
        # The models beside the first, each in a column of its own (side by side).
        self.beside: list[ModelSpec] = []
        # Mounted, and given the focus, after the first frame (_fill_after_first_frame): empty
        # until the task's questions are read, it was a fifth of the first screen's work, its
        # focus (the pane's styles worked out again) another.
        self._questions = OptionList(id="questions")

    @property
    def bbm_app(self) -> AppContext:
        return context(self)

    def compose(self) -> ComposeResult:
        if self.bbm_app.chosen_spec is not None:  # chosen on an earlier new-session screen
            self.spec = self.bbm_app.chosen_spec
        yield TitleBar(styled("bbm-tui — new session", "bold"), id="title-bar")
        with Horizontal(id="new-body"):
            # Drawn as focused (FOCUS_COMING) until its question list has the focus.
            with Vertical(id="question-side", classes=f"panel {FOCUS_COMING}"):
                yield Input(
                    # Whole in the pane at 80 columns (a longer one was cut there).
                    placeholder="/ to search, or a number (e.g. 17)",
                    id="search",
                )
                yield Static(id="match-count", classes="hint")
                # The question list goes here after the first frame.
                yield Static(id="question-preview")
            # Filled after the first frame (_fill_after_first_frame).
            yield Vertical(id="model-side", classes="panel")
        yield KeysFooter(drawn_first=True)  # the app's first frame: its keys as one line

    def _model_side(self) -> list[Widget]:
        """The task and model pane's widgets: the tasks, the model, Start."""
        from bbm_tui.ui.widgets.tickbox import TickBox  # after the first frame, as the pane

        recorded = self.bbm_app.recorded_trace
        return [
            OptionList(*[Option(task_option(name, title), id=name)
                         for name, title in task_titles().items()], id="tasks"),
            Static(spec_line(self.spec, self.bbm_app.stepper_settings), id="model-line"),
            Static(styled(f"{key_for(self, 'new_edit_model')} changes or tests it", MUTED),
                   classes="hint"),
            Static(self._beside_line(), id="beside-line", classes="hint"),
            TickBox(recorded_label(recorded), recorded, id="recorded",
                    tooltip="On: the session starts with the dataset's own steps, to label "
                    "without generating. Off: the model writes the steps (n, r)."),
            Button("Start", variant="primary", id="start",
                   tooltip=f"Create the session and open it ({key_for(self, 'new_start')})"),
            Static(id="new-status", classes="hint"),
        ]

    def on_mount(self) -> None:
        set_panel_title(self.query_one("#question-side"), "Question")
        set_panel_title(self.query_one("#model-side"), "Task and model")
        self._show_loading()
        # After the first frame: the question list, then the task and model pane (a list, a
        # checkbox and a button: their styles, layout and painting were a third of the first
        # screen's CPU), then the questions (hundreds of options). The panes' frames and
        # titles are in the first frame.
        self.call_after_refresh(self._fill_after_first_frame)

    async def _fill_after_first_frame(self) -> None:
        side = self.query_one("#question-side")
        if not side.is_attached:  # the app closed before its first frame was out (q at once)
            return
        await side.mount(self._questions, before="#question-preview")
        if self.focused is None:  # where AUTO_FOCUS puts it (unless a key moved it first)
            self.set_focus(self._questions)
        side.remove_class(FOCUS_COMING)
        mark_panels(self)
        widgets = self._model_side()
        tasks = widgets[0]
        assert isinstance(tasks, OptionList)
        tasks.highlighted = list(task_titles()).index(self.task_name)
        await self.query_one("#model-side").mount_all(widgets)
        self._load_rows(self.task_name)

    def action_search(self) -> None:
        self.query_one("#search", Input).focus()

    def action_type_question(self) -> None:
        from bbm_tui.core.trace.session import NewTrace
        from bbm_tui.ui.dialogs import TypedQuestionScreen

        def typed(result: tuple[str, str | None] | None) -> None:
            if result is None:
                return
            text, target = result
            refusal = self._offline_refusal()
            if refusal is not None:
                self._refuse(refusal)
                return
            if self.spec.model == "replay/bbm" and not any(
                entry.row.input == text for entry in self._entries
            ):
                # Refused now, not after n: the replay knows only the bundled questions.
                self._refuse("replay/bbm replays only the bundled questions. For your own, "
                             f"pick another model ({key_for(self, 'new_edit_model')}): "
                             "solver/bbm writes word sorting, tracking, arithmetic and Dyck "
                             "steps offline.")
                return
            self._begin(StartRequest(NewTrace(self.task_name, text, target), self.spec,
                                     beside=tuple(self.beside)))

        self.app.push_screen(TypedQuestionScreen(get_task(self.task_name)), typed)

    def action_edit_model(self) -> None:
        from bbm_tui.ui.dialogs import ModelChoice, ModelScreen

        def edited(choice: ModelChoice | None) -> None:
            if choice is not None:
                self.spec = choice.spec
                self.post_message(ModelChosen(choice.spec, choice.settings))
                self.query_one("#model-line", Static).update(
                    spec_line(choice.spec, choice.settings))
                self._show_model_fit()

        self.app.push_screen(ModelScreen(self.spec, self.bbm_app.stepper_settings), edited)

    # -- models beside it (side by side)

    def _beside_line(self) -> Content:
        key = key_for(self, "new_add_beside")
        if not self.beside:
            return styled(f"{key} adds a model beside it", MUTED)
        names = ", ".join(one_line(spec.model, 30) for spec in self.beside)
        line = Content.assemble(("Beside it: ", "bold"), safe_line(names))
        more = (f"{key} adds another" if len(self.beside) < MAX_BESIDE
                else f"{key} clears them")
        return line.append(styled(f" · {more}", MUTED))

    def action_add_beside(self) -> None:
        if len(self.beside) >= MAX_BESIDE:
            self.beside = []
            self.query_one("#beside-line", Static).update(self._beside_line())
            return
        from bbm_tui.ui.dialogs import ModelChoice, ModelScreen

        def chosen(choice: ModelChoice | None) -> None:
            if choice is not None:
                self.beside.append(choice.spec)
                self.query_one("#beside-line", Static).update(self._beside_line())

        # The offline pair is the likeliest second model: the solver beside the replay.
        first = ModelSpec("solver/bbm") if self.spec.model != "solver/bbm" and not any(
            spec.model == "solver/bbm" for spec in self.beside) else self.spec
        self.app.push_screen(ModelScreen(first, self.bbm_app.stepper_settings,
                                         f"Model {len(self.beside) + 2}, beside the first"),
                             chosen)

    # -- the task, and the dataset's questions (read in a thread: the first read parses a
    # JSONL file)

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        # Not @on(Checkbox.Changed, ...): Textual's toggle buttons are imported with the task
        # and model pane, after the first frame.
        if event.checkbox.id != "recorded":
            return
        event.checkbox.label = recorded_label(event.value)
        self.bbm_app.recorded_trace = event.value  # the next new session starts the same

    @on(OptionList.OptionHighlighted, "#tasks")
    def _task_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        name = event.option.id or self.task_name
        if name == self.task_name or name not in task_titles():
            return
        # Arrowing through the tasks loads the one the highlight rests on, not each one it
        # passes (a list of hundreds of questions is rebuilt per load).
        self.task_name = name
        self._show_loading()
        if self._task_timer is not None:
            self._task_timer.stop()
        self._task_timer = self.set_timer(TASK_SETTLE_S, lambda: self._load_rows(name))

    @on(OptionList.OptionSelected, "#tasks")
    def _task_chosen(self) -> None:
        self._questions.focus()

    @work(thread=True, exclusive=True, group="dataset", exit_on_error=False,
          description="Reading the dataset")
    def _load_rows(self, task: str) -> None:
        from bbm_tui.core.dataset import DatasetError, question_rows

        try:
            rows = question_rows(task)
        except DatasetError as error:  # a task file's questions file, broken
            if not get_current_worker().is_cancelled:
                self.app.call_from_thread(self._rows_loaded, task, [], str(error))
            return
        entries = [
            Entry(index, row, f"{row.input}\n{row.target}".lower())
            for index, row in enumerate(rows)
        ]
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._rows_loaded, task, entries)

    def _rows_loaded(self, task: str, entries: list[Entry], problem: str | None = None) -> None:
        if task != self.task_name:
            return
        self._entries = entries
        self._rows_problem = problem
        self._apply_filter()
        self._show_model_fit()

    def _offline_refusal(self) -> str | None:
        """Why the chosen model cannot write this task's steps (an offline model and a task
        of one's own), None when it can."""
        if self.task_name in TASK_NAMES:
            return None
        from bbm_tui.core.llm.refusals import offline_refusal

        refusal = offline_refusal(self.spec, self.task_name)
        if refusal is None:
            return None
        return (f"{self.spec.model} cannot write steps for your task {self.task_name}: "
                f"choose another model ({key_for(self, 'new_edit_model')}).")

    def _show_model_fit(self) -> None:
        """Say at once when the model cannot write the highlighted task's steps."""
        refusal = self._offline_refusal()
        self.query_one("#new-status", Static).update(
            styled(refusal, "$text-warning") if refusal else "")

    def _show_loading(self) -> None:
        # A line of text rather than `loading = True`: the spinner is a widget and a timer,
        # and this screen is the app's first frame.
        self.query_one("#match-count", Static).update(styled("Reading the questions…", MUTED))

    @on(Input.Changed, "#search")
    def _search_changed(self) -> None:
        self._apply_filter()

    def _apply_filter(self) -> None:
        query = self.query_one("#search", Input).value
        self._shown = filter_entries(self._entries, query)
        questions = self._questions
        questions.clear_options()
        questions.add_options(
            Option(entry_prompt(entry), id=str(entry.index)) for entry in self._shown
        )
        total = len(self._entries)
        count = f"{total} questions"
        if query.strip():
            count = f"{len(self._shown)} of {count}"
        line = f"{count} · enter on a question starts it"
        if self._rows_problem is not None:
            line = self._rows_problem
        elif not total:
            line = (f"No questions listed for this task: {key_for(self, 'new_type_question')} "
                    "types one (a task file lists a file of them with `questions`).")
        self.query_one("#match-count", Static).update(styled(line, MUTED))
        if self._shown:
            questions.highlighted = 0
        self._show_preview()

    @on(OptionList.OptionHighlighted, "#questions")
    def _question_highlighted(self) -> None:
        self._show_preview()

    @on(Input.Submitted, "#search")
    def _search_submitted(self) -> None:
        query = self.query_one("#search", Input).value.strip().lstrip("#")
        questions = self._questions
        if query.isdigit():
            # /17 enter: question 17 itself, at once.
            found = next((i for i, entry in enumerate(self._shown)
                          if entry.index == int(query)), None)
            if found is not None:
                questions.highlighted = found
                self.action_start()
                return
        if self._shown:
            questions.focus()

    @on(OptionList.OptionSelected, "#questions")
    def _question_selected(self) -> None:
        self.action_start()

    def selected_entry(self) -> Entry | None:
        highlighted = self._questions.highlighted
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

    # -- starting

    @on(Button.Pressed, "#start")
    def _start_pressed(self) -> None:
        self.action_start()

    def action_start(self) -> None:
        request = self._request()
        if request is not None:
            self._begin(request)

    def _begin(self, request: StartRequest) -> None:
        self.query_one("#new-status", Static).update(styled("Opening…", MUTED))
        self._start(request)

    def _request(self) -> StartRequest | None:
        """What the screen says, or None (after saying what is missing)."""
        refusal = self._offline_refusal()
        if refusal is not None:
            return self._refuse(refusal)
        entry = self.selected_entry()
        if entry is None:
            return self._refuse("Pick a question first.")
        from bbm_tui.ui.widgets.tickbox import TickBox

        recorded = self.query_one("#recorded", TickBox).value
        return dataset_request(self.task_name, entry.index, entry.row, self.spec,
                               recorded=recorded, beside=self.beside)

    def _refuse(self, message: str) -> None:
        self.notify(message, severity="warning", markup=False)
        return None

    @work(exclusive=True, group="start", exit_on_error=False, description="Starting the session")
    async def _start(self, request: StartRequest) -> None:
        store = await self.bbm_app.wait_for_store()
        if store is None:
            self.query_one("#new-status", Static).update(
                styled("The session store is not available.", "$text-error")
            )
            return
        made = await asyncio.to_thread(create_trace, store, request)
        from bbm_tui.core.trace.side_by_side import SideBySide

        self.post_message(OpenModels(made) if isinstance(made, SideBySide) else OpenTrace(made))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":  # greyed out where there is nothing to go back to
            return True if self.bbm_app.can_leave(self) else None
        return True

    def action_dataset_view(self) -> None:
        from bbm_tui.ui.screens.dataset import open_task_dataset_view

        open_task_dataset_view(self.app, self.task_name)

    def action_back(self) -> None:
        self.post_message(GoBack(self))
