"""Several models on one question, side by side, in the app: each model's trace a column (a
TraceView on its model branch), streaming at once from two local servers at different speeds,
one failing mid-trace and saying why in its own column, one right and one wrong; the keys of a
single trace in each column; the screen's own keys on all of them; a session of three models
reopened as it was, its streaming column going on; columns that do not fit one key away."""

from __future__ import annotations

import threading
from itertools import pairwise

import pytest
from textual.pilot import Pilot
from ui_helpers import make_app, steady_frame, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import StepFinished
from bbm_tui.core.records import ModelBranchState
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace
from bbm_tui.core.trace.side_by_side import SideBySide
from bbm_tui.ui.screens.model_column import ModelColumn
from bbm_tui.ui.screens.new_session import NewSessionScreen
from bbm_tui.ui.screens.side_by_side import SideBySideScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.fake_server import dataset_trace_responder, solver_responder
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

TASK = "tracking_shuffled_objects"
QUESTION = 3  # the recording goes wrong at Thought 5 (answer (E)); the solver does not ((B))
OFFLINE = [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm")]


def question() -> NewTrace:
    row = bundled_rows(TASK)[QUESTION]
    return NewTrace(TASK, row.input, row.target, QUESTION, row.mistake_index)


def paced(responder, chunk_delay_s: float, *, drop_at: int | None = None,
          hold: threading.Event | None = None, hold_at: int = 1):
    """Replies streamed word by word `chunk_delay_s` apart; with `drop_at`, the stream of
    that thought and of every one after it is cut (retried, then given up); with `hold`,
    Thought `hold_at` is held until the test sets it (both columns out at once, however
    slowly one of them starts; or both still out when the test acts on them, however fast
    the other ran)."""
    def respond(path: str, body: dict) -> Reply:
        reply = responder(path, body)
        reply.chunk_delay_s = chunk_delay_s
        if hold is not None and body_thought(body) == hold_at:
            reply.hold, reply.hold_s = hold, 120.0
        if drop_at is not None and body_thought(body) >= drop_at:
            reply.drop_after_chunks = 2
        return reply
    return respond


def body_thought(body: dict) -> int:
    """The number of the thought a generation prompt asks for."""
    from bbm_tui.core.llm.offline.replay import parse_generation_prompt
    from tests.fake_server import last_prompt

    request = parse_generation_prompt(last_prompt(body))
    return len(request.steps) + 1 if request is not None else 0


def columns(app) -> list[ModelColumn]:
    screen = app.screen
    assert isinstance(screen, SideBySideScreen)
    return screen.columns


def tops(column: ModelColumn) -> dict[int, int]:
    """Where each finished thought starts in its column's scrolling pane."""
    return {view.number: view.virtual_region.y for view in column.view.thoughts.views()}


async def open_race(pilot: Pilot, store: Store, specs: list[llm.ModelSpec],
                    session_id: int | None = None) -> SideBySideScreen:
    app = pilot.app
    if session_id is None:
        session_id = SideBySide.create(store, question(), specs).id
    app.open_session(session_id)
    await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen)
                   and app.screen.is_mounted, timeout=30)
    screen = app.screen
    assert isinstance(screen, SideBySideScreen)
    await wait_for(pilot, lambda: all(c.view.is_mounted for c in screen.columns))
    return screen


def finished_runs(screen: SideBySideScreen) -> bool:
    return not any(column.view.running for column in screen.columns)


async def raced_offline(pilot: Pilot, store: Store) -> SideBySideScreen:
    """A race of the offline models opened, run with `r`, and both columns at their end."""
    screen = await open_race(pilot, store, OFFLINE)
    await pilot.press("r")
    await wait_for(pilot, lambda: all(c.trace.finished for c in screen.columns)
                   and finished_runs(screen), timeout=60)
    return screen


async def test_two_servers_race_one_fails_mid_trace_and_the_other_answers(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    """r: both columns stream at once (both show a thought growing at one moment); the slow
    one's stream is cut at Thought 3 and its column says why and that it failed, keeping its
    two thoughts; the fast one answers right; the headers say each state and what it cost;
    the thoughts sit level by number."""
    both_out = threading.Event()
    openai_server.responder = paced(dataset_responder, 0.02, drop_at=3, hold=both_out)
    second_openai_server.responder = paced(solver_responder, 0.002, hold=both_out)
    specs = [llm.ModelSpec("openai/recorded", openai_server.base_url),
             llm.ModelSpec("openai/solver", second_openai_server.base_url)]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, specs)
        slow, fast = screen.columns
        assert slow.title.plain.removeprefix("▸ ").startswith("1 openai/recorded")
        assert "waiting" in slow.title.plain
        await pilot.press("r")
        # Both columns' Thought 1 is out at once (held at the servers until both asked).
        await wait_for(pilot, lambda: slow.view.thoughts.streaming is not None
                       and fast.view.thoughts.streaming is not None
                       and openai_server.requests and second_openai_server.requests,
                       timeout=30)
        assert "streaming" in slow.title.plain and "streaming" in fast.title.plain
        both_out.set()
        await wait_for(pilot, lambda: finished_runs(screen), timeout=60)
        await pilot.pause()
        # The fast model: right, answered.
        assert fast.trace.answer == "(B)" and fast.trace.correct is True
        assert "answered" in fast.title.plain
        assert "7 thoughts" in fast.figures
        # The slow one: its two thoughts kept, its failure said in its own column.
        assert len(slow.trace.steps) == 2 and slow.trace.answer is None
        assert "failed" in slow.title.plain
        status = str(slow.view.query_one("#run-status").render())
        assert "Thought 3 failed" in status
        assert "failed" not in str(fast.view.query_one("#run-status").render())
        branch = store.model_branches(screen.race.id)[0]
        assert branch.state == ModelBranchState.FAILED and branch.error
        # Level rows: Thoughts 1 and 2 start at one height in both columns.
        await wait_for(pilot, lambda: all(tops(slow)[n] == tops(fast)[n] for n in (1, 2)))

        # n goes on in the column without an answer only (the server now answers it).
        openai_server.responder = paced(dataset_responder, 0.0)
        calls = len(second_openai_server.requests)
        await pilot.press("n")
        await wait_for(pilot, lambda: len(slow.trace.steps) == 3 and finished_runs(screen),
                       timeout=30)
        assert len(second_openai_server.requests) == calls
        await pilot.press("r")
        await wait_for(pilot, lambda: slow.trace.finished and finished_runs(screen),
                       timeout=30)
        assert (slow.trace.answer, slow.trace.correct) == ("(E)", False)
        assert "answered" in slow.title.plain
        await wait_for(pilot, lambda: all(tops(slow)[n] == tops(fast)[n]
                                          for n in range(1, 8)))
        assert "✗ not the target" in str(slow.view.query_one("#answer").render())
        assert "✓ matches the target" in str(fast.view.query_one("#answer").render())


async def test_one_call_for_many_steps_in_every_column(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    """With `one_call` on, r in a session of two models makes one call a column: each server
    is asked once, each column's thoughts all come from its one call, level by number."""
    openai_server.responder = paced(dataset_trace_responder, 0.002)
    second_openai_server.responder = paced(dataset_trace_responder, 0.002)
    specs = [llm.ModelSpec("openai/first", openai_server.base_url),
             llm.ModelSpec("openai/second", second_openai_server.base_url)]
    app = make_app(Config(one_call=True))
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, specs)
        await pilot.press("r")
        # The first call imports litellm (seconds, more on a loaded machine).
        await wait_for(pilot, lambda: all(column.trace.finished for column in screen.columns)
                       and finished_runs(screen), timeout=60)
        recorded = bundled_rows(TASK)[QUESTION].steps
        for column, server in zip(screen.columns, (openai_server, second_openai_server),
                                  strict=True):
            assert column.trace.texts == recorded
            assert column.trace.answer == "(E)"
            [request] = server.requests
            assert "stop" not in request.body
        for branch in store.model_branches(screen.race.id):
            steps = [step for step in store.steps_of(screen.race.id)
                     if step.model_branch_id == branch.id]
            assert len(steps) == len(recorded)
            assert len({step.one_call for step in steps}) == 1 and steps[0].one_call
        assert store.totals(screen.race.id).calls == 2
        first, second = screen.columns
        await wait_for(pilot, lambda: all(tops(first)[n] == tops(second)[n]
                                          for n in range(1, len(recorded) + 1)))


async def test_the_keys_of_a_trace_act_in_the_focused_column(store: Store) -> None:
    """x, c, u, e, l, v, t, b, w: each in the column with the focus only; tab, the arrows and
    h move between columns, keeping the thought number selected."""
    from bbm_tui.ui.dialogs import FindScreen
    from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
    from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
    from bbm_tui.ui.screens.compare import CompareScreen
    from bbm_tui.ui.screens.tokens import TokenScreen

    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        replay, solver = screen.columns
        await pilot.press("r")
        await wait_for(pilot, lambda: replay.trace.finished and solver.trace.finished
                       and finished_runs(screen), timeout=60)
        assert screen.focused is replay.view
        # x in the first column: its thought flagged, not the other's.
        await pilot.press("5", "enter", "x")
        await wait_for(pilot, lambda: replay.trace.mistake_number == 5)
        assert solver.trace.label is None
        # tab: the second column, Thought 5 still selected there.
        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.focused is solver.view)
        assert solver.view.selected == 5
        assert "1 replay/bbm" in replay.title.plain
        await pilot.press("c")
        await wait_for(pilot, lambda: solver.trace.no_mistake)
        assert replay.trace.mistake_number == 5
        await pilot.press("u")
        await wait_for(pilot, lambda: solver.trace.label is None)
        assert replay.trace.mistake_number == 5
        # The arrows and h move back and forth.
        await pilot.press("left")
        await wait_for(pilot, lambda: screen.focused is replay.view)
        await pilot.press("right")
        await wait_for(pilot, lambda: screen.focused is solver.view)
        await pilot.press("h")
        await wait_for(pilot, lambda: screen.focused is replay.view)
        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.focused is solver.view)
        # l: the focused column's thought, token by token.
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        # v: the branch beside the other model's.
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert (compare.left_is, compare.right_is) == (
            "a model's own trace · solver/bbm", "a model's own trace · replay/bbm")
        assert not compare.diff.shared  # each model's trace from its first thought
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        # t, then enter on the other model's branch: its column takes the focus.
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchTreeScreen))
        # The replay's trace is one of the two first segments (which one: whichever model
        # stored its first thought first).
        first_rows = [root.end.id for root in app.screen.roots]
        moves = first_rows.index(replay.trace.steps[-1].id)
        await pilot.press("home", *(["down"] * moves), "enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: screen.focused is replay.view)
        assert replay.trace.texts == bundled_rows(TASK)[QUESTION].steps
        assert solver.trace.answer == "(B)"
        # f: the mistake finder of the focused column (the replay's gold finder).
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: replay.view.finder is not None
                       and not replay.view.finding, timeout=30)
        assert solver.view.finder is None
        # e: the finder's answer under its verdict, in that column.
        await pilot.press("1", "enter", "e")
        await wait_for(pilot, lambda: replay.view.finder_answer_open or any(
            view.expanded for view in replay.view.thoughts.views()))
        assert not any(view.expanded for view in solver.view.thoughts.views())
        await pilot.press("5", "enter")
        # b in the replay column: backtracking from its flagged Thought 5 (solver/bbm's
        # samples), a new branch in that column only.
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: replay.trace.finished and not replay.view.running
                       and replay.trace.steps[4].origin == "backtrack", timeout=30)
        assert solver.trace.answer == "(B)" and len(solver.trace.steps) == 7
        # w in the solver column: a rewrite there.
        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.focused is solver.view)
        await pilot.press("7", "enter", "w")
        await wait_for(pilot, lambda: isinstance(app.screen, EditThoughtScreen))
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
    # Each column's work is stored on its own model branch.
    replay_branch, solver_branch = store.model_branches(screen.race.id)
    kinds = {step.model_branch_id for step in store.steps_of(screen.race.id)}
    assert kinds == {replay_branch.id, solver_branch.id}


async def test_n_and_esc_act_on_every_column_and_presenter_mode_on_all(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    # Thought 3 is held at both servers until esc has stopped both columns: neither can
    # have answered by then, however slowly the app runs.
    held = threading.Event()
    openai_server.responder = paced(dataset_responder, 0.01, hold=held, hold_at=3)
    second_openai_server.responder = paced(solver_responder, 0.01, hold=held, hold_at=3)
    specs = [llm.ModelSpec("openai/recorded", openai_server.base_url),
             llm.ModelSpec("openai/solver", second_openai_server.base_url)]
    app = make_app()
    try:
        await _n_and_esc_on_every_column(app, store, specs, openai_server,
                                         second_openai_server)
    finally:
        held.set()


async def _n_and_esc_on_every_column(app, store: Store, specs: list[llm.ModelSpec],
                                     *servers: FakeOpenAI) -> None:
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, specs)
        first, second = screen.columns
        await pilot.press("n")
        await wait_for(pilot, lambda: [len(c.trace.steps) for c in screen.columns] == [1, 1]
                       and finished_runs(screen), timeout=60)
        assert "waiting" in first.title.plain
        await pilot.press("r")
        # Both at Thought 3, held at their servers.
        await wait_for(pilot, lambda: all(
            len(c.trace.steps) == 2 and c.view.running for c in screen.columns)
            and all(len(server.requests) >= 3 for server in servers), timeout=60)
        await pilot.press("escape")
        await wait_for(pilot, lambda: finished_runs(screen))
        await wait_for(pilot, lambda: all(
            b.state == ModelBranchState.STOPPED
            for b in store.model_branches(screen.race.id)))
        assert "stopped" in first.title.plain and "stopped" in second.title.plain
        # P: presenter mode in every column.
        await pilot.press("P")
        await wait_for(pilot, lambda: first.view.presenter and second.view.presenter)
        assert all(view.presenter for column in screen.columns
                   for view in column.view.thoughts.views())
        await pilot.press("P")
        await wait_for(pilot, lambda: not first.view.presenter and not second.view.presenter)


async def test_a_session_of_three_models_reopens_as_it_was(store: Store) -> None:
    """Three columns left: one answered and labelled, one stopped by the person, one
    streaming when the app went (its state still says so). Opened again: the same models in
    the same columns, the same thoughts and labels and states; the streaming one goes on to
    its answer by itself, the others stay as they were."""
    from bbm_tui.core.trace.session import on_the_loop

    specs = [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm"),
             llm.ModelSpec("solver/bbm", mode="completion")]
    race = SideBySide.create(store, question(), specs, store_work=on_the_loop)

    async def work() -> None:
        async for _ in race.race(columns=[0]):
            pass
        async for _ in race.race(columns=[1], max_new_steps=2):
            pass
        seen = 0
        async for event in race.columns[2].generate():
            if isinstance(event, StepFinished):
                seen += 1
                if seen == 3:
                    return

    await work()
    race.columns[1].mark_stopped()
    race.columns[0].flag_mistake(5)
    store.release_claim(race.id, race.claim.owner)
    app = make_app()
    async with app.run_test(size=(160, 45)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, specs, session_id=race.id)
        first, second, third = screen.columns
        assert [c.trace.spec.model for c in screen.columns] == [
            "replay/bbm", "solver/bbm", "solver/bbm"]
        assert third.trace.spec.mode == "completion"
        assert first.trace.mistake_number == 5 and second.trace.label is None
        assert "answered" in first.title.plain
        assert "stopped" in second.title.plain
        assert len(second.trace.steps) == 2
        await wait_for(pilot, lambda: third.trace.finished and finished_runs(screen),
                       timeout=60)
        assert third.trace.answer == "(B)" and len(third.trace.steps) == 7
        assert len(second.trace.steps) == 2  # not resumed: the person stopped it
        assert [s.number for s in third.trace.steps] == list(range(1, 8))
    assert [b.state for b in store.model_branches(race.id)] == [
        "answered", "stopped", "answered"]


async def test_at_80_columns_two_models_show_and_the_others_are_one_key_away(
    store: Store,
) -> None:
    specs = [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm"),
             llm.ModelSpec("solver/bbm", mode="completion")]
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, specs)
        shown = [column.display for column in screen.columns]
        assert shown == [True, True, False]
        more = str(screen.query_one("#sbs-summary").render())
        assert "Models 1-2 of 3 on show" in more and "tab" in more
        await pilot.press("tab", "tab")
        await wait_for(pilot, lambda: screen.focused is screen.columns[2].view)
        assert [column.display for column in screen.columns] == [False, True, True]
        assert "Models 2-3 of 3" in str(screen.query_one("#sbs-summary").render())
        await pilot.press("tab")  # round to the first again
        await wait_for(pilot, lambda: screen.focused is screen.columns[0].view)
        assert [column.display for column in screen.columns] == [True, True, False]
        # Wider: every column.
        await pilot.resize_terminal(250, 50)
        await wait_for(pilot, lambda: all(column.display for column in screen.columns))
        assert not screen.query_one("#sbs-summary").display


async def test_m_on_a_trace_adds_a_model_and_the_session_goes_side_by_side(
    store: Store,
) -> None:
    from bbm_tui.ui.dialogs import ModelScreen

    app = make_app(task=TASK, question=QUESTION)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen), timeout=30)
        trace_screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: trace_screen.view.trace.finished
                       and not trace_screen.view.running, timeout=60)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen), timeout=30)
        screen = app.screen
        first, second = screen.columns
        assert first.trace.spec.model == "replay/bbm" and second.trace.spec.model == \
            "solver/bbm"
        assert first.trace.answer == "(E)" and not second.trace.steps
        await pilot.press("r")  # only the column without an answer runs
        await wait_for(pilot, lambda: second.trace.finished and finished_runs(screen),
                       timeout=30)
        assert second.trace.answer == "(B)"
        # m here: a third model.
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        dialog = app.screen
        from textual.widgets import Input

        dialog.query_one("#model", Input).value = "replay/bbm"
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(screen.columns) == 3 and app.screen is screen)
        await wait_for(pilot, lambda: screen.focused is screen.columns[2].view)
        assert screen.columns[2].title.plain.startswith("▸ 3 replay/bbm")
    assert [b.model for b in store.model_branches(screen.race.id)] == [
        "replay/bbm", "solver/bbm", "replay/bbm"]


async def test_the_new_session_screen_sets_models_beside_the_first(store: Store) -> None:
    from textual.widgets import OptionList

    from bbm_tui.ui.dialogs import ModelScreen

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, NewSessionScreen))
        new = app.screen
        await wait_for(pilot, lambda: new.query_one("#questions", OptionList).option_count)
        await pilot.press("ctrl+o")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.press("enter")  # solver/bbm, offered first
        await wait_for(pilot, lambda: app.screen is new)
        assert "Beside it: solver/bbm" in str(new.query_one("#beside-line").render())
        await pilot.press("enter")  # the highlighted question
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen), timeout=30)
        screen = app.screen
        assert [c.trace.spec.model for c in screen.columns] == ["replay/bbm", "solver/bbm"]


# -- snapshots: the offline demo, replay/bbm beside solver/bbm, at three sizes

SNAP_SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (250, 50)],
                                     ids=["80x24", "120x40", "250x50"])


@SNAP_SIZES
def test_side_by_side_snapshot(snap_compare, size: tuple[int, int]) -> None:
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen), timeout=30)
        screen = app.screen
        await pilot.press("r")
        await wait_for(pilot, lambda: all(c.trace.finished for c in screen.columns)
                       and finished_runs(screen), timeout=60)
        await pilot.press("5", "enter")
        await steady_frame(pilot)

    app = make_app(task=TASK, question=QUESTION, models=OFFLINE)
    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", [(80, 24), (250, 50)], ids=["80x24", "250x50"])
def test_four_models_snapshot(snap_compare, size: tuple[int, int]) -> None:
    """Four models: two at 80 columns (the others one key away), all four at 250."""
    async def run_before(pilot: Pilot) -> None:
        app = pilot.app
        await wait_for(pilot, lambda: isinstance(app.screen, SideBySideScreen), timeout=30)
        screen = app.screen
        await pilot.press("n")
        await wait_for(pilot, lambda: all(len(c.trace.steps) == 1 for c in screen.columns)
                       and finished_runs(screen), timeout=60)
        await steady_frame(pilot)

    models = [*OFFLINE, llm.ModelSpec("solver/bbm", mode="completion"),
              llm.ModelSpec("replay/bbm", mode="completion")]
    app = make_app(task=TASK, question=QUESTION, models=models)
    assert snap_compare(app, terminal_size=size, run_before=run_before)



async def test_a_column_switch_restyles_the_columns_not_every_widget_in_them(
    store: Store,
) -> None:
    """tab moves the keys and the bright border to the next column without restyling the
    columns and all their widgets (a CSS class on a column did: ~25 widgets each, a column
    switch took ~100 ms while two columns streamed; the focus itself restyles only the trace
    views it leaves and enters); the border follows the theme."""
    from textual.color import Color

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        first, second = screen.columns
        await pilot.pause()
        restyled: list[object] = []
        update_nodes = app.stylesheet.update_nodes

        def counting(nodes, animate=False):  # type: ignore[no-untyped-def]
            nodes = list(nodes)
            restyled.extend(nodes)
            return update_nodes(nodes, animate=animate)

        app.stylesheet.update_nodes = counting  # type: ignore[method-assign]

        def primary() -> Color:
            return Color.parse(app.get_css_variables()["primary"])

        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.focused is second.view)
        await pilot.pause()
        assert first not in restyled and second not in restyled
        assert second.styles.border_top[1] == primary()
        assert first.styles.border_top[1] != primary()
        app.stylesheet.update_nodes = update_nodes  # type: ignore[method-assign]
        app.theme = "nord" if app.theme != "nord" else "gruvbox"
        await wait_for(pilot, lambda: second.styles.border_top[1] == primary())
        assert first.styles.border_top[1] != primary()


async def test_a_number_enter_and_x_typed_at_once_flag_that_thought(store: Store) -> None:
    """"4⏎x" as a terminal sends it when typed fast (the keys queued before any is handled),
    in the focused column: Thought 4 flagged. The jump ran when enter's binding did, after x
    had reached the column and cleared the number, so the thought selected before was
    flagged."""
    from textual import events

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        replay, solver = screen.columns
        await pilot.press("r")
        await wait_for(pilot, lambda: replay.trace.finished and solver.trace.finished
                       and finished_runs(screen), timeout=60)
        await pilot.press("tab")
        await wait_for(pilot, lambda: screen.focused is solver.view)
        assert solver.view.selected == 7
        for key, character in (("4", "4"), ("enter", "\r"), ("x", "x")):
            app.post_message(events.Key(key, character))
        await wait_for(pilot, lambda: solver.trace.mistake_number is not None)
        assert solver.trace.mistake_number == 4 and solver.view.selected == 4
        assert replay.trace.label is None


async def test_facts_growing_in_one_column_leave_the_rows_level(store: Store) -> None:
    """g shows the dataset's gold label under the focused column's thoughts (a fact the
    other column does not show): every column's facts take as many rows, so that the thoughts
    panes keep one height and their rows stay level; g again, and they shrink together."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        replay, solver = screen.columns
        await pilot.press("r")
        await wait_for(pilot, lambda: replay.trace.finished and solver.trace.finished
                       and finished_runs(screen), timeout=60)

        def panes() -> list[int]:
            return [column.view.query_one("#thoughts-pane").region.height
                    for column in screen.columns]

        before = panes()
        assert before[0] == before[1]
        await pilot.press("g")
        gold = replay.view.query_one("#gold")
        await wait_for(pilot, lambda: gold.display and gold.region.height > 0)
        # The other column's facts follow a refresh later: waited for, not assumed.
        await wait_for(pilot, lambda: panes()[0] == panes()[1] < before[0])
        await wait_for(pilot, lambda: tops(replay) == tops(solver))
        await pilot.press("g")
        await wait_for(pilot, lambda: panes() == before)


async def test_at_80_columns_the_footer_never_shows_keys_without_what_they_do(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the columns stream, esc (stop all) joins the footer at 80 columns and j/k's
    "move" no longer fits: j/k go with it, not left as a bare "jk"."""
    from textual.widgets._footer import FooterLabel, KeyGroup

    from bbm_tui.ui.widgets.chrome import KeysFooter

    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "20")
    llm.set_replay_pace(None)
    app = make_app()
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await app.wait_for_store()
            screen = await open_race(pilot, store, OFFLINE)
            await pilot.press("r")
            footer = screen.query_one(KeysFooter)
            await wait_for(pilot, lambda: any(
                getattr(key, "action", None) == "stop_all" and key.display
                for key in footer.children))
            await pilot.pause()
            children = list(footer.children)
            for group, label in pairwise(children):
                if isinstance(group, KeyGroup):
                    assert isinstance(label, FooterLabel)
                    assert group.display == label.display
            await pilot.press("escape")
            await wait_for(pilot, lambda: finished_runs(screen))
    finally:
        monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")
        llm.set_replay_pace(None)


async def test_a_tall_terminal_shows_the_whole_question_with_its_options(
    store: Store,
) -> None:
    """At 250x50 the question above the columns shows whole, its options and target too (the
    answers (E) and (B) name them); at 80x24 it takes two lines and scrolls (] and [)."""
    app = make_app()
    async with app.run_test(size=(250, 50)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        question = screen.query_one("#sbs-question")
        await wait_for(pilot, lambda: question.region.height > 0)
        await pilot.pause()
        assert question.max_scroll_y == 0
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: question.max_scroll_y > 0)
        assert question.region.height == 3  # two lines and the rule under them


async def test_levelling_leaves_a_min_height_that_does_nothing_in_place(store: Store) -> None:
    """A thought given its row's height keeps it when it grows to that height itself (a
    streaming thought catching up with the other column's): clearing it made one more layout
    for every line a streaming thought gained. Only a row that shrank below it clears it."""
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        replay, solver = screen.columns
        await pilot.press("r")
        await wait_for(pilot, lambda: replay.trace.finished and solver.trace.finished
                       and finished_runs(screen), timeout=60)
        await pilot.pause()
        view = replay.view.thoughts.views()[0]
        own = replay.natural_heights()[view.number]
        view.styles.min_height = own  # as if it had been shorter than its row before
        replay.level({view.number: own}, 0, replay)
        min_height = view.styles.min_height
        assert min_height is not None and min_height.value == own
        replay.level({view.number: own - 1}, 0, replay)  # the row shrank: nothing to hold up
        assert view.styles.min_height is not None  # at its own height: harmless, kept
        view.styles.min_height = own + 2
        replay.level({view.number: own}, 0, replay)  # held taller than its row: cleared
        assert view.styles.min_height is None


DYCK_QUESTION = 25  # replay's recording ends at Thought 37, the solver's at Thought 54


def dyck_question() -> NewTrace:
    row = bundled_rows("dyck_languages")[DYCK_QUESTION]
    return NewTrace("dyck_languages", row.input, row.target, DYCK_QUESTION, row.mistake_index)


def screen_rows(column: ModelColumn) -> dict[int, int]:
    """Where each thought on show starts on the screen (not in its pane)."""
    return {view.number: view.region.y for view in column.view.thoughts.views()
            if view.region.height}


def level_and_selected_in_view(screen: SideBySideScreen) -> bool:
    """Every thought number on show in two columns sits on one screen row, and the focused
    column's selected thought is on show (not scrolled away, not out of the window)."""
    shown = [column for column in screen.columns if column.display]
    rows = [screen_rows(column) for column in shown]
    for one, other in pairwise(rows):
        if any(one[number] != other[number] for number in one.keys() & other.keys()):
            return False
    focused = next(column for column in shown if column.view is screen.focused)
    selected = focused.view.thoughts.view(focused.view.selected)
    if selected is None:
        return False
    pane = focused.view.thoughts.region
    return selected.region.height > 0 and pane.y <= selected.region.y \
        and selected.region.bottom <= pane.bottom


async def test_columns_of_different_lengths_keep_their_numbers_level(store: Store) -> None:
    """Issue 34, item 2: once replay (37 thoughts) and the solver (54) both answer, the
    focused replay column showed a blank, held at the solver's rows 43-47 (the solver's
    window of 40 thoughts started at 15, replay's at 1, and the focused column followed its
    end into the blank under its last thought); `30 enter` showed Thought 30 beside Thought
    43. Now the same numbers sit on the same rows and the focused selection is in view, after
    a jump, a column switch and `m` adding a column too; and no column prints "Filler"
    (item 6)."""
    from bbm_tui.ui.dialogs import ModelScreen

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        session_id = SideBySide.create(store, dyck_question(), OFFLINE).id
        screen = await open_race(pilot, store, OFFLINE, session_id)
        replay, solver = screen.columns
        await pilot.press("r")
        await wait_for(pilot, lambda: replay.trace.finished and solver.trace.finished
                       and finished_runs(screen), timeout=60)
        assert (len(replay.trace.steps), len(solver.trace.steps)) == (37, 54)
        await wait_for(pilot, lambda: level_and_selected_in_view(screen))
        assert replay.view.selected == 37
        await pilot.press("3", "0", "enter")
        await wait_for(pilot, lambda: replay.view.selected == 30
                       and level_and_selected_in_view(screen))
        assert screen_rows(replay)[30] == screen_rows(solver)[30]
        await pilot.press("tab", "G")
        await wait_for(pilot, lambda: screen.focused is solver.view
                       and solver.view.selected == 54
                       and level_and_selected_in_view(screen))
        # Replay's blank beside the solver's Thoughts 38-54 is on show.
        await pilot.pause()
        assert "Filler" not in app.export_screenshot()
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(screen.columns) == 3 and app.screen is screen)
        added = screen.columns[2]
        await wait_for(pilot, lambda: screen.focused is added.view)
        await pilot.press("r")
        await wait_for(pilot, lambda: added.trace.finished and finished_runs(screen),
                       timeout=60)
        await wait_for(pilot, lambda: level_and_selected_in_view(screen))
        await pilot.press("1", "6", "enter")
        await wait_for(pilot, lambda: added.view.selected == 16
                       and level_and_selected_in_view(screen))
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: level_and_selected_in_view(screen))
        await pilot.press("shift+tab", "G")  # the solver, beside the added column's blank
        await wait_for(pilot, lambda: screen.focused is solver.view
                       and solver.view.selected == 54
                       and level_and_selected_in_view(screen))
        await pilot.pause()
        assert "Filler" not in app.export_screenshot()


async def test_the_blank_under_a_shorter_column_prints_nothing(store: Store) -> None:
    """Issue 34, item 6: the blank a shorter column keeps beside the longer one's thoughts
    printed its widget's class name, "Filler", at 80x24 and 120x40."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        session_id = SideBySide.create(store, dyck_question(), OFFLINE).id
        screen = await open_race(pilot, store, OFFLINE, session_id)
        replay, solver = screen.columns
        await pilot.press("r")
        await wait_for(pilot, lambda: replay.trace.finished and solver.trace.finished
                       and finished_runs(screen), timeout=60)
        await pilot.press("tab", "G")  # the solver's last thoughts, beside replay's blank
        await wait_for(pilot, lambda: solver.view.selected == 54
                       and replay.filler.region.height > 0, timeout=10)
        for size in ((80, 24), (120, 40)):
            await pilot.resize_terminal(*size)
            await wait_for(pilot, lambda: replay.filler.region.height > 0, timeout=10)
            await pilot.pause()
            assert "Filler" not in app.export_screenshot()


async def test_m_refuses_a_simulated_reward_model_as_a_column(store: Store) -> None:
    """Issue 34, item 10: `m` took simulated/rm-0.65 as a generating column, which then
    failed at its first thought. The dialog refuses it, on enter as on its Test (ctrl+t),
    saying why, and no column is added."""
    from textual.widgets import Input

    from bbm_tui.ui.dialogs import ModelScreen

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await open_race(pilot, store, OFFLINE)
        await pilot.press("m")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        dialog = app.screen
        dialog.query_one("#model", Input).value = "simulated/rm-0.65"
        for key in ("ctrl+t", "enter"):
            app.clear_notifications()
            await pilot.press(key)
            await wait_for(pilot, lambda: any(
                "simulated reward model" in str(toast.message)
                for toast in app._notifications))
            assert app.screen is dialog
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.pause()
        assert len(screen.columns) == 2
    assert [b.model for b in store.model_branches(screen.race.id)] == [
        "replay/bbm", "solver/bbm"]


async def test_v_and_t_agree_with_the_line_under_the_columns(store: Store) -> None:
    """Issue 34, item 4: with the line under the columns saying "The traces part at Thought
    5", `v` said "They part at Thought 1" and showed Thoughts 1-4 unfolded on both sides
    (two models' traces share no step), and `t` gave both branches the same snippet (their
    word-for-word Thought 1). Now `v` folds Thoughts 1-4 and starts at Thought 5, and `t`
    shows each branch's Thought 5, where they differ."""
    from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
    from bbm_tui.ui.screens.compare import CompareScreen

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await app.wait_for_store()
        screen = await raced_offline(pilot, store)
        summary = str(screen.query_one("#sbs-summary").render())
        assert "The traces part at Thought 5." in summary
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        compare = app.screen
        folded = str(compare.query_one("#compare-folded").render())
        assert folded == ("Thoughts 1-4 are the same on both (folded); they part at "
                          "Thought 5.")
        assert compare.numbers == [5, 6, 7]
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchTreeScreen))
        await pilot.pause()
        shown = app.export_screenshot().replace("&#160;", " ")
        assert "5: “…red, Dave: yellow, Eve: blue.”" in shown  # replay's Thought 5
        assert "5: “…blue, Dave: red, Eve: yellow.”" in shown  # the solver's


def screen_text(app) -> str:  # type: ignore[no-untyped-def]
    """The screen's text, its styles' runs joined (the SVG screenshot, tags left out)."""
    import html
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", app.export_screenshot())).replace(
        "\xa0", " ")


async def test_at_80_columns_a_columns_border_keeps_its_cost(store: Store) -> None:
    """Issue 34, item 15: at 80x24 a column's border cut its figures at the end, "7 thoughts
    · 1.4 s · 4,663 tok …": the cost, the figure that matters most, was the one lost. The
    latency, then the tokens, give way; the cost stays."""
    app = make_app(wall_clock=True)
    async with app.run_test(size=(80, 24)) as pilot:
        await app.wait_for_store()
        screen = await raced_offline(pilot, store)
        await pilot.pause()
        # The focused column's border is heavy (its focus reads without colour too).
        await wait_for(pilot, lambda: screen_text(app).count("$0 ─╯")
                       + screen_text(app).count("$0 ━┛") == 2, timeout=10)
        for column in screen.columns:
            assert column.figures.startswith("7 thoughts") and column.figures.endswith("$0")
        await pilot.resize_terminal(250, 50)  # room for every figure, the latency too
        await wait_for(pilot, lambda: all(" s · " in column.figures
                                          for column in screen.columns), timeout=10)
