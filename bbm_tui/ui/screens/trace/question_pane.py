"""The left pane of a trace view: the question, then the facts about the trace (the target, the
answer, the person's label, a mistake finder's verdict and its agreement with the label, the
finder's answer on demand, the dataset's gold label), each shown from the session by the view
models of ui/viewmodels/trace.py."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from bbm_tui.core.trace.session import TraceSession
from bbm_tui.ui.message_log import keep_message
from bbm_tui.ui.panels import set_panel_title
from bbm_tui.ui.text import (
    COPY_QUESTION,
    GLYPH_MISTAKE,
    GLYPH_OK,
    MUTED,
    QUESTION_SHOWN,
    safe,
    safe_cut,
    safe_line,
    styled,
)
from bbm_tui.ui.viewmodels.thinking import reasoning_fact
from bbm_tui.ui.viewmodels.trace import (
    FinderShown,
    describe_agreement,
    describe_finder,
    describe_label,
    error_cut,
    finder_source,
    question_text,
)
from bbm_tui.ui.widgets.chrome import LeanStatic


class QuestionPane(VerticalScroll, can_focus=False):
    """The question and the facts, in a pane that scrolls (the mouse wheel, `]` / `[`) and
    never takes the focus, so that the keys always reach the trace view."""

    def __init__(self, trace: TraceSession, **kwargs) -> None:
        super().__init__(**kwargs)
        self.trace = trace

    def compose(self) -> ComposeResult:
        trace = self.trace
        yield Static(safe_cut(question_text(trace.task, trace.session.input), COPY_QUESTION,
                              QUESTION_SHOWN), id="question")
        yield Static(id="target", classes="fact")
        yield LeanStatic(id="answer", classes="fact")
        yield LeanStatic(id="reasoning", classes="fact")
        yield LeanStatic(id="label", classes="fact")
        yield LeanStatic(id="finder", classes="fact")
        yield LeanStatic(id="agreement", classes="fact")
        yield Static(id="finder-answer", classes="fact")
        yield LeanStatic(id="gold", classes="fact")
        yield Static(
            styled("Do not assume every step is correct because the answer is: a trace can "
                   "reach the right answer after a mistake.", MUTED),
            id="note",
        )

    def on_mount(self) -> None:
        for hidden in ("#finder", "#agreement", "#finder-answer", "#gold"):
            self.query_one(hidden).display = False
        self._show_title()
        self._show_target()
        self.show_answer()

    def _show_title(self) -> None:
        trace = self.trace
        title = Content.assemble("Question · ", safe_line(trace.task.title, 40))
        if trace.task_change is not None:  # said in full in a notice on opening
            title = title.append(styled(" · file changed", "$text-warning"))
        elif not trace.task.is_paper:
            title = title.append(styled(" · yours", MUTED))
        set_panel_title(self, title)

    def _show_target(self) -> None:
        target = self.trace.session.target
        shown = self.query_one("#target", Static)
        shown.display = target is not None
        if target is not None:
            shown.update(Content.assemble(("Target: ", "bold"), safe_cut(
                target, "the export has all of it", QUESTION_SHOWN, line=True)))

    def show_answer(self) -> None:
        answer = self.trace.answer
        line = Content.assemble(("Answer: ", "bold"))
        if answer is None:
            line = line.append(styled("—", MUTED))
        else:
            line = line.append(safe_line(answer))
            correct = self.trace.correct
            # The spaces go with the answer: a styled run that starts with spaces loses them
            # when librsvg draws a screenshot ("(A)✗ not the target").
            if correct is True:
                line = line.append("  ").append(
                    styled(f"{GLYPH_OK} matches the target", "$text-success"))
            elif correct is False:
                line = line.append("  ").append(
                    styled(f"{GLYPH_MISTAKE} not the target", "$text-error"))
        self.query_one("#answer", LeanStatic).show(line)
        self._show_reasoning()

    def _show_reasoning(self) -> None:
        """A thinking trace's reasoning, where there is something to say of it: none sent by
        the provider (o-series), and the reasoning tokens it counted."""
        fact = reasoning_fact(self.trace)
        shown = self.query_one("#reasoning", LeanStatic)
        shown.display = fact is not None
        if fact is not None:
            shown.show(Content.assemble(("Reasoning: ", "bold"),
                                        styled(fact, MUTED)))

    def show_label(self, finder: FinderShown | None) -> None:
        """The person's label, and how it agrees with the finder's verdict."""
        self.query_one("#label", LeanStatic).show(describe_label(self.trace))
        self._show_agreement(finder)

    def show_finder(self, finder: FinderShown | None, *, answer_open: bool) -> None:
        """The finder's verdict (hidden without one), its trace-level answer when open, and the
        agreement with the label."""
        line = self.query_one("#finder", LeanStatic)
        line.display = finder is not None
        if finder is not None:
            line.show(describe_finder(finder, self.trace))
            if finder.state == "failed" and finder.error and error_cut(finder.error):
                # Cut in the pane: whole in the messages screen, as the pane says (a run
                # read back from the store was never said in this session).
                keep_message(self, f"Mistake finding failed ({finder_source(finder)}): "
                             f"{finder.error}", severity="error", once=True)
        answer = self.query_one("#finder-answer", Static)
        raw = finder.trace_raw if finder is not None and not finder.step_level else None
        answer.display = raw is not None and answer_open
        if raw is not None and answer_open:
            raw = raw.strip()
            answer.update(Content.assemble(("The model's answer: ", "bold"))
                          .append(safe(raw).stylize(MUTED) if raw
                                  else styled("(an empty answer)", f"italic {MUTED}")))
        self._show_agreement(finder)

    def _show_agreement(self, finder: FinderShown | None) -> None:
        agreement = describe_agreement(finder, self.trace)
        line = self.query_one("#agreement", LeanStatic)
        line.display = agreement is not None
        if agreement is not None:
            line.show(agreement)

    def scroll_to_finder_answer(self) -> None:
        self.scroll_to_widget(self.query_one("#finder-answer"), animate=False)

    def show_gold(self, gold: Content | None) -> None:
        """The dataset's gold label (None: hidden)."""
        line = self.query_one("#gold", LeanStatic)
        line.display = gold is not None
        if gold is not None:
            line.show(gold)
