"""What the side-by-side screen shows of each model's column (docs/DESIGN.md §15), as pure
functions: the header (model, state, latency, tokens, cost), which columns fit the terminal,
and the height each row of thoughts takes so that a thought number sits at one height in
every column."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from textual.content import Content

from bbm_tui.core.accounting import format_total_cost
from bbm_tui.core.records import ModelBranchState
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.trace.side_by_side import MAX_MODELS, BranchFigures
from bbm_tui.ui.text import MUTED, cost_phrase, format_tokens, safe_line, styled

# The narrowest a column may be: thoughts wrapped narrower read poorly. 80 columns of
# terminal hold two, 250 hold four (MAX_MODELS).
MIN_COLUMN_WIDTH = 40

# Each state's word and style in a column's header; "streaming" is the view's own (a run
# going on), the others are what the store says of the branch.
STATE_STYLES: dict[str, str] = {
    ModelBranchState.STREAMING: "bold $accent",
    ModelBranchState.ANSWERED: "bold $text-success",
    ModelBranchState.ENDED: "bold $text-warning",
    ModelBranchState.FAILED: "bold $text-error",
    ModelBranchState.STOPPED: "bold $text-warning",
    ModelBranchState.IDLE: MUTED,
}
STATE_WORDS: dict[str, str] = {
    ModelBranchState.STREAMING: "● streaming",
    ModelBranchState.ANSWERED: "answered",
    ModelBranchState.ENDED: "ended, no answer",
    ModelBranchState.FAILED: "failed",
    ModelBranchState.STOPPED: "stopped",
    ModelBranchState.IDLE: "waiting",
}


def shown_state(trace: TraceSession, running: bool) -> ModelBranchState:
    """A column's state as its header says it: streaming while its run goes on, else what
    its branch stored (a column whose branch on show has an answer has answered, whatever
    ended its last run)."""
    if running:
        return ModelBranchState.STREAMING
    stored = trace.state or ModelBranchState.IDLE
    if trace.finished and stored != ModelBranchState.FAILED:
        return ModelBranchState.ANSWERED
    if stored == ModelBranchState.STREAMING:  # its run ended without saying how (a kill)
        return ModelBranchState.IDLE
    return stored


def figures_line(figures: BranchFigures, *, wall_clock: bool = True,
                 room: int | None = None) -> str:
    """"7 thoughts · 3.2 s · 4,210 tok · $0.0012"; the latency left out where the figures
    must not change between runs (screenshots); "≥$…" where some call's price is unknown,
    "cost —" where none is. In `room` cells (a narrow column's border), the latency goes
    first, then the tokens, then the thoughts: the cost stays (the border cut it off)."""
    thoughts = f"{figures.thoughts} thought" + ("" if figures.thoughts == 1 else "s")
    latency = f"{figures.latency_s:.1f} s" if wall_clock and figures.thoughts else ""
    tokens = format_tokens(figures.tokens, estimated=figures.estimated)
    cost = cost_phrase(format_total_cost(figures.cost, figures.calls, figures.unpriced_calls))
    parts = [thoughts, latency, tokens, cost]
    for dropped in (1, 2, 0):  # the latency, the tokens, the thoughts
        line = " · ".join(part for part in parts if part)
        if room is None or len(line) <= room:
            return line
        parts[dropped] = ""
    return cost


def column_title(model: str, state: ModelBranchState, *, position: int, focused: bool,
                 mode: str = "chat", note: str = "") -> Content:
    """A column's border title: its number and model (and its mode where it is not chat:
    two columns may ask one model both ways), its state, and a thinking model's `note`: what
    its steps are cut from ("summary" where they are a summary). The focused column's starts
    with a marker ("▸"): the focus reads without colour too."""
    number = styled(f"▸ {position + 1} ", "bold $accent") if focused else \
        styled(f"{position + 1} ", MUTED)
    title = Content.assemble(number, safe_line(model, 60).stylize("bold"), " ")
    if mode != "chat":
        title = title.append(styled(f"{mode} ", MUTED))
    title = title.append(styled(STATE_WORDS[state], STATE_STYLES[state]))
    # After the state, which a narrow column must not lose to it.
    return title.append(styled(f" ({note})", MUTED)) if note else title


def columns_on_show(count: int, width: int, focused: int, first: int) -> range:
    """Which columns fit `width` (each at least MIN_COLUMN_WIDTH, at most MAX_MODELS), as a
    run of neighbours that holds the focused one, moved as little as possible from the run
    starting at `first`."""
    fits = max(1, min(count, MAX_MODELS, width // MIN_COLUMN_WIDTH))
    start = min(max(first, focused - fits + 1, 0), focused, count - fits)
    return range(start, start + fits)


def more_line(shown: range, count: int, next_key: str) -> str:
    """What a terminal too narrow for every column says: which are on show, and the key."""
    if len(shown) >= count:
        return ""
    return f"Models {shown.start + 1}-{shown.stop} of {count} on show ({next_key}: the next)"


def parting_line(traces: Sequence[Sequence[str]]) -> str:
    """Where the columns' traces part: the first thought that two columns both have and
    word differently ("The traces part at Thought 5"); while none does, how many they share
    so far. Nothing before every column has a thought."""
    if len(traces) < 2 or not all(traces):
        return ""
    for index in range(max(len(trace) for trace in traces)):
        texts = {trace[index] for trace in traces if index < len(trace)}
        if len(texts) > 1:
            return f"The traces part at Thought {index + 1}."
    shared = min(len(trace) for trace in traces)
    return f"The same {shared} thought{'' if shared == 1 else 's'} so far."


def row_heights(columns: Sequence[Mapping[int, int]]) -> dict[int, int]:
    """The height each thought number's row takes: the tallest of that thought in any
    column (each column's natural heights by number), so that Thought N starts at one
    height everywhere and a thought one model has and another has not leaves a gap."""
    rows: dict[int, int] = {}
    for heights in columns:
        for number, height in heights.items():
            rows[number] = max(rows.get(number, 0), height)
    return rows


def filler_height(rows: Mapping[int, int], own: Mapping[int, int], gap: int = 0,
                  until: int | None = None) -> int:
    """The blank a column keeps under its last thought: the rows other columns have and it
    has not, down to Thought `until` (None: all of them), each with `gap` (the space between
    thoughts), so that it scrolls as far as the column it is scrolled with and its rows stay
    level with theirs."""
    last = max(own, default=0)
    return sum(height + gap for number, height in rows.items()
               if number > last and (until is None or number <= until))
