"""The headless commands' tables (stats, find, verify, backtrack), as text: their columns
and rows. `drawing.print_table` prints one with rich, which a command imports only to print
a table (never for --json)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Column:
    header: str
    number: bool = False  # right-aligned, never cut nor wrapped
    style: str = ""
    # Text cut with an ellipsis at this many characters (a verified step), then wrapped
    # like the rest; None: shown whole.
    cut: int | None = None
    # In plain rows, the value goes in brackets after the one before (the paper's figure
    # beside ours).
    beside: bool = False
    # In plain rows, what names the value, where the header is too short to ("Thought 2:"
    # for a column headed "2").
    label: str = ""


@dataclass
class TextTable:
    """A table's title, columns and rows as text (never markup), and a line under it."""

    title: str
    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    caption: str | None = None
    # Row indexes after which a line is drawn (before an "overall" row).
    sections: set[int] = field(default_factory=set)

    def add_row(self, *cells: str, section: bool = False) -> None:
        if section:
            self.sections.add(len(self.rows))
        self.rows.append(list(cells))

