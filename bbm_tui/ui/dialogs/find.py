"""The mistake finder's dialog (f): the method, the model to ask, and whether a step-level method
judges every step."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.geometry import Size
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from bbm_tui.core import llm
from bbm_tui.core.judging.judges import Judge
from bbm_tui.ui.dialogs.base import Dialog, with_key
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, styled
from bbm_tui.ui.widgets.tickbox import TickBox


@dataclass(frozen=True)
class FindRequest:
    """What the finder dialog asks for: a judge (a name from core/judging/judges.py), the
    model to ask, and whether a step-level method goes on past the first "No"."""

    method: str
    spec: llm.ModelSpec
    judge_all: bool = False


class SpaceCheckbox(TickBox, inherit_bindings=False):
    """A checkbox that space toggles and enter leaves to the dialog (which runs)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("space", "toggle_button", "toggle", show=False),
    ]


class MarkedRadioButton(RadioButton):
    """A radio button that shows where the focus is with a marker ("▸" before the highlighted
    one of a focused set), not only a tint: readable without colour (NO_COLOR, a monochrome
    terminal, a screenshot in print)."""

    MARKER = "▸"

    def render(self) -> Content:
        parent = self.parent
        marked = self.has_class("-selected") and isinstance(parent, RadioSet) and \
            parent.has_focus
        return Content.assemble(self.MARKER if marked else " ", super().render())

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return 1 + super().get_content_width(container, viewport)


class MethodSet(RadioSet, inherit_bindings=False):
    """A RadioSet where the arrows choose (not just move a highlight) and enter is left to the
    dialog, which runs: f, then ↓ ↓, then enter."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down,right", "choose(1)", "next method", show=False),
        Binding("up,left", "choose(-1)", "previous method", show=False),
        Binding("space", "toggle_button", "choose", show=False),
    ]

    def on_mount(self) -> None:
        # RadioSet highlights its first button once mounted (its own handler runs after this
        # one); here the highlight is on the chosen one.
        self.call_after_refresh(self._highlight_pressed)

    def _highlight_pressed(self) -> None:
        if self.pressed_index >= 0:
            self._selected = self.pressed_index

    def on_focus(self) -> None:
        self._mark_focus()

    def on_blur(self) -> None:
        self._mark_focus()

    def watch__selected(self) -> None:
        super().watch__selected()
        self._mark_focus()

    def _mark_focus(self) -> None:
        """The marker follows the focus and the highlight (MarkedRadioButton)."""
        for button in self.query(MarkedRadioButton):
            button.refresh()

    def action_choose(self, delta: int) -> None:
        buttons = list(self.query(RadioButton))
        if buttons:
            buttons[(max(self.pressed_index, 0) + delta) % len(buttons)].value = True


JUDGE_ALL = "Judge every step, not only up to the first No (space toggles)"


class FindScreen(Dialog[FindRequest | None]):
    """Run a mistake finder on the trace: the method (those the paper has prompts for on the
    task), the model to ask (the session's by default; any litellm model, or the offline
    replay/bbm oracle and simulated/rm-X reward models), and, for step-level methods, whether
    to judge every step or stop at the first "No"."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="find_cancel"),
        Binding("enter,ctrl+r", "run", "run", id="find_run"),
    ]
    # Under 32 rows the dialog drops its borders and the offline note (dialogs.tcss): at
    # 80x24 it scrolled, with its title out of view.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (32, "-tall")]

    def __init__(self, methods: list[Judge], default: FindRequest, *,
                 offline: bool = True) -> None:
        """`offline`: the offline finders know the task (the paper's five)."""
        super().__init__()
        self._methods = methods
        self._default = default
        self._offline = offline

    def compose(self) -> ComposeResult:
        names = [method.name for method in self._methods]
        chosen = self._default.method if self._default.method in names else names[0]
        with Vertical(id="find-dialog", classes="dialog"):
            yield Static(styled("Find the first mistake", "bold"), classes="dialog-title")
            with MethodSet(id="find-method"):
                for method in self._methods:
                    label = Content.assemble((method.title, "bold"), (f"  {method.name}", MUTED))
                    yield MarkedRadioButton(label, value=method.name == chosen,
                                      id=f"method-{method.name}",
                                      tooltip=method.hint)
            yield Static(id="find-method-hint")
            with Horizontal(id="find-model-row"):
                yield Input(value=self._default.spec.model, id="find-model",
                            placeholder="e.g. replay/bbm, simulated/rm-0.65, openai/gpt-4o")
                yield Input(value=self._default.spec.api_base or "", id="find-api-base",
                            placeholder="the provider's default")
            yield SpaceCheckbox(JUDGE_ALL, id="find-judge-all", value=self._default.judge_all)
            with Horizontal(classes="dialog-buttons"):
                yield Button(with_key("Run", key_for(self, "find_run")), variant="primary",
                             id="find-run")
                yield Button(with_key("Cancel", key_for(self, "find_cancel")),
                             id="find-cancel")
            note = ("Offline: replay/bbm answers from the dataset's gold labels; "
                    "simulated/rm-0.65 is right 65% of the time. Every answer is saved with "
                    "the session." if self._offline else
                    "Every answer is saved with the session. The offline models know the "
                    "paper's tasks only: ask a model of a provider.")
            yield Static(styled(note, MUTED), id="find-hint")

    def on_mount(self) -> None:
        self.query_one("#find-method", MethodSet).focus()
        self._method_changed()

    @property
    def method(self) -> Judge:
        pressed = self.query_one("#find-method", MethodSet).pressed_button
        name = pressed.id.removeprefix("method-") if pressed and pressed.id else None
        return next((m for m in self._methods if m.name == name), self._methods[0])

    def on_radio_set_changed(self, event: RadioSet.Changed) -> None:
        self._method_changed()

    def _method_changed(self) -> None:
        method = self.method
        self.query_one("#find-method-hint", Static).update(styled(method.hint, MUTED))
        # Judging every step means something only to a judge that stops at the first
        # mistake; a judge with no model (the task verifier) takes none. What does not apply
        # is greyed and says why (left in place: the dialog keeps its shape as the arrows
        # go through the methods).
        judge_all = self.query_one("#find-judge-all", Checkbox)
        judge_all.disabled = not method.stops_early
        judge_all.label = (JUDGE_ALL if method.stops_early else
                           "Judge every step: for step-level methods only")
        model, api_base = self.query_one("#find-model", Input), self.query_one(
            "#find-api-base", Input)
        model.disabled = api_base.disabled = not method.needs_model
        model.border_title = "Model" if method.needs_model else "Model: not used by this method"
        api_base.border_title = "API base" if method.needs_model else "API base: not used"

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "find-run":
            self.action_run()
        else:
            self.action_cancel()

    def on_input_submitted(self) -> None:
        self.action_run()

    def action_run(self) -> None:
        method = self.method
        if not method.needs_model:
            self.dismiss(FindRequest(method.name, method.spec(self._default.spec)))
            return
        model = self.query_one("#find-model", Input).value.strip()
        if not model:
            self.notify("Give a model (e.g. replay/bbm, the offline oracle).",
                        severity="warning", markup=False)
            return
        api_base = self.query_one("#find-api-base", Input).value.strip() or None
        judge_all = method.stops_early and self.query_one("#find-judge-all", Checkbox).value
        self.dismiss(FindRequest(method.name, llm.ModelSpec(model, api_base,
                                                            self._default.spec.mode),
                                 judge_all))

    def action_cancel(self) -> None:
        self.dismiss(None)
