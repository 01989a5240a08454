"""The commands' tables (`tables`) printed with rich so that no number is ever cut: in a
terminal, as wide as the terminal, the text columns wrapping; where even that cannot fit
(find with the paper's figures at 80 columns), as plain rows, one block a row; to a pipe or
a file, at the table's full width, nothing wrapped or cut (a pipe is not 80 columns wide, and
a fixed 120 hard-wrapped wide tables). Imported only to print a table: rich is not needed
for --json."""

from __future__ import annotations

import sys

from rich.cells import cell_len
from rich.columns import Columns
from rich.console import Console
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from bbm_tui.cli.tables import Column, TextTable

# Wider than any table: what a pipe is measured against.
UNBOUNDED = 100_000
# The narrowest a wrapped text column may be (a reason of a word or two a line reads
# poorly): narrower, the table is printed as plain rows.
READABLE = 24


def print_table(table: TextTable, *, to_stderr: bool = False) -> None:
    console = Console(stderr=to_stderr, file=sys.stderr if to_stderr else sys.stdout)
    rich_table = _rich(table)
    if not console.is_terminal:
        needed = Measurement.get(console, console.options.update_width(UNBOUNDED), rich_table)
        Console(file=console.file, width=max(needed.maximum, 40)).print(rich_table)
        return
    if _minimum(table) > console.width:
        _print_rows(table, console)
        return
    console.print(rich_table)


def _minimum(table: TextTable) -> int:
    """The narrowest the table can be drawn with nothing cut: its first column and its
    numbers whole, its other text wrapped at words (a header too) in columns of READABLE
    cells at least, each column's padding and border."""
    widths = []
    for index, column in enumerate(table.columns):
        cells = [_shown(row[index], column) for row in table.rows]
        header = _longest_word(column.header)
        if column.number or index == 0:
            widths.append(max([header, *(cell_len(cell) for cell in cells)]))
        else:  # wrapped, but not into a column too narrow to read
            longest = max((cell_len(cell) for cell in cells), default=0)
            widths.append(max([header, min(longest, READABLE),
                               *(_longest_word(cell) for cell in cells)]))
    return sum(widths) + 3 * len(widths) + 1


def _longest_word(text: str) -> int:
    return max((cell_len(word) for word in text.split()), default=0)


def _rich(table: TextTable) -> Table:
    rich_table = Table(title=table.title, caption=table.caption)
    for index, column in enumerate(table.columns):
        first = index == 0
        rich_table.add_column(
            column.header, justify="right" if column.number else "left", style=column.style,
            # The first column names the row (a task: one word); numbers are whole words
            # too, so a column is never narrower than its widest number. Headers wrap.
            no_wrap=first, overflow="fold",
            min_width=max((cell_len(row[index]) for row in table.rows), default=0)
            if column.number or first else None,
        )
    for index, row in enumerate(table.rows):
        rich_table.add_row(*(_cell(text, column) for text, column in zip(row, table.columns,
                                                                        strict=True)),
                           end_section=index + 1 in table.sections)
    return rich_table


def _cell(text: str, column: Column) -> Text:
    return Text(_shown(text, column))  # literal: a file name or a step is never markup


def _shown(text: str, column: Column) -> str:
    if column.cut is not None and len(text) > column.cut:
        return text[: column.cut - 1] + "…"
    return text


def _print_rows(table: TextTable, console: Console) -> None:
    """One block a row, for a terminal too narrow for the table: its first cell, then each
    column's header and value ("accuracy 74.50 (paper 72.30)"), laid out in as many columns
    as fit and never split. Nothing is cut."""
    console.print(Text(table.title, style="bold"))
    for row in table.rows:
        name, *values = row
        pairs: list[str] = []
        for column, value in zip(table.columns[1:], values, strict=True):
            called = column.label or column.header
            if column.beside and pairs:
                pairs[-1] += f" ({called} {value})"
            else:
                pairs.append(f"{called} {value}")
        console.print(Text(name, style="bold"))
        console.print(Padding(Columns([Text(pair) for pair in pairs], padding=(0, 3)),
                              (0, 0, 0, 2)))
    if table.caption:
        console.print(Text(table.caption, style="dim"))
