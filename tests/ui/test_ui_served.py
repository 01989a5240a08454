"""The app as `bbm-tui serve` runs it for a signed-in user (issue 37), through Pilot: an
annotator's app is their queue and nothing else (no sessions, no new session, no palette, no
agreement, Esc stays); a lead's is the agreement with every annotator's progress, `d` the
adjudication and Esc back. Snapshots of the lead's screen at 80x24 and 120x40."""

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


def queue_file(tmp_path: Path, count: int = 4) -> Path:
    path = tmp_path / f"{TASK}.jsonl"
    path.write_text("".join(row.to_line() + "\n" for row in bundled_rows(TASK)[:count]))
    return path


def label(path: Path, name: str, labels: list[int | None]) -> None:
    with Store.open() as store:
        queue = AnnotationQueue(store, name, read_queue_file(path))
        for mistake in labels:
            for mark in protocol.judged_for(mistake, len(queue.current.row.steps)):
                queue.judge(mark == protocol.CORRECT)
            queue.submit()


def screen_name(pilot: Pilot) -> str:
    return type(pilot.app.screen).__name__


async def test_an_annotators_served_app_is_their_queue_and_nothing_else(
        tmp_path: Path) -> None:
    path = queue_file(tmp_path)
    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path), served=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "AnnotateScreen")
        queue_screen = app.screen
        # The app's keys for sessions, a new session, the palette, the agreement, and Esc.
        for key in ("ctrl+n", "ctrl+p", "a", "escape"):
            await pilot.press(key)
            await app.workers.wait_for_complete()
            await pilot.pause()
            assert app.screen is queue_screen, key
        assert not app.check_action("sessions", ()) and not app.check_action("agreement", ())
        assert not app.check_action("command_palette", ()) and app.check_action("help", ())
        await pilot.press("x", "enter")
        await app.workers.wait_for_complete()
    with Store.open() as store:
        assert [(found.annotator, found.mistake_index)
                for found in store.annotator_labels()] == [("alice", 0)]


async def test_the_same_app_not_served_still_leaves_the_queue(tmp_path: Path) -> None:
    """What the served app refuses is the terminal app's as before."""
    path = queue_file(tmp_path)
    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "AnnotateScreen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: screen_name(pilot) == "NewSessionScreen")


async def test_a_leads_served_app_shows_progress_and_adjudicates(tmp_path: Path) -> None:
    path = queue_file(tmp_path)
    label(path, "alice", [0, 1])
    label(path, "bob", [0, None, 2])
    app = make_app(annotate=AnnotateRequest("lee", read_queue_file(path), served=True,
                                            lead=True))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "AgreementScreen")
        await wait_for(pilot, lambda: app.screen.progress != [])
        shown = str(app.screen.query_one("#agreement-progress").render())
        assert "Progress (of 4): alice 2, bob 3" in shown
        agreement = app.screen
        await pilot.press("escape")  # the lead's own screen: Esc stays
        await pilot.pause()
        assert app.screen is agreement
        await pilot.press("d")
        await wait_for(pilot, lambda: screen_name(pilot) == "AdjudicateScreen")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is agreement)
        # Labels given meanwhile (in another annotator's app) are read again.
        label(path, "carol", [0])
        await wait_for(pilot, lambda: any(found.annotator == "carol"
                                          for found in agreement.progress), timeout=30)


async def test_a_terminal_agreement_screen_has_no_adjudicate_key(tmp_path: Path) -> None:
    path = queue_file(tmp_path)
    label(path, "alice", [0])
    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)))
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "AnnotateScreen")
        await app.action_agreement()
        await wait_for(pilot, lambda: screen_name(pilot) == "AgreementScreen")
        assert not app.screen.check_action("adjudicate", ())


@pytest.mark.parametrize("size", SIZES, ids=["80x24", "120x40"])
def test_lead_screen_snapshots(snap_compare, tmp_path: Path, size) -> None:
    path = queue_file(tmp_path)
    label(path, "alice", [0, 1])
    label(path, "bob", [0, None, 2])

    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: screen_name(pilot) == "AgreementScreen")
        await wait_for(pilot, lambda: app.screen.progress != [])
        await steady_frame(pilot)

    app = make_app(annotate=AnnotateRequest("lee", read_queue_file(path), served=True,
                                            lead=True))
    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_a_served_app_never_imports_the_model_library(tmp_path: Path) -> None:
    """No model is called in a served app: litellm (~175 MB an app process, seconds of CPU)
    is not warmed up in any of the team's processes (bench/serve.py: 203 -> 51 MiB RSS)."""
    path = queue_file(tmp_path)
    served = make_app(annotate=AnnotateRequest("alice", read_queue_file(path), served=True),
                      warm_up=True)
    assert served._warm is False
    terminal = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)),
                        warm_up=True)
    assert terminal._warm is True
