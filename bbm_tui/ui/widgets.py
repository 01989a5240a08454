"""What the screens share: a base screen, the one-line title bar, and a numbered thought."""

from __future__ import annotations

from typing import Literal

from textual.app import ComposeResult
from textual.containers import HorizontalGroup, VerticalGroup
from textual.content import Content
from textual.screen import Screen
from textual.widgets import Static
from textual.worker import Worker

from bbm_tui.core.store import Step
from bbm_tui.ui.text import (
    CURSOR,
    DISABLED,
    GLYPH_MISTAKE,
    GLYPH_OK,
    GLYPH_PLAIN,
    GLYPH_STREAMING,
    MUTED,
    safe,
    safe_line,
    step_meta,
    styled,
)

Status = Literal["plain", "ok", "mistake", "after"]

_GLYPHS: dict[Status, tuple[str, str]] = {
    "plain": (GLYPH_PLAIN, MUTED),
    "ok": (GLYPH_OK, "$text-success"),
    "mistake": (GLYPH_MISTAKE, "bold $text-error"),
    "after": (GLYPH_PLAIN, DISABLED),
}


class BbmScreen(Screen[None]):
    """A screen whose workers' failures go to the app's one handler (`Worker.StateChanged`
    does not bubble, so each node that owns workers passes it on)."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        self.app.on_worker_state_changed(event)  # type: ignore[attr-defined]


class TitleBar(HorizontalGroup):
    """One line at the top of a screen: what is on show (left) and running figures (right)."""

    def __init__(self, left: Content | str = "", right: Content | str = "", **kwargs) -> None:
        super().__init__(**kwargs)
        self._left = Static(left, classes="title-left", markup=False)
        self._right = Static(right, classes="title-right", markup=False)

    def compose(self) -> ComposeResult:
        yield self._left
        yield self._right

    def set_left(self, content: Content | str) -> None:
        self._left.update(content)

    def set_right(self, content: Content | str) -> None:
        self._right.update(content)


class ThoughtView(HorizontalGroup):
    """One numbered thought: a gutter (number and status glyph), the text, and a dim line
    with latency and tokens.

    While the thought streams, text is appended to this widget alone, so a token costs the
    re-render of one thought, not of the whole trace.
    """

    def __init__(self, number: int, *, streaming: bool = False) -> None:
        super().__init__(id=f"thought-{number}", classes="thought")
        self.number = number
        self.streaming = streaming
        self.status: Status = "plain"
        self.step: Step | None = None
        self._raw = ""
        self._note = ""
        self._gutter = Static(classes="gutter")
        self._text = Static(classes="text")
        self._meta = Static(classes="meta")
        self.set_class(streaming, "-streaming")
        self._show()

    @classmethod
    def of_step(cls, step: Step, *, wall_clock: bool = True) -> ThoughtView:
        view = cls(step.number)
        view.finish(step, wall_clock=wall_clock)
        return view

    def compose(self) -> ComposeResult:
        yield self._gutter
        with VerticalGroup(classes="body"):
            yield self._text
            yield self._meta

    # -- what the stepper reports

    @property
    def text(self) -> str:
        return self._raw

    def append(self, delta: str) -> None:
        self._raw += delta
        self._note = ""
        self._show()

    def restart(self, reason: str) -> None:
        """A retry after text had streamed: what was shown is void."""
        self._raw = ""
        self._note = f"retrying ({reason})"
        self._show()

    def finish(self, step: Step, *, wall_clock: bool = True) -> None:
        self.step = step
        self.streaming = False
        self.remove_class("-streaming")
        self._raw = step.text
        self._note = step_meta(step, wall_clock=wall_clock)
        self._show()

    def set_status(self, status: Status) -> None:
        if status == self.status:
            return
        self.status = status
        for name in ("plain", "ok", "mistake", "after"):
            self.set_class(name == status, f"-{name}")
        self._show_gutter()

    # -- drawing

    def _show(self) -> None:
        # Static.update works before mounting too, so a view made from a saved step is
        # complete by the time it is composed.
        self._show_gutter()
        if self.streaming:
            text = safe(self._raw).append(styled(CURSOR, "$accent"))
        elif self._raw:
            text = safe(self._raw)
        else:
            text = styled("(empty thought)", f"italic {MUTED}")
        self._text.update(text)
        note = self._note or ("streaming…" if self.streaming else "")
        self._meta.update(safe_line(note))
        self._meta.display = bool(note)

    def _show_gutter(self) -> None:
        if self.streaming:
            glyph, style = GLYPH_STREAMING, "$accent"
        else:
            glyph, style = _GLYPHS[self.status]
        self._gutter.update(
            Content.assemble((f"{self.number:>3} ", MUTED), (glyph, style))
        )
