"""What a thinking model's long reasoning costs the app a thought (issue 36,
bench/thinking_stream.py: the app's CPU a token against the step-at-a-time mode's). Counted
through the real app, never timed: a frame that repaints a streamed token's line renders only
the widgets on that line, and writes to the terminal what Textual's own rendering writes,
while the reasoning streams by sentence (the window of thoughts moving down) and keys move
the selection."""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType
from typing import Any

import pytest
from rich.segment import Segment
from rich.style import Style
from textual._compositor import ChopsUpdate, Compositor
from textual.geometry import Region
from textual.pilot import Pilot
from textual.widget import Widget
from ui_helpers import make_app, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.types import SplitRule
from bbm_tui.ui.compositor import LinesOnlyCompositor
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.screens.trace.view import TraceView
from bbm_tui.ui.widgets.thought_list import WINDOW
from tests.openai_server import FakeOpenAI, Reply

TASK, QUESTION = "logical_deduction", 15
SIZE = (120, 40)


def long_reasoning(sentences: int) -> str:
    """A reasoning of about `sentences` sentences (the bundled thoughts, three a paragraph),
    as bench/_server.py's."""
    thoughts = [step.strip() for row in bundled_rows(TASK)[:40] for step in row.steps
                if step.strip().endswith(".")]
    picked = thoughts[:sentences]
    return "\n\n".join(" ".join(picked[i:i + 3]) for i in range(0, len(picked), 3))


def thinking_app(server: FakeOpenAI, reasoning: str, *, chunk_delay_s: float,
                 split: str = "sentence") -> Any:
    server.enqueue(Reply(text="So the answer is (A)", reasoning=reasoning,
                         chunk_delay_s=chunk_delay_s))
    config = Config(model="openai/thinker", api_base=server.base_url, mode="thinking",
                    split=SplitRule(split))
    return make_app(config, task=TASK, question=QUESTION)


async def started(pilot: Pilot) -> TraceView:
    """The trace screen open and `r` pressed: its view."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.view.is_mounted)
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    await pilot.press("r")
    return screen.view


class RendersByFrame:
    """The widgets rendered for each frame painted (`Widget.render_lines`, which the
    compositor calls for every widget it renders), each with the region it shows on the
    screen (its region within its clip) at that frame, and the frame's update."""

    def __init__(self, app: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        self.frames: list[tuple[object, dict[str, list[Region]]]] = []
        self._rendered: set[Widget] = set()
        render_lines = Widget.render_lines

        def counted(widget: Widget, crop: Any) -> Any:
            self._rendered.add(widget)
            return render_lines(widget, crop)

        monkeypatch.setattr(Widget, "render_lines", counted)
        original = app._display

        def display(screen: Any, renderable: Any) -> None:
            if renderable is not None:
                placed = screen._compositor.visible_widgets
                shown: dict[str, list[Region]] = {}
                for widget in self._rendered:
                    region, clip = placed[widget]
                    shown.setdefault(type(widget).__name__, []).append(
                        region.intersection(clip))
                self.frames.append((renderable, shown))
            self._rendered = set()
            original(screen, renderable)

        app._display = display


async def test_a_streamed_tokens_frame_renders_only_the_widgets_on_its_lines(
    openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Textual rendered, for a frame that repaints a line or two, every widget whose clip meets
    them, whole: every thought on show, the footer and the title too (the screen is their
    clip), all but those lines thrown away. Now a widget is rendered only where it shows on
    the lines and columns the frame repaints."""
    app = thinking_app(openai_server, long_reasoning(30), chunk_delay_s=0.02)
    frames = RendersByFrame(app, monkeypatch)
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        await wait_for(pilot, lambda: len(view.trace.steps) >= 6, timeout=60)
        mark = len(frames.frames)
        await wait_for(pilot, lambda: len(view.trace.steps) >= 9, timeout=60)
        partial = [(update, rendered) for update, rendered in frames.frames[mark:]
                   if isinstance(update, ChopsUpdate)]
        assert len(partial) >= 10, "too few frames of tokens to tell"
        for update, rendered in partial:
            repainted = Region.from_union([Region(start, y, end - start, 1)
                                           for y, start, end in update.spans])
            for name, regions in rendered.items():
                for shown in regions:
                    assert shown.overlaps(repainted), (
                        f"{name} ({shown}) rendered for {repainted}, which it is not on")
        view.action_stop()


def written(update: object, console: Any) -> list[tuple[str, Style | None]]:
    """What an update writes to the terminal: its text and styles, and where it moves."""
    assert isinstance(update, ChopsUpdate)
    return [(segment.text, segment.style)
            for segment in update.__rich_console__(console, console.options)
            if isinstance(segment, Segment)]


async def test_each_frame_paints_what_textuals_own_rendering_paints(
    openai_server: FakeOpenAI
) -> None:
    """Each frame that repaints part of the screen, rendered again as Textual's own
    compositor renders it (every widget whose clip meets the lines, whole): the terminal is
    written the same, while the reasoning streams by sentence past the window's size
    (thoughts leave its top) and keys move the selection up, home and back to the end."""
    app = thinking_app(openai_server, long_reasoning(WINDOW + 12), chunk_delay_s=0.004)
    console = app.console
    compared: list[int] = []
    differing: list[str] = []

    def checked(compositor: LinesOnlyCompositor) -> Callable[[], ChopsUpdate | None]:
        def render_partial_update() -> ChopsUpdate | None:
            regions = set(compositor._dirty_regions)
            ours = LinesOnlyCompositor.render_partial_update(compositor)
            compositor._dirty_regions.update(regions)
            # Textual's own renders, for this one frame.
            vars(compositor)["_get_renders"] = MethodType(Compositor._get_renders, compositor)
            try:
                textuals = Compositor.render_partial_update(compositor)
            finally:
                del vars(compositor)["_get_renders"]
            if ours is not None and textuals is not None:
                compared.append(1)
                if written(ours, console) != written(textuals, console):
                    differing.append(str(Region.from_union(list(regions))))
            return ours
        return render_partial_update

    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen))
        compositor = pilot.app.screen._compositor
        assert isinstance(compositor, LinesOnlyCompositor)
        vars(compositor)["render_partial_update"] = checked(compositor)
        view = await started(pilot)
        await wait_for(pilot, lambda: len(view.trace.steps) >= 8, timeout=60)
        await pilot.press("k", "k", "pageup", "j")
        await wait_for(pilot, lambda: len(view.trace.steps) >= WINDOW + 2, timeout=60)
        await pilot.press("home", "j", "end")
        await wait_for(pilot, lambda: not view.running, timeout=60)
        await pilot.press("k")
        await pilot.pause(0.2)
    assert len(compared) >= 50, "too few frames to tell"
    assert not differing, f"{len(differing)} of {len(compared)} frames differ: {differing[:3]}"
