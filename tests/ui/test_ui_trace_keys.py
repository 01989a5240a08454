"""Every key of the main screen, checked against what is on screen and what is in the store."""

from __future__ import annotations

import io

import pytest
from rich.cells import cell_len
from rich.console import Console
from textual.content import Content
from textual.widgets import Static
from textual.widgets._footer import FooterKey
from ui_helpers import (
    SIZE,
    make_app,
    notifications,
    palette_commands,
    recorded_session,
    thought,
    wait_for,
)

from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import (
    StepDelta,
    StepFinished,
    StepRestarted,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.store import Store, Totals
from bbm_tui.ui.dialogs import ConfirmScreen, HelpScreen
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.sessions import SessionsScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.chrome import KeysFooter
from bbm_tui.ui.widgets.thought import ThoughtView

TASK = "tracking_shuffled_objects"


def trace_screen(app) -> TraceScreen:
    screen = app.screen
    assert isinstance(screen, TraceScreen), screen
    return screen


def finished_views(app) -> list[ThoughtView]:
    return [view for view in app.screen.query(ThoughtView) if not view.streaming]


async def open_recorded(pilot, store: Store | None = None) -> TraceScreen:
    """Wait until the main screen is up (the session loads in a worker)."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    return trace_screen(pilot.app)


# -- generating: n, r, escape

async def test_n_generates_one_thought_and_commits_it(store: Store) -> None:
    app = make_app(task=TASK, question=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: not screen.view.running
                       and len(screen.view.trace.steps) == 1, timeout=30)
        await pilot.press("n")
        await wait_for(pilot, lambda: not screen.view.running
                       and len(screen.view.trace.steps) == 2, timeout=30)
        row = bundled_rows(TASK)[0]
        saved = store.branch(screen.view.trace.id)
        assert [step.text for step in saved] == row.steps[:2]
        assert [view.text for view in finished_views(app)] == row.steps[:2]
        # Each thought shows its tokens and cost; the title shows the running totals.
        meta = finished_views(app)[0].meta
        assert " in · " in meta and " out · $0" in meta
        assert "2 calls" in str(screen.query_one("#title-bar .title-right").render())


async def test_each_thought_shows_its_log_probability_when_asked(
    store: Store, openai_server
) -> None:
    """With `logprobs = true` (or --logprobs) a chat model's thought shows the sum of its
    tokens' log-probabilities, sent by a real server through litellm."""
    from dataclasses import replace

    from tests.openai_server import dataset_responder

    openai_server.responder = lambda path, body: replace(dataset_responder(path, body),
                                                         logprob_per_token=-0.125)
    config = Config(model="openai/test", api_base=openai_server.base_url, logprobs=True)
    app = make_app(config, task=TASK, question=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: not screen.view.running and len(screen.view.trace.steps) == 1)
        [step] = store.branch(screen.view.trace.id)
        assert step.logprob is not None and step.logprob < 0
        assert f"log-prob {step.logprob:.2f}" in finished_views(app)[0].meta
        assert openai_server.requests[-1].body["logprobs"] is True


async def test_r_runs_to_the_answer_and_shows_whether_it_matches(store: Store) -> None:
    app = make_app(task=TASK, question=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        row = bundled_rows(TASK)[0]
        assert [step.text for step in store.branch(screen.view.trace.id)] == row.steps
        answer = str(screen.query_one("#answer").render())
        assert row.answer.strip() in answer
        assert ("matches the target" in answer) == (row.answer.strip() == row.target.strip())
        assert "Finished with an answer" in str(screen.query_one("#run-status").render())
        # n and r are greyed out while running, and work again after.
        assert screen.view.check_action("step", ()) is True


async def test_escape_mid_stream_drops_the_half_thought(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "40")
    app = make_app(task="word_sorting", question=0)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        await pilot.press("r")

        def streaming_second() -> bool:
            views = [v for v in screen.query(ThoughtView) if v.streaming and v.text]
            return bool(views) and views[0].number >= 2

        # The first step imports litellm (3-5 s, many more with the suite's workers on two
        # cores): a generous limit, as wait_for's own.
        await wait_for(pilot, streaming_second, timeout=60)
        streaming = next(v for v in screen.query(ThoughtView) if v.streaming)
        assert streaming.text and "▌" in streaming.shown
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.view.running)
        await app.workers.wait_for_complete()
        await pilot.pause()  # the worker's last messages reach the screen
        saved = store.branch(screen.view.trace.id)
        row = bundled_rows("word_sorting")[0]
        # Only finished thoughts are saved and on screen, and they are the recorded ones.
        assert 1 <= len(saved) < len(row.steps)
        assert [step.text for step in saved] == row.steps[: len(saved)]
        assert not [v for v in screen.query(ThoughtView) if v.streaming]
        assert [v.text for v in finished_views(app)] == [s.text for s in saved]
        assert "Stopped" in str(screen.query_one("#run-status").render())


# -- moving and labelling: j k down up, x, c, u

async def test_moving_and_flagging_the_first_mistake(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        assert screen.view.selected == 1
        await pilot.press("j", "down", "j")
        assert screen.view.selected == 4
        await pilot.press("k", "up")
        assert screen.view.selected == 2
        await pilot.press("down")
        assert screen.view.selected == 3
        assert [v.number for v in screen.query(".-selected")] == [3]
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 3)
        label = store.current_label(trace.id)
        assert label is not None and label.mistake_step_id == trace.steps[2].id
        views = finished_views(app)
        assert [v.status for v in views] == ["ok", "ok", "mistake", "after", "after"]
        assert views[3].has_class("-after") and views[2].has_class("-mistake")
        assert "first mistake in Thought 3" in str(screen.query_one("#label").render())
        await wait_for(pilot, lambda: "Thought 3 flagged as the first mistake." in
                       str(screen.query_one("#run-status").render()))
        # Moving past either end stays on the ends.
        await pilot.press("j", "j", "j", "j", "j")
        assert screen.view.selected == 5


async def test_no_mistake_then_undo_restores_the_previous_label(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        await pilot.press("j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        await pilot.press("c")  # the answer is wrong: c asks first (issue 10, item 5)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.view.trace.no_mistake)
        label = store.current_label(trace.id)
        assert label is not None and label.mistake_step_id is None
        assert [v.status for v in finished_views(app)] == ["ok"] * 5
        await pilot.press("u")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        label = store.current_label(trace.id)
        assert label is not None and label.mistake_step_id == trace.steps[1].id
        await pilot.press("u")
        await wait_for(pilot, lambda: screen.view.trace.label is None)
        assert store.current_label(trace.id) is None
        assert [v.status for v in finished_views(app)] == ["plain"] * 5
        await pilot.press("u")
        await wait_for(pilot, lambda: "no label to undo" in str(
            screen.query_one("#run-status").render()))
        assert not any("label" in n for n in notifications(app))  # said once, in the status


# -- copying: y, Y

async def test_y_copies_the_thought_and_capital_y_the_trace(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await pilot.press("j", "y")
        assert app.clipboard == trace.steps[1].text
        await pilot.press("Y")
        expected = "\n".join(f"Thought {i}: {s.text}" for i, s in enumerate(trace.steps, 1))
        assert app.clipboard == expected
        assert any("Copied the trace" in n for n in notifications(app))


# -- the app's keys on the main screen: ?, s, ctrl+n, q

async def test_help_lists_every_key_of_the_screen(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        rows = {row.keys: row for row in app.screen.rows}
        # Every key, also those the footer leaves out for now (esc while nothing runs, e
        # before a finder has answered) or always (g, y, Y).
        for key in ("n", "r", "esc", "j / ↓", "k / ↑", "x", "c", "u", "f", "e", "g", "y", "Y",
                    "s", "^n", "?", "^p"):
            assert key in rows, key
        assert rows["x"].binding_id == "flag_mistake" and rows["x"].detail
        assert rows["f"].binding_id == "find_mistake" and rows["f"].detail
        assert rows["g"].binding_id == "show_gold" and rows["e"].binding_id == "show_answer"
        assert "q" in {key for row in rows for key in row.split(" / ")}
        await pilot.press("escape")
        assert isinstance(app.screen, TraceScreen)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
async def test_help_shows_every_description_whole(store: Store, size: tuple[int, int]) -> None:
    """No description is cut short: at 120 columns they wrap in their column, at 80 they go
    under the key's name."""
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=size) as pilot:
        await open_recorded(pilot, store)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        table = app.screen.query_one("#help-table", Static)
        await wait_for(pilot, lambda: table.content_size.width > 0)
        await pilot.pause()
        console = Console(width=table.content_size.width, file=io.StringIO(), record=True)
        console.print(table.content)
        drawn = console.export_text()
        assert max(cell_len(line) for line in drawn.splitlines()) <= table.content_size.width
        words = drawn.split()
        for row in app.screen.rows:
            # In order, every word whole; in columns a binding id may sit between two lines.
            assert in_order(row.detail.split(), words), row.detail
            assert not row.binding_id or row.binding_id in words


def in_order(wanted: list[str], words: list[str]) -> bool:
    """Whether `wanted` occurs in `words` as a run, give or take a word between two."""
    for start, word in enumerate(words):
        if word != wanted[0]:
            continue
        position, found = start, True
        for needed in wanted[1:]:
            if needed in words[position + 1 : position + 3]:
                position = words.index(needed, position + 1)
            else:
                found = False
                break
        if found:
            return True
    return False


async def test_s_opens_the_sessions_and_ctrl_n_a_new_session(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("ctrl+n")
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        # The new session starts on the task that was open.
        assert app.screen.task_name == TASK
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))


async def test_q_quits_with_exit_code_zero(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_keymap_from_the_config_rebinds_keys(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    config = Config(keymap={"flag_mistake": "m", "select_next": "l"})
    app = make_app(config, session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        # The old keys do nothing now: keys are handled in order, so once the new "l" has
        # moved the selection, "j" and "x" before it have been handled (and did nothing).
        await pilot.press("j", "x", "l")
        await wait_for(pilot, lambda: screen.view.selected == 2)
        await app.workers.wait_for_complete()
        assert screen.view.selected == 2 and screen.view.trace.label is None
        await pilot.press("l", "m")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 3)
        # The footer and the help screen show the new keys.
        await pilot.press("question_mark")
        keys = {row.keys: row.binding_id for row in app.screen.rows}
        assert keys["m"] == "flag_mistake" and keys["l"] == "select_next"


async def footer_keys(pilot) -> list[tuple[str, str, bool]]:
    """The Footer's keys in order: (action, key as shown, shown or left out for room)."""
    footer = pilot.app.screen.query_one(KeysFooter)
    await wait_for(pilot, lambda: len(footer.query(FooterKey)) > 0)
    await pilot.pause()
    return [(key.action, key.key_display, bool(key.display))
            for key in footer.query(FooterKey)]


def status_line(screen: TraceScreen) -> str:
    return str(screen.query_one("#run-status").render())


async def test_hints_footer_and_help_name_the_remapped_keys(store: Store) -> None:
    """After `[keymap]` flag_mistake = "m", backtrack = "z", undo_label = "ctrl+z": the
    status line's hints name the new keys, the Footer shows them where x and b were, and the
    help screen lists them."""
    unlabelled = recorded_session(store, TASK, 0)
    labelled = recorded_session(store, TASK, 1)
    labelled.flag_mistake(2)
    keymap = {"flag_mistake": "m", "backtrack": "z", "undo_label": "ctrl+z"}

    async with make_app(session_id=unlabelled.id).run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        before = await footer_keys(pilot)

    app = make_app(Config(keymap=keymap), session_id=unlabelled.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        assert "Label the trace: m flags the first mistake, c says there is none." in \
            status_line(screen)
        after = await footer_keys(pilot)
        renamed = {"x": "m", "b": "z", "u": "^z"}
        # The same keys in the same order, the remapped ones shown (a wider "^z" may leave
        # a key at the end out for room).
        assert [(action, key) for action, key, _ in after] == \
            [(action, renamed.get(key, key)) for action, key, _ in before]
        assert {("flag", "m", True), ("backtrack", "z", True), ("undo", "^z", True)} <= \
            set(after)
        await pilot.press("question_mark")
        rows = {row.binding_id: row.keys for row in app.screen.rows}
        assert (rows["flag_mistake"], rows["backtrack"], rows["undo_label"]) == \
            ("m", "z", "^z")
        order = [row.binding_id for row in app.screen.rows]
        assert order.index("flag_mistake") < order.index("no_mistake") < \
            order.index("undo_label")  # each in its place, as declared

    app = make_app(Config(keymap=keymap), session_id=labelled.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        assert "; ^z undoes it, f asks a model." in status_line(screen)
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: status_line(screen).startswith("Label undone"))


# -- resume shows exactly what was saved

async def test_resume_shows_the_saved_steps_latencies_and_label(store: Store) -> None:
    app = make_app(task=TASK, question=1, wall_clock=True)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        await pilot.press("n", "n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 2 and not screen.view.running)
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 3 and not screen.view.running)
        assert screen.view.selected == 3  # the selection followed the new thoughts
        await pilot.press("k", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        session_id = screen.view.trace.id
        before = [(v.text, v.meta, v.status)
                  for v in finished_views(app)]
        title = str(screen.query_one("#title-bar .title-right").render())
    again = make_app(session_id=session_id, wall_clock=True)
    async with again.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        after = [(v.text, v.meta, v.status)
                 for v in finished_views(again)]
        assert after == before
        assert " s · " in before[0][1]  # latency and tokens were shown and came back
        assert str(screen.query_one("#title-bar .title-right").render()) == title
        assert screen.view.selected == 2  # the flagged thought


# -- what the stepper can report, fed straight to the screen

async def test_restart_failure_and_finish_reasons_are_shown(store: Store) -> None:
    trace = recorded_session(store, TASK, 0, steps=bundled_rows(TASK)[0].steps[:2])
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        screen.view.generation.on_event(StepStarted(3))
        await pilot.pause()
        screen.view.generation.on_event(StepDelta(3, "half a tho"))
        view = thought(screen, 3)
        assert view.text == "half a tho"
        screen.view.generation.on_event(StepRestarted(3, "rate limited [bold]", 1.0))
        await pilot.pause()
        assert view.text == ""
        assert "retrying (rate limited [bold])" in view.meta
        screen.view.generation.drop_unfinished()
        await pilot.pause()
        for reason, words in (("step_limit", "step limit"), ("empty", "returned nothing"),
                              ("truncated", "token limit")):
            screen.view.generation.on_event(TraceFinished(reason, [], None))
            assert words in str(screen.query_one("#run-status").render())
        assert isinstance(StepFinished, type)


async def test_a_failed_step_is_one_clear_message_and_no_half_thought(
    store: Store,
) -> None:
    from bbm_tui.core.llm import ModelSpec
    from bbm_tui.core.trace.session import NewTrace, TraceSession

    # A question the replay model does not know: its first step fails.
    trace = TraceSession.create(store, NewTrace("word_sorting", "zebra apple"), ModelSpec())
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        await pilot.press("n")
        await wait_for(pilot, lambda: not screen.view.running and "Thought 1 failed" in str(
            screen.query_one("#run-status").render()), timeout=20)
        status = str(screen.query_one("#run-status").render())
        assert "Thought 1 failed" in status and status.endswith(
            "another model. n tries it again, ^e changes the model.")
        assert screen.query_one("#run-status").has_class("-error")
        assert not list(screen.query(ThoughtView))
        assert store.branch(trace.id) == []
        assert not any(n.startswith("Thought 1 failed") for n in notifications(app))


async def test_streaming_follows_the_bottom_unless_the_reader_moved_up(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The keys are tested above; here the actions are called directly, because Pilot's
    # press waits for an idle CPU, which never comes while a trace streams.
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "1000")
    app = make_app(task="dyck_languages", question=52)  # 126 short thoughts, the longest
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        scroll = screen.query_one("#thoughts")
        screen.view.action_run()
        await wait_for(pilot, lambda: len(screen.view.trace.steps) >= 16, timeout=30)
        # Following: the view reaches the bottom once layout catches up (slower under load).
        await wait_for(
            pilot,
            lambda: scroll.max_scroll_y > 0 and scroll.scroll_y >= scroll.max_scroll_y - 3,
            timeout=10,
        )
        await pilot.pause(0.1)  # let the layout settle before the reader moves
        screen.view.action_first()  # the reader goes back to Thought 1
        assert screen.view.selected == 1
        steps = len(screen.view.trace.steps)
        await wait_for(pilot, lambda: len(screen.view.trace.steps) >= steps + 2, timeout=30)
        assert scroll.scroll_y == 0  # not yanked down
        # Back at the last thought, it follows again.
        screen.view.selected = len(screen.view.trace.steps) - 1
        screen.view.action_move(1)
        steps = len(screen.view.trace.steps)
        await wait_for(pilot, lambda: len(screen.view.trace.steps) >= steps + 2, timeout=30)
        await wait_for(pilot, lambda: scroll.scroll_y >= scroll.max_scroll_y - 3, timeout=10)
        screen.view.action_stop()


async def test_the_command_palette_offers_the_main_actions(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        commands = palette_commands(app, screen)
        for title in ("Step once", "Run to the answer", "Stop", "Flag the first mistake",
                      "No mistake", "Undo the label", "Copy the trace", "Find the mistake",
                      "Show the model's answer", "Gold label", "New session", "Sessions",
                      "Keys"):
            assert title in commands, title
        screen.view.selected = 2
        commands["Flag the first mistake"].callback()
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        # And the palette itself opens on ctrl+p and finds them by name.
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "CommandPalette"


async def test_the_docs_key_table_lists_every_key_of_the_main_screen(store: Store) -> None:
    """docs/screens/trace.md's key table names every binding id the trace screen's help
    lists, and no other."""
    import re
    from pathlib import Path

    page = Path(__file__).resolve().parents[2] / "docs" / "screens" / "trace.md"
    section = page.read_text(encoding="utf-8").split("\n## Keys\n", 1)[1].split("\n## ", 1)[0]
    documented = set()
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[2].startswith("`"):
            documented.update(re.findall(r"`([a-z_]+)`", cells[2]))
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        ids = {row.binding_id for row in app.help_rows() if row.binding_id}
    assert documented == ids


async def test_resume_scrolls_to_the_flagged_thought(store: Store) -> None:
    trace = recorded_session(store, "word_sorting", 3)  # 17 long thoughts
    trace.flag_mistake(12)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        await wait_for(pilot, lambda: screen.view.selected == 12)
        view = thought(screen, 12)
        pane = screen.query_one("#thoughts")
        assert pane.scroll_y > 0
        assert pane.region.contains_region(view.region)


async def test_a_labelled_finished_trace_says_so_on_resume(store: Store) -> None:
    trace = recorded_session(store, TASK, 0)
    trace.flag_mistake(2)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        status = str(screen.query_one("#run-status").render())
        assert status.startswith("The trace has its answer. Labelled: ✗ first mistake in "
                                 "Thought 2; u undoes it")
        await pilot.press("u")
        await wait_for(pilot, lambda: "Label undone" in
                       str(screen.query_one("#run-status").render()))


async def test_one_keys_entry_and_screenshots_in_the_data_folder(store: Store) -> None:
    from bbm_tui.ui.palette import screenshot_folder

    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        titles = [command.title.split(" · ")[0]
                  for command in app.get_system_commands(screen)]
        assert titles.count("Keys") == 1 and titles.count("Screenshot") == 1
        assert {"Backtrack", "Branches", "Compare branches", "Tokens"} <= set(titles)
        app.save_svg_now()
        saved = list(screenshot_folder().glob("*.svg"))
        assert len(saved) == 1 and saved[0].parent == store.path.parent / "screenshots"
        # Only its owner can read it, as every file the project writes (issue 34, item 13).
        assert saved[0].stat().st_mode & 0o777 == 0o600
        await pilot.pause()
        assert any(str(saved[0]) in note for note in notifications(app)), notifications(app)


async def test_presenter_mode_and_the_replay_pace(store: Store) -> None:
    from bbm_tui.core import llm

    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot, store)
        view = finished_views(app)[0]
        assert "recorded in the dataset" in view.meta
        await pilot.press("P")
        try:
            assert screen.has_class("-presenter") and view.meta == ""
            assert view.styles.margin.bottom == 1
        finally:
            await pilot.press("P")
        assert "recorded in the dataset" in view.meta
        before = llm.replay_pace()
        try:
            await pilot.press("p")
            assert llm.replay_pace() != before
            assert "The offline models now stream" in str(
                screen.query_one("#run-status").render())
        finally:
            llm.set_replay_pace(None)


async def test_a_bad_keymap_gets_one_message_naming_the_file_and_line(
    store: Store, tmp_path
) -> None:
    from bbm_tui.core.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('model = "replay/bbm"\n\n[keymap]\nstep = "m"\nno_such_action = "z"\n'
                    'flag_mistake = "n"\n')
    config = load_config(path)
    trace = recorded_session(store, TASK, 0)
    app = make_app(config, session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await wait_for(pilot, lambda: any("Keymap" in note for note in notifications(app)))
        [note] = [note for note in notifications(app) if note.startswith("Keymap")]
        assert f"{path}:5: [keymap] has no binding 'no_such_action'" in note
        # n was step's; step moved to m, so flag_mistake may have n: no conflict reported.
        assert "gives 'n'" not in note


async def test_a_key_given_to_two_actions_is_reported(store: Store, tmp_path) -> None:
    from bbm_tui.core.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('[keymap]\nflag_mistake = "r"\n')
    trace = recorded_session(store, TASK, 0)
    app = make_app(load_config(path), session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await wait_for(pilot, lambda: any("Keymap" in note for note in notifications(app)))
        note = next(note for note in notifications(app) if note.startswith("Keymap"))
        assert f"{path}:2: [keymap] gives 'r' to both 'run' and 'flag_mistake'" in note
        # Once, where a person meets it, by the names the help uses (issue 34, item 13: it
        # was said three times, as "TraceView on TraceScreen" and the like).
        assert note.count("gives 'r'") == 1, note
        assert "(on the side-by-side screen, the main screen)" in note
        assert "TraceView" not in note and "Screen" not in note


async def test_a_remapped_annotation_dialog_key_is_not_reported(store: Store, tmp_path) -> None:
    """Ids of the annotation dialogs (bbm_tui/ui/screens/annotate_dialogs.py) are known to the
    check; the unknown id beside them shows the check ran."""
    from bbm_tui.core.config import load_config

    path = tmp_path / "config.toml"
    path.write_text('[keymap]\nflag_unsure = "ctrl+y"\nguidelines_close = "escape,g"\n'
                    'annotate_highlight = "w"\nno_such_action = "z"\n')
    trace = recorded_session(store, TASK, 0)
    app = make_app(load_config(path), session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_recorded(pilot, store)
        await wait_for(pilot, lambda: any("Keymap" in note for note in notifications(app)))
        note = next(note for note in notifications(app) if note.startswith("Keymap"))
        assert f"{path}:5: [keymap] has no binding 'no_such_action'" in note
        for known in ("flag_unsure", "guidelines_close", "annotate_highlight"):
            assert known not in note


def test_every_screen_with_binding_ids_is_checked() -> None:
    """Every Screen of the UI (found by walking bbm_tui.ui, not by the list the check keeps)
    that declares bindings with an id is in the keymap check, with those ids."""
    import importlib
    import pkgutil

    from textual.binding import Binding
    from textual.screen import Screen

    import bbm_tui.ui
    from bbm_tui.ui.keymap import screen_bindings

    for info in pkgutil.walk_packages(bbm_tui.ui.__path__, prefix="bbm_tui.ui."):
        importlib.import_module(info.name)
    screens: dict[str, set[str]] = {}
    pending: list[type] = [Screen]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if not cls.__module__.startswith("bbm_tui.ui."):
            continue
        ids = {binding.id for binding in Binding.make_bindings(cls.__dict__.get("BINDINGS", []))
               if binding.id}
        if ids:
            screens[cls.__name__] = ids
    checked = screen_bindings()
    assert {"AnnotateScreen", "FlagDialog", "GuidelinesDialog", "TraceScreen"} <= set(screens)
    for name, ids in screens.items():
        assert name in checked, f"{name} is not in the keymap check"
        assert {binding.id for binding in checked[name]} == ids


@pytest.mark.parametrize("size", [(80, 24), SIZE])
async def test_a_dialog_footer_lists_the_dialog_keys_not_the_screen_behind(
    store: Store, size: tuple[int, int]
) -> None:
    """With the token view (l), help (?) or a confirmation open, the bottom row is the dialog's
    own footer, naming the keys that work in it, never the main screen's (f find, x first
    mistake), which do nothing under a dialog."""
    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=size) as pilot:
        screen = await open_recorded(pilot)
        behind = {key.action for key in screen.query_one(KeysFooter).query(FooterKey)}
        assert "find" in behind
        for key in ("l", "question_mark"):
            await pilot.press(key)
            await wait_for(pilot, lambda: app.screen is not screen)
            await pilot.pause()
            dialog = app.screen
            [footer] = dialog.query(KeysFooter)
            await wait_for(pilot, lambda footer=footer: footer.query(FooterKey))
            assert footer.region.bottom == size[1]  # over the screen behind's footer
            shown = {key.action for key in footer.query(FooterKey) if key.display}
            assert shown == {"close"}, shown  # no tokens to pick on a recorded thought
            # The dialog fits above it, its title in view (not scrolled away).
            title = dialog.query_one(".dialog-title")
            assert title.region.height and title.region.y >= 0
            assert dialog.query_one(".dialog").max_scroll_y == 0
            assert not shown & behind
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen)


async def test_another_key_forgets_a_typed_number(store: Store) -> None:
    """Digits then enter go to a thought. "2", then w (rewrite the selected thought), then esc
    left the 2 waiting behind the dialog, its "Go to Thought 2…" too, and "3" enter after
    read "There is no Thought 23". Any other key does its own thing and forgets the number."""
    from bbm_tui.ui.screens.backtrack import EditThoughtScreen

    trace = recorded_session(store, TASK, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_recorded(pilot)
        status = screen.query_one("#run-status")
        selected = screen.view.selected
        await pilot.press("2")
        assert "Go to Thought 2" in str(status.render())
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, EditThoughtScreen))
        assert app.screen.number == selected  # the selected one, as w says
        assert "Go to Thought" not in str(status.render())
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("3", "enter")
        assert screen.view.selected == 3 and "Thought 3 of" in str(status.render())
        await pilot.press("1", "j")  # j moves from 3; the 1 goes
        assert screen.view.selected == 4
        await pilot.press("enter")
        assert screen.view.selected == 4 and "no Thought" not in str(status.render())


def test_a_status_message_is_cut_with_an_ellipsis_never_its_instruction() -> None:
    from bbm_tui.ui.text import fit_message

    message = ("Thought 3 failed: replay/bbm cannot invent a new step: Thought 2 differs from "
               "the recorded trace of this question; choose another model to continue an "
               "edited trace")
    then = "n tries it again, ^e changes the model."
    fitted = fit_message(message, then, 44, 3)
    assert fitted.endswith(" " + then) and "…" in fitted
    assert fitted.startswith("Thought 3 failed: replay/bbm cannot")
    assert len(Content(fitted).wrap(44)) == 3
    assert fit_message("Short.", then, 44, 3) == f"Short. {then}"
    assert fit_message(message, "", 200, 3) == message
    # Where not even the message's first word fits beside the instruction (a side-by-side
    # column, 36 cells and 2 lines), the instruction alone, not "Finish…".
    then = "Label the trace: x flags the first mistake, c says there is none."
    assert fit_message("Finished with an answer ✗ not the target.", then, 36, 2) == then


@pytest.mark.parametrize("size", [(80, 24), SIZE])
async def test_the_header_parts_never_run_together(store: Store, size) -> None:
    """A long title is cut with an ellipsis, with a gap before the running figures."""
    trace = recorded_session(store, "multistep_arithmetic", 7,
                             name="a name long enough to need cutting at any width at all, "
                             "even the widest terminal of them all, really")
    app = make_app(session_id=trace.id)
    async with app.run_test(size=size) as pilot:
        screen = await open_recorded(pilot)
        screen.view.totals = Totals(1234, 10_000_000, 2_000_000, 12.5, 0)
        screen.show_title()
        await pilot.pause()
        left = screen.query_one("#title-bar .title-left")
        right = screen.query_one("#title-bar .title-right")
        assert left.region.right <= right.region.x
        shown = str(right.render())
        # The figures as they fit beside a long title (at most half the bar): without the
        # calls at 120 columns, the tokens in one sum at 80.
        assert shown == ("10,000,000 in / 0 cached / 2,000,000 out · $12.5000" if size == SIZE
                         else "12,000,000 tok, 0 cached · $12.5000")
        assert right.content_region.x - left.region.right >= 2
        # The model the next step uses stays whole; the app's name goes first.
        assert "multistep_arithmetic #7 — replay/bbm" in str(left.render())


async def test_the_header_says_where_the_question_came_from(store: Store) -> None:
    """A session `import` made from a file's row is not a typed question: its header said
    "word_sorting typed"."""
    from bbm_tui.core.annotation.export import import_rows

    [imported] = import_rows(store, "word_sorting", bundled_rows("word_sorting")[:1]).imported
    app = make_app(session_id=imported)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_recorded(pilot)
        title = str(screen.query_one("#title-bar .title-left").render())
        # Its row named no model: the next step is the configured model's, which the header
        # names (never "dataset", a name nothing can call).
        assert "word_sorting from a file — " in title and "typed" not in title
        assert "dataset" not in title


async def screenshot_from_the_palette(pilot) -> str:
    """ctrl+p, "Screenshot", enter: the SVG saved (read once its notification is up)."""
    from bbm_tui.ui.palette import screenshot_folder

    app = pilot.app
    before = set(screenshot_folder().glob("*.svg")) if screenshot_folder().exists() else set()
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: type(app.screen).__name__ == "CommandPalette")
    await pilot.press(*"Screenshot")
    await pilot.pause(0.3)
    await pilot.press("enter")
    await wait_for(pilot, lambda: any("Screenshot saved" in note
                                      for note in notifications(app)))
    [saved] = set(screenshot_folder().glob("*.svg")) - before
    return saved.read_text()


@pytest.mark.parametrize("where", ["new session", "main", "annotation"])
async def test_a_screenshot_from_the_palette_has_the_footer(store: Store, tmp_path,
                                                             where: str) -> None:
    """The palette closes just before the screenshot is taken, and the footer of the screen
    under it recomposes a frame later: the screenshot waits for it (it had an empty row)."""
    from bbm_tui.core.annotation.queue import read_queue_file
    from bbm_tui.ui.app import AnnotateRequest

    if where == "main":
        app = make_app(session_id=recorded_session(store, TASK, 0).id)
        key_text, screen_name = "first mistake", "TraceScreen"
    elif where == "annotation":
        path = tmp_path / "word_sorting.jsonl"
        path.write_text(bundled_rows("word_sorting")[0].to_line() + "\n")
        app = make_app(annotate=AnnotateRequest("alice", read_queue_file(path)))
        key_text, screen_name = "incorrect", "AnnotateScreen"
    else:
        app = make_app()
        key_text, screen_name = "type a question", "NewSessionScreen"
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == screen_name)
        await app.workers.wait_for_complete()
        await pilot.pause()
        svg = await screenshot_from_the_palette(pilot)
        assert key_text in svg_row(svg, SIZE[1] - 1)


def svg_row(svg: str, row: int) -> str:
    """The text of one row of a Rich SVG screenshot (its runs are clipped to their row)."""
    import html
    import re

    runs = re.findall(rf'clip-path="url\(#terminal-\d+-line-{row}\)">([^<]*)</text>', svg)
    return html.unescape("".join(runs)).replace("\xa0", " ")
