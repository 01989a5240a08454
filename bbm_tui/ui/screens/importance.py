"""Each thought's importance in a thinking trace (`I` on the trace; issue 35, item 3): Thought
Anchors' resampling importance, from rollouts that go on from prefixes of the reasoning, run
by the same core code as `bbm-tui anchors` (core/batch/anchors.py) and written as the same
rows, to a file of the session's own beside the store: what is done is shown when the view
opens again, and a run goes on with only the rollouts not done yet.

Before it starts, a dialog says the calls and an estimate of the tokens and cost for the M
rollouts a prefix and the concurrency chosen, and asks again above the command's limit. The
rollouts then fill in live: a bar beside each thought, the chart of importance along the
trace, and the top anchors with their text (the steps' text is the model's: never markup).
esc stops, keeping every rollout written.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Button, Input, Static

from bbm_tui.core import charts, llm
from bbm_tui.core.textsafe import one_line
from bbm_tui.ui.dialogs.base import Dialog, with_key
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.screens.base import BbmScreen
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import MUTED, safe, safe_line, styled
from bbm_tui.ui.widgets.chart import ChartView
from bbm_tui.ui.widgets.chrome import KeysFooter, LeanStatic, StatusLine, TitleBar

if TYPE_CHECKING:
    from bbm_tui.core.batch.anchors import AnchorsProgress, Plan, Trace
    from bbm_tui.core.dataset import TraceRow
    from bbm_tui.core.judging.anchors import StepImportance
    from bbm_tui.core.llm.prefix import PrefixSettings

# The command's defaults (`bbm-tui anchors`): its --concurrency; M is the test's 4.
ROLLOUTS = 4
CONCURRENCY = 16
# The top anchors listed under the chart.
TOP = 5
# The bars and chart are drawn again at most this often while rollouts come in.
REFRESH_S = 0.25


@dataclass(frozen=True)
class ImportanceSource:
    """What the view is about: the trace as `anchors` takes one, the model that goes on from
    its prefixes, and the session's rollouts file."""

    trace: Trace
    spec: llm.ModelSpec
    path: Path
    heading: str  # "multistep_arithmetic #3"
    # The rollouts' sampling (the command's defaults: temperature 1, the server's top-p) and
    # the model's chat template where the server needs one (vLLM, Ollama).
    prefix: PrefixSettings
    chat_template: Path | None = None


@dataclass(frozen=True)
class RolloutChoice:
    rollouts: int
    concurrency: int


# -- the dialog before a run


class RolloutsDialog(Dialog[RolloutChoice | None]):
    """M rollouts a prefix and the concurrency; what the run will cost, as the command says
    it before it starts; above the command's limit, a second question."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="rollouts_cancel",
                tooltip="Close without a call"),
        Binding("ctrl+r", "start", "start", id="rollouts_start",
                tooltip="Start the rollouts (enter in a field too)"),
    ]

    def __init__(self, steps: int, plan_for: Any, rollouts: int = ROLLOUTS,
                 concurrency: int = CONCURRENCY) -> None:
        """`plan_for(rollouts)`: the Plan of a run of `rollouts` a prefix (done ones left
        out)."""
        super().__init__()
        self._steps = steps
        self._plan_for = plan_for
        self._rollouts = rollouts
        self._concurrency = concurrency

    def compose(self) -> ComposeResult:
        with Vertical(id="rollouts-dialog", classes="dialog"):
            yield Static(styled("Each thought's importance", "bold"), classes="dialog-title")
            yield Static(Content(
                f"M rollouts from each of the {self._steps + 1} prefixes go on to the answer: "
                "those from prefix i resample thought i, those from i+1 keep it."),
                classes="dialog-text")
            with Horizontal(classes="model-row"):
                yield Input(str(self._rollouts), id="rollouts-m", type="integer",
                            max_length=4)
                yield Input(str(self._concurrency), id="rollouts-concurrency",
                            type="integer", max_length=3)
            yield Static(id="rollouts-plan")
            with Horizontal(classes="dialog-buttons"):
                yield Button(with_key("Start", key_for(self, "rollouts_start")),
                             variant="primary", id="rollouts-go")
                yield Button(with_key("Cancel", key_for(self, "rollouts_cancel")),
                             id="rollouts-no")

    def on_mount(self) -> None:
        self.query_one("#rollouts-m", Input).border_title = "M rollouts a prefix"
        self.query_one("#rollouts-concurrency", Input).border_title = "at once"
        self.query_one("#rollouts-m", Input).focus()
        self._show_plan()

    def _numbers(self) -> tuple[int | None, int | None]:
        def number(selector: str) -> int | None:
            text = self.query_one(selector, Input).value.strip()
            return int(text) if text.isdigit() and int(text) >= 1 else None

        return number("#rollouts-m"), number("#rollouts-concurrency")

    def on_input_changed(self) -> None:
        self._show_plan()

    def _show_plan(self) -> None:
        rollouts, concurrency = self._numbers()
        shown = self.query_one("#rollouts-plan", Static)
        if rollouts is None or concurrency is None:
            shown.update(styled("M and the rollouts at once are whole numbers from 1.",
                                "$text-error"))
            return
        shown.update(Content(plan_words(self._plan_for(rollouts))))

    def on_input_submitted(self) -> None:
        self.action_start()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "rollouts-go":
            self.action_start()
        else:
            self.action_cancel()

    def action_start(self) -> None:
        rollouts, concurrency = self._numbers()
        if rollouts is None or concurrency is None:
            self.notify("M and the rollouts at once are whole numbers from 1.",
                        severity="warning", markup=False)
            return
        from bbm_tui.core.batch.anchors import CONFIRM_ABOVE_CALLS

        calls = self._plan_for(rollouts).calls
        choice = RolloutChoice(rollouts, concurrency)
        if calls <= CONFIRM_ABOVE_CALLS:
            self.dismiss(choice)
            return
        from bbm_tui.ui.dialogs.confirm import ConfirmScreen

        def answered(yes: bool | None) -> None:
            if yes:
                self.dismiss(choice)

        self.app.push_screen(ConfirmScreen(Content(
            f"{calls:,} calls is more than {CONFIRM_ABOVE_CALLS}. Make them?"), "Go on"),
            answered)

    def action_cancel(self) -> None:
        self.dismiss(None)


def plan_words(plan: Plan) -> str:
    """What a run will cost, in the command's words."""
    cost = "cost unknown" if plan.cost is None else f"~${plan.cost:.2f}"
    if plan.calls == 0:
        return "Every rollout is done already: no call to make."
    return (f"{plan.calls:,} call{'s' * (plan.calls != 1)} (rollouts done are kept, not "
            f"made again), ~{plan.prompt_tokens:,} prompt and ~{plan.completion_tokens:,} "
            f"written tokens (estimated), {cost}.")


# -- the view


class StepsPane(VerticalScroll, can_focus=False):
    """The thoughts with their bars, scrolled by the screen's keys."""


class StepsTable(Widget):
    """The thoughts' table, drawn at the width it has when it is painted (a table made
    before the first layout, at a guessed width, stayed on screen until the next rollout)."""

    DEFAULT_CSS = "StepsTable { height: auto; width: 1fr; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.steps: list[StepImportance] = []

    def show(self, steps: list[StepImportance]) -> None:
        resized = len(steps) != len(self.steps)
        self.steps = steps
        self.refresh(layout=resized)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.steps) + 1  # the header, then a line a thought (never wrapped)

    def render(self) -> Table:
        width = self.content_size.width
        return steps_table(self.steps, 20 if width >= 100 else 10, width)


class AnchorsPane(VerticalScroll, can_focus=False):
    """The top anchors' text."""


class ImportanceScreen(BbmScreen):
    """A thinking trace's thoughts by importance: bars beside them, the chart along the trace
    and the top anchors; `s` rolls out what is not done, esc stops (keeping what is done)
    or goes back."""

    HELP_TITLE = "the importance view"
    CSS_PATH = stylesheet("charts")
    # Under 160 columns the chart and the anchors go under the thoughts (whose text needs
    # the width); wider, beside them.
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-narrow"),
                                                                      (160, "-wide")]

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("s", "start", "roll out", id="importance_start",
                tooltip="Choose M and the rollouts at once, then roll out what is not done "
                "yet (rollouts done are kept, never made again)"),
        Binding("escape", "stop_or_back", "stop / back", id="importance_back",
                tooltip="Stop the rollouts, keeping every one written; when none are "
                "running, back to the trace"),
        Binding("j,down", "scroll(3)", "scroll", id="importance_down",
                tooltip="Scroll the thoughts down"),
        Binding("k,up", "scroll(-3)", "scroll up", id="importance_up", show=False,
                tooltip="Scroll the thoughts up"),
        Binding("pagedown", "page(1)", "page down", id="importance_page_down", show=False,
                tooltip="Scroll the thoughts down a screenful"),
        Binding("pageup", "page(-1)", "page up", id="importance_page_up", show=False,
                tooltip="Scroll the thoughts up a screenful"),
        Binding("t", "numbers", "numbers", id="importance_numbers", show=False,
                tooltip="The chart's numbers as a table (again: the chart)"),
    ]

    def __init__(self, source: ImportanceSource, *, ask: bool = True) -> None:
        """`ask`: open the dialog once what is done is read."""
        super().__init__(classes="importance-screen")
        self.source = source
        self.rows: list[TraceRow] = []
        self.steps: list[StepImportance] = []
        self.progress: AnchorsProgress | None = None
        self.running = False
        self.numbers = False
        self._ask = ask
        self._dirty = False

    def compose(self) -> ComposeResult:
        yield TitleBar(id="title-bar")
        yield StatusLine(lines=2, id="importance-status")
        with Horizontal(id="importance-body"):
            with StepsPane(id="importance-steps", classes="panel"):
                yield StepsTable(id="importance-table")
            with Vertical(id="importance-side"):
                yield ChartView(id="importance-chart", classes="panel")
                with AnchorsPane(id="importance-anchors", classes="panel"):
                    yield LeanStatic(id="importance-anchors-text")
        yield KeysFooter()

    def on_mount(self) -> None:
        source = self.source
        self.query_one(TitleBar).set_left(
            Content.assemble(("bbm-tui ", "bold"), ("— importance — ", MUTED),
                             safe_line(source.heading, 40), (" — ", MUTED),
                             safe_line(source.spec.model, 40)),
            Content.assemble(("importance ", "bold"), safe_line(source.spec.model, 40)))
        self.query_one("#importance-steps").border_title = "Thoughts by importance"
        self.query_one("#importance-anchors").border_title = "Top anchors"
        self.say("Reading the rollouts done…")
        self.set_interval(REFRESH_S, self._draw_if_dirty)
        self.run_worker(self._read(), name="importance_read", group="importance",
                        exclusive=True, exit_on_error=False,
                        description="Reading the rollouts done")

    def say(self, message: str, then: str = "", *, error: bool = False) -> None:
        self.query_one("#importance-status", StatusLine).say(message, then, error=error)

    # -- what is done

    async def _read(self) -> None:
        from bbm_tui.core.batch.anchors import read_rollouts, rollouts_of_trace
        from bbm_tui.core.dataset import DatasetError

        try:
            rows = await asyncio.to_thread(read_rollouts, self.source.path)
        except DatasetError as error:
            self.say(f"The rollouts cannot be read: {error}", error=True)
            self._draw()
            return
        self.rows = rollouts_of_trace(self.source.trace, rows)
        self._draw()
        done = len(self.rows)
        self.say(f"{done} rollout{'s' * (done != 1)} done so far." if done
                 else "No rollout yet.", then=f"{self.key('importance_start')} rolls out.")
        if self._ask:
            # Once the view is laid out with what is done (a screen under a dialog is not laid
            # out again until the dialog closes).
            self.call_after_refresh(self.action_start)

    def key(self, binding_id: str) -> str:
        return key_for(self, binding_id)

    # -- a run

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "start":
            return None if self.running else True
        return True

    def action_start(self) -> None:
        if self.running:
            return
        from bbm_tui.core.batch.anchors import done_jobs, jobs_of, plan

        trace, spec = self.source.trace, self.source.spec

        def plan_for(rollouts: int) -> Plan:
            jobs = jobs_of([trace], rollouts)
            return plan(jobs, spec, done_jobs(trace, self.rows, rollouts))

        def chosen(choice: RolloutChoice | None) -> None:
            if choice is None:
                done = len(self.rows)
                self.say(f"No rollout started ({done} done).",
                         then=f"{self.key('importance_start')} rolls out, esc goes back.")
                return
            self.run_worker(self._run(choice), name="importance_run", group="importance",
                            exclusive=True, exit_on_error=False,
                            description="Rolling out the thoughts")

        self.app.push_screen(RolloutsDialog(len(trace.raw), plan_for), chosen)

    async def _run(self, choice: RolloutChoice) -> None:
        from bbm_tui.core.batch.anchors import (
            AnchorsSettings,
            anchors_batch,
            prepare_folder,
        )
        from bbm_tui.core.batch.runner import BatchStop
        from bbm_tui.core.dataset import DatasetError
        from bbm_tui.core.judging.anchors import Similar, similar_by_words

        source = self.source
        self.running = True
        self.refresh_bindings()
        before = len(self.rows)
        self.say(f"Rolling out: {choice.rollouts} a prefix, {choice.concurrency} at once…",
                 then="esc stops, keeping what is done.")

        async def similar_for(_texts: list[str]) -> Similar:
            return similar_by_words

        def on_progress(progress: AnchorsProgress) -> None:
            self.progress = progress
            self._dirty = True

        def on_rollout(row: TraceRow) -> None:
            self.rows.append(row)
            self._dirty = True

        settings = AnchorsSettings(source.prefix, choice.rollouts, source.chat_template)
        try:
            await asyncio.to_thread(prepare_folder, source.path)
            result = await anchors_batch([source.trace], source.spec, source.path,
                                         settings=settings, similar_for=similar_for,
                                         concurrency=choice.concurrency,
                                         on_progress=on_progress, on_rollout=on_rollout)
        except asyncio.CancelledError:
            self._draw()
            made = len(self.rows) - before
            self.say(f"Stopped: {made} new rollout{'s' * (made != 1)} kept, "
                     f"{len(self.rows)} in all.",
                     then=f"{self.key('importance_start')} goes on with the rest.")
            raise
        except (BatchStop, DatasetError, llm.LLMError) as error:
            self._draw()
            self.say(f"The rollouts stopped: {one_line(str(error), 300)}", error=True,
                     then=f"{self.key('importance_start')} tries again.")
            return
        finally:
            self.running = False
            if self.is_attached:
                self.refresh_bindings()
        self.progress = result.progress
        self._draw()
        failed = result.progress.failed
        made = len(self.rows) - before
        why = f"; {failed} failed: {one_line(result.progress.errors[0], 200)}" if (
            failed and result.progress.errors) else ""
        self.say(f"Done: {made} new rollout{'s' * (made != 1)}, {len(self.rows)} in all"
                 f"{why}.", error=bool(failed),
                 then=f"{self.key('importance_start')} adds more (a larger M).")

    def action_stop_or_back(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "importance")
            return
        self.dismiss()

    # -- scrolling and numbers

    def action_scroll(self, lines: int) -> None:
        self.query_one(StepsPane).scroll_relative(y=lines, animate=False)

    def action_page(self, direction: int) -> None:
        pane = self.query_one(StepsPane)
        pane.scroll_relative(y=direction * max(1, pane.scrollable_content_region.height - 1),
                             animate=False)

    def action_numbers(self) -> None:
        self.numbers = not self.numbers
        self.query_one(ChartView).show_numbers(self.numbers)

    # -- drawing

    def _draw_if_dirty(self) -> None:
        if self._dirty:
            self._draw()

    def _draw(self) -> None:
        from bbm_tui.core.batch.anchors import live_importances

        self._dirty = False
        self.steps = live_importances(self.source.trace, self.rows)
        self.query_one(StepsTable).show(self.steps)
        chart = charts.importance_chart(self.steps)
        view = self.query_one(ChartView)
        view.show(chart)
        view.border_title = "Importance along the trace"
        self.query_one("#importance-anchors-text", LeanStatic).show(anchors_text(self.steps))
        self._show_counts()

    def _show_counts(self) -> None:
        total = (len(self.source.trace.raw) + 1)
        done = len(self.rows)
        words = f"{done} rollout{'s' * (done != 1)} ({total} prefixes)"
        progress = self.progress
        if progress is not None and progress.calls:
            cost = f" · ${progress.cost:.4f}" if progress.cost else ""
            words += f" · {progress.calls} call{'s' * (progress.calls != 1)}{cost}"
        self.query_one(TitleBar).set_right(styled(words, MUTED))


def _figure(value: float | None) -> str:
    return "–" if value is None else f"{value:+.2f}"


def _share(value: float | None, count: int) -> str:
    return "–" if value is None else f"{value:.0%} of {count}"


def steps_table(steps: list[StepImportance], bar_width: int, width: int) -> Table:
    """A row a thought: its number, its bar (█ keeping it helps, ░ it hurts), the figure,
    the accuracy kept and resampled, and its text on one line (the model's: plain text) in
    what the rest leave of `width` (every other column's width is set: Rich, left to fit a
    long text, narrowed the figures to nothing)."""
    from bbm_tui.core.judging.anchors import importance_bar

    headers = ("#", "importance", "", "kept", "resampled", "thought")
    rows = [(str(step.index + 1), importance_bar(step.importance, bar_width),
             _figure(step.importance), _share(step.accuracy_kept, step.kept),
             _share(step.accuracy_resampled, step.resampled)) for step in steps]
    widths = [max([len(headers[column])] + [len(row[column]) for row in rows])
              for column in range(5)]
    widths[1] = bar_width
    gaps = 2 * (len(headers) - 1)
    text_width = max(10, width - sum(widths) - gaps)
    table = Table(box=None, padding=(0, 1), show_edge=False, pad_edge=False)
    for column, header in enumerate(headers[:5]):
        table.add_column(header, width=widths[column], no_wrap=True,
                         justify="left" if column == 1 else "right")
    table.add_column("thought", width=text_width, no_wrap=True, overflow="ellipsis")
    for step, row in zip(steps, rows, strict=True):
        importance = step.importance
        colour = "" if importance is None else ("green" if importance >= 0 else "red")
        table.add_row(row[0], Text(row[1], style=colour), *row[2:],
                      Text(one_line(step.text), no_wrap=True, overflow="ellipsis"))
    return table


def anchors_text(steps: list[StepImportance]) -> Content:
    """The thoughts whose resampling moved the answer most, with their text."""
    from bbm_tui.core.judging.anchors import WORD_OVERLAP, top_anchors

    anchors = [step for step in top_anchors(steps, TOP) if step.importance]
    if not anchors:
        return styled("None yet: a thought needs rollouts that keep it and rollouts that "
                      "resample it, and a difference between them.", MUTED)
    lines: list[Content] = []
    for step in anchors:
        kl = ("" if step.counterfactual_kl is None
              else f", KL {step.counterfactual_kl:.2f} over {step.different} that differ")
        lines.append(Content.assemble(
            # Each run ends with its space, none starts with one: librsvg drops a run's
            # leading spaces in screenshots.
            (f"Thought {step.index + 1} ", "bold"), (f"{_figure(step.importance)}  ", "bold"),
            (f"kept {_share(step.accuracy_kept, step.kept)}, resampled "
             f"{_share(step.accuracy_resampled, step.resampled)}{kl}", MUTED)))
        lines.append(safe(one_line(step.text, 400)))
    # What "differ" means here (the command names its measure the same way).
    lines.append(styled(f"KL over the resamples that differ in meaning, by {WORD_OVERLAP}.",
                        MUTED))
    return Content("\n").join(lines)

