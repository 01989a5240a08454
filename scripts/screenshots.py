#!/usr/bin/env python3
"""Make SVG screenshots of the real app into docs/screenshots/ (run with the project's venv):

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

Each shot drives the app headless through Textual's Pilot, on the offline replay model, with a
throwaway session store, so the shots show what a person would see and touch nothing of theirs.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the backtracking shot drives the tests' local model server
SIZE = (120, 36)
SHOTS = ("new-session", "streaming", "flagged", "flagged-80x24", "finder", "sessions",
         "backtrack", "backtracked", "branch-tree", "compare", "tokens", "annotate",
         "adjudicate", "help-80x24", "messages", "dataset", "finder-vs-paper",
         "side-by-side-80x24", "side-by-side-250x50", "thinking-80x24", "thinking-250x50",
         "thinking-backtrack", "thinking-backtracked", "importance", "importance-80x24")


async def wait_for(pilot, condition: Callable[[], bool], timeout: float = 60.0) -> None:
    from textual.css.query import NoMatches

    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            if condition():
                return
        except NoMatches:
            pass
        if loop.time() > deadline:
            raise TimeoutError(f"the app never got to {condition}")
        await pilot.pause(0.05)


def still(pilot) -> None:
    """No blinking cursor and no toast in a screenshot."""
    pilot.app.clear_notifications()
    for widget in pilot.app.screen.query("Input, TextArea"):
        widget.cursor_blink = False


async def new_session(out: Path) -> None:
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.new_session import NewSessionScreen

    app = BbmApp(warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen)
                       and app.screen.query_one("#questions").option_count > 0)
        await pilot.press("down", "down", "down")
        still(pilot)
        await pilot.pause()
        app.save_screenshot("new-session.svg", str(out))


async def streaming(out: Path) -> None:
    """A trace mid-stream: a few thoughts done, the current one growing behind its cursor."""
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.trace import TraceScreen
    from bbm_tui.ui.widgets.thought import ThoughtView

    os.environ["BBM_TUI_REPLAY_TPS"] = "12"
    app = BbmApp(task="word_sorting", question=17)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("r")

        def mid_stream() -> bool:
            views = [v for v in screen.query(ThoughtView) if v.streaming]
            return len(screen.view.trace.steps) >= 3 and bool(views) and len(views[0].text) > 60

        await wait_for(pilot, mid_stream, timeout=120)
        still(pilot)
        app.save_screenshot("streaming.svg", str(out))
        await pilot.press("escape")


async def flagged(out: Path) -> None:
    """A whole generated trace with its first mistake flagged: later thoughts dimmed."""
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = BbmApp(task="tracking_shuffled_objects", question=0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        await pilot.press("home", "j", "j", "j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await pilot.pause(0.2)
        still(pilot)
        app.save_screenshot("flagged.svg", str(out))


SIDE_BY_SIDE = dict(task="tracking_shuffled_objects", question=3)  # the README's demo


def side_by_side_app():  # type: ignore[no-untyped-def]
    from bbm_tui.core.types import ModelSpec
    from bbm_tui.ui.app import BbmApp

    return BbmApp(models=[ModelSpec("replay/bbm"), ModelSpec("solver/bbm")], **SIDE_BY_SIDE)


async def side_by_side_small(out: Path) -> None:
    """replay/bbm beside solver/bbm at 80x24, mid-stream: both columns streaming Thought 6,
    the line under them saying where their traces part."""
    from bbm_tui.ui.screens.side_by_side import SideBySideScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "12"
    app = side_by_side_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen))
        screen = app.screen
        await pilot.press("r")

        def mid_stream() -> bool:
            streaming = all(len(column.trace.steps) == 5 and column.view.thoughts.streaming
                            is not None and len(column.view.thoughts.streaming.text) > 30
                            for column in screen.columns)
            # and levelled: each streaming thought starts on one screen row (the columns are
            # levelled five times a second while they stream).
            return streaming and len({column.view.thoughts.streaming.region.y
                                      for column in screen.columns}) == 1


        await wait_for(pilot, mid_stream, timeout=120)
        still(pilot)
        app.save_screenshot("side-by-side-80x24.svg", str(out))
        await pilot.press("escape")


async def side_by_side_wide(out: Path) -> None:
    """The same at 250x50, both finished: the recording's Thought 5 flagged as its first
    mistake and its wrong answer beside the solver's right one."""
    from bbm_tui.ui.screens.side_by_side import SideBySideScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = side_by_side_app()
    async with app.run_test(size=(250, 50)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen))
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: all(column.trace.finished and not column.view.running
                                          for column in screen.columns))
        await pilot.press("5", "enter", "x")
        await wait_for(pilot, lambda: screen.columns[0].trace.mistake_number == 5)
        await pilot.pause(0.3)
        still(pilot)
        app.save_screenshot("side-by-side-250x50.svg", str(out))


THINKING = dict(task="multistep_arithmetic", question=4)  # the README's thinking demo


async def thinking_small(out: Path) -> None:
    """solver/thinking at 80x24 (`bbm-tui --model solver/thinking --mode thinking`): its
    reasoning streaming in as numbered thoughts, the pane saying what they are cut from."""
    from bbm_tui.core.config import Config
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "12"
    app = BbmApp(Config(model="solver/thinking", mode="thinking"), **THINKING)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("r")

        def mid_stream() -> bool:
            streaming = screen.view.thoughts.streaming
            return (len(screen.view.trace.steps) >= 3 and streaming is not None
                    and len(streaming.text) > 40)

        await wait_for(pilot, mid_stream, timeout=120)
        still(pilot)
        app.save_screenshot("thinking-80x24.svg", str(out))
        await pilot.press("escape")


async def thinking_wide(out: Path) -> None:
    """solver/thinking beside solver/bbm at 250x50, both finished: the thinking trace's slip
    (Thought 6) flagged, the task verifier's marks on each thought of both columns."""
    from bbm_tui.core.config import Config
    from bbm_tui.core.types import ModelSpec
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.side_by_side import SideBySideScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = BbmApp(Config(model="solver/thinking", mode="thinking", verify_live=True),
                 models=[ModelSpec("solver/thinking", mode="thinking"), ModelSpec("solver/bbm")],
                 **THINKING)
    async with app.run_test(size=(250, 50)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen))
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: all(column.trace.finished and not column.view.running
                                          for column in screen.columns))
        await pilot.press("6", "enter", "x")
        await wait_for(pilot, lambda: screen.columns[0].trace.mistake_number == 6)
        await pilot.pause(0.3)
        still(pilot)
        app.save_screenshot("thinking-250x50.svg", str(out))


async def importance(out: Path) -> None:
    """Each thought's importance (I) on a thinking trace of a model scripted on the local
    llama-server (tests/importance_scenario.py: its answers depend on the thoughts kept, so
    the shot needs no key): every rollout in, at 120x36 and 80x24."""
    from tests.importance_scenario import script
    from tests.llama_server import FakeLlamaServer

    server = FakeLlamaServer()
    server.start()
    try:
        script(server)
        await importance_shot(server, "importance", SIZE, out)
        await importance_shot(server, "importance-80x24", (80, 24), out)
    finally:
        server.stop()


async def importance_shot(server, name: str, size: tuple[int, int], out: Path) -> None:  # type: ignore[no-untyped-def]
    """One shot, on a session of its own (none of its rollouts done yet)."""
    from bbm_tui.core.config import Config
    from bbm_tui.core.store import Store
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.importance import ImportanceScreen, RolloutsDialog
    from bbm_tui.ui.screens.trace import TraceScreen
    from tests.importance_scenario import MODEL, STEPS, thinking_trace

    with Store.open() as store:
        trace = await thinking_trace(store, server)
    app = BbmApp(Config(model=MODEL, api_base=server.base_url, mode="thinking"),
                 session_id=trace.id)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and len(app.screen.view.trace.steps) == len(STEPS))
        await pilot.press("I")
        await wait_for(pilot, lambda: isinstance(app.screen, RolloutsDialog))
        view = app.screen_stack[-2]
        assert isinstance(view, ImportanceScreen)
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(view.rows) == 36 and not view.running)
        await pilot.pause(0.5)
        still(pilot)
        app.save_screenshot(f"{name}.svg", str(out))

async def thinking_backtrack(out: Path) -> None:
    """`b` on solver/thinking's slip (Thought 6 of the demo), offline: 8 samples each from the
    raw reasoning before it, the right step starred; then the new branch, streamed to the
    answer. The samples are drawn at random: `b` again until one is the right step."""
    from bbm_tui.core.config import Config
    from bbm_tui.core.llm.offline.continuation import HESITATIONS
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.backtrack import CandidatesScreen
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = BbmApp(Config(model="solver/thinking", mode="thinking"), **THINKING)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        view = screen.view
        await pilot.press("r")
        await wait_for(pilot, lambda: view.trace.finished and not view.running)
        await pilot.press("6", "enter", "x")
        await wait_for(pilot, lambda: view.trace.mistake_number == 6)
        for _ in range(10):
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                           and app.screen.all_arrived)
            ready = app.screen.ready
            chosen = None if ready is None else ready.resample.chosen
            if chosen is not None and not ready.stored[chosen].text.startswith(HESITATIONS):
                break
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                           and not view.running)
        await pilot.pause(0.3)
        still(pilot)
        app.save_screenshot("thinking-backtrack.svg", str(out))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and view.trace.finished and not view.running)
        await pilot.pause(0.3)
        still(pilot)
        app.save_screenshot("thinking-backtracked.svg", str(out))


async def flagged_small(out: Path) -> None:
    """The same at 80x24, the smallest terminal the app is made for."""
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = BbmApp(task="tracking_shuffled_objects", question=0)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        await pilot.press("home", "j", "j", "j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await pilot.pause(0.2)
        still(pilot)
        app.save_screenshot("flagged-80x24.svg", str(out))


async def backtrack(out: Path) -> None:
    """The paper's second half: from the flagged mistake, 8 samples at temperature 1 (a model
    scripted on the local test server, so the shot needs no key), then the new branch."""
    from bbm_tui.core import llm
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import NewTrace, TraceSession
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.backtrack import CandidatesScreen
    from bbm_tui.ui.screens.trace import TraceScreen
    from tests.openai_server import FakeOpenAI
    from tests.test_backtrack import ORIGINAL, QUESTION, TARGET, responder

    server = FakeOpenAI().start()
    server.responder = with_alternatives(responder())
    try:
        with Store.open() as store:
            trace = TraceSession.create(
                store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                llm.ModelSpec("openai/local-model", server.base_url))
            trace.load_recorded(ORIGINAL)
            trace.flag_mistake(2)
        app = BbmApp(session_id=trace.id)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
            screen = app.screen
            await pilot.press("b")
            await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                           and app.screen.all_arrived)
            await pilot.pause(0.2)
            still(pilot)
            app.save_screenshot("backtrack.svg", str(out))
            await pilot.press("enter")
            await wait_for(pilot, lambda: screen.view.trace.answer == "4"
                           and not screen.view.running)
            await pilot.press("home", "j")
            await pilot.pause(0.2)
            still(pilot)
            app.save_screenshot("backtracked.svg", str(out))
            # A second branch by hand (w), then the views of branches and tokens.
            await pilot.press("w")
            await wait_for(pilot, lambda: app.screen.query("#edit-input"))
            app.screen.query_one("#edit-input").value = "2 + 2 = 22"
            await pilot.press("enter")
            await wait_for(pilot, lambda: not screen.view.running
                           and len(screen.view.trace.steps) >= 2
                           and screen.view.trace.texts[1] == "2 + 2 = 22")
            await pilot.press("t")
            await wait_for(pilot, lambda: app.screen.query("#branch-tree-view"))
            await pilot.pause(0.2)
            still(pilot)
            app.save_screenshot("branch-tree.svg", str(out))
            await pilot.press("escape")
            await pilot.press("home", "j", "less_than_sign")  # back to the backtracked branch
            await wait_for(pilot, lambda: screen.view.trace.texts[1] == "2 + 2 = 4")
            await pilot.press("v")
            await wait_for(pilot, lambda: app.screen.query("#compare"))
            await pilot.pause(0.2)
            still(pilot)
            app.save_screenshot("compare.svg", str(out))
            await pilot.press("escape")
            await pilot.press("l")
            await wait_for(pilot, lambda: app.screen.query("#tokens"))
            await pilot.press("right", "right", "a")  # the second "2", and its rivals
            await pilot.pause(0.2)
            still(pilot)
            app.save_screenshot("tokens.svg", str(out))
    finally:
        server.stop()


async def finder(out: Path) -> None:
    """A generated word-sorting trace judged by CoT step-level on the offline oracle, every
    step, beside the person's flag: the model's marks on the thoughts, its reasoning open on
    the thought it faults, and the agreement on the left (with the gold label shown, g)."""
    from textual.widgets import Checkbox

    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.dialogs import FindScreen
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = BbmApp(task="word_sorting", question=7)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        await pilot.press("home", "j", "j", "j", "x")  # the person flags Thought 4
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("down")  # CoT, step-level
        app.screen.query_one("#find-judge-all", Checkbox).value = True
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.finder is not None
                       and screen.view.finder.state == "finished" and not screen.view.finding)
        await pilot.press("e", "g")
        await wait_for(pilot, lambda: screen.query_one("#gold").display)
        await pilot.pause(0.2)
        still(pilot)
        await pilot.pause()
        app.save_screenshot("finder.svg", str(out))


async def sessions(out: Path) -> None:
    from bbm_tui.core import llm
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import NewTrace, TraceSession
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.new_session import NewSessionScreen
    from bbm_tui.ui.screens.sessions import SessionsScreen

    # Two labelled traces beside the ones the other shots made.
    with Store.open() as store:
        for task, index, label in (("dyck_languages", 7, 3), ("multistep_arithmetic", 11, None)):
            row = bundled_rows(task)[index]
            trace = TraceSession.create(
                store, NewTrace(task, row.input, row.target, index, row.mistake_index),
                llm.ModelSpec(),
            )
            trace.load_recorded(list(row.steps))
            if label is None:
                trace.mark_no_mistake()
            else:
                trace.flag_mistake(label)
    app = BbmApp(warm_up=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionsScreen)
                       and app.screen.query_one("#sessions-table").row_count >= 4)
        await pilot.press("down")
        still(pilot)
        await pilot.pause()
        app.save_screenshot("sessions.svg", str(out))


def _queue_file(folder: Path, task: str, count: int) -> Path:
    from bbm_tui.core.dataset import bundled_rows

    path = folder / f"{task}.jsonl"
    path.write_text("".join(row.to_line() + "\n" for row in bundled_rows(task)[:count]))
    return path


async def annotate(out: Path) -> None:
    """The queue: one trace submitted (its gold on the left), the next half judged, a word
    highlighted."""
    from bbm_tui.core.annotation.queue import read_queue_file
    from bbm_tui.ui.app import AnnotateRequest, BbmApp

    with tempfile.TemporaryDirectory() as folder:
        path = _queue_file(Path(folder), "word_sorting", 20)
        app = BbmApp(warm_up=False, wall_clock=False,
                     annotate=AnnotateRequest("alice", read_queue_file(path)))
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
            for key in ("c", "x", "enter", "c", "c"):
                await pilot.press(key)
                await app.workers.wait_for_complete()
            await pilot.press("slash")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "HighlightDialog")
            await pilot.press(*"holden", "enter")
            await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen")
            await app.workers.wait_for_complete()
            still(pilot)
            await pilot.pause()
            app.save_screenshot("annotate.svg", str(out))


async def adjudicate(out: Path) -> None:
    """Two annotators apart on a trace: their first mistakes side by side."""
    from bbm_tui.core.annotation import protocol
    from bbm_tui.core.annotation.queue import AnnotationQueue, read_queue_file
    from bbm_tui.core.store import Store
    from bbm_tui.ui.app import AnnotateRequest, BbmApp

    with tempfile.TemporaryDirectory() as folder:
        path = _queue_file(Path(folder), "multistep_arithmetic", 1)
        with Store.open() as store:
            for name, label in (("alice", 1), ("bob", 2), ("carol", None)):
                queue = AnnotationQueue(store, name, read_queue_file(path))
                for mark in protocol.judged_for(label, len(queue.current.row.steps)):
                    queue.judge(mark == protocol.CORRECT)
                queue.submit()
    app = BbmApp(warm_up=False, wall_clock=False, annotate=AnnotateRequest("", adjudicate=True))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AdjudicateScreen"
                       and bool(app.screen.query(".a-thought")))
        await app.workers.wait_for_complete()
        still(pilot)
        await pilot.pause()
        app.save_screenshot("adjudicate.svg", str(out))


async def help_small(out: Path) -> None:
    """The keys (`?`) on a finished trace at 80x24: each key's name and id over its whole
    description."""
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.dialogs import HelpScreen
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    app = BbmApp(task="word_sorting", question=3)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.pause(0.2)
        still(pilot)
        app.save_screenshot("help-80x24.svg", str(out))


async def messages(out: Path) -> None:
    """The messages screen (M): every notice, warning and error of the session, whole and
    newest first; here a step that failed (cut in the status line) and two notices."""
    from bbm_tui.core.llm import ModelSpec
    from bbm_tui.core.store import Store
    from bbm_tui.core.trace.session import NewTrace, TraceSession
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.dialogs import MessagesScreen
    from bbm_tui.ui.screens.trace import TraceScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    with Store.open() as store:
        trace = TraceSession.create(store, NewTrace("word_sorting", "zebra apple mango"),
                                    ModelSpec())
        trace.load_recorded(["z comes after a and m.", "Now the list is sorted."])
    app = BbmApp(session_id=trace.id, warm_up=False, wall_clock=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        screen = app.screen
        await pilot.press("n")
        await wait_for(pilot, lambda: screen.query_one("#run-status").has_class("-error"))
        await pilot.press("Q", "Y")
        await pilot.pause(0.2)
        still(pilot)
        await pilot.press("M")
        await wait_for(pilot, lambda: isinstance(app.screen, MessagesScreen))
        await pilot.pause(0.2)
        still(pilot)
        app.save_screenshot("messages.svg", str(out))


async def dataset(out: Path) -> None:
    """The dataset view over the whole bundled dataset: where the first mistakes fall in the
    traces of each task, here Dyck languages, by place in the trace."""
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.tasks import TASK_NAMES
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.dataset import DatasetScreen

    app = BbmApp(warm_up=False, wall_clock=False)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "NewSessionScreen")
        await app.push_screen(DatasetScreen([bundled_path(task) for task in TASK_NAMES],
                                            name="the bundled dataset (5 files)",
                                            chart="first mistake: place", task="dyck_languages"))
        await wait_for(pilot, lambda: app.screen.summary is not None)
        await pilot.pause(0.3)
        still(pilot)
        app.save_screenshot("dataset.svg", str(out))


async def finder_vs_paper(out: Path) -> None:
    """A finder's location accuracy per task beside GPT-4's in the paper's Table 4: the
    simulated reward model (right 65% of the time), direct step-level, 100 traces a task."""
    from bbm_tui.cli import main as command
    from bbm_tui.core.dataset import bundled_path
    from bbm_tui.core.tasks import TASK_NAMES
    from bbm_tui.ui.app import BbmApp
    from bbm_tui.ui.screens.dataset import DatasetScreen

    os.environ["BBM_TUI_REPLAY_TPS"] = "0"
    with tempfile.TemporaryDirectory() as folder:
        preds = Path(folder) / "preds.jsonl"
        arguments = ["find", "--model", "simulated/rm-0.65", "--method", "direct-step",
                     "--input", *(str(bundled_path(task)) for task in TASK_NAMES),
                     "--limit", "100", "--out", str(preds), "--no-progress"]
        # In a thread: the command runs an event loop of its own.
        assert await asyncio.to_thread(command, arguments) == 0
        app = BbmApp(warm_up=False, wall_clock=False)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: type(app.screen).__name__ == "NewSessionScreen")
            await app.push_screen(DatasetScreen([preds], chart="finder vs the paper"))
            await wait_for(pilot, lambda: app.screen.summary is not None)
            await pilot.pause(0.3)
            still(pilot)
            app.save_screenshot("finder-vs-paper.svg", str(out))


def with_alternatives(respond: Callable) -> Callable:
    """The scripted model also ranks the tokens it weighed at each place (top_logprobs), as
    real servers do when asked, for the token view's alternatives (a)."""
    rivals = ["4", "5", "22", "four", " =", "\n"]

    def weighed(piece: str, logprob: float) -> list[tuple[str, float]]:
        others = [rival for rival in rivals if rival != piece.strip()]
        return [(piece, logprob), *((rival, logprob - 1.2 * (rank + 1) - 0.3 * rank * rank)
                                    for rank, rival in enumerate(others))]

    def respond_with_alternatives(path: str, body: dict):
        reply = respond(path, body)
        reply.alternatives = weighed
        return reply

    return respond_with_alternatives


def preserve_spaces(svg: Path) -> None:
    """Keep the indents when the SVG is drawn by librsvg (rsvg-convert), which otherwise drops
    the leading no-break spaces of each text run; browsers draw it the same either way."""
    text = svg.read_text(encoding="utf-8")
    marker = '<svg class="rich-terminal"'
    if "xml:space" not in text:
        svg.write_text(text.replace(marker, '<svg xml:space="preserve" class="rich-terminal"', 1),
                       encoding="utf-8")


async def main(out: Path, only: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for shot in (new_session, streaming, flagged, flagged_small, finder, sessions, backtrack,
                 annotate, adjudicate, help_small, messages, dataset, finder_vs_paper,
                 side_by_side_small, side_by_side_wide, thinking_small, thinking_wide,
                 thinking_backtrack, importance):
        if only and shot.__name__ not in only:
            continue
        await shot(out)
        print(f"{shot.__name__}: done", file=sys.stderr)
    for name in SHOTS:
        if (out / f"{name}.svg").exists():
            preserve_spaces(out / f"{name}.svg")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--only", nargs="+", default=[], metavar="SHOT",
                        help="make only these (the functions' names: dataset finder_vs_paper)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bbm-tui-shots-") as home:
        os.environ["BBM_TUI_HOME"] = home
        os.environ["BBM_TUI_CONFIG"] = str(Path(home) / "config.toml")  # defaults, not yours
        asyncio.run(main(args.out.resolve(), args.only))
        for name in SHOTS:
            print(args.out / f"{name}.svg")
