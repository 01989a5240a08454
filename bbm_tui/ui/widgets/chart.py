"""A chart of core/charts.py drawn by Textualize's textual-plotext widget, with its legend under
it and its numbers one key away (`show_numbers`): the table of the same values, as the
commands print them.

textual-plotext (and plotext under it) is imported with this module, which only the chart
screens import, when first opened: never on the way to the first frame.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static
from textual_plotext import PlotextPlot

from bbm_tui.core.charts import BarChart
from bbm_tui.plotting import draw, legend, numbers_table
from bbm_tui.ui.text import MUTED, styled


class BarChartPlot(PlotextPlot):
    """textual-plotext's widget, drawing one BarChart at the widget's size each time it
    renders (so a resize redraws the bars and fits the labels again)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.chart: BarChart | None = None

    def show(self, chart: BarChart) -> None:
        self.chart = chart
        self.refresh()

    def render(self):  # -> RenderResult
        if self.chart is None or self.size.width < 10 or self.size.height < 6:
            return ""
        draw(self.plt, self.chart, self.size.width, self.size.height)
        return super().render()


class NumbersPane(VerticalScroll, can_focus=False):
    """The chart's numbers, scrolled by the screen's keys."""


class ChartView(Vertical):
    """One chart: the bars and their legend, or (toggled) the table of their numbers; a
    chart with nothing to draw says why instead."""

    DEFAULT_CSS = """
    ChartView { height: 1fr; }
    ChartView > BarChartPlot { height: 1fr; }
    ChartView > .chart-legend { height: auto; color: $text; }
    ChartView > .chart-empty { height: 1fr; content-align: center middle; color: $text-muted;
                               display: none; }
    ChartView > NumbersPane { height: 1fr; display: none; }
    ChartView.-empty > BarChartPlot { display: none; }
    ChartView.-empty > .chart-empty { display: block; }
    ChartView.-no-legend > .chart-legend { display: none; }
    ChartView.-numbers > BarChartPlot, ChartView.-numbers > .chart-legend,
    ChartView.-numbers > .chart-empty { display: none; }
    ChartView.-numbers > NumbersPane { display: block; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.chart: BarChart | None = None

    def compose(self) -> ComposeResult:
        yield BarChartPlot()
        yield Static(classes="chart-empty")
        yield Static(classes="chart-legend")
        with NumbersPane():
            yield Static(classes="chart-numbers")

    @property
    def numbers_shown(self) -> bool:
        return self.has_class("-numbers")

    def show_numbers(self, shown: bool) -> None:
        self.set_class(shown, "-numbers")

    def show(self, chart: BarChart) -> None:
        self.chart = chart
        self.set_class(chart.empty, "-empty")
        if chart.empty:
            self.query_one(".chart-empty", Static).update(
                styled(chart.note or "Nothing to draw here: every value is 0.", MUTED))
        else:
            self.query_one(BarChartPlot).show(chart)
        key = legend(chart)
        if chart.note and not chart.empty:
            key.append(("   " if key else "") + chart.note)
        self.set_class(not key, "-no-legend")
        self.query_one(".chart-legend", Static).update(key)
        self.query_one(".chart-numbers", Static).update(numbers_table(chart))
