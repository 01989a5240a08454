"""One model's column on the side-by-side screen (side_by_side.py): its trace view in a border
that names the model, its state and its figures, and the fillers that keep its rows and its
facts level with the other columns'."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Vertical
from textual.content import Content
from textual.geometry import Size
from textual.reactive import Reactive
from textual.widget import Widget

from bbm_tui.core.records import ModelBranchState
from bbm_tui.core.store import Totals
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.trace.side_by_side import BranchFigures
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.screens.trace.view import TraceView
from bbm_tui.ui.viewmodels.columns import column_title, figures_line, filler_height, shown_state
from bbm_tui.ui.viewmodels.thinking import thinking_note
from bbm_tui.ui.widgets.chrome import StatusLine
from bbm_tui.ui.widgets.thought import ThoughtView

# The lines of a column's status line (the trace view's own has three).
STATUS_LINES = 2
# What a column's border takes of its width around its figures (corners, the rule's ends
# and a space either side).
BORDER_ROOM = 6


class Filler(Widget):
    """The blank under a column's last thought: the rows the other columns have and it has
    not, so that every column scrolls as far and its rows stay level."""

    DEFAULT_CSS = """
    Filler {
        height: 0;
    }
    """

    # Textual's own `virtual_size` asks for a layout when it changes, which is in the layout
    # that gave the filler its new height: a second layout of the whole screen, and a second
    # frame, for nothing (the filler draws blank, whatever its size), each time the other
    # columns' rows grew under a column's last thought (9 in 5 s of two columns streaming,
    # bench/side_by_side.py). As ThoughtView's.
    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False, repaint=False)

    def render(self) -> Content:
        # Blank: a widget with nothing to render draws its class name ("Filler").
        return Content("")

    def set_rows(self, height: int) -> None:
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height


class ModelColumn(Vertical):
    """One model's column: its trace view, framed by a border that names the model, its state
    and its figures."""

    def __init__(self, trace: TraceSession, totals: Totals, position: int) -> None:
        super().__init__(classes="model-column")
        self.trace = trace
        self.position = position
        self.view = TraceView(trace, totals, id=f"column-{position}")
        self.filler = Filler()
        # Under its facts: the rows the other columns' facts take and its own do not.
        self.facts_filler = Filler()
        # What its border says (show_header): the title as shown, the figures as text.
        self.title = Content()
        self.figures = ""

    def compose(self) -> ComposeResult:
        yield self.view

    def on_mount(self) -> None:
        # Under the column's thoughts (after the window's last line: ThoughtList mounts its
        # own thoughts before that line, so the filler stays last).
        self.view.thoughts.mount(self.filler)
        self.view.thoughts.share_window()  # every column mounts the same thought numbers
        self.view.question_pane.mount(self.facts_filler)
        set_panel_title(self.view.query_one("#thoughts-pane"), "")
        self.view.thoughts_titled = False  # the column's border says it (show_header)
        # Two lines of what happened, in every column alike (side_by_side.tcss): the
        # thoughts panes stay one height, whatever each says.
        self.view.query_one("#run-status", StatusLine).lines = STATUS_LINES
        self.call_after_refresh(self._facts_only)

    def _facts_only(self) -> None:
        """Under the thoughts, the view's facts without the question and target (shown once
        above the columns): the view shows its target when it mounts."""
        pane = self.view.question_pane
        set_panel_title(pane, Content())
        pane.query_one("#target").display = False

    @property
    def state(self) -> ModelBranchState:
        return shown_state(self.trace, self.view.running)

    def show_header(self, *, focused: bool, wall_clock: bool) -> None:
        """The border: the model and its state above, its figures below."""
        spec = self.trace.spec
        note = thinking_note(self.trace, self.view.context.stepper_settings.split, short=True) \
            if spec.mode == "thinking" else ""
        title = column_title(spec.model, self.state, position=self.position,
                             focused=focused, mode=spec.mode, note=note)
        # The border's room: its corners and the space either side of the figures taken.
        room = self.size.width - BORDER_ROOM if self.size.width else None
        figures = figures_line(BranchFigures.of(self.trace.steps), wall_clock=wall_clock,
                               room=room)
        # Set again only what changed: Textual repaints the whole column for a border title
        # set, even as it was, and the headers are shown again each time either column
        # finishes a step (a frame of both columns for nothing, bench/side_by_side.py).
        # Content's == compares the text alone: its styles too here.
        if self.border_title is None or (title.plain, title.spans) != (self.title.plain,
                                                                       self.title.spans):
            self.border_title = title
        if self.border_subtitle is None or figures != self.figures:
            self.border_subtitle = Content(figures)
        self.title, self.figures = title, figures
        self.show_focus(focused)

    def show_focus(self, focused: bool) -> None:
        """The column with the keys has a heavy border in the theme's primary colour (heavy:
        it reads without colour too, beside the others' round ones). An inline
        style, not a CSS class: a class change restyles every widget in the column (~25),
        which made a column switch take ~100 ms while two columns streamed; this restyles
        the column only."""
        if focused:
            primary = Color.parse(self.app.get_css_variables()["primary"])
            # Set again only if it changed: Textual repaints the whole column for a border
            # set, even as it was (the headers are shown again each time a column finishes a
            # step: a frame of the whole column for nothing, bench/side_by_side.py).
            if self.styles.border_top != ("heavy", primary):
                self.styles.border = ("heavy", primary)
        elif self.styles.inline.has_rule("border_top"):
            self.styles.border = None  # the stylesheet's own

    def natural_heights(self) -> dict[int, int]:
        """Each thought's own height here by number (the one streaming too), where laid out."""
        thoughts = self.view.thoughts
        views: list[ThoughtView] = [*thoughts.views()]
        if thoughts.streaming is not None and thoughts.streaming.parent is not None:
            views.append(thoughts.streaming)
        found: dict[int, int] = {}
        for view in views:
            width = view.content_size.width
            if width > 0:
                found[view.number] = view.get_content_height(Size(0, 0), Size(0, 0), width)
        return found

    def facts_height(self) -> int:
        """The rows its facts under the thoughts take (answer, label, a finder's verdict...),
        laid out as they are, whatever height the pane is given."""
        pane = self.view.question_pane
        return pane.gutter.height + sum(child.outer_size.height
                                        for child in pane.displayed_children
                                        if child is not self.facts_filler)

    def level_facts(self, height: int) -> None:
        self.facts_filler.set_rows(max(0, height - self.facts_height()))

    def level(self, rows: dict[int, int], gap: int, lead: ModelColumn) -> None:
        """Give each thought its row's height and the column its filler: the rows down to
        the last of the column with the keys (`lead`), so that this one scrolls as far as
        that one (which has none: it shows its own last thought at its end, never a blank)."""
        thoughts = self.view.thoughts
        views = [*thoughts.views()]
        if thoughts.streaming is not None and thoughts.streaming.parent is not None:
            views.append(thoughts.streaming)
        own = self.natural_heights()
        for view in views:
            level_thought(view, rows.get(view.number), own.get(view.number, 0))
        if lead is self:
            self.filler.set_rows(0)
            return
        lead_thoughts = lead.view.thoughts
        # The lead's line of later thoughts, where this column has none: a row of blank too.
        later = int(lead_thoughts.later_line_shown and not thoughts.later_line_shown)
        self.filler.set_rows(filler_height(rows, own, gap, until=lead.last_number()) + later)

    def last_number(self) -> int:
        """The number of the last thought on show in the column (the one streaming too)."""
        return max(self.natural_heights(), default=0)


def level_thought(view: ThoughtView, row: int | None, own: int) -> None:
    """A thought as tall as its row (`row`: the tallest of its number in the columns on
    show; `own`: its own height). A min-height at or under its own height does nothing, so it
    is left where it is: clearing it as soon as the thought grew to it made a second layout
    for each line a streaming thought gained (a layout is the costly part of a frame)."""
    current = view.styles.min_height
    now = current.value if current is not None else None
    if row is not None and row > own:
        if now != row:
            view.styles.min_height = row
    elif now is not None and (row is None or now > own):
        view.styles.min_height = None
