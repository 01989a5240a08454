"""The charts drawn with plotext, for the app (through textual-plotext's widget) and for
`--plot` (printed through Rich): one drawing of each chart of core/charts.py, so the app and
the command line show the same picture.

Readable without colour: every series has its own marker (ours solid, the paper's light
shades), and the legend, written under the chart, names each by its marker. The names on a
chart (tasks, models, annotators) come from files: they reach plotext made printable (no
escape sequence gets through to be read back by `Text.from_ansi`) and the legend and the
matrix are `Text`, never markup.

plotext is imported here only, and this module only where a chart is drawn: never on the
way to the app's first frame nor by a command run without `--plot`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from bbm_tui.core.charts import BarChart, MatrixChart
from bbm_tui.core.textsafe import one_line

# Ours first: solid, then dense; the paper's: light shades. Told apart without colour.
OUR_MARKERS = ("█", "▓", "▚", "▞")
PAPER_MARKERS = ("░", "▒", "┼", "·")
OUR_COLOURS = ("blue+", "orange+", "green+", "magenta+")
PAPER_COLOURS = ("gray+", "cyan", "yellow", "red")
# Stacked counts: with a mistake solid, without light, unlabelled shaded between.
STACKED_MARKERS = ("█", "░", "▒")
STACKED_COLOURS = ("red+", "green+", "gray")
# Rows a chart needs beside its bars: the frame (2) and the x axis's ticks and labels (2).
FRAME_ROWS = 4


def new_figure() -> Any:
    """A plotext figure of its own (not plotext's global one), as textual-plotext makes."""
    from plotext._figure import _figure_class

    return _figure_class()


def styles(chart: BarChart) -> list[tuple[str, str]]:
    """Each series' (marker, colour), in the chart's order."""
    if chart.stacked:
        return [(STACKED_MARKERS[i % 3], STACKED_COLOURS[i % 3])
                for i in range(len(chart.series))]
    found: list[tuple[str, str]] = []
    ours = papers = 0
    for series in chart.series:
        if series.paper:
            found.append((PAPER_MARKERS[papers % 4], PAPER_COLOURS[papers % 4]))
            papers += 1
        else:
            found.append((OUR_MARKERS[ours % 4], OUR_COLOURS[ours % 4]))
            ours += 1
    return found


def legend(chart: BarChart, *, colour: bool = True) -> Text:
    """The series' names after their markers ("█ ours  ░ paper: gpt-4"), each marker in its
    bars' colour (without `colour`, markers only); none for a chart of one series, whose title
    says what it counts."""
    text = Text()
    if len(chart.series) < 2:
        return text
    for (marker, colour_name), series in zip(styles(chart), chart.series, strict=True):
        if text:
            text.append("   ")
        text.append(marker * 2, style=rich_colour(colour_name) if colour else "")
        text.append(" " + one_line(series.name, 60))
    return text


def rich_colour(name: str) -> str:
    """A plotext colour name ("blue+") as the Rich colour plotext paints it with (one of the
    terminal's 16, by number), so a legend's marker matches its bars."""
    from plotext._dict import color_codes

    return f"color({color_codes[name]})"


def draw(plot: Any, chart: BarChart, width: int, height: int, *, colour: bool = True) -> None:
    """Draw `chart` on a plotext figure (or textual-plotext's Plot) of `width` x `height`
    cells; without `colour`, markers only (plotext's "clear" theme)."""
    plot.clear_data()
    plot.clear_figure()
    plot.plotsize(max(width, 10), max(height, FRAME_ROWS + 2))
    plot.theme("clear")
    values = [[0.0 if value is None else float(value) for value in series.values]
              for series in chart.series]
    low, high = _limits(chart, values)
    ticks = fitting_ticks(low, high, height, whole=chart.unit == "traces")
    labels = [one_line(category) for category in chart.categories]
    plot_width = width - _tick_width(ticks, chart) - 2
    labels = fit_labels(labels, plot_width)
    markers = [marker for marker, _colour in styles(chart)]
    colours = [colour_name for _marker, colour_name in styles(chart)] if colour else None
    positions = list(range(1, len(labels) + 1))
    if chart.stacked:
        plot.stacked_bar(positions, values, marker=markers, color=colours, width=0.7)
    else:
        # A category's bars side by side, touching, with room between categories (plotext's
        # multiple_bar spaces every bar alike, so a pair did not read as one category's).
        group = 0.6 if len(values) == 1 else 0.8
        bar_width = group / len(values)
        for index, series_values in enumerate(values):
            offset = bar_width * (index + 0.5) - group / 2
            plot.bar([position + offset for position in positions], series_values,
                     marker=markers[index], color=colours[index] if colours else None,
                     width=bar_width, reset_ticks=False)
    plot.xticks(positions, labels)
    # Room either side of the first and last bars, for their labels (plotext leaves out a
    # label that would cross the frame).
    plot.xlim(0.3, len(labels) + 0.7)
    plot.ylim(ticks[0], ticks[-1])
    plot.yticks(ticks, [_tick_label(tick, chart) for tick in ticks])
    if chart.signed and ticks[0] < 0:
        plot.hline(0)
    _ticks_in_order(plot)


def _ticks_in_order(plot: Any) -> None:
    """The ticks and their labels left to right (bottom to top). plotext passes them through
    a set, so their order follows the string hash, which changes from run to run; and it
    places each label around those already placed, or leaves it out: without this the labels
    moved by a cell, or went missing, from one run to the next."""
    monitor = plot.monitor
    for ticks, labels in ((monitor.xticks, monitor.xlabels), (monitor.yticks, monitor.ylabels)):
        for side in range(2):
            if ticks[side] and labels[side] and len(ticks[side]) == len(labels[side]):
                pairs = sorted(zip(ticks[side], labels[side], strict=True))
                ticks[side] = [tick for tick, _label in pairs]
                labels[side] = [label for _tick, label in pairs]


def _limits(chart: BarChart, values: Sequence[Sequence[float]]) -> tuple[float, float]:
    if chart.stacked:
        totals = [sum(column) for column in zip(*values, strict=True)] or [0.0]
        flat = [*totals, 0.0]
    else:
        flat = [value for series in values for value in series] + [0.0]
    low = min(flat) if chart.signed else 0.0
    high = max(flat)
    if high <= low:
        high = low + 1.0
    if chart.signed:  # room below the lowest bar and above the highest, off the frame
        margin = 0.05 * (high - low)
        low, high = low - margin * (low < 0), high + margin
    if chart.ceiling is not None and max(flat) > 0.6 * chart.ceiling:
        high = chart.ceiling  # near the top of a bounded scale: the whole scale
    return low, high


def fitting_ticks(low: float, high: float, height: int, *, whole: bool = False) -> list[float]:
    """`nice_ticks` with a row at least between two labels on a chart of `height` rows: on a
    short chart (80x24) six ticks on five rows were drawn next to and over each other, a
    label beside the wrong line. The most that fit, down to one step."""
    allowed = max(1, (height - FRAME_ROWS - 1) // 2)
    for most in range(min(5, allowed), 0, -1):
        ticks = nice_ticks(low, high, most, whole=whole)
        if len(ticks) - 1 <= allowed:
            return ticks
    return nice_ticks(low, high, 1, whole=whole)


def nice_ticks(low: float, high: float, most: int = 5, *, whole: bool = False) -> list[float]:
    """Round ticks from at or below `low` to at or above `high`, `most` of them at most (plus
    the ends): steps of 1, 2, 2.5 or 5 times a power of ten; with `whole` (a count of
    traces), whole numbers only (a histogram of ones and zeros had ticks 0.2, 0.4, ...)."""
    span = high - low
    magnitude = 10 ** math.floor(math.log10(span / most)) if span > 0 else 1.0
    step = next(magnitude * factor for factor in (1, 2, 2.5, 5, 10)
                if span / (magnitude * factor) <= most)
    if whole and step < 1:
        step = 1.0
    elif whole and step != int(step):  # 2.5, 25, ...: the next whole step that is round
        step = magnitude * 5 if magnitude >= 1 else 1.0
    first = math.floor(low / step) * step
    last = math.ceil(high / step) * step
    count = round((last - first) / step)
    return [round(first + index * step, 10) for index in range(count + 1)]


def _tick_label(tick: float, chart: BarChart) -> str:
    if chart.unit == "alpha":
        return f"{tick:.2f}"
    if chart.unit == "points":
        return f"{tick:+g}" if tick else "0"
    return f"{tick:g}"


def _tick_width(ticks: Sequence[float], chart: BarChart) -> int:
    return max(len(_tick_label(tick, chart)) for tick in ticks)


def fit_labels(labels: Sequence[str], plot_width: int) -> list[str]:
    """Category labels fitted to the room each has under its bars (plotext leaves out a
    label that would run into the next): whole where they fit; else each by its first word
    ("tracking" for tracking_shuffled_objects), where those are told apart and fit; cut with
    an ellipsis only then. The numbers table under the chart names each whole."""
    room = max(int(plot_width / (len(labels) + 0.4)) - 3, 3)
    if all(len(label) <= room for label in labels):
        return list(labels)
    first_words = [re.split(r"[_\s/-]", label, maxsplit=1)[0] or label for label in labels]
    if len(set(first_words)) == len(first_words):
        labels = [label if len(label) <= room else word
                  for label, word in zip(labels, first_words, strict=True)]
    return [label if len(label) <= room else label[: room - 1] + "…" for label in labels]


def chart_text(chart: BarChart, width: int, height: int, *, colour: bool = True) -> Text:
    """The chart as Rich text: the drawing, then its legend."""
    figure = new_figure()
    draw(figure, chart, width, height, colour=colour)
    drawn = Text.from_ansi(figure.build())
    drawn.rstrip()
    key = legend(chart, colour=colour)
    if key:
        drawn.append("\n")
        drawn.append_text(key)
    return drawn


# --------------------------------------------------------------------------- numbers


def value_text(value: float | None, unit: str) -> str:
    """A value as the commands' tables print it: counts whole, percentages to 2 places,
    changes signed, alpha to 3 places, and "—" for no figure."""
    if value is None:
        return "—"
    if unit == "traces":
        return str(int(value))
    if unit == "points":
        rounded = round(value, 2)
        return f"{rounded if rounded else 0.0:+.2f}"
    if unit == "alpha":
        return f"{value:.3f}"
    return f"{value:.2f}"


def numbers(chart: BarChart) -> tuple[list[str], list[list[str]]]:
    """The chart's numbers as a table: headers (its categories' header, then each series'
    name) and one row of text per category."""
    headers = [chart.category_header, *(series.name for series in chart.series)]
    rows = [[category, *(value_text(value, chart.unit) for value in values)]
            for category, values in chart.rows()]
    return headers, rows


def numbers_table(chart: BarChart) -> Table:
    """The chart's numbers as a Rich table (the app's `t`; its title is the chart's)."""
    headers, rows = numbers(chart)
    table = Table(expand=False)
    for index, header in enumerate(headers):
        table.add_column(Text(one_line(header, 40)), justify="left" if index == 0 else "right",
                         no_wrap=True)
    for row in rows:
        table.add_row(*(Text(one_line(cell, 40)) for cell in row))
    return table


# --------------------------------------------------------------------------- matrix

SHADES = (" ", "░", "▒", "▓", "█")


def shade(value: float | None) -> str:
    """A kappa as a shade, for the eye without colour: blank at or below 0 (chance), full
    block at 1."""
    if value is None:
        return "·"
    return SHADES[max(0, min(4, math.ceil(value * 4)))] if value > 0 else SHADES[0]


def matrix_table(matrix: MatrixChart, name_width: int = 14, *, titled: bool = True) -> Table:
    """The kappa matrix: a row and a column per annotator, each cell the kappa (3 places)
    after its shade; "—" on the diagonal, "n/a" where a pair's kappa is undefined."""
    names = [one_line(name, name_width) for name in matrix.names]
    table = Table(title=Text(matrix.title) if titled else None, title_justify="left")
    table.add_column("", no_wrap=True)
    for name in names:
        table.add_column(Text(name), justify="right", no_wrap=True)
    for index, (row_name, row) in enumerate(zip(names, matrix.cells, strict=True)):
        cells = [Text(row_name, style="bold")]
        for column, value in enumerate(row):
            if value is None:
                cells.append(Text("—" if column == index else "n/a", style="dim"))
            else:
                cells.append(Text(f"{shade(value) * 2} {value:.3f}"))
        table.add_row(*cells)
    return table

