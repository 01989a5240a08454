"""The dataset view: dataset-format files as charts, a chart at a time, each with its numbers
one key away (`t`). Per task (or all together): where the first mistakes are, by thought
number and by place in the trace, and how long the traces are; across the tasks: how many
traces have a mistake, none, or no label yet; and for the files `find` and `backtrack` write,
the finder's location accuracy and backtracking's change in accuracy beside the paper's
figures (prompts/paper_tables.json: Tables 4 and 6).

The files are read in a thread (core/batch/summary.py, as `bbm-tui stats` reads them); the
charts are core/charts.py's, drawn by ui/widgets/chart.py. Names from the files (tasks,
models) are shown as text, never markup.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Input, Static

from bbm_tui.core import charts
from bbm_tui.core.batch.summary import FileSummary, paper_backtracking, summarize
from bbm_tui.core.dataset import DatasetError, questions_file
from bbm_tui.core.tasks import UnknownTaskError
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.messages import GoBack
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import MUTED, safe_line, styled
from bbm_tui.ui.widgets.chart import ChartView
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar


@dataclass(frozen=True)
class Page:
    """One chart of the view: `make(task)` draws it for a task (or all tasks, None) when
    `per_task`, else once for every task."""

    name: str
    make: Callable[[str | None], charts.BarChart]
    per_task: bool = False


def pages_of(summary: FileSummary, paper_model: Callable[[], str | None]) -> list[Page]:
    """The charts a summary has: the first mistakes, the lengths and the counts always; the
    finder's accuracy and backtracking's deltas where the files hold them."""
    stats = summary.stats
    pages = [
        Page("first mistake: thought", lambda task: charts.thought_chart(stats, task), True),
        Page("first mistake: place", lambda task: charts.position_chart(stats, task), True),
        Page("trace lengths", lambda task: charts.lengths_chart(stats, task), True),
        Page("with / without a mistake", lambda _task: charts.counts_chart(stats)),
    ]
    finder = summary.finder
    if finder is not None:
        who = one_line(" / ".join(summary.models) or "the finder", 40)

        def finder_chart(_task: str | None) -> charts.BarChart:
            model = paper_model()
            paper = summary.paper_finder(model) if model else None
            return charts.finder_chart(finder, paper, model or "", who)

        pages.append(Page("finder vs the paper", finder_chart))
    if summary.backtrack is not None:
        right, wrong = charts.backtrack_charts(summary.backtrack, paper_backtracking(),
                                               " / ".join(summary.models))
        pages.append(Page("backtracking: answer was right", lambda _task: right))
        pages.append(Page("backtracking: answer was wrong", lambda _task: wrong))
    return pages


class DatasetScreen(BbmScreen):
    """Charts of dataset-format files: ←/→ the chart, ↑/↓ the task (for the per-task ones),
    `t` the numbers, `m` the paper's model beside a finder's accuracy, esc back."""

    HELP_TITLE = "the dataset view"
    CSS_PATH = stylesheet("charts")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "page(1)", "next chart", id="dataset_next_chart",
                tooltip="The next chart"),
        Binding("left,h", "page(-1)", "prev chart", id="dataset_previous_chart",
                tooltip="The previous chart"),
        Binding("down,j", "task(1)", "next task", id="dataset_next_task",
                tooltip="The next task (the per-task charts; the first is all tasks together)"),
        Binding("up,k", "task(-1)", "prev task", id="dataset_previous_task", show=False,
                tooltip="The previous task"),
        Binding("t", "numbers", "numbers", id="dataset_numbers",
                tooltip="The chart's numbers as a table (again: the chart)"),
        Binding("m", "paper_model", "paper model", id="dataset_paper_model",
                tooltip="Which of the paper's models stands beside the finder's accuracy"),
        Binding("escape", "back", "back", id="dataset_back", tooltip="Back"),
    ]

    def __init__(self, paths: list[Path], *, name: str = "", task: str | None = None,
                 chart: str | None = None) -> None:
        super().__init__(classes="dataset-screen")
        self.paths = paths
        self.source_name = name or ", ".join(path.name for path in paths)
        self.summary: FileSummary | None = None
        self.pages: list[Page] = []
        self.page = 0
        self.tasks: list[str | None] = [None]
        self.task_index = 0
        self._start_task = task
        self._start_chart = chart
        self.paper_models: list[str] = []
        self.paper_index = 0

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        yield LeanStatic(id="dataset-where", classes="dataset-line")
        yield LeanStatic(id="dataset-counts", classes="dataset-line")
        yield ChartView(id="dataset-chart", classes="panel")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(TitleBar).set_left(
            Content.assemble(styled("bbm-tui — dataset · ", "bold"),
                             safe_line(self.source_name, 100)),
            Content.assemble(styled("dataset · ", "bold"), safe_line(self.source_name, 50)))
        self.query_one("#dataset-where", LeanStatic).show(styled("Reading the files…", MUTED))
        self._read()

    @work(thread=True, exclusive=True, group="dataset-view", exit_on_error=False,
          description="Reading the files")
    def _read(self) -> None:
        try:
            summary = summarize(self.paths)
        except (DatasetError, UnknownTaskError) as error:
            self.app.call_from_thread(self._failed, str(error))
            return
        self.app.call_from_thread(self._loaded, summary)

    def _failed(self, message: str) -> None:
        self.query_one(ChartView).display = False
        self.query_one("#dataset-where", LeanStatic).show(
            Content.assemble(styled("Cannot read the files: ", "bold $text-error"),
                             safe_line(message, 300)))

    def _loaded(self, summary: FileSummary) -> None:
        self.summary = summary
        self.paper_models = summary.paper_models()
        if "gpt-4" in self.paper_models:  # the paper's main model
            self.paper_index = self.paper_models.index("gpt-4")
        found = charts.stats_tasks(summary.stats)
        # One task: it is all the tasks; "all tasks" and it would be one chart twice.
        self.tasks = [*found] if len(found) == 1 else [None, *found]
        if self._start_task in self.tasks:
            self.task_index = self.tasks.index(self._start_task)
        self.pages = pages_of(summary, self._paper_model)
        names = [page.name for page in self.pages]
        if self._start_chart in names:
            self.page = names.index(self._start_chart)
        self.query_one(TitleBar).set_right(styled(f"{summary.traces} traces", MUTED))
        self._show()
        self.refresh_bindings()

    def _paper_model(self) -> str | None:
        return self.paper_models[self.paper_index] if self.paper_models else None

    @property
    def current_page(self) -> Page | None:
        return self.pages[self.page] if self.pages else None

    @property
    def task(self) -> str | None:
        return self.tasks[self.task_index]

    def _show(self) -> None:
        page = self.current_page
        if page is None or self.summary is None:
            return
        chart = page.make(self.task if page.per_task else None)
        view = self.query_one(ChartView)
        view.show(chart)
        set_panel_title(view, one_line(chart.title, 200))
        self.query_one("#dataset-where", LeanStatic).show(self._where_line(page))
        self.query_one("#dataset-counts", LeanStatic).show(self._counts_line())

    def _where_line(self, page: Page) -> Content:
        parts = [styled(f"Chart {self.page + 1}/{len(self.pages)}: ", "bold"),
                 styled(page.name, "bold $accent")]
        if page.per_task:
            subject = self.task or charts.ALL_TASKS
            parts += [styled(" · task ", MUTED), safe_line(subject, 40),
                      styled(f" ({self.task_index + 1}/{len(self.tasks)})", MUTED)]
        elif page.name == "finder vs the paper" and self.paper_models:
            parts += [styled(" · beside ", MUTED),
                      safe_line(self.paper_models[self.paper_index], 30),
                      styled(f" ({key_for(self, 'dataset_paper_model')})", MUTED)]
        return Content.assemble(*parts)

    def _counts_line(self) -> Content:
        """The task's counts in words (all tasks' on a chart across them)."""
        assert self.summary is not None
        page = self.current_page
        stats = self.summary.stats
        figures = (stats["tasks"][self.task]
                   if page is not None and page.per_task and self.task else stats["overall"])
        text = (f"{figures['traces']} traces: {figures['with_mistake']} with a mistake, "
                f"{figures['without_mistake']} without, {figures['unlabelled']} unlabelled; "
                f"mean {figures['mean_steps']:.2f} steps")
        return styled(text, MUTED)

    # -- keys

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        page = self.current_page
        if action in ("page", "numbers"):
            return True if self.pages else None
        if action == "task":
            return True if page is not None and page.per_task else None
        if action == "paper_model":
            return True if (page is not None and page.name == "finder vs the paper"
                            and len(self.paper_models) > 1) else None
        return True

    def action_page(self, step: int) -> None:
        if self.pages:
            self.page = (self.page + step) % len(self.pages)
            self._show()
            self.refresh_bindings()

    def action_task(self, step: int) -> None:
        self.task_index = (self.task_index + step) % len(self.tasks)
        self._show()

    def action_numbers(self) -> None:
        view = self.query_one(ChartView)
        view.show_numbers(not view.numbers_shown)

    def action_paper_model(self) -> None:
        if self.paper_models:
            self.paper_index = (self.paper_index + 1) % len(self.paper_models)
            self._show()

    def action_back(self) -> None:
        self.post_message(GoBack(self))



class DatasetFilesDialog(Dialog[list[Path] | None]):
    """From the palette: the dataset-format files to chart (space-separated)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="dataset_files_cancel"),
    ]

    def __init__(self, files: str = "") -> None:
        super().__init__()
        self._files = files

    def compose(self) -> ComposeResult:
        with Vertical(id="dataset-files-dialog", classes="dialog"):
            yield Static(styled("Dataset view", "bold"), classes="dialog-title")
            yield Input(value=self._files, placeholder="FILE.jsonl ... (any dataset format; "
                        "find and backtrack output too)", id="dataset-files")
            yield Static(id="dataset-files-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#dataset-files", Input).focus()
        self.query_one("#dataset-files-hint", Static).update(styled(
            f"enter to chart them · {key_for(self, 'dataset_files_cancel')} to cancel", MUTED))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        paths = [Path(name).expanduser() for name in event.value.split()]
        if not paths:
            self.notify("Name at least one file.", severity="warning", markup=False)
            return
        self.dismiss(paths)

    def action_cancel(self) -> None:
        self.dismiss(None)


async def open_dataset_view(app: App, screen: Screen) -> None:
    """The palette's "Dataset view": the files asked for (on the new-session screen, its
    task's questions file to start with)."""
    task = getattr(screen, "task_name", None) if screen.has_class("new-session") else None
    path = questions_file(task) if task is not None else None

    def chosen(paths: list[Path] | None) -> None:
        if paths:
            app.push_screen(DatasetScreen(paths, task=task if paths == [path] else None))

    await app.push_screen(DatasetFilesDialog(str(path) if path else ""), chosen)


def open_task_dataset_view(app: App, task: str) -> None:
    """The new-session screen's key: the charts of the task's questions file."""
    path = questions_file(task)
    if path is None:
        app.notify(f"{one_line(task, 60)} lists no questions file to chart.",
                   severity="warning", markup=False)
        return
    app.push_screen(DatasetScreen([path], task=task))
