"""Modal screens: help, a yes/no confirmation, a one-line rename, the model of a new session,
the mistake finder's settings, and the store failure."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, TypeVar

from rich.cells import cell_len
from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, RadioButton, RadioSet, Static

from bbm_tui.core import llm
from bbm_tui.core.judging.judges import Judge
from bbm_tui.core.tasks import Task
from bbm_tui.core.types import (
    MAX_QUESTION_CHARS,
    MAX_TEMPERATURE,
    MIN_TEMPERATURE,
    StepperSettings,
)
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.styles import stylesheet
from bbm_tui.ui.text import GLYPH_MISTAKE, GLYPH_OK, MUTED, safe, safe_line, styled
from bbm_tui.ui.widgets.chrome import KeysFooter, TickBox

R = TypeVar("R")


class Dialog(ModalScreen[R]):
    """A modal box in the middle of the screen; its styles load with the first one shown.

    It has a footer of its own, over the screen behind's: that one listed keys (f find, x
    first mistake) that do nothing while the dialog is open, and this one lists the
    dialog's, which do (a modal's bindings stop at the modal: Screen._modal_binding_chain).
    """

    CSS_PATH = stylesheet("dialogs")

    def __init__(self) -> None:
        super().__init__(classes="dialog-screen")

    def on_mount(self) -> None:
        # Mounted before the first frame, after the subclass's own widgets (each dialog
        # composes its box; this is the one thing every dialog adds).
        self.mount(KeysFooter(show_command_palette=False))


@dataclass(frozen=True)
class KeyHelp:
    keys: str
    description: str
    detail: str
    binding_id: str = ""


# The most rows of keys the help shows at once (the rest scroll).
HELP_ROWS = 28
# The help dialog's width (styles/dialogs.tcss #help), what its border, padding and the key
# list's scrollbar take of it, the gap between the key table's columns, and the least room
# for the descriptions beside the other columns (less, and they go under the names).
HELP_WIDTH = 108
HELP_CHROME = 8
HELP_GAP = 2
HELP_MIN_DETAIL = 40


class HelpScreen(Dialog[None]):
    """Every key that works on the screen below, with its current binding (keymap applied)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "close", id="help_close"),
    ]

    def __init__(self, rows: list[KeyHelp], title: str) -> None:
        super().__init__()
        self.rows = rows
        self._title = title
        self._in_columns: bool | None = None  # the layout the table was last drawn in

    def compose(self) -> ComposeResult:
        with Vertical(id="help", classes="dialog"):
            yield Static(styled(self._title, "bold"), classes="dialog-title")
            with VerticalScroll(id="help-keys"):
                # Drawn for the width it gets, once the dialog is laid out (_fit_keys).
                yield Static(id="help-table")
            yield Static(
                styled('Change a key in config.toml\'s [keymap] table: binding id = "keys", '
                       'e.g. step = "n,space".', MUTED),
                classes="dialog-hint",
            )

    def on_mount(self) -> None:
        self._draw_table(self._expected_width())
        self.call_after_refresh(self._fit_keys)

    def on_resize(self) -> None:
        self.call_after_refresh(self._fit_keys)

    def _expected_width(self) -> int:
        """The table's width before layout: the dialog's (108 columns, or the screen's) less
        its border, padding and the list's scrollbar."""
        return min(HELP_WIDTH, self.app.size.width) - HELP_CHROME

    def _fit_keys(self) -> None:
        """The key list gets what the title and the hint leave of the dialog's 90% of the
        screen, and scrolls in it. Left to the dialog's own scrolling, a short terminal (80x24)
        scrolled the title and the hint away and clipped the list's last rows, which its own
        scrollbar could then not reach."""
        width = self.query_one("#help-table", Static).content_size.width
        if width:
            self._draw_table(width)
        dialog = self.query_one("#help", Vertical)
        keys = self.query_one("#help-keys", VerticalScroll)
        others = dialog.styles.gutter.height + sum(
            child.outer_size.height + child.styles.margin.height
            for child in dialog.children if child is not keys)
        # The dialog's 90% is of the screen less its footer (docked at the bottom).
        footer = sum(widget.outer_size.height for widget in self.query(KeysFooter))
        room = int((self.size.height - footer) * 0.9) - others
        keys.styles.max_height = max(3, min(HELP_ROWS, room))

    def _draw_table(self, width: int) -> None:
        in_columns = self._fits_in_columns(width)
        if in_columns != self._in_columns:
            self._in_columns = in_columns
            table = self._columns_table() if in_columns else self._stacked_table()
            self.query_one("#help-table", Static).update(table)

    def _fits_in_columns(self, width: int) -> bool:
        """Whether the descriptions get room enough beside the keys, names and binding ids
        (they wrap in their column; a narrower one would make most of them three lines)."""
        def widest(field: Callable[[KeyHelp], str]) -> int:
            return max((cell_len(field(row)) for row in self.rows), default=0)

        beside = (widest(lambda row: row.keys) + widest(lambda row: row.description)
                  + widest(lambda row: row.binding_id) + HELP_GAP * 3)
        return width - beside >= HELP_MIN_DETAIL

    def _columns_table(self) -> Table:
        """Four columns: keys, name, description (wrapped in its column), binding id."""
        # A Rich grid sizes the columns; every cell is our own text (a Text, never markup).
        table = Table.grid(padding=(0, HELP_GAP), expand=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(no_wrap=True)
        table.add_column(ratio=1, overflow="fold")
        table.add_column(no_wrap=True)
        for row in self.rows:
            table.add_row(self._keys_text(row), Text(row.description, style="bold"),
                          Text(row.detail), Text(row.binding_id, style="dim"))
        return table

    def _stacked_table(self) -> Table:
        """Two columns: the keys, and beside them the name and binding id on one line and the
        description wrapped under them (a narrow dialog: 80 columns cut descriptions short)."""
        table = Table.grid(padding=(0, HELP_GAP), expand=True)
        table.add_column(justify="right", no_wrap=True)
        table.add_column(ratio=1, overflow="fold")
        for row in self.rows:
            about = Text.assemble((row.description, "bold"), "  ", (row.binding_id, "dim"),
                                  "\n", row.detail)
            table.add_row(self._keys_text(row), about)
        return table

    def _keys_text(self, row: KeyHelp) -> Text:
        return Text(row.keys, style=f"bold {self.app.theme_variables.get('accent', 'yellow')}")

    def action_close(self) -> None:
        self.dismiss(None)


def _with_key(label: str, key: str) -> Content:
    """A button's label and its key: "Start (^r)". Content, not a string: a string label is
    read as markup, and a key from the user's keymap may be "[" ."""
    return Content(f"{label} ({key})")


class ConfirmScreen(Dialog[bool]):
    """Ask before doing something that cannot be undone."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "yes", id="confirm_yes"),
        Binding("n,escape", "answer(False)", "no", id="confirm_no"),
    ]

    def __init__(self, question: Content, confirm_label: str = "Delete") -> None:
        super().__init__()
        self._question = question
        self._confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm", classes="dialog"):
            yield Static(self._question, classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(_with_key(self._confirm_label, key_for(self, "confirm_yes")),
                             variant="error", id="yes")
                yield Button(_with_key("Cancel", key_for(self, "confirm_no")), id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, answer: bool) -> None:
        self.dismiss(answer)


class RenameScreen(Dialog[str | None]):
    """A new name for a session; Enter keeps it, Esc drops it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="rename_cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="rename", classes="dialog"):
            yield Static(styled("Rename the session", "bold"), classes="dialog-title")
            yield Input(value=self._current, id="rename-input", select_on_focus=True)
            # enter is the input's own key, not a binding: no keymap moves it.
            yield Static(styled(f"enter to save · {key_for(self, 'rename_cancel')} to cancel",
                                MUTED), classes="dialog-hint")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        name = " ".join(event.value.split())
        if not name:
            self.notify("A session needs a name.", severity="warning", markup=False)
            return
        self.dismiss(name)

    def action_cancel(self) -> None:
        self.dismiss(None)


class TypedQuestionScreen(Dialog[tuple[str, str | None] | None]):
    """A question of one's own for the task: the text (several lines if need be) and,
    optionally, the target answer to compare with."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+r", "submit", "start", id="typed_start"),
        Binding("escape", "cancel", "cancel", id="typed_cancel"),
    ]
    # Under 32 rows the text box is shorter (dialogs.tcss): with the footer, the dialog
    # then fits 80x24 without scrolling its title away.
    VERTICAL_BREAKPOINTS: ClassVar[list[tuple[int, str]] | None] = [(0, "-short"),
                                                                    (32, "-tall")]

    def __init__(self, task: Task) -> None:
        super().__init__()
        self._question_task = task

    def compose(self) -> ComposeResult:
        # Imported here: a TextArea is costly, and only this dialog needs one.
        from textual.widgets import TextArea

        task = self._question_task
        prefix, _, suffix = task.question_template.partition("{input}")
        title = Content.assemble("Type a ", safe_line(task.title.lower(), 40), " question")
        before = (safe(prefix).stylize("bold") if prefix
                  else styled("(nothing: your text is the whole question)", "bold"))
        # A template that goes on after the text shows where the text goes.
        asked = Content.assemble(("The model is asked: ", MUTED), before,
                                 ("your text" if suffix else "+ your text", MUTED),
                                 safe(suffix).stylize("bold"))
        with Vertical(id="typed", classes="dialog"):
            yield Static(title.stylize("bold"), classes="dialog-title")
            yield Static(asked, id="typed-hint")
            yield TextArea(id="typed-input", soft_wrap=True, show_line_numbers=False)
            yield Input(placeholder="Target answer (optional)", id="typed-target")
            with Horizontal(classes="dialog-buttons"):
                yield Button(_with_key("Start", key_for(self, "typed_start")),
                             variant="primary", id="typed-start")
                yield Button(_with_key("Cancel", key_for(self, "typed_cancel")),
                             id="typed-cancel")

    def on_mount(self) -> None:
        self.query_one("#typed-input").focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "typed-start":
            self.action_submit()
        else:
            self.action_cancel()

    def action_submit(self) -> None:
        from textual.widgets import TextArea

        text = self.query_one("#typed-input", TextArea).text.strip()
        if not text:
            self.notify("Type a question first.", severity="warning", markup=False)
            return
        target = self.query_one("#typed-target", Input).value.strip() or None
        longest = max(len(text), len(target or ""))
        if longest > MAX_QUESTION_CHARS:
            self.notify(f"That is {longest:,} characters; bbm-tui takes questions of up to "
                        f"{MAX_QUESTION_CHARS:,} characters (and targets as long).",
                        severity="warning", markup=False)
            return
        self.dismiss((text, target))

    def action_cancel(self) -> None:
        self.dismiss(None)


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
                yield Input(value=f"{call.temperature:g}", id="temperature", type="number")
                yield Input(value=str(call.max_tokens or ""), id="max-tokens", type="integer")
                yield Input(value=str(self._settings.step_limit), id="step-limit",
                            type="integer")
            with Horizontal(classes="model-row"):
                yield TickBox("Text completion (base model)", id="completion",
                              value=self._spec.mode == "completion",
                              tooltip="Off: chat (the prompt as one user message)")
                yield TickBox("One call, many steps", id="one-call",
                              value=self._settings.one_call,
                              tooltip="One streamed call goes on through the thoughts the "
                              "model writes with their labels; at the first line without "
                              "one, the trace goes on one call a step (the paper's way, "
                              "when this is off)")
            yield Static(id="model-test-result")
            with Horizontal(classes="dialog-buttons"):
                yield Button(_with_key("Test", key_for(self, "model_test")), id="model-test",
                             tooltip="One tiny call: does the model answer, and how fast")
                # enter submits a field (the inputs' own key, not a binding).
                yield Button("Keep (enter)", variant="primary", id="model-keep")
                yield Button(_with_key("Cancel", key_for(self, "model_cancel")),
                             id="model-cancel")
            yield Static(styled("API keys stay in the environment (e.g. OPENAI_API_KEY).",
                                MUTED), classes="dialog-hint")

    def on_mount(self) -> None:
        self.query_one("#model").border_title = "Model (a litellm model string)"
        self.query_one("#api-base").border_title = "API base"
        self.query_one("#temperature").border_title = "Temperature"
        self.query_one("#temperature").border_subtitle = "the paper's: 0"
        self.query_one("#max-tokens").border_title = "Tokens a step"
        self.query_one("#step-limit").border_title = "Step limit"
        self.query_one("#model-test-result").display = False
        self.query_one("#model").focus()

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
        temperature = _number(self.query_one("#temperature", Input).value)
        if temperature is None or not MIN_TEMPERATURE <= temperature <= MAX_TEMPERATURE:
            return self._refuse("#temperature", f"The temperature is a number from "
                                f"{MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}.")
        max_tokens = _whole(self.query_one("#max-tokens", Input).value)
        if max_tokens is None:
            return self._refuse("#max-tokens", "Tokens a step: a whole number of at least 1.")
        step_limit = _whole(self.query_one("#step-limit", Input).value)
        if step_limit is None:
            return self._refuse("#step-limit", "The step limit: a whole number of at least 1.")
        api_base = self.query_one("#api-base", Input).value.strip() or None
        mode = "completion" if self.query_one("#completion", Checkbox).value else "chat"
        one_call = self.query_one("#one-call", Checkbox).value
        call = replace(self._settings.call, temperature=temperature, max_tokens=max_tokens)
        # The router file is the config's (`router = ...`), kept as it is.
        return ModelChoice(llm.ModelSpec(model, api_base, mode, router=self._spec.router),
                           replace(self._settings, step_limit=step_limit, call=call,
                                   one_call=one_call))

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

    @work(exclusive=True, group="model-test", exit_on_error=False)
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
                    yield RadioButton(label, value=method.name == chosen,
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
                yield Button(_with_key("Run", key_for(self, "find_run")), variant="primary",
                             id="find-run")
                yield Button(_with_key("Cancel", key_for(self, "find_cancel")),
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


class StoreErrorScreen(Dialog[None]):
    """The session store cannot be opened: say why and where, and let the person leave."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q,escape,enter", "quit_app", "quit", id="store_error_quit"),
    ]

    def __init__(self, message: str) -> None:
        super().__init__()
        self._message = message

    def compose(self) -> ComposeResult:
        with Vertical(id="store-error", classes="dialog -error"):
            yield Static(styled("The session store cannot be opened", "bold $text-error"),
                         classes="dialog-title")
            yield Static(safe(self._message), id="store-error-message", classes="dialog-text")
            yield Static(
                safe_line(
                    "Nothing was changed. Fix or move the file, or set BBM_TUI_HOME to another "
                    f"folder, then start bbm-tui again. Press {key_for(self, 'store_error_quit')}"
                    " to quit."
                ),
                classes="dialog-hint",
            )

    def action_quit_app(self) -> None:
        self.app.exit(return_code=1)
