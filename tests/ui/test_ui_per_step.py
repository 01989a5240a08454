"""`annotate --protocol per-step` through Pilot: PRM800K's ratings key by key on a
ProcessBench-format file, undo, each of PRM800K's finish reasons, resuming after quitting, a
second annotator, agreement with alpha over the step ratings (worked out here by hand), and
exports that carry the ratings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from textual.widgets._footer import FooterKey

from bbm_tui.core.annotation.export import export_file
from bbm_tui.core.annotation.queue import read_queue_file
from bbm_tui.core.annotation.report import from_store, report_json
from bbm_tui.core.store import Store
from bbm_tui.ui.app import AnnotateRequest
from tests.test_formats import FILES
from tests.ui.ui_helpers import SIZE, make_app, wait_for

SCREEN = "PerStepAnnotateScreen"


def per_step_app(annotator: str):
    traces = read_queue_file(FILES["processbench"])
    return make_app(annotate=AnnotateRequest(annotator, traces, protocol="per-step"))


async def settle(pilot: Pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def opened(pilot: Pilot) -> None:
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == SCREEN)
    await settle(pilot)


async def keys(pilot: Pilot, *pressed: str) -> None:
    for key in pressed:
        await pilot.press(key)
        await settle(pilot)


def state(pilot: Pilot) -> str:
    return str(pilot.app.screen.query_one("#a-state", Static).render())


async def finish_without_label(pilot: Pilot, *pressed: str) -> None:
    await pilot.press("f")
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == "GiveUpDialog")
    await pilot.pause()
    # The footer names ctrl+u as the hint does (issue 34, item 13: it said "unsure").
    footer = {key.description for key in pilot.app.screen.query(FooterKey)}
    hint = str(pilot.app.screen.query_one("#flag-hint", Static).render())
    assert "give up" in footer and "unsure" not in footer, footer
    assert "^u: give up" in hint and "unsure" not in hint, hint
    await pilot.press(*pressed)
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == SCREEN)
    await settle(pilot)


async def test_rate_undo_and_every_finish_reason(store: Store) -> None:
    app = per_step_app("alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        queue = app.screen.queue
        assert "Rate Thought 1: c good · n neutral · x bad" in state(pilot)
        await keys(pilot, "c", "n", "x")
        # A bad thought does not end the trace: Thought 4 is rated too.
        assert queue.judged == "+0-" and "Rate Thought 4" in state(pilot)
        glyphs = [str(widget.render()).split()[1] for widget in app.screen.query(".a-thought")]
        assert glyphs == ["✓", "~", "✗", "▸"]
        await keys(pilot, "u")
        assert queue.judged == "+0"
        await keys(pilot, "x", "c")
        assert "Rated: Thought 3 (found_error) · ⏎ to submit" in state(pilot)
        await keys(pilot, "enter")  # found_error
        assert queue.position == 1
        await keys(pilot, "c", "c", "c", "enter")  # solution
        assert queue.position == 2
        await keys(pilot, "c")
        await finish_without_label(pilot, *"stuck", "enter")  # give_up
        assert queue.position == 3
        await keys(pilot, "c")
        await finish_without_label(pilot, "ctrl+b")  # bad_problem
    labels = {label.session_id: label for label in store.annotator_labels()}
    assert [(labels[1].ratings, labels[1].finish_reason, labels[1].mistake_index),
            (labels[2].ratings, labels[2].finish_reason, labels[2].mistake_index)] == [
        ((1, 0, -1, 1), "found_error", 2), ((1, 1, 1), "solution", None)]
    work = {item.session_id: item for item in store.all_queue_work()}
    assert [(work[3].judged, work[3].flag_reason, work[3].note),
            (work[4].judged, work[4].flag_reason)] == [
        ("+", "give up", "stuck"), ("+", "bad problem")]


async def test_resume_then_a_second_annotator_agreement_and_exports(
        store: Store, tmp_path: Path) -> None:
    app = per_step_app("alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await keys(pilot, "c", "n", "x", "c", "enter", "c", "c", "c", "enter", "c")
        await finish_without_label(pilot, "enter")
        await keys(pilot, "c")
        await finish_without_label(pilot, "ctrl+b")
    bob = per_step_app("bob")
    async with bob.run_test(size=SIZE) as pilot:
        await opened(pilot)
        await keys(pilot, "c", "c")
        await pilot.press("q")  # quit half way through the first trace
    again = per_step_app("bob")
    async with again.run_test(size=SIZE) as pilot:
        await opened(pilot)
        queue = again.screen.queue
        assert queue.position == 0 and queue.judged == "++"
        assert "Rate Thought 3" in state(pilot)
        await keys(pilot, "x", "x", "enter", "c", "n", "c", "enter")
    result = report_json(from_store(store))
    # First mistakes: trace 1 (Thought 3, Thought 3), trace 2 (none, none): total agreement.
    assert result["krippendorff_alpha"] == pytest.approx(1.0)
    # Step ratings, seven steps rated by both: (1,1) x3, (0,1), (-1,-1), (1,-1), (1,0).
    # Coincidences: (1,1) 6, (-1,-1) 2, (0,1) and (1,0) 2 each, (1,-1) and (-1,1) 1 each;
    # n_1 = 9, n_0 = 2, n_-1 = 3, n = 14.
    rated = result["step_ratings"]
    assert (rated["n_steps"], rated["n_traces"]) == (7, 2)
    # Nominal: 6 disagreeing pairs, expected pairs 14^2 - (81 + 4 + 9) = 102.
    assert rated["krippendorff_alpha_nominal"] == pytest.approx(1 - 13 * 6 / 102)
    # Interval: observed 2 + 2 + 4 + 4 = 12; expected 2 * (9*2*1 + 9*3*4 + 2*3*1) = 264.
    assert rated["krippendorff_alpha_interval"] == pytest.approx(1 - 13 * 12 / 264)
    # The app's agreement summary shows them as the command prints them (issue 34, item 14).
    summary = make_app()
    async with summary.run_test(size=SIZE) as pilot:
        await summary.action_agreement()
        await wait_for(pilot, lambda: type(summary.screen).__name__ == "AgreementScreen"
                       and summary.screen.result is not None, timeout=20)
        await pilot.pause()
        shown = " ".join(str(summary.screen.query_one("#agreement-alpha").render()).split())
        assert ("Krippendorff's alpha over step ratings (-1/0/+1): nominal "
                f"{1 - 13 * 6 / 102:.3f}, interval {1 - 13 * 12 / 264:.3f} (7 steps of 2 "
                "traces rated by two annotators or more)") in shown, shown
    out = tmp_path / "prm.jsonl"
    assert export_file(store, "prm800k", out).written == 4
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [(row["label"]["finish_reason"],
             [step["completions"][0]["rating"] for step in row["label"]["steps"]])
            for row in rows] == [("found_error", [1, 0, -1, 1]), ("solution", [1, 1, 1]),
                                 ("give_up", [1]), ("bad_problem", [1])]
    trl = tmp_path / "trl.jsonl"
    export_file(store, "trl", trl)
    assert [json.loads(line)["labels"] for line in trl.read_text().splitlines()] == [
        [True, False, False, True], [True, True, True], [True], [True]]


async def test_the_apps_annotate_files_reads_any_format() -> None:
    """The palette's "Annotate files" reads the field's formats as the command does: MR-BEN's
    object of arrays and a Math-Shepherd file, each under its format's task."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.store is not None)
        await app.action_annotate()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "OpenQueueDialog")
        app.screen.query_one("#queue-files").value = (
            f"{FILES['mr-ben']} {FILES['math-shepherd']}")
        app.screen.query_one("#queue-annotator").value = "carol"
        app.screen.query_one("#queue-annotator").focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
        traces = app.screen.queue.traces
        assert [(trace.task, trace.line, trace.gold) for trace in traces] == [
            ("mr-ben", 3, None), ("mr-ben", 24, 0), ("mr-ben", 52, 2),
            ("math-shepherd", 1, None), ("math-shepherd", 2, 0), ("math-shepherd", 3, 2),
            ("math-shepherd", 4, None)]
        assert app.screen.queue.current.row.steps[-1] == "Solution: Choice_D"
