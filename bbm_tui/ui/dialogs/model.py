"""The model dialog: the model to ask and how to generate with it, with a test of the
connection (a new session's, and a trace's from its next step on)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.widgets import Button, Checkbox, Input, Static

from bbm_tui.core import llm
from bbm_tui.core.types import (
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    PAPER_TEMPERATURE,
    StepperSettings,
)
from bbm_tui.ui.dialogs.base import Dialog, with_key
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED, safe_line, styled
from bbm_tui.ui.widgets.tickbox import TickBox


@dataclass(frozen=True)
class ModelChoice:
    """What the model dialog returns: the model to ask, and how to generate with it."""

    spec: llm.ModelSpec
    settings: StepperSettings


class ModelScreen(Dialog["ModelChoice | None"]):
    """The model a new session asks (any litellm model string, an api base, the mode) and the
    generation settings beside it (temperature, max tokens per step, step limit), with a test
    of the connection: one tiny call, its latency or its error."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="model_cancel"),
        Binding("ctrl+t", "test", "test connection", id="model_test"),
    ]
    # Under 32 rows the buttons are one line each (dialogs.tcss): at 80x24 the test's result
    # line made the dialog scroll, its last line out of view.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (32, "-tall")]

    def __init__(self, spec: llm.ModelSpec, settings: StepperSettings,
                 title: str = "The model for this session") -> None:
        super().__init__()
        self._spec = spec
        self._settings = settings
        self._title = title

    def compose(self) -> ComposeResult:
        call = self._settings.call
        with Vertical(id="model-dialog", classes="dialog"):
            yield Static(styled(self._title, "bold"), classes="dialog-title")
            with Horizontal(classes="model-row"):
                yield Input(value=self._spec.model, id="model",
                            placeholder="e.g. openai/gpt-4o-mini, or replay/bbm (offline)")
                yield Input(value=self._spec.api_base or "", id="api-base",
                            placeholder="provider's default")
            with Horizontal(classes="model-row"):
                yield Input(value=self._temperature_shown(self._spec.mode == "thinking"),
                            id="temperature", type="number")
                yield Input(value=str(call.max_tokens or ""), id="max-tokens", type="integer")
                yield Input(value=str(self._settings.step_limit), id="step-limit",
                            type="integer")
            with Horizontal(classes="model-row"):
                yield TickBox("Text completion", id="completion",
                              value=self._spec.mode == "completion",
                              tooltip="For a base model; off: chat (the prompt as one "
                              "user message)")
                yield TickBox("Thinking", id="thinking", value=self._spec.mode == "thinking",
                              tooltip="A thinking model: one call a trace, its reasoning cut "
                              "into steps as it streams (by the config's or --split's rule; "
                              "S on a trace cuts it by another)")
                yield TickBox("One call", id="one-call",
                              value=self._settings.one_call,
                              tooltip="Steps in one call: one streamed call goes on through "
                              "the thoughts the model writes with their labels; at the first "
                              "line without "
                              "one, the trace goes on one call a step (the paper's way, "
                              "when this is off)")
            yield Static(id="model-test-result")
            with Horizontal(classes="dialog-buttons"):
                yield Button(with_key("Test", key_for(self, "model_test")), id="model-test",
                             tooltip="One tiny call: does the model answer, and how fast")
                # enter submits a field (the inputs' own key, not a binding).
                yield Button("Keep (enter)", variant="primary", id="model-keep")
                yield Button(with_key("Cancel", key_for(self, "model_cancel")),
                             id="model-cancel")
            yield Static(styled("API keys stay in the environment (e.g. OPENAI_API_KEY).",
                                MUTED), classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#model").border_title = "Model (a litellm model string)"
        self.query_one("#api-base").border_title = "API base"
        self.query_one("#temperature").border_title = "Temperature"
        self._show_temperature_hint(self._spec.mode == "thinking")
        self.query_one("#max-tokens").border_title = "Tokens a step"
        self.query_one("#step-limit").border_title = "Step limit"
        self.query_one("#model-test-result").display = False
        self.query_one("#model").focus()

    def _temperature_shown(self, thinking: bool) -> str:
        """The temperature the field opens with: a thinking call's (empty: the provider's
        default), or the step-at-a-time mode's."""
        if thinking:
            given = self._settings.thinking_temperature
            return "" if given is None else f"{given:g}"
        return f"{self._settings.call.temperature:g}"

    def _show_temperature_hint(self, thinking: bool) -> None:
        self.query_one("#temperature").border_subtitle = (
            "empty: the provider's" if thinking else "the paper's: 0")

    def on_checkbox_changed(self, event: Checkbox.Changed) -> None:
        """Thinking on or off: the field shows that mode's temperature (a thinking call's
        is left out unless given: some providers take only their own)."""
        if event.checkbox.id == "thinking":
            self.query_one("#temperature", Input).value = self._temperature_shown(event.value)
            self._show_temperature_hint(event.value)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "model-keep":
            self.on_input_submitted()
        elif event.button.id == "model-test":
            self.action_test()
        else:
            self.action_cancel()

    def on_input_submitted(self) -> None:
        choice = self._choice()
        if choice is not None:
            self.dismiss(choice)

    def _choice(self) -> ModelChoice | None:
        """What the fields say, or None (with a message saying which field is wrong)."""
        model = self.query_one("#model", Input).value.strip()
        if not model:
            return self._refuse("#model", "Give a model (e.g. replay/bbm, the offline replay).")
        refusal = llm.generation_refusal(llm.ModelSpec(model, router=self._spec.router))
        if refusal is not None:
            return self._refuse("#model", refusal)
        thinking = self.query_one("#thinking", Checkbox).value
        typed = self.query_one("#temperature", Input).value
        temperature = _number(typed)
        if (temperature is None and not (thinking and not typed.strip())) or (
                temperature is not None
                and not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE):
            return self._refuse("#temperature", f"The temperature is a number from "
                                f"{MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}" + (
                                    " (empty: the provider's default)." if thinking else "."))
        max_tokens = _whole(self.query_one("#max-tokens", Input).value)
        if max_tokens is None:
            return self._refuse("#max-tokens", "Tokens a step: a whole number of at least 1.")
        step_limit = _whole(self.query_one("#step-limit", Input).value)
        if step_limit is None:
            return self._refuse("#step-limit", "The step limit: a whole number of at least 1.")
        api_base = self.query_one("#api-base", Input).value.strip() or None
        completion = self.query_one("#completion", Checkbox).value
        if completion and thinking:
            return self._refuse("#thinking", "Thinking or text completion, not both: a "
                                "thinking call is a chat call.")
        mode = "completion" if completion else "thinking" if thinking else "chat"
        one_call = self.query_one("#one-call", Checkbox).value
        call = replace(self._settings.call, max_tokens=max_tokens)
        settings = replace(self._settings, step_limit=step_limit, one_call=one_call)
        if thinking:
            settings = replace(settings, call=call, thinking_temperature=temperature)
        else:
            settings = replace(settings, call=replace(
                call, temperature=PAPER_TEMPERATURE if temperature is None else temperature))
        # The router file is the config's (`router = ...`), kept as it is.
        return ModelChoice(llm.ModelSpec(model, api_base, mode, router=self._spec.router),
                           settings)

    def _refuse(self, field: str, message: str) -> None:
        self.notify(message, severity="warning", markup=False)
        self.query_one(field).focus()
        return None

    def action_test(self) -> None:
        choice = self._choice()
        if choice is None:
            return
        self._show_test(styled(f"Asking {choice.spec.model}…", MUTED))
        self._test(choice)

    @work(exclusive=True, group="model-test", exit_on_error=False, description="Testing the model")
    async def _test(self, choice: ModelChoice) -> None:
        try:
            check = await llm.check_connection(choice.spec, choice.settings.call.timeout_s)
        except llm.LLMError as error:
            self._show_test(Content.assemble((f"{GLYPH_MISTAKE} ", "bold $text-error"),
                                             safe_line(error.message, 300)), error=True)
            return
        if check.offline:
            said = Content.assemble((f"{GLYPH_OK} ", "$text-success"),
                                    safe_line(choice.spec.model, 40),
                                    " is offline: it answers without a network.")
        else:
            said = Content.assemble(
                (f"{GLYPH_OK} ", "$text-success"), "Answered in ",
                (f"{check.latency_s:.2f} s", "bold"), ": ",
                safe_line(check.reply.strip() or "(an empty answer)", 60))
        self._show_test(said)

    def _show_test(self, line: Content, *, error: bool = False) -> None:
        result = self.query_one("#model-test-result", Static)
        result.update(line)
        result.set_class(error, "-error")
        result.display = True

    def action_cancel(self) -> None:
        self.dismiss(None)


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if value == value else None  # not NaN


def _whole(text: str) -> int | None:
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if value >= 1 else None
