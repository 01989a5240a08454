"""`--plot` on `stats`, `find`, `backtrack` and `agreement`: the app's charts, printed under the
command's tables, as wide as the terminal.

`--plot` (or `--plot=auto`) draws them when the output is a terminal and leaves them out, saying
so on standard error, when it goes to a pipe or a file; `--plot=always` draws them there too (a
`less -R`, a saved report); `--plot=never`, the default, draws none. Colour follows Rich (none
with NO_COLOR, or to a pipe); the series are told apart by their markers either way.

plotext is imported only when a chart is drawn (bbm_tui/plotting.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from itertools import groupby
from types import ModuleType
from typing import Any

PLOT_COMMANDS = ("stats", "find", "backtrack", "agreement")
WHEN = ("auto", "always", "never")
# A chart's height in rows (its bars, frame and axis), and the narrowest a chart of a task's
# small multiples is drawn (one a row at 80 columns, two at 120, three at 150).
CHART_ROWS = 16
SMALL_ROWS = 12
SMALL_WIDTH = 50


def add_plot_option(commands: Any) -> None:
    """`--plot[=auto|always|never]` on each command that draws charts."""
    for name in PLOT_COMMANDS:
        commands.choices[name].add_argument(
            "--plot", nargs="?", const="auto", default="never", choices=WHEN, metavar="WHEN",
            help="draw the charts under the tables: --plot (auto) when the output is a "
            "terminal, --plot=always to a pipe or file too, never (the default)")


def plot_refusal(args: argparse.Namespace) -> str | None:
    """--json prints one JSON object: no chart goes beside it."""
    if getattr(args, "plot", "never") != "never" and getattr(args, "json", False):
        return "--plot draws under the tables, and --json prints none: leave out one of them"
    return None


def print_charts(args: argparse.Namespace, make: Callable[[ModuleType], Sequence[Any]], *,
                 to_stderr: bool = False) -> None:
    """Print the charts `make(bbm_tui.core.charts)` returns (its bar charts and matrices)
    under the tables, to the stream the tables went to, as `args.plot` says; or say on
    standard error why they are left out."""
    when = getattr(args, "plot", "never")
    if when == "never":
        return
    from rich.console import Console

    from bbm_tui.cli.errors import note
    from bbm_tui.core import charts as chart_data

    console = Console(stderr=to_stderr)
    if when == "auto" and not console.is_terminal:
        note("charts left out: the output is not a terminal (--plot=always draws them)")
        return
    charts = list(make(chart_data))
    if not charts:
        note("no chart to draw: nothing was scored")
        return
    for kind, group in groupby(charts, key=_kind):
        found = list(group)
        if len(found) > 1 and kind != "matrix":
            _print_small_multiples(console, found)
        else:
            for chart in found:
                _print_one(console, chart)


def _kind(chart: Any) -> str:
    return getattr(chart, "kind", "matrix")


def _colour(console: Any) -> bool:
    return console.color_system is not None and not console.no_color


def _print_one(console: Any, chart: Any) -> None:
    from rich.text import Text

    from bbm_tui.core.charts import MatrixChart
    from bbm_tui.plotting import chart_text, matrix_table

    console.print()
    if isinstance(chart, MatrixChart):
        console.print(matrix_table(chart))
        for pair, why in chart.why.items():
            console.print(Text(f"n/a {pair.replace('|', ' / ')}: {why}", style="dim"))
        return
    console.print(Text(chart.title, style="bold"))
    if chart.empty:  # a frame around nothing, scaled to a made-up top, said nothing
        console.print(Text(chart.note or "Nothing to draw: every value is 0.", style="dim"))
        return
    console.print(chart_text(chart, console.width, CHART_ROWS, colour=_colour(console)))
    if chart.note:
        console.print(Text(chart.note, style="dim"))


def _print_small_multiples(console: Any, charts: list[Any]) -> None:
    """A task's chart each, side by side as many as fit: one heading for the lot (the
    chart's title without its subject), each chart under its task's name."""
    from rich.table import Table
    from rich.text import Text

    from bbm_tui.core.textsafe import one_line
    from bbm_tui.plotting import chart_text

    across = max(1, console.width // SMALL_WIDTH)
    width = console.width // across - 1
    console.print()
    console.print(Text(charts[0].title.split(" · ")[0], style="bold"))
    for start in range(0, len(charts), across):
        row = charts[start:start + across]
        grid = Table.grid(padding=(0, 1))
        for _chart in row:
            grid.add_column(width=width)
        cells = []
        for chart in row:
            cell = Text(one_line(chart.subject, width), style="bold")
            cell.append("\n")
            if chart.empty:
                cell.append(chart.note or "Nothing to draw: every value is 0.", style="dim")
                cells.append(cell)
                continue
            cell.append_text(chart_text(chart, width, SMALL_ROWS, colour=_colour(console)))
            if chart.note:
                cell.append("\n" + chart.note, style="dim")
            cells.append(cell)
        grid.add_row(*cells)
        console.print(grid)
