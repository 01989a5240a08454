"""The annotation screens' dialogs: a flag's reason and note, a word to highlight, the task's
guidelines, and, from the palette, opening a queue and exporting the labels."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Static

from bbm_tui.core.records import FlagReason
from bbm_tui.ui.dialogs import Dialog
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.text import MUTED, safe, styled
from bbm_tui.ui.viewmodels.annotate import reflowed


@dataclass(frozen=True)
class Flag:
    reason: FlagReason
    note: str


class FlagDialog(Dialog[Flag | None]):
    """Why the trace is set aside: b (bad problem) or u (unsure), with an optional note typed
    first; Esc drops it. In per-step labelling, PRM800K's ways to finish without a label:
    bad problem, or give up (in place of unsure)."""

    # Priority: the note's Input has ctrl+u itself (delete to the start), which took the key.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="flag_cancel"),
        Binding("ctrl+b", "flag('bad problem')", "bad problem", id="flag_bad_problem",
                priority=True),
        Binding("ctrl+u", "flag('unsure')", "unsure", id="flag_unsure", priority=True),
    ]

    def __init__(self, per_step: bool = False) -> None:
        super().__init__()
        self._per_step = per_step
        # What "unsure" is in per-step labelling: PRM800K's give_up.
        self._unsure = FlagReason.GIVE_UP if per_step else FlagReason.UNSURE

    def compose(self) -> ComposeResult:
        title = "Finish without a label" if self._per_step else "Flag this trace"
        with Vertical(id="flag-dialog", classes="dialog"):
            yield Static(styled(title, "bold"), classes="dialog-title")
            yield Input(placeholder="a note (optional)", id="flag-note")
            yield Static(id="flag-hint", classes="dialog-hint")

    @classmethod
    def for_protocol(cls, per_step: bool) -> FlagDialog:
        """The paper protocol's dialog, or per-step labelling's (its key says "give up")."""
        return GiveUpDialog() if per_step else cls()

    def on_mount(self) -> None:
        # The keys as bound (the user's keymap applied).
        unsure = key_for(self, "flag_unsure")
        bad = key_for(self, "flag_bad_problem")
        cancel = key_for(self, "flag_cancel")
        self.query_one("#flag-hint", Static).update(styled(
            f"enter or {unsure}: {self._unsure} · {bad}: bad problem · {cancel}: cancel",
            MUTED))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(Flag(self._unsure, event.value.strip()))

    def action_flag(self, reason: str) -> None:
        chosen = self._unsure if reason == FlagReason.UNSURE else FlagReason(reason)
        self.dismiss(Flag(chosen, self.query_one(Input).value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)


class GiveUpDialog(FlagDialog):
    """Per-step labelling's FlagDialog: its ctrl+u gives up, and the footer says so (it said
    "unsure" beside a hint that said "give up")."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+u", "flag('unsure')", "give up", id="flag_unsure", priority=True),
    ]

    def __init__(self) -> None:
        super().__init__(per_step=True)


class NoteDialog(Dialog[str | None]):
    """A note on the trace: why its first mistake is one (MR-BEN's error reason); it goes
    with the label when the trace is submitted."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="note_cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="note-dialog", classes="dialog"):
            yield Static(styled("A note: why the first mistake is one", "bold"),
                         classes="dialog-title")
            yield Input(value=self._current, id="note-input", select_on_focus=False)
            yield Static(id="note-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        cancel = key_for(self, "note_cancel")
        self.query_one("#note-hint", Static).update(styled(
            f"enter to keep it with the label (empty: none) · {cancel} to cancel", MUTED))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class HighlightDialog(Dialog[str | None]):
    """A word to highlight in the question and every thought (empty: none)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="highlight_cancel"),
    ]

    def __init__(self, current: str) -> None:
        super().__init__()
        self._current = current

    def compose(self) -> ComposeResult:
        with Vertical(id="highlight-dialog", classes="dialog"):
            yield Static(styled("Highlight a word", "bold"), classes="dialog-title")
            yield Input(value=self._current, id="highlight-input", select_on_focus=True)
            yield Static(id="highlight-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        cancel = key_for(self, "highlight_cancel")
        self.query_one("#highlight-hint", Static).update(styled(
            f"enter to highlight (empty: none) · {cancel} to cancel", MUTED))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


class GuidelinesDialog(Dialog[None]):
    """The paper's annotation guidelines for the task."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,i,q", "close", "close", id="guidelines_close"),
    ]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self._title = title
        self._text = text

    def compose(self) -> ComposeResult:
        with Vertical(id="guidelines-dialog", classes="dialog"):
            yield Static(styled(self._title, "bold"), classes="dialog-title")
            with VerticalScroll(id="guidelines-text"):
                yield Static(safe(reflowed(self._text)))
            yield Static(id="guidelines-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        close = key_for(self, "guidelines_close")
        self.query_one("#guidelines-hint", Static).update(styled(
            f"{close} to close · ↑ ↓ pgup pgdn to scroll", MUTED))

    def action_close(self) -> None:
        self.dismiss(None)


@dataclass(frozen=True)
class QueueRequest:
    paths: list[str]
    annotator: str


class OpenQueueDialog(Dialog[QueueRequest | None]):
    """From the palette: the files to annotate (space-separated) and who annotates."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="queue_cancel"),
    ]

    def __init__(self, annotator: str) -> None:
        super().__init__()
        self._annotator = annotator

    def compose(self) -> ComposeResult:
        with Vertical(id="queue-dialog", classes="dialog"):
            yield Static(styled("Annotate files", "bold"), classes="dialog-title")
            yield Input(placeholder="FILE.jsonl ... (named after their task)", id="queue-files")
            yield Input(value=self._annotator, placeholder="annotator", id="queue-annotator")
            yield Static(id="queue-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        cancel = key_for(self, "queue_cancel")
        self.query_one("#queue-hint", Static).update(styled(
            f"tab to the annotator · enter to open · {cancel} to cancel", MUTED))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        paths = self.query_one("#queue-files", Input).value.split()
        annotator = self.query_one("#queue-annotator", Input).value.strip()
        if not paths or not annotator:
            self.notify("Name at least one file and the annotator.", severity="warning",
                        markup=False)
            return
        self.dismiss(QueueRequest(paths, annotator))

    def action_cancel(self) -> None:
        self.dismiss(None)


def guidelines_text(task: str) -> str | None:
    """The paper's guidelines for `task` as shipped (Dyck languages has none: its labels came
    from a program)."""
    from bbm_tui.core.resources import prompts_dir

    path = prompts_dir() / "annotation_guidelines" / f"{task}.txt"
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return None


@dataclass(frozen=True)
class ExportRequest:
    fmt: str
    path: str


class ExportDialog(Dialog[ExportRequest | None]):
    """From the palette: every session's labels to a file, in a format `bbm-tui export` knows."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "cancel", id="export_cancel"),
    ]

    def __init__(self, formats: tuple[str, ...]) -> None:
        super().__init__()
        self._formats = formats

    def compose(self) -> ComposeResult:
        with Vertical(id="export-dialog", classes="dialog"):
            yield Static(styled("Export every session's labels", "bold"),
                         classes="dialog-title")
            yield Input(value="jsonl", placeholder=" | ".join(self._formats), id="export-format")
            yield Input(placeholder="OUT file (an existing one is never replaced here)",
                        id="export-path")
            yield Static(id="export-hint", classes="dialog-hint")

    def on_mount(self) -> None:
        cancel = key_for(self, "export_cancel")
        self.query_one("#export-hint", Static).update(styled(
            f"formats: {', '.join(self._formats)} · enter to export · {cancel} to cancel",
            MUTED))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        fmt = self.query_one("#export-format", Input).value.strip()
        path = self.query_one("#export-path", Input).value.strip()
        if fmt not in self._formats or not path:
            self.notify(f"Choose a format ({', '.join(self._formats)}) and a file.",
                        severity="warning", markup=False)
            return
        self.dismiss(ExportRequest(fmt, path))

    def action_cancel(self) -> None:
        self.dismiss(None)
