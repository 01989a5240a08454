"""What a thinking model's long reasoning costs the app (issue 36, bench/thinking_stream.py:
the app's CPU a token against the step-at-a-time mode's). Counted through the real app, never
timed: while the pane follows the end of the reasoning, it mounts only the last thoughts that
fill it twice over (each line a streaming thought gains is a layout of every thought mounted),
and a key that leaves the end widens the window again."""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, wait_for

from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.types import SplitRule
from bbm_tui.ui.keys import key_for
from bbm_tui.ui.screens.trace import TraceScreen, host
from bbm_tui.ui.screens.trace.view import TraceView
from bbm_tui.ui.widgets.out_of_window import OutOfWindow
from bbm_tui.ui.widgets.thought import ThoughtView
from bbm_tui.ui.widgets.thought_list import FOLLOWED, WINDOW, ThoughtList
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


def thinking_app(server: FakeOpenAI, reasoning: str, *, chunk_delay_s: float) -> Any:
    server.enqueue(Reply(text="So the answer is (A)", reasoning=reasoning,
                         chunk_delay_s=chunk_delay_s))
    config = Config(model="openai/thinker", api_base=server.base_url, mode="thinking",
                    split=SplitRule("sentence"))
    return make_app(config, task=TASK, question=QUESTION)


async def started(pilot: Pilot) -> TraceView:
    """The trace screen open and `r` pressed: its view."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.view.is_mounted)
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    await pilot.press("r")
    return screen.view


def assert_window_shows_its_steps(view: TraceView) -> None:
    pane = view.thoughts
    lo, hi = pane.window
    shown = pane.views()
    assert [thought.number for thought in shown] == list(range(lo, hi + 1))
    assert [thought.text for thought in shown] == view.trace.texts[lo - 1:hi]
    mounted = [thought for thought in pane.query(ThoughtView) if thought is not pane.streaming]
    assert mounted == shown


async def test_following_the_end_mounts_only_the_thoughts_that_fill_the_pane_twice(
    openai_server: FakeOpenAI,
) -> None:
    """A reasoning cut by sentence mounted every thought up to the window's 40 while the pane
    followed its end (a layout for each line the streaming thought gained placed them all).
    Now the window keeps the last of them that fill the pane twice over, at least FOLLOWED;
    the end stays in sight, the line above says how many are out of the window, and a key
    that goes back up widens the window again."""
    app = thinking_app(openai_server, long_reasoning(WINDOW + 15), chunk_delay_s=0.004)
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        pane = view.query_one(ThoughtList)
        counts: list[tuple[int, int]] = []  # (thoughts, mounted) as each one finished
        while view.running or not counts:
            await pilot.pause(0.02)
            steps = len(view.trace.steps)
            if view.running and pane.is_anchored and (not counts or counts[-1][0] != steps):
                counts.append((steps, len(pane.views())))
        assert counts[-1][0] >= WINDOW + 5, "the reasoning ended too soon to tell"
        height = pane.scrollable_content_region.height
        # Past the window's size: FOLLOWED at least, far fewer than the window's 40 (all of
        # them before).
        late = [mounted for steps, mounted in counts if steps >= WINDOW]
        assert late and max(late) < WINDOW - 5, counts
        assert min(late) >= FOLLOWED
        # Filled still (twice over as laid out when the last thought finished).
        assert sum(thought.outer_size.height for thought in pane.views()) > height
        assert_window_shows_its_steps(view)
        lo, hi = pane.window
        assert hi == len(view.trace.steps) and view.selected == hi
        assert pane.query_one("#thoughts-before", OutOfWindow).count == lo - 1 > 0
        assert pane.scroll_y == pane.max_scroll_y > 0  # the end in sight
        # Back up past the window's margin: the window widens around the selection again.
        for _ in range(hi - lo - 6):
            await pilot.press("k")
        await pilot.pause(0.1)
        low, high = pane.window
        assert high - low + 1 == WINDOW and low <= view.selected <= high
        assert_window_shows_its_steps(view)
        selected = pane.view(view.selected)
        assert selected is not None and selected.has_class("-selected")
        await wait_for(pilot, lambda: pane.region.contains_region(selected.region))


async def test_a_thought_finished_works_out_the_styles_of_three_rows_and_looks_no_key_up(
    openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each thought finished set the selected class on every view of the window, twice (the
    selection's watcher, then again); the next thought's view worked its styles out for its
    streaming class before it was even mounted; and each thought started looked the stop key
    up through every binding of the keymap for the status line (a reasoning cut by sentence
    finishes four or five thoughts a second). Now the selection is set on the row it leaves
    and the row it comes to, a streaming view has its class from the start, and the key is
    looked up once a run: the styles of three rows worked out a thought (the one finished,
    the selection's two), not four."""
    app = thinking_app(openai_server, long_reasoning(WINDOW + 16), chunk_delay_s=0.004)
    selections: list[bool] = []
    styled_views: list[ThoughtView] = []
    lookups: list[str] = []
    set_class, update_node_styles = ThoughtView.set_class, ThoughtView.update_node_styles

    def counted_class(thought: ThoughtView, add: bool, *names: str, **kwargs: Any) -> Any:
        if "-selected" in names:
            selections.append(add)
        return set_class(thought, add, *names, **kwargs)

    def counted_styles(thought: ThoughtView, animate: bool = True) -> None:
        styled_views.append(thought)
        update_node_styles(thought, animate)

    def counted_key(node: Any, binding_id: str) -> str:
        lookups.append(binding_id)
        return key_for(node, binding_id)

    monkeypatch.setattr(ThoughtView, "set_class", counted_class)
    monkeypatch.setattr(ThoughtView, "update_node_styles", counted_styles)
    monkeypatch.setattr(host, "key_for", counted_key)
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        await wait_for(pilot, lambda: len(view.trace.steps) >= 4, timeout=60)
        steps = len(view.trace.steps)
        counts = (len(selections), len(styled_views), len(lookups))
        await wait_for(pilot, lambda: len(view.trace.steps) >= steps + 12, timeout=60)
        finished = len(view.trace.steps) - steps
        assert view.running, "the reasoning ended too soon to tell"
        # The new view dressed as it joins the window, the row left, the row come to.
        assert len(selections) - counts[0] <= 3 * (finished + 1), (
            f"{len(selections) - counts[0]} selections set for {finished} thoughts")
        # (A few more where Textual works a sibling's styles out again as views come and go.)
        assert len(styled_views) - counts[1] <= 3 * finished + 6, (
            f"{len(styled_views) - counts[1]} styles worked out for {finished} thoughts")
        assert lookups[counts[2]:] == [], "keys looked up while the reasoning streamed"
        assert [shown.number for shown in view.views() if shown.has_class("-selected")] == [
            view.selected]
        # Between a thought finished and the next started none streams: wait for the next.
        await wait_for(pilot, lambda: view.thoughts.streaming is not None, timeout=30)
        streaming = view.thoughts.streaming
        assert streaming is not None and streaming.has_class("-streaming")
        assert streaming.styles.background != view.views()[0].styles.background
        # Stopped before the app closes: a paint of the stream's clock that came as the app
        # took its screen down found no thoughts pane (NoMatches), 1 run in 10 at -n 2.
        await pilot.press("escape")
        await wait_for(pilot, lambda: not view.running, timeout=30)


async def test_a_paint_due_as_the_screen_is_taken_down_does_nothing(
    openai_server: FakeOpenAI,
) -> None:
    """The app closed while a thought streamed: Textual takes the screen's widgets away before
    the trace view itself, and the paint clock's next tick found the view still attached and
    its thoughts pane gone (NoMatches('#thoughts'), an error on the way out)."""
    app = thinking_app(openai_server, long_reasoning(30), chunk_delay_s=0.02)
    async with app.run_test(size=SIZE) as pilot:
        view = await started(pilot)
        await wait_for(pilot, lambda: view.thoughts.streaming is not None)
        view.action_stop()
        await view.thoughts.remove()
        assert view.is_attached
        view.generation._paint_streamed()  # the tick the clock had due: nothing to paint on
