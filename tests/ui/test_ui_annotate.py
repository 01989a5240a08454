"""The annotation queue and adjudication screens through Pilot (issue 12): the paper's
protocol key by key, undo, skip, flag, the gold label after submitting, a suggestion making
the label assisted, highlight and guidelines, resuming after quitting, two annotators and
adjudication."""

from __future__ import annotations

import json
import re
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Static

from bbm_tui.core.annotation import protocol
from bbm_tui.core.annotation.queue import AnnotationQueue, read_queue_file
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.types import ADJUDICATOR
from bbm_tui.ui.app import AnnotateRequest
from tests.ui.ui_helpers import SIZE, make_app, notifications, steady_frame, wait_for

TASK = "word_sorting"


def queue_file(tmp_path: Path, count: int = 4) -> Path:
    path = tmp_path / f"{TASK}.jsonl"
    path.write_text("".join(row.to_line() + "\n" for row in bundled_rows(TASK)[:count]))
    return path


def annotate_app(path: Path, annotator: str):
    return make_app(annotate=AnnotateRequest(annotator, read_queue_file(path)))


async def opened(pilot: Pilot, name: str) -> None:
    await wait_for(pilot, lambda: type(pilot.app.screen).__name__ == name)
    await settle(pilot)


async def settle(pilot: Pilot) -> None:
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def keys(pilot: Pilot, *pressed: str) -> None:
    for key in pressed:
        await pilot.press(key)
        await settle(pilot)


def text(pilot: Pilot, selector: str) -> str:
    widget = pilot.app.screen.query_one(selector, Static)
    return str(widget.render())


def label_keys(mistake_index: int | None, steps: int) -> list[str]:
    if mistake_index is None:
        return ["c"] * steps + ["enter"]
    return ["c"] * mistake_index + ["x", "enter"]


async def test_the_protocol_key_by_key(tmp_path: Path, store: Store) -> None:
    path = queue_file(tmp_path)
    gold = bundled_rows(TASK)[0].mistake_index
    app = annotate_app(path, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        screen = app.screen
        assert "Judge Thought 1" in text(pilot, "#a-state")
        await keys(pilot, "enter")  # not complete: refused, nothing saved
        assert screen.queue.position == 0 and store.annotator_labels() == []
        await keys(pilot, "c")
        assert screen.queue.judged == "+" and "Judge Thought 2" in text(pilot, "#a-state")
        await keys(pilot, "x")
        assert "Complete: Thought 2" in text(pilot, "#a-state")
        await keys(pilot, "u")  # undo the last judgement
        assert screen.queue.judged == "+"
        await keys(pilot, "x", "enter")  # submit: the next trace opens
        assert screen.queue.position == 1
        last = text(pilot, "#a-last")
        assert "you said Thought 2" in last and f"gold: Thought {gold + 1}" in last
        assert [(label.annotator, label.mistake_index) for label in store.annotator_labels()] \
            == [("alice", 1)]
        await keys(pilot, "s")  # skip
        assert screen.queue.position == 2
        await pilot.press("f")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagDialog")
        await pilot.press(*"typo", "ctrl+b")
        await settle(pilot)
        assert screen.queue.position == 3
        flagged = store.queue_work("alice")[screen.queue.session_id(2)]
        assert (flagged.status, flagged.flag_reason, flagged.note) == (
            "flagged", "bad problem", "typo")
        # A suggestion, asked for, is shown and makes the label assisted.
        await keys(pilot, "h")
        assert "verifier:" in text(pilot, "#a-suggestion")
        steps = len(screen.queue.current.row.steps)
        await keys(pilot, *label_keys(None, steps))
        assisted = {label.session_id: label.assisted for label in store.annotator_labels()}
        assert assisted[screen.queue.session_id(3)] is True
        # Then the skipped trace comes back.
        assert screen.queue.position == 1


async def test_highlight_and_guidelines(tmp_path: Path) -> None:
    app = annotate_app(queue_file(tmp_path, 1), "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        await pilot.press("slash")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "HighlightDialog")
        word = bundled_rows(TASK)[0].input.split()[0]
        await pilot.press(*word, "enter")
        await settle(pilot)
        question = app.screen.query_one("#a-question", Static).render()
        first = app.screen.query(".a-thought").first(Static).render()
        for content in (question, first):
            spans = [span for span in content.spans if "reverse" in str(span.style)]
            assert spans and all(content.plain[s.start:s.end].lower() == word for s in spans)
        await pilot.press("i")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "GuidelinesDialog")
        guidelines = str(app.screen.query("#guidelines-text Static").first(Static).render())
        assert "Step-by-Step Verification Guidelines" in guidelines and "Word sorting" in guidelines
        await pilot.press("escape")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")


async def test_resume_after_quitting(tmp_path: Path) -> None:
    path = queue_file(tmp_path)
    app = annotate_app(path, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        await keys(pilot, "c", "c")  # half way through the first trace
        await pilot.press("q")
    again = annotate_app(path, "alice")
    async with again.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        assert again.screen.queue.position == 0 and again.screen.queue.judged == "++"
        assert "Judge Thought 3" in text(pilot, "#a-state")


async def test_two_annotators_then_adjudication(tmp_path: Path, store: Store) -> None:
    path = queue_file(tmp_path, 2)
    rows = bundled_rows(TASK)[:2]
    for name, labels in (("alice", [0, None]), ("bob", [0, 1])):
        app = annotate_app(path, name)
        async with app.run_test(size=SIZE) as pilot:
            await opened(pilot, "AnnotateScreen")
            for row, label in zip(rows, labels, strict=True):
                await keys(pilot, *label_keys(label, len(row.steps)))
    labels = {(label.annotator, label.mistake_index) for label in store.annotator_labels()}
    assert labels == {("alice", 0), ("alice", None), ("bob", 0), ("bob", 1)}
    app = make_app(annotate=AnnotateRequest("", adjudicate=True))
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AdjudicateScreen")
        candidates = text(pilot, "#j-candidates")
        assert "1  no mistake" in candidates and "2  Thought 2" in candidates
        await keys(pilot, "2")
        assert "Adjudicated: Thought 2" in text(pilot, "#j-state")
        await keys(pilot, "u")
        assert "Not adjudicated" in text(pilot, "#j-state")
        await keys(pilot, "k", "k", "j", "x")  # set another: Thought 2 selected, then set
        await keys(pilot, "c", "y")  # then "no mistake" instead, once asked
    adjudicated = [label for label in store.annotator_labels() if label.annotator == ADJUDICATOR]
    assert [label.mistake_index for label in adjudicated] == [None]


async def test_adjudication_says_where_it_goes_asks_before_replacing_and_sums_up(
        tmp_path: Path, store: Store) -> None:
    """Issue 34, item 5: accepting says which trace comes next; n at the last trace and p at
    the first say so and stay (no wrapping); a settled trace's label is replaced only after a
    yes; the last settle ends with a summary, kept on the screen."""
    path = queue_file(tmp_path, 3)
    rows = bundled_rows(TASK)[:3]
    for name, labels in (("alice", [0, None, 0]), ("bob", [1, 1, 2])):
        app = annotate_app(path, name)
        async with app.run_test(size=SIZE) as pilot:
            await opened(pilot, "AnnotateScreen")
            for row, label in zip(rows, labels, strict=True):
                await keys(pilot, *label_keys(label, len(row.steps)))
    app = make_app(annotate=AnnotateRequest("", adjudicate=True))
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AdjudicateScreen")
        assert "Trace 1 of 3" in text(pilot, "#j-position")
        await keys(pilot, "p")
        assert "Trace 1 of 3 is the first" in notifications(app)[-1]
        assert "Trace 1 of 3" in text(pilot, "#j-position")
        await keys(pilot, "1")
        assert "Trace 1 adjudicated as Thought 1. On to trace 2 of 3" in notifications(app)[-1]
        assert "Trace 2 of 3" in text(pilot, "#j-position")
        await keys(pilot, "n", "n")
        assert "Trace 3 of 3 is the last" in notifications(app)[-1]
        assert "Trace 3 of 3" in text(pilot, "#j-position")
        await keys(pilot, "c")
        assert "On to trace 2 of 3" in notifications(app)[-1]
        await keys(pilot, "2")
        assert "All traces settled" in notifications(app)[-1]
        assert "3 of 3 traces settled: 1 no mistake, 2 at a thought (1 not a candidate)" \
            in notifications(app)[-1]
        assert "All settled" in text(pilot, "#j-position")
        # Trace 2 is settled: another label asks first, and "no" keeps the one there.
        await keys(pilot, "x")
        assert type(app.screen).__name__ == "ConfirmScreen"
        await keys(pilot, "n")
        assert "Adjudicated: Thought 2" in text(pilot, "#j-state")
        await keys(pilot, "x", "y")
        assert "Adjudicated: Thought" in text(pilot, "#j-state")
    adjudicated = sorted((label.session_id, label.mistake_index)
                         for label in store.annotator_labels() if label.annotator == ADJUDICATOR)
    assert [index for _, index in adjudicated] == [0, 0, None]


async def test_open_a_queue_from_the_palette(tmp_path: Path) -> None:
    path = queue_file(tmp_path, 2)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.store is not None)
        await app.action_annotate()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "OpenQueueDialog")
        app.screen.query_one("#queue-files").value = str(path)
        app.screen.query_one("#queue-annotator").value = "carol"
        app.screen.query_one("#queue-annotator").focus()
        await pilot.press("enter")
        await opened(pilot, "AnnotateScreen")
        assert app.screen.queue.annotator == "carol" and len(app.screen.queue.traces) == 2
        assert json.loads(path.read_text().splitlines()[0])["input"] == \
            app.screen.queue.current.row.input


async def test_export_from_the_palette(tmp_path: Path, store: Store) -> None:
    path = queue_file(tmp_path, 1)
    out = tmp_path / "labels.csv"
    app = annotate_app(path, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        await keys(pilot, "x", "enter")
        for attempt in range(2):  # the second time, the file exists: refused, left as it was
            await app.action_export()
            await wait_for(pilot, lambda: type(app.screen).__name__ == "ExportDialog")
            app.screen.query_one("#export-format").value = "csv"
            app.screen.query_one("#export-path").value = str(out)
            app.screen.query_one("#export-path").focus()
            await pilot.press("enter")
            await settle(pilot)
            if attempt == 0:
                first = out.read_bytes()
    lines = first.decode().splitlines()
    assert lines[0].startswith("session_id,name,task,annotator")
    assert ",alice,labelled,0," in lines[1]
    assert out.read_bytes() == first


def shown_text(app) -> str:
    """The text of every Static on the screen that is displayed (the title bar, the panes,
    the footer), scrolled into view or not."""
    return "\n".join(str(widget.render()) for widget in app.screen.query(Static)
                     if all(node.display for node in widget.ancestors_with_self
                            if node is not app.screen and node is not app))


async def test_the_gold_label_is_hidden_until_the_trace_is_submitted(tmp_path: Path) -> None:
    path = queue_file(tmp_path, 2)
    gold = [row.mistake_index for row in bundled_rows(TASK)[:2]]
    assert gold[0] is not None and gold[0] > 0  # Thought 1 is then not the gold label
    app = annotate_app(path, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        screen = app.screen
        for pressed in ("", "c", "u", "x"):  # while labelling, judged or not, complete
            if pressed:
                await keys(pilot, pressed)
            assert "gold" not in shown_text(app).lower()
            marked = [index for index, widget in enumerate(screen.query(".a-thought"))
                      if widget.has_class("-mistake")]
            assert marked == ([0] if pressed == "x" else [])  # only the annotator's own mark
        await keys(pilot, "enter")
        assert screen.queue.position == 1
        last = text(pilot, "#a-last")
        assert f"you said Thought 1; gold: Thought {gold[0] + 1} (differ)" in last
        # The next trace's gold stays hidden: the only gold on screen is the submitted one's.
        assert shown_text(app).lower().count("gold") == 1
        await keys(pilot, "u")  # reopened: its label withdrawn, its gold hidden again
        assert screen.queue.position == 0 and screen.queue.judged == ""
        assert "gold" not in shown_text(app).lower()
        assert not screen.query_one("#a-last").display
        await keys(pilot, "x", "enter", "u", "u")
        assert "gold" not in text(pilot, "#a-state").lower()


async def test_a_file_written_by_run_is_annotated_and_exported_back(tmp_path: Path,
                                                                     store: Store) -> None:
    """`bbm-tui run` (the real command, replay/bbm, two questions) writes unlabelled rows;
    `bbm-tui annotate` reads them (without a terminal it stops only at the terminal check);
    the queue labels them in the app; `bbm-tui export` writes them back, labelled."""
    from tests.cli_helpers import run_all

    written = tmp_path / f"{TASK}.jsonl"
    exported = tmp_path / "exported.jsonl"
    [ran] = run_all([("run", "--model", "replay/bbm", "--task", TASK, "--dataset", "--limit",
                      "2", "--out", str(written), "--no-progress")])
    assert ran.code == 0, ran
    rows = [json.loads(line) for line in written.read_text().splitlines()]
    assert len(rows) == 2 and all("mistake_index" not in row for row in rows)
    [annotate] = run_all([("annotate", str(written), "--annotator", "alice")])
    assert annotate.code == 2 and "the app needs a terminal" in annotate.err, annotate

    labels = [1, None]
    app = annotate_app(written, "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        queue = app.screen.queue
        assert not any(trace.has_gold for trace in queue.traces)
        for row, label in zip(rows, labels, strict=True):
            assert queue.current.row.input == row["input"]
            await keys(pilot, *label_keys(label, len(row["steps"])))
        assert queue.first_unfinished() is None
        sessions = [str(queue.session_id(index)) for index in range(2)]
        await pilot.press("q")
    [export] = run_all([("export", "--format", "jsonl", "--session", *sessions,
                         "--out", str(exported))])
    assert export.code == 0, export
    back = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [row["input"] for row in back] == [row["input"] for row in rows]
    for row, again, label in zip(rows, back, labels, strict=True):
        assert again["mistake_index"] == label
        for field in ("steps", "answer", "target"):
            assert again[field] == row[field], field


async def test_at_80x24_the_footer_has_the_essentials_and_help_has_every_key(
    tmp_path: Path,
) -> None:
    from textual.widgets._footer import FooterKey

    from bbm_tui.ui.dialogs import HelpScreen
    from bbm_tui.ui.screens.annotate import AnnotateScreen

    app = annotate_app(queue_file(tmp_path, 1), "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot, "AnnotateScreen")
        await steady_frame(pilot)  # the footer has left out what does not fit
        shown = {key.action for key in app.screen.query(FooterKey) if key.display}
        assert "back" not in shown  # 80 columns: not every key fits
        essentials = {"judge(True)", "judge(False)", "submit", "undo", "help"}
        assert essentials <= shown, shown
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        listed = {row.binding_id for row in app.screen.rows}
        ids = {binding.id for binding in AnnotateScreen.BINDINGS}  # type: ignore[union-attr]
        assert ids <= listed, ids - listed


def fully_in_view(app, selector: str) -> bool:
    """The widget is drawn on screen whole (none of it scrolled or cut off)."""
    widget = app.screen.query_one(selector)
    try:
        shown = app.screen.find_widget(widget).visible_region
    except Exception:  # NoWidget: not on screen at all
        return False
    return shown.height == widget.outer_size.height and shown.height > 0


async def test_at_80x24_what_an_annotator_needs_is_in_view(tmp_path: Path) -> None:
    """The question's start, the target, the thought to judge, the state and the progress,
    without scrolling; the same for the adjudication screen's candidates."""
    path = tmp_path / "tracking_shuffled_objects.jsonl"  # long questions
    path.write_text("".join(row.to_line() + "\n"
                            for row in bundled_rows("tracking_shuffled_objects")[:2]))
    app = annotate_app(path, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot, "AnnotateScreen")
        await keys(pilot, *label_keys(3, len(app.screen.queue.current.row.steps)), "c", "c")
        await steady_frame(pilot)
        question = app.screen.query_one("#a-question", Static)
        assert app.screen.find_widget(question).visible_region.height >= 8
        for selector in ("#a-target", "#a-last", "#a-state", "#a-progress",
                         ".a-thought.-current"):
            assert fully_in_view(app, selector), selector
    for name, label in (("carol", 1), ("bob", None)):  # with alice's: three candidates
        queue = AnnotationQueue(Store.open(), name, read_queue_file(path)[:1])
        for mark in protocol.judged_for(label, len(queue.current.row.steps)):
            queue.judge(mark == protocol.CORRECT)
        queue.submit()
        queue.store.close()
    app = make_app(annotate=AnnotateRequest("", adjudicate=True))
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot, "AdjudicateScreen")
        await steady_frame(pilot)
        for selector in ("#j-candidates", "#j-target", "#j-state", ".a-thought.-current"):
            assert fully_in_view(app, selector), selector


async def test_the_state_line_names_the_keys_as_bound(tmp_path: Path) -> None:
    from bbm_tui.core.config import Config

    config = Config(keymap={"annotate_correct": "v", "annotate_submit": "space"})
    app = make_app(config, annotate=AnnotateRequest("alice", read_queue_file(
        queue_file(tmp_path, 1))))
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        assert "Judge Thought 1: v correct · x incorrect" in text(pilot, "#a-state")
        await keys(pilot, "x")
        assert "space to submit" in text(pilot, "#a-state")


async def test_flag_keys_work_while_the_note_is_typed(tmp_path: Path, store: Store) -> None:
    """ctrl+u is also the note Input's own key (delete to the start): the flag wins."""
    app = annotate_app(queue_file(tmp_path, 2), "alice")
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AnnotateScreen")
        for reason, key in (("unsure", "ctrl+u"), ("bad problem", "ctrl+b")):
            index = app.screen.queue.position
            await pilot.press("f")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "FlagDialog")
            hint = str(app.screen.query_one("#flag-hint", Static).render())
            assert hint == "enter or ^u: unsure · ^b: bad problem · esc: cancel"
            await pilot.press(*"odd target", key)
            await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
            await settle(pilot)
            session = app.screen.queue.session_id(index)
            work = store.queue_work("alice")[session]
            assert (work.status, work.flag_reason, work.note) == ("flagged", reason,
                                                                  "odd target")


async def test_the_thought_to_judge_is_scrolled_into_view(tmp_path: Path) -> None:
    """At 80x24, a long trace reopened by undo (and one resumed) shows its unlocked thought
    (it was left below the fold: the thoughts were mounted anew and not laid out yet)."""
    path = tmp_path / f"{TASK}.jsonl"
    path.write_text(bundled_rows(TASK)[1].to_line() + "\n" + bundled_rows(TASK)[2].to_line()
                    + "\n")
    app = annotate_app(path, "alice")
    async with app.run_test(size=(80, 24)) as pilot:
        await opened(pilot, "AnnotateScreen")
        await keys(pilot, *"cccccc", "x", "enter")
        await keys(pilot, "u")  # trace 1 again, Thought 7 unlocked
        assert app.screen.queue.position == 0 and app.screen.queue.judged == "++++++"
        await steady_frame(pilot)
        assert fully_in_view(app, ".a-thought.-current")
        await pilot.press("q")
    again = annotate_app(path, "alice")
    async with again.run_test(size=(80, 24)) as pilot:
        await opened(pilot, "AnnotateScreen")
        assert again.screen.queue.judged == "++++++"
        await steady_frame(pilot)
        assert fully_in_view(again, ".a-thought.-current")


def test_the_guidelines_running_text_is_joined_and_their_tables_kept() -> None:
    from bbm_tui.ui.screens.annotate_dialogs import guidelines_text
    from bbm_tui.ui.viewmodels.annotate import reflowed

    for task in ("word_sorting", "tracking_shuffled_objects", "logical_deduction",
                 "multistep_arithmetic"):
        text = guidelines_text(task)
        assert text is not None
        shown = reflowed(text)
        assert shown.split() == text.split()  # not a word lost, added or moved
        # Lines in columns (a run of spaces inside, after any bullet) are the tables: kept.
        table = [line for line in text.split("\n")
                 if re.search(r"\S {3,}\S", re.sub(r"^[●•]\s+", "", line.strip()))]
        assert len(table) > 5 and set(table) <= set(shown.split("\n"))
    text = guidelines_text("word_sorting") or ""
    assert ("We’ve used an AI model to generate a sequence of steps to complete a word sorting "
            "task, but some of these steps might be wrong.") in reflowed(text)
    assert "Overview\nWe’ve used" in reflowed(text)  # a heading stays on its line


async def test_esc_leaves_the_queue_and_adjudication_for_the_new_session_screen(
    tmp_path: Path, store: Store
) -> None:
    """The footer says "esc back" and help "Leave the queue": esc leaves either queue, opened
    from the command line (nothing below but the splash) or from the palette, for the
    new-session screen, with what was done kept."""
    path = queue_file(tmp_path, 2)
    rows = bundled_rows(TASK)[:2]
    for name, labels in (("alice", [0, None]), ("bob", [0, 1])):
        app = annotate_app(path, name)
        async with app.run_test(size=SIZE) as pilot:
            await opened(pilot, "AnnotateScreen")
            for row, label in zip(rows, labels, strict=True):
                await keys(pilot, *label_keys(label, len(row.steps)))
            await keys(pilot, "escape")
            await opened(pilot, "NewSessionScreen")
            assert not any(type(s).__name__ == "AnnotateScreen" for s in app.screen_stack)
    app = make_app(annotate=AnnotateRequest("", adjudicate=True))
    async with app.run_test(size=SIZE) as pilot:
        await opened(pilot, "AdjudicateScreen")
        await keys(pilot, "escape")
        await opened(pilot, "NewSessionScreen")
        # From the palette, over the new-session screen: back to it.
        await app.action_annotate()
        await wait_for(pilot, lambda: type(app.screen).__name__ == "OpenQueueDialog")
        app.screen.query_one("#queue-files").value = str(path)
        app.screen.query_one("#queue-annotator").value = "carol"
        app.screen.query_one("#queue-annotator").focus()
        await pilot.press("enter")
        await opened(pilot, "AnnotateScreen")
        await keys(pilot, "c", "escape")
        await opened(pilot, "NewSessionScreen")
        assert [type(s).__name__ for s in app.screen_stack] == ["SplashScreen",
                                                                 "NewSessionScreen"]
    assert len(store.annotator_labels()) == 4
