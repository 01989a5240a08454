"""The private details of Textual the app still uses, where Textual 8.2.8 has no public
way (issue 9, item 8). Each is used in one place; these tests fail on a Textual upgrade that
renames or drops them, so that whoever upgrades looks again."""

from __future__ import annotations

import gc
from collections.abc import Callable

import pytest
import textual
from rich.segment import Segment
from textual._compositor import ChopsUpdate, Compositor, LayoutUpdate
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.screen import Screen
from textual.strip import Strip
from textual.widgets import Footer, RadioButton, RadioSet, Static
from textual.widgets._footer import FooterKey

from bbm_tui.ui.compositor import (
    ScrollAfterLayoutCompositor,
    strips_divided_whole_make_no_cycle,
)
from bbm_tui.ui.widgets.chrome import KeysFooter
from tests.ui.ui_helpers import make_app, on_each_frame, wait_for


def test_the_pinned_textual() -> None:
    assert textual.__version__ == "8.2.8"


def test_footer_bindings_ready_still_exists() -> None:
    """bbm_tui/ui/widgets/chrome.py KeysFooter sets Footer._bindings_ready so that the keys are in
    the first frame (Textual's Footer waits a frame for the screen to announce them)."""
    assert "_bindings_ready" in Footer._reactives  # type: ignore[attr-defined]


async def test_the_keys_are_in_the_first_frame() -> None:
    # Counted when the first frame is drawn (the app's `_display`), not after a pause: a
    # recompose later on (the screen announcing its bindings) may be half done by then.
    app = make_app()
    keys_at_first_frame: list[int] = []

    def noted(screen: Screen[object], update: object) -> None:
        if not keys_at_first_frame:
            keys_at_first_frame.append(len(screen.query(KeysFooter).first().query(FooterKey)))

    on_each_frame(app, noted)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: bool(keys_at_first_frame))
    assert keys_at_first_frame[0] > 0, "the footer drew no keys in its first frame"


def test_footer_keys_still_say_their_action_key_and_description() -> None:
    """bbm_tui/ui/widgets/chrome.py KeysFooter leaves out the keys that do not fit, keeping
    help: it reads FooterKey (textual.widgets._footer, not exported) for its action and its
    width."""
    key = FooterKey("question_mark", "?", "help", "app.help")
    assert (key.action, key.key_display, key.description) == ("app.help", "?", "help")


@pytest.mark.parametrize("width", [60, 80, 120, 250])
async def test_the_footer_leaves_out_whole_keys_never_help(width: int) -> None:
    from bbm_tui.core.store import Store
    from bbm_tui.ui.screens.trace import TraceScreen
    from tests.ui.ui_helpers import recorded_session

    with Store.open() as store:
        trace = recorded_session(store, "word_sorting", 3)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=(width, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.pause()
        footer = app.screen.query_one(KeysFooter)
        await pilot.pause()
        shown = [key for key in footer.query(FooterKey) if key.display and key.parent.display]
        assert any(key.action in ("help", "app.help") for key in shown)
        # Whatever is shown is whole: the last key ends inside the footer.
        assert max(key.region.right for key in shown) <= footer.region.right
        actions = [key.action for key in footer.query(FooterKey)]
        hidden = [key.action for key in footer.query(FooterKey) if not key.display]
        if width >= 250:
            assert not hidden
        else:
            # Left out from the end, in order (help excepted).
            assert hidden or width >= 120
            if hidden:
                first_hidden = actions.index(hidden[0])
                assert all(a in hidden or a in ("help", "app.help")
                           for a in actions[first_hidden:])


def test_radio_set_selected_still_exists() -> None:
    """bbm_tui/ui/dialogs/find.py MethodSet moves RadioSet._selected (the highlight) onto the
    pressed button when the dialog opens; there is no public setter."""
    assert "_selected" in RadioSet._reactives  # type: ignore[attr-defined]


async def test_the_finder_dialog_highlights_the_chosen_method() -> None:
    from bbm_tui.ui.dialogs import MethodSet

    app = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        choice = MethodSet(RadioButton("a"), RadioButton("b", value=True))
        await app.screen.mount(choice)
        await wait_for(pilot, lambda: choice._selected == 1)  # type: ignore[attr-defined]


def test_a_scroll_bars_repaint_in_the_layouts_frame_still_works() -> None:
    """bbm_tui/ui/widgets/thought_list.py ThoughtList._scroll_update paints the scroll bar in
    the layout's frame: it overrides Widget._scroll_update (called by `_size_updated` in the
    screen's layout), reads the bar's `_repaint_required` and hands it to the screen's
    compositor (`_compositor.update_widgets`, `visible_widgets`)."""
    import inspect

    from textual._compositor import Compositor
    from textual.scrollbar import ScrollBar
    from textual.widget import Widget

    assert "self._scroll_update(virtual_size)" in inspect.getsource(Widget._size_updated)
    assert "self.vertical_scrollbar.refresh()" in inspect.getsource(Widget._scroll_update)
    assert "_repaint_required" in inspect.getsource(Widget._check_refresh)
    assert "_repaint_required" in vars(ScrollBar(vertical=True))
    assert callable(Compositor.update_widgets)
    assert isinstance(vars(Compositor).get("visible_widgets"), property)


def test_the_anchors_height_in_a_layout_is_still_read_from_container_size() -> None:
    """bbm_tui/ui/widgets/thought_list.py ThoughtList._anchor_to_this_height sets the pane's
    `_container_size` height in its `arrange`, because the compositor's anchor, right after
    `arrange`, scrolls to the bottom by `widget.container_size` (the last layout's), and
    `Widget.container_size` returns `_container_size`, which `_size_updated` sets later."""
    import inspect

    from textual._compositor import Compositor
    from textual.widget import Widget

    arrange_root = inspect.getsource(Compositor._arrange_root)
    assert "widget._anchored and not widget._anchor_released" in arrange_root
    assert "widget.container_size.height" in arrange_root
    assert "return self._container_size" in inspect.getsource(
        Widget.container_size.fget)  # type: ignore[attr-defined]
    assert "self._container_size = container_size" in inspect.getsource(Widget._size_updated)


def _scrolling_app(compositor: type[Compositor]) -> tuple[App[None], list[object]]:
    """An app whose screen (a title line above a pane of 40 lines, 10 on show) uses
    `compositor`, and the updates it paints."""

    class Pane(Screen[None]):
        def __init__(self) -> None:
            super().__init__()
            self._compositor = compositor()

        def compose(self) -> ComposeResult:
            yield Static("the title")
            with VerticalScroll(id="pane"):
                for number in range(40):
                    yield Static(f"line {number}")

    class Scrolling(App[None]):
        def on_mount(self) -> None:
            self.push_screen(Pane())

    app = Scrolling()
    painted: list[object] = []
    on_each_frame(app, lambda screen, update: painted.append(update))
    return app, painted


async def _scroll_after_a_layout(compositor: type[Compositor]) -> tuple[object, Region]:
    """A line mounted in the pane (a layout, painted), then a scroll of a line on its own
    (the side-by-side columns following a line a column gained): the scroll's update, and
    the pane's region. The scroll comes straight after the layout's frame: where anything
    else was painted between them (a loaded machine's frames fall otherwise), another line
    is mounted and the scroll tried again."""
    app, painted = _scrolling_app(compositor)
    async with app.run_test(size=(30, 12)) as pilot:
        pane = app.screen.query_one("#pane", VerticalScroll)
        await wait_for(pilot, lambda: pane.max_scroll_y > 0)
        for number in range(40, 50):
            mounted = len(painted)
            await pane.mount(Static(f"line {number}"))
            await wait_for(pilot, lambda mounted=mounted: any(
                isinstance(update, LayoutUpdate) for update in painted[mounted:]))
            if not isinstance(painted[-1], LayoutUpdate):
                continue
            before = len(painted)
            pane.scroll_to(y=pane.scroll_y + 1, animate=False, immediate=True)
            await wait_for(pilot, lambda before=before: len(painted) > before)
            return painted[before], pane.region
    raise AssertionError("no scroll came straight after a layout's frame in ten tries")


def test_the_compositor_names_the_scroll_after_a_layout_reads() -> None:
    """bbm_tui/ui/compositor.py reads Compositor._visible_map and _full_map, and overrides
    reflow and reflow_visible."""
    compositor = Compositor()
    assert compositor._visible_map is None
    assert compositor._full_map == {}
    assert callable(Compositor.reflow) and callable(Compositor.reflow_visible)


async def test_textual_repaints_the_whole_screen_on_a_scroll_after_a_layout() -> None:
    """What ScrollAfterLayoutCompositor is for: Textual's own compositor paints the whole
    screen (a LayoutUpdate), title and all, for a scroll that comes after a layout."""
    update, _pane = await _scroll_after_a_layout(Compositor)
    assert isinstance(update, LayoutUpdate)


async def test_a_scroll_after_a_layout_repaints_the_pane_alone() -> None:
    update, pane = await _scroll_after_a_layout(ScrollAfterLayoutCompositor)
    assert isinstance(update, ChopsUpdate)
    lines = {y for y, _start, _end in update.spans}
    # Every line of the pane (the scroll moved them all), none of the title's.
    assert lines == set(pane.line_range)


def _cycles_left_by_a_whole_division(divide: Callable[[Strip, list[int]], object]) -> int:
    """How many objects the collector finds after a strip divided at its own end alone (as
    the compositor divides every line it paints) is let go."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        strip = Strip([Segment("a line")], 6)
        assert list(divide(strip, [6])) == [strip]  # type: ignore[arg-type]
        del strip
        return gc.collect()
    finally:
        if enabled:
            gc.enable()


def test_textual_keeps_a_strip_divided_whole_in_a_cycle() -> None:
    """What strips_divided_whole_make_no_cycle is for: Textual's Strip.divide caches the
    strip in its own cache, a cycle only the collector frees. It reads Strip._divide_cache."""
    textual_divide = getattr(Strip.divide, "__wrapped__", Strip.divide)
    assert _cycles_left_by_a_whole_division(textual_divide) > 0
    assert hasattr(Strip([], 0), "_divide_cache")


def test_a_strip_divided_whole_is_freed_without_the_collector() -> None:
    strips_divided_whole_make_no_cycle()
    assert _cycles_left_by_a_whole_division(Strip.divide) == 0
    # Divisions elsewhere are Textual's own.
    strip = Strip([Segment("a line")], 6)
    assert [piece.text for piece in strip.divide([2, 6])] == ["a ", "line"]
