"""Thinking traces in the annotation queue (issue 32, item 4): rows of `run --mode thinking`
(one the provider's summary of its reasoning) and DeltaBench's sections cut by sentence are
labelled in the queue with the paper's protocol and PRM800K's per-step one, in the terminal
and served to a browser; the queue's title says what the steps are cut from ("summary" for a
summary) and by which rule; the agreement is worked out over them and their disagreements
adjudicated, the adjudication screen saying the same."""

from __future__ import annotations

import json
from pathlib import Path

from textual.pilot import Pilot
from ui_helpers import make_app, wait_for

from bbm_tui.cli.annotate import read_annotation_files
from bbm_tui.core.annotation.queue import read_queue_file
from bbm_tui.core.generation.cuts import step_cut
from bbm_tui.core.generation.splitting import split_text, stripped_steps
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.types import ADJUDICATOR, SplitRule, StepOrigin
from bbm_tui.ui.app import AnnotateRequest
from bbm_tui.ui.screens.agreement import AgreementScreen
from bbm_tui.ui.screens.annotate import AnnotateScreen

TASK = "multistep_arithmetic"
SIZE = (100, 30)
DELTABENCH = Path(__file__).parent.parent / "fixtures" / "formats" / "deltabench.csv"
RAW = ("A is 4 + 6 = 10.\n\nB is 9 - 5 + 1 = 4.\n\nWait, 9 - 5 is 4 and 4 + 1 is 5.\n\n"
       "So the product is 10 * 5 = 50.")
SUMMARY = "**Working out the parts**\n\nThe parts are 10 and 5.\n\nTheir product is 50."


def thinking_row(question: str, reasoning: str, kind: str, model: str) -> dict:
    """A row as `run --mode thinking` writes it."""
    return {"input": question, "steps": stripped_steps(split_text(reasoning, SplitRule.PARAGRAPH)),
            "answer": "50", "target": "50", "mode": "thinking", "split": "paragraph",
            "reasoning": reasoning, "reasoning_kind": kind, "answer_text": "So the answer is 50",
            "model": model}


def thinking_file(tmp_path: Path) -> Path:
    path = tmp_path / f"{TASK}.jsonl"
    rows = [thinking_row("((4 + 6) * (9 - 5 + 1)) =", RAW, "raw", "deepseek/deepseek-reasoner"),
            thinking_row("((4 + 6) * (9 - 4)) =", SUMMARY, "summary",
                         "anthropic/claude-sonnet-4-5")]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def screen_name(pilot: Pilot) -> str:
    return type(pilot.app.screen).__name__


def thoughts_title(pilot: Pilot, pane: str = "#annotate-right") -> str:
    return str(pilot.app.screen.query_one(pane).border_title)


async def keys(pilot: Pilot, *pressed: str) -> None:
    for key in pressed:
        await pilot.press(key)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()


async def label_both(pilot: Pilot, first: list[str], second: list[str]) -> list[str]:
    """Label the file's two traces with the keys given; the titles each showed."""
    await wait_for(pilot, lambda: screen_name(pilot) == "AnnotateScreen"
                   and thoughts_title(pilot).startswith("Thoughts"))
    titles = [thoughts_title(pilot)]
    await keys(pilot, *first)
    screen = pilot.app.screen
    assert isinstance(screen, AnnotateScreen)
    await wait_for(pilot, lambda: screen.queue.position == 1
                   and thoughts_title(pilot) != titles[0])
    titles.append(thoughts_title(pilot))
    await keys(pilot, *second)
    return titles


async def test_thinking_traces_are_labelled_agreed_on_and_adjudicated(
        tmp_path: Path, store: Store) -> None:
    path = thinking_file(tmp_path)
    # alice: the raw trace's first mistake at Thought 2, the summary's none; bob: Thought 3,
    # and the summary's at Thought 1.
    for name, first, second in (("alice", ["c", "x", "enter"], ["c", "c", "c", "enter"]),
                                ("bob", ["c", "c", "x", "enter"], ["x", "enter"])):
        app = make_app(annotate=AnnotateRequest(name, read_queue_file(path)))
        async with app.run_test(size=SIZE) as pilot:
            titles = await label_both(pilot, first, second)
        assert titles == ["Thoughts · 4 · reasoning · paragraphs",
                          "Thoughts · 3 · summary · paragraphs"]
    labels = {(label.annotator, label.mistake_index) for label in store.annotator_labels()}
    assert labels == {("alice", None), ("alice", 1), ("bob", 0), ("bob", 2)}
    # The queue made thinking traces: the reasoning whole, its kind, the steps a view of it.
    sessions = sorted({label.session_id for label in store.annotator_labels()})
    raw, summary = (TraceSession.load(store, session_id) for session_id in sessions)
    for trace, text, kind in ((raw, RAW, "raw"), (summary, SUMMARY, "summary")):
        reasoning = trace.reasoning()
        assert reasoning is not None and (reasoning.text, reasoning.kind) == (text, kind)
        assert all(step.origin == StepOrigin.THINKING for step in trace.steps)

    app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "AnnotateScreen")
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, AgreementScreen)
                       and app.screen.result is not None, timeout=20)
        assert isinstance(app.screen, AgreementScreen)
        result = app.screen.result
        # Two annotators, two traces, no agreement on either: kappa at or under 0.
        assert result is not None and set(result["cohen_kappa"]) == {"alice|bob"}
        assert result["cohen_kappa"]["alice|bob"] <= 0

    app = make_app(annotate=AnnotateRequest("", adjudicate=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "AdjudicateScreen"
                       and thoughts_title(pilot, "#adjudicate-right").startswith("Thoughts"))
        assert thoughts_title(pilot, "#adjudicate-right") == \
            "Thoughts · 4 · reasoning · paragraphs"
        await keys(pilot, "2")  # bob's Thought 3
        await wait_for(pilot, lambda: thoughts_title(pilot, "#adjudicate-right")
                       == "Thoughts · 3 · summary · paragraphs")
        await keys(pilot, "1")  # alice's "no mistake"
    adjudicated = sorted((label.session_id, label.mistake_index)
                         for label in store.annotator_labels()
                         if label.annotator == ADJUDICATOR)
    assert adjudicated == [(raw.id, 2), (summary.id, None)]


async def test_deltabench_by_sentence_per_step_and_served(tmp_path: Path, store: Store) -> None:
    """DeltaBench's sections cut by sentence (`annotate --split sentence`), rated with the
    per-step protocol in a served app (a browser's): the title names the rule."""
    traces = read_annotation_files([DELTABENCH], None, None, step_cut("sentence"))
    first = traces[0]
    app = make_app(annotate=AnnotateRequest("dana", traces, protocol="per-step", served=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen_name(pilot) == "PerStepAnnotateScreen"
                       and thoughts_title(pilot).startswith("Thoughts"))
        count = len(first.row.steps)
        assert thoughts_title(pilot) == f"Thoughts · {count} · reasoning · sentences"
        await keys(pilot, *(["c"] * (count - 1)), "x", "enter")
    [found] = store.annotator_labels()
    assert (found.annotator, found.mistake_index) == ("dana", count - 1)
    trace = TraceSession.load(store, found.session_id)
    assert trace.split_rule() == SplitRule.SENTENCE and trace.texts == first.row.steps
