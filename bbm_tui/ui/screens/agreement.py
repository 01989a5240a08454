"""The annotation's summary: how far the annotators agree, over the store's labels, as
`bbm-tui agreement` reports it (core/annotation/report.py). Krippendorff's alpha and each
annotator's agreement with the gold label in words; Cohen's kappa between each two annotators
as a small matrix, each cell shaded by its value (read without colour) with the number in it;
and, when every trace is the dataset's, alpha per task beside the paper's as bars. `t` shows
each chart's numbers as a table. Annotators' names are shown as text, never markup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core import charts
from bbm_tui.core.textsafe import one_line
from bbm_tui.plotting import matrix_table
from bbm_tui.ui.context import context
from bbm_tui.ui.messages import GoBack
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import MUTED, safe_line, styled
from bbm_tui.ui.widgets.chart import ChartView
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, TitleBar

if TYPE_CHECKING:
    from bbm_tui.core.annotation.queue import AnnotatorProgress, QueuedTrace

MATRIX = "kappa between annotators"
ALPHA = "alpha per task vs the paper"


class MatrixPane(VerticalScroll, can_focus=False):
    """The kappa matrix (or its numbers), scrolled with the screen's keys when wide."""


def pairs_table(result: dict[str, Any]) -> Table:
    """The matrix's numbers: each pair's kappa, its raw agreement, and why it is undefined."""
    table = Table()
    for header in ("annotators", "kappa", "raw agreement", "undefined because"):
        table.add_column(header, justify="right" if header in ("kappa", "raw agreement")
                         else "left")
    undefined = result.get("undefined", {})
    for pair, kappa in result["cohen_kappa"].items():
        raw = result.get("cohen_raw_agreement", {}).get(pair)
        table.add_row(Text(one_line(pair.replace("|", " / "), 60)),
                      "—" if kappa is None else f"{kappa:.3f}",
                      "—" if raw is None else f"{raw:.1f}%",
                      Text(one_line(undefined.get(pair, ""), 80)))
    return table


class AgreementScreen(BbmScreen):
    """The agreement summary: ←/→ the chart (the kappa matrix; alpha per task), `t` the
    numbers, esc back."""

    HELP_TITLE = "the agreement summary"
    CSS_PATH = stylesheet("charts")

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("right,l", "page(1)", "next chart", id="agreement_next_chart",
                tooltip="The next chart"),
        Binding("left,h", "page(-1)", "prev chart", id="agreement_previous_chart",
                show=False, tooltip="The previous chart"),
        Binding("t", "numbers", "numbers", id="agreement_numbers",
                tooltip="The chart's numbers as a table (again: the chart)"),
        Binding("d", "adjudicate", "adjudicate", id="agreement_adjudicate",
                tooltip="Settle the traces the annotators disagree on"),
        Binding("escape", "back", "back", id="agreement_back", tooltip="Back"),
    ]

    # How often a lead's screen reads the labels again (`bbm-tui serve`: they come in as the
    # annotators work).
    TEAM_REFRESH_S = 5.0

    def __init__(self, team: list[QueuedTrace] | None = None) -> None:
        super().__init__(classes="agreement-screen")
        # A team's queue (`bbm-tui serve`, the lead): each annotator's progress through it
        # is shown too, read again every few seconds, and `d` adjudicates.
        self.team = team
        self.progress: list[AnnotatorProgress] = []
        self.result: dict[str, Any] | None = None
        self.annotators = 0
        self.pages: list[str] = []
        self.page = 0
        self.numbers = False

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        yield LeanStatic(id="agreement-alpha", classes="dataset-line")
        yield LeanStatic(id="agreement-gold", classes="dataset-line")
        if self.team is not None:
            yield LeanStatic(id="agreement-progress", classes="dataset-line")
        with MatrixPane(id="agreement-matrix-pane", classes="panel"):
            yield Static(id="agreement-matrix")
        yield ChartView(id="agreement-chart", classes="panel")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(TitleBar).set_left(styled("bbm-tui — agreement", "bold"))
        self.query_one("#agreement-alpha", LeanStatic).show(styled("Reading the labels…", MUTED))
        self.query_one(ChartView).display = False
        self._read()
        if self.team is not None:
            self.set_interval(self.TEAM_REFRESH_S, self._read)

    @work(exclusive=True, group="agreement", exit_on_error=False,
          description="Reading the annotators' labels")
    async def _read(self) -> None:
        import asyncio

        store = await context(self).wait_for_store()
        if store is None:
            return
        result, annotators = await asyncio.to_thread(_report, store)
        if self.team is not None:
            from bbm_tui.core.annotation.queue import team_progress

            self.progress = await asyncio.to_thread(team_progress, store, self.team)
        self.result = result
        self.annotators = annotators
        self.pages = [MATRIX] + ([ALPHA] if charts.alpha_chart(result) else [])
        self._show()
        self.refresh_bindings()

    def _show(self) -> None:
        result = self.result
        if result is None:
            return
        self.query_one(TitleBar).set_right(styled(
            f"{self.annotators} annotators · {result['n']} traces labelled by two or more",
            MUTED))
        self.query_one("#agreement-alpha", LeanStatic).show(_alpha_line(result))
        self.query_one("#agreement-gold", LeanStatic).show(_gold_line(result))
        if self.team is not None:
            self.query_one("#agreement-progress", LeanStatic).show(
                _progress_line(self.progress, len(self.team)))
        matrix_pane = self.query_one(MatrixPane)
        view = self.query_one(ChartView)
        on_matrix = self.pages[self.page] == MATRIX
        matrix_pane.display = on_matrix
        view.display = not on_matrix
        if on_matrix:
            matrix = charts.kappa_matrix(result)
            set_panel_title(matrix_pane, one_line(matrix.title))
            shown: Any = styled("Fewer than two annotators have labelled traces: no pair to "
                                "compare.", MUTED)
            if matrix.names:
                shown = (pairs_table(result) if self.numbers
                         else matrix_table(matrix, titled=False))
            self.query_one("#agreement-matrix", Static).update(shown)
        else:
            chart = charts.alpha_chart(result)
            if chart is not None:
                view.show(chart)
                set_panel_title(view, one_line(chart.title))
                view.show_numbers(self.numbers)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "page":
            return True if len(self.pages) > 1 else None
        if action == "numbers":
            return True if self.result is not None else None
        if action == "adjudicate":  # the lead's screen only; elsewhere the palette has it
            return self.team is not None
        if action == "back":  # served, the lead's own screen: nowhere to go back to
            return self.team is None
        return True

    def action_page(self, step: int) -> None:
        if self.pages:
            self.page = (self.page + step) % len(self.pages)
            self._show()

    async def action_adjudicate(self) -> None:
        await self.app.run_action("app.adjudicate")

    def action_numbers(self) -> None:
        self.numbers = not self.numbers
        self._show()

    def action_back(self) -> None:
        self.post_message(GoBack(self))


def _report(store: Any) -> tuple[dict[str, Any], int]:
    """Blocking: the store's agreement report, as `bbm-tui agreement --json` prints it."""
    from bbm_tui.core.annotation import report

    data = report.from_store(store)
    return report.report_json(data), len(data.labels)


def _alpha_line(result: dict[str, Any]) -> Content:
    alpha = result["krippendorff_alpha"]
    undefined = result.get("undefined", {})
    if alpha is None:
        why = undefined.get("krippendorff_alpha", "no trace labelled by two annotators")
        shown = Content.assemble(styled("undefined: ", MUTED), safe_line(why, 200))
    else:
        shown = Content(f"{alpha:.3f}")
    line = Content.assemble(styled("Krippendorff's alpha (nominal): ", "bold"), shown)
    rated = result.get("step_ratings")
    if rated is None:
        return line
    # Per-step labels: the alphas over the ratings, as `bbm-tui agreement` prints them.
    return Content.assemble(line, "\n", _step_alphas(rated))


def _step_alphas(rated: dict[str, Any]) -> Content:
    def figure(value: float | None) -> str:
        return "—" if value is None else f"{value:.3f}"

    steps, traces = rated["n_steps"], rated["n_traces"]
    return Content.assemble(
        styled("Krippendorff's alpha over step ratings (-1/0/+1): ", "bold"),
        f"nominal {figure(rated['krippendorff_alpha_nominal'])}, interval "
        f"{figure(rated['krippendorff_alpha_interval'])} ",
        styled(f"({steps} step{'s' * (steps != 1)} of {traces} trace{'s' * (traces != 1)} "
               "rated by two annotators or more)", MUTED))


def _progress_line(progress: list[AnnotatorProgress], total: int) -> Content:
    if not progress:
        return styled(f"Progress: no annotator has started the {total} traces yet.", MUTED)
    parts: list[Content | tuple[str, str] | str] = [styled(f"Progress (of {total}): ", "bold")]
    for index, annotator in enumerate(progress):
        if index:
            parts.append(", ")
        parts.append(safe_line(annotator.annotator, 30))
        flagged = f" +{annotator.flagged} flagged" if annotator.flagged else ""
        parts.append(f" {annotator.done}{flagged}")
    return Content.assemble(*parts)


def _gold_line(result: dict[str, Any]) -> Content:
    gold = result.get("gold_agreement", {})
    if not gold:
        return styled("No gold label to compare with.", MUTED)
    parts: list[Content | tuple[str, str] | str] = [styled("Agreement with gold: ", "bold")]
    for index, (name, value) in enumerate(gold.items()):
        if index:
            parts.append(", ")
        parts.append(safe_line(name, 30))
        parts.append(" —" if value is None else f" {value:.1f}%")
    return Content.assemble(*parts)
