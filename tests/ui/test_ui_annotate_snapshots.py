"""SVG snapshots of the annotation queue and the adjudication screen at 80x24 and 120x40
(issue 12). Deterministic: a fresh store per test, no times on screen (wall_clock=False)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, steady_frame, wait_for

from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.queue import AnnotationQueue, read_queue_file
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.ui.app import AnnotateRequest

SIZES = [(80, 24), (120, 40)]
TASK = "tracking_shuffled_objects"


def queue_file(tmp_path: Path) -> Path:
    path = tmp_path / f"{TASK}.jsonl"
    path.write_text("".join(row.to_line() + "\n" for row in bundled_rows(TASK)[:3]))
    return path


async def settle(pilot: Pilot) -> None:
    await steady_frame(pilot)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_annotation_queue_mid_trace(snap_compare, tmp_path: Path, size) -> None:
    """The second trace, two thoughts judged correct, the third unlocked; the first trace's
    label and gold on the left."""
    path = queue_file(tmp_path)

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
        await settle(pilot)
        steps = len(app.screen.queue.current.row.steps)
        for key in [*("c" * (steps - 1)), "x", "enter", "c", "c"]:
            await pilot.press(key)
            await app.workers.wait_for_complete()
        await settle(pilot)

    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_adjudication_screen(snap_compare, tmp_path: Path, size) -> None:
    """Two annotators apart on the first trace: their candidates side by side."""
    path = queue_file(tmp_path)
    with Store.open() as store:
        for name, label in (("alice", 3), ("bob", None)):
            queue = AnnotationQueue(store, name, read_queue_file(path)[:1])
            for mark in protocol.judged_for(label, len(queue.current.row.steps)):
                queue.judge(mark == protocol.CORRECT)
            queue.submit()

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AdjudicateScreen")
        await settle(pilot)

    app = make_app(annotate=AnnotateRequest("", adjudicate=True))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def _on_queue(pilot: Pilot, key: str, typed: str, dialog: str) -> None:
    """On the annotation queue's first trace, `key` opens `dialog`; `typed` goes into it."""
    app = pilot.app
    await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
    await settle(pilot)
    await pilot.press(key)
    await wait_for(pilot, lambda: type(app.screen).__name__ == dialog)
    if typed:
        await pilot.press(*typed)


async def _from_palette(pilot: Pilot, action: str, dialog: str) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.store is not None
                   and type(app.screen).__name__ == "NewSessionScreen")
    await settle(pilot)
    await getattr(app, action)()
    await wait_for(pilot, lambda: type(app.screen).__name__ == dialog)


DIALOGS = {
    "flag": lambda pilot: _on_queue(pilot, "f", "the target looks wrong", "FlagDialog"),
    "highlight": lambda pilot: _on_queue(pilot, "slash", "ball", "HighlightDialog"),
    "guidelines": lambda pilot: _on_queue(pilot, "i", "", "GuidelinesDialog"),
    "open_queue": lambda pilot: _from_palette(pilot, "action_annotate", "OpenQueueDialog"),
    "export": lambda pilot: _from_palette(pilot, "action_export", "ExportDialog"),
}


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
@pytest.mark.parametrize("dialog", list(DIALOGS))
def test_annotation_dialogs(snap_compare, tmp_path: Path, dialog: str, size) -> None:
    """Each dialog of bbm_tui/ui/screens/annotate_dialogs.py over the screen it opens from:
    the flag's note, the word to highlight and the guidelines over the queue; opening a queue
    and exporting from the palette."""
    path = queue_file(tmp_path)

    async def run_before(pilot: Pilot) -> None:
        await DIALOGS[dialog](pilot)
        await settle(pilot)

    on_queue = dialog in ("flag", "highlight", "guidelines")
    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path))) if on_queue \
        else make_app()
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_per_step_annotation_mid_trace(snap_compare, size) -> None:
    """PRM800K's per-step labelling on a ProcessBench file: the first trace rated to the end
    (a bad thought, then a good one) and submitted, the second rated good then neutral, its
    third thought to rate."""
    from tests.test_formats import FILES

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: type(app.screen).__name__ == "PerStepAnnotateScreen")
        await settle(pilot)
        for key in ["c", "n", "x", "c", "enter", "c", "n"]:
            await pilot.press(key)
            await app.workers.wait_for_complete()
        await settle(pilot)

    traces = read_queue_file(FILES["processbench"])
    app = make_app(annotate=AnnotateRequest("alice", traces, protocol="per-step"))
    assert snap_compare(app, terminal_size=size, run_before=run_before)
