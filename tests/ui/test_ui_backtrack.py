"""Backtracking in the app (issue 11, item 3): `b` samples the flagged thought 8 times at
temperature 1 against the local server, the samples appear with their log-probabilities, the
dropped ones and the paper's choice; Enter continues on a new branch; another sample may be
picked; `w` rewrites a thought; `<` and `>` move between the versions, each branch with its
own label. Snapshots of the samples dialog at 80x24 and 120x40."""

from __future__ import annotations

import math
import threading

import pytest
from textual.pilot import Pilot
from textual.widgets import OptionList
from textual.widgets._footer import FooterKey
from ui_helpers import SIZE, footers_current, make_app, steady_frame, thought, wait_for

from bbm_tui.core import llm
from bbm_tui.core.generation.backtrack import Resample, SampleArrived
from bbm_tui.core.store import Store, StoredCandidate, Totals
from bbm_tui.core.trace.session import NewTrace, SamplesReady, TraceSession
from bbm_tui.ui.screens.backtrack import CandidatesScreen, EditThoughtScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.text import format_totals
from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack import ORIGINAL, QUESTION, TARGET, responder


def served_trace(store: Store, server: FakeOpenAI, model: str = "openai/test") -> TraceSession:
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec(model, server.base_url))
    trace.load_recorded(ORIGINAL)
    trace.flag_mistake(2)
    return trace


async def open_trace(pilot: Pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, TraceScreen)
    return screen


async def samples_in(pilot: Pilot) -> CandidatesScreen:
    """The samples dialog with every sample in (it opens at once, and fills in)."""
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, CandidatesScreen)
                   and pilot.app.screen.all_arrived, timeout=30)
    return pilot.app.screen


def option_texts(app) -> list[str]:
    options = app.screen.query_one(OptionList)
    return [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]


async def test_b_backtracks_from_the_flag_and_keeps_both_branches(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.responder = responder()
    trace = served_trace(store, openai_server)
    original = [step.id for step in trace.steps]
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("b")
        await samples_in(pilot)
        texts = option_texts(app)
        assert len(texts) == 8
        assert "= the original (dropped)" in texts[0] and "★ chosen" in texts[1]
        assert "2 + 2 = 4" in texts[1] and "-2.50" in texts[1]
        assert app.screen.query_one(OptionList).highlighted == 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4" and not screen.view.running,
                       timeout=30)
        assert screen.view.trace.texts[1] == "2 + 2 = 4" and screen.view.trace.correct
        assert screen.view.trace.label is None  # the flag stays on the original branch
        # < shows the original again, with its flag.
        screen.view.selected = 2
        await pilot.press("less_than_sign")
        await wait_for(pilot, lambda: [s.id for s in screen.view.trace.steps] == original)
        assert screen.view.trace.mistake_number == 2
        assert "version 1 of 2" in str(screen.query_one("#run-status").render())
        await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4")


async def test_a_backtracked_thought_shows_its_own_tokens_and_its_confidence(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """Issue 11: the thought chosen from one call's eight samples says it is one of eight and
    counts its own tokens, not the call's for all eight; where it has log-probabilities its
    confidence shows beside them ("confidence 87%"); presenter mode hides every figure."""
    openai_server.responder = responder()
    trace = served_trace(store, openai_server)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("b")
        await samples_in(pilot)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4" and not screen.view.running,
                       timeout=30)
        step = screen.view.trace.steps[1]
        [sample_call] = [r for r in openai_server.requests if r.body.get("n") == 8]
        own = step.ntokens
        # The branch holds its steps without their tokens (read a window at a time from the
        # store, issue 36); the store has them (`t` reads them there).
        tokens = store.step(step.id).tokens
        assert tokens is not None
        assert step.call_choices == 8 and own == len(tokens) == step.completion_tokens
        confidence = math.exp(step.logprob / own)
        meta = thought(screen, 2).meta
        # Its prompt is the samples' call's; its cost is the call's, for all eight: none here.
        assert meta == (f"backtracked · 1 of 8 samples · {step.prompt_tokens:,} in, 0 cached · "
                        f"{own} out · log-prob {step.logprob:.2f} · confidence {confidence:.0%}")
        assert "296 out" not in meta and sample_call.body["n"] == 8
        # The title's totals count the sampling call once, as the store does.
        assert screen.view.totals == store.totals(trace.id)
        assert screen.view.totals.calls == 1 + len(screen.view.trace.steps) - 2
        assert format_totals(screen.view.totals).startswith("3 calls · ")
        assert format_totals(Totals(1, 10, 5, 0.0)) == "1 call · 10 in / 0 cached / 5 out · $0"
        await pilot.press("P")
        await pilot.pause()
        assert thought(screen, 2).meta == ""
        await pilot.press("P")


async def test_another_sample_can_be_picked_and_escape_keeps_the_trace(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.responder = responder()
    trace = served_trace(store, openai_server)
    before = [step.id for step in trace.steps]
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("b")
        await samples_in(pilot)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen and not screen.view.running)
        assert [s.id for s in screen.view.trace.steps] == before
        assert "samples of Thought 2 are saved" in str(screen.query_one("#run-status").render())
        await pilot.press("b")
        await samples_in(pilot)
        await pilot.press("down", "down")  # to "two plus two is four"
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.view.running and len(screen.view.trace.steps) > 1
                       and screen.view.trace.texts[1] == "two plus two is four", timeout=30)
        assert len(screen.view.trace.alternatives(2)) == 2


def held_eighth(hold: threading.Event):
    """A provider without `n` (one call a sample): the eighth sampling call is held until the
    test lets it go; the continuation is served as usual."""
    served = responder(one_choice=True)
    samples: list[int] = []

    def respond(path: str, body: dict) -> Reply:
        reply = served(path, body)
        if not body.get("stream"):
            samples.append(1)
            if len(samples) == 8:
                reply.hold = hold
        return reply

    return respond


def parallel_trace(store: Store, server: FakeOpenAI) -> TraceSession:
    """lm_studio/ goes to the test server but takes no `n`: one call a sample."""
    return served_trace(store, server, "lm_studio/test")


async def test_the_samples_appear_as_their_calls_return(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """b opens the samples dialog at once; each sample fills its row as its call returns
    (the original again marked dropped at once) while the last call is still out; the
    paper's choice is starred only when all are in; Enter does nothing before."""
    hold = threading.Event()
    openai_server.responder = held_eighth(hold)
    trace = parallel_trace(store, openai_server)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.arrived_count == 7, timeout=30)
        dialog = app.screen
        texts = option_texts(app)
        assert sum("waiting for its call" in text for text in texts) == 1
        assert sum("= the original (dropped)" in text for text in texts) == 2
        assert not any("★" in text for text in texts) and not dialog.all_arrived
        assert "7 of 8 in" in str(dialog.query_one("#candidates-title").render())
        assert not any(r.released for r in openai_server.requests)  # the eighth is out
        await pilot.press("enter")
        assert app.screen is dialog and dialog.ready is None
        hold.set()
        await samples_in(pilot)
        texts = option_texts(app)
        [starred] = [text for text in texts if "★ chosen" in text]
        assert "2 + 2 = 4" in starred
        assert [r.released for r in openai_server.requests].count(True) == 1
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4" and not screen.view.running,
                       timeout=30)
        assert screen.view.trace.texts[1] == "2 + 2 = 4"


async def test_escape_while_sampling_stops_it_and_saves_nothing(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """Esc with a call still out: the dialog goes, the call is hung up on, no sample (nor
    its call) is stored, the trace is as it was; b works again after."""
    hold = threading.Event()
    openai_server.responder = held_eighth(hold)
    trace = parallel_trace(store, openai_server)
    before = [step.id for step in trace.steps]
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.arrived_count == 7
                       and len(openai_server.requests) == 8, timeout=30)  # the eighth held
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen and not screen.view.running)
        assert "Stopped sampling Thought 2" in str(screen.query_one("#run-status").render())
        await wait_for(pilot, lambda: any(r.client_closed_early for r in openai_server.requests))
        assert store.candidates(trace.id, before[0], 2) == []
        assert store.totals(trace.id).calls == 0
        assert [s.id for s in screen.view.trace.steps] == before
        assert screen.view.trace.mistake_number == 2
        hold.set()
        await pilot.press("b")
        await samples_in(pilot)
        assert len(store.candidates(trace.id, before[0], 2)) == 8


async def test_w_rewrites_a_thought_and_the_model_goes_on(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.responder = responder()
    trace = served_trace(store, openai_server)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        screen.view.selected = 2
        await pilot.press("w")
        await wait_for(pilot, lambda: isinstance(app.screen, EditThoughtScreen))
        field = app.screen.query_one("#edit-input")
        field.value = "2 + 2 = 4"
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4" and not screen.view.running,
                       timeout=30)
        assert screen.view.trace.steps[1].origin == "edit"
        assert len(screen.view.trace.alternatives(2)) == 2


def sample_dialog(store: Store) -> tuple[int, SamplesReady]:
    """A trace and its samples as backtracking stores them (no model call)."""
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", "http://127.0.0.1:9"))
    trace.load_recorded(ORIGINAL)
    trace.flag_mistake(2)
    texts = ["2 + 2 = 5", "2 + 2 = 4", "2 + 2 = 22", "two plus two is four", "2 + 2 = 5",
             "2 + 2 = 3", "2+2=4", ""]
    scores = [-0.5, -2.5, -15.0, -3.0, -0.5, -10.0, -3.0, None]
    stored = [StoredCandidate(i, trace.id, None, i, trace.steps[0].id, 2, text, None, score,
                              text == "2 + 2 = 5", None, 0.0)
              for i, (text, score) in enumerate(zip(texts, scores, strict=True))]
    resample = Resample(2, "2 + 2 = 5", llm.Samples(), [c.dropped for c in stored], 1,
                        "logprob")
    return trace.id, SamplesReady(2, resample, stored)


def _samples_snapshot(snap_compare, size: tuple[int, int]) -> bool:
    with Store.open() as store:
        session_id, ready = sample_dialog(store)

    async def run_before(pilot: Pilot) -> None:
        await open_trace(pilot)
        pilot.app.push_screen(CandidatesScreen.showing(ready))
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, CandidatesScreen))
        await steady_frame(pilot)

    return snap_compare(make_app(session_id=session_id), terminal_size=size,
                        run_before=run_before)


def test_samples_dialog_at_80x24(snap_compare) -> None:
    assert _samples_snapshot(snap_compare, (80, 24))


def test_samples_dialog_at_120x40(snap_compare) -> None:
    assert _samples_snapshot(snap_compare, (120, 40))


def _arriving_snapshot(snap_compare, size: tuple[int, int]) -> bool:
    """The dialog with five of eight samples in (two of them the original again)."""
    with Store.open() as store:
        session_id, ready = sample_dialog(store)

    async def run_before(pilot: Pilot) -> None:
        await open_trace(pilot)
        dialog = CandidatesScreen(2, "2 + 2 = 5", 8)
        pilot.app.push_screen(dialog)
        await wait_for(pilot, lambda: pilot.app.screen is dialog and dialog.is_mounted)
        for position in (1, 0, 4, 3, 6):
            stored = ready.stored[position]
            candidate = llm.Candidate(stored.text, None, stored.text, "stop", False, 0,
                                      position)
            dialog.arrived(SampleArrived(position, candidate, stored.dropped))
        await steady_frame(pilot)

    return snap_compare(make_app(session_id=session_id), terminal_size=size,
                        run_before=run_before)


def test_samples_arriving_at_80x24(snap_compare) -> None:
    assert _arriving_snapshot(snap_compare, (80, 24))


def test_samples_arriving_at_120x40(snap_compare) -> None:
    assert _arriving_snapshot(snap_compare, (120, 40))


async def test_the_papers_story_in_a_minute_offline() -> None:
    """The paper's demo, whole, offline, with the keys README's "The paper's story in a
    minute" gives: replay/bbm writes the recorded trace, which goes wrong at Thought 2
    (A = 10, not 3) and answers 0, not -7; the simulated reward model at the paper's 65%
    finds no mistake; the person flags Thought 2; backtracking (solver/bbm samples and goes
    on) reaches -7. The original branch keeps its flag and the finder's run; the new one has
    neither."""
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.ui.dialogs import FindScreen
    from bbm_tui.ui.screens.branch_tree import BranchTreeScreen
    from bbm_tui.ui.screens.compare import CompareScreen
    from bbm_tui.ui.screens.tokens import TokenScreen

    row = bundled_rows("multistep_arithmetic")[7]
    assert (row.mistake_index, row.answer, row.target) == (1, "0", "-7")
    app = make_app(task="multistep_arithmetic", question=7)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("r")  # the model makes a mistake
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=30)
        assert screen.view.trace.texts == list(row.steps) and screen.view.trace.correct is False
        await pilot.press("f")  # a finder misses it
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("up", "tab", *"simulated/rm-0.65", "enter")
        await wait_for(pilot, lambda: app.screen is screen and screen.view.finder is not None
                       and screen.view.finder.state == "finished", timeout=30)
        assert (screen.view.finder.method, screen.view.finder.model) == ("direct-trace",
                                                               "simulated/rm-0.65")
        assert screen.view.finder.has_result and screen.view.finder.mistake_number is None
        assert "no mistake" in str(screen.query_one("#finder").render())
        await pilot.press("2", "enter", "x")  # a person flags it
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        assert "disagree" in str(screen.query_one("#agreement").render())
        original = [step.id for step in screen.view.trace.steps]
        await pilot.press("b")  # backtracking fixes the answer
        dialog = await samples_in(pilot)
        chosen = dialog.ready.resample.chosen
        assert chosen is not None and not dialog.ready.stored[chosen].dropped
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.correct and not screen.view.running,
                       timeout=30)
        assert screen.view.trace.answer == "-7" and screen.view.trace.spec.model == "solver/bbm"
        assert screen.view.trace.steps[1].origin == "backtrack" and screen.view.trace.label is None
        await wait_for(pilot, lambda: screen.view.finder is None)
        # < on Thought 2: the original branch, its flag and the finder's miss, as they were.
        await pilot.press("2", "enter", "less_than_sign")
        await wait_for(pilot, lambda: [s.id for s in screen.view.trace.steps] == original)
        assert screen.view.trace.answer == "0" and screen.view.trace.mistake_number == 2
        await wait_for(pilot, lambda: screen.view.finder is not None
                       and screen.view.finder.model == "simulated/rm-0.65")
        # v and t (the two branches; the tree), then > and l: the new branch's Thought 2
        # token by token, the chosen sample, which has log-probabilities (issue 34, item 11:
        # the README had l on the original's Thought 2, the replay's, with none to show).
        assert story_keys(5) == ["2", "enter", "<", "v", "t", ">", "l"]
        await pilot.press("v")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen))
        await pilot.press("escape", "t")
        await wait_for(pilot, lambda: isinstance(app.screen, BranchTreeScreen))
        await pilot.press("escape", "greater_than_sign")
        await wait_for(pilot, lambda: app.screen is screen
                       and screen.view.trace.answer == "-7")
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        tokens = app.screen
        assert tokens.step.number == 2 and tokens.step.origin == "backtrack"
        assert tokens.tokens and "No log-probabilities" not in tokens_text(tokens)


def story_keys(item: int) -> list[str]:
    """The keys that item `item` of the README's "The paper's story in a minute" gives, in
    order (`esc`, which closes a dialog, left out), from the README or the docs site."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        start = text.find("The paper's story in a minute")
        if start < 0:
            continue
        found = re.search(rf"^{item}\. (.*?)(?=^\d+\. |^\S|\Z)", text[start:],
                          re.MULTILINE | re.DOTALL)
        if found is not None:
            return [key for key in re.findall(r"`([^`]+)`", found.group(1)) if key != "esc"]
    raise AssertionError("no story in the README or the docs")


def tokens_text(screen) -> str:  # type: ignore[no-untyped-def]
    """What the token view says, all its lines."""
    return " ".join(str(widget.render()) for widget in screen.query("Static"))


def call_models(store: Store, session_id: int) -> list[str]:
    """The model each of the session's calls recorded, in order."""
    import sqlite3

    with sqlite3.connect(store.path) as connection:
        return [model for (model,) in connection.execute(
            "SELECT model FROM calls WHERE session_id = ? ORDER BY id", (session_id,))]


def title_of(screen: TraceScreen) -> str:
    return str(screen.query_one("#title-bar .title-left").render())


async def test_a_rewrite_on_the_replay_goes_on_with_the_solver_and_says_so() -> None:
    """w on replay/bbm, which can only repeat its recording, hands over to solver/bbm as
    backtracking does, says so, and the header names the model now in use."""
    from ui_helpers import notifications

    from bbm_tui.core.dataset import bundled_rows

    app = make_app(task="multistep_arithmetic", question=7)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=30)
        assert "replay/bbm" in title_of(screen)
        await pilot.press("2", "enter", "w")
        await wait_for(pilot, lambda: isinstance(app.screen, EditThoughtScreen))
        app.screen.query_one("#edit-input").value = "Let's calculate A = 3."
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running
                       and screen.view.trace.steps[1].origin == "edit", timeout=30)
        assert screen.view.trace.answer == "-7" and screen.view.trace.correct
        assert screen.view.trace.spec.model == "solver/bbm"
        assert "solver/bbm" in title_of(screen)
        assert any("goes on with solver/bbm" in note for note in notifications(app))
        steps = len(bundled_rows("multistep_arithmetic")[7].steps)
        assert call_models(app.store, screen.view.trace.id) == (
            ["replay/bbm"] * steps + ["solver/bbm"] * (len(screen.view.trace.steps) - 2))


async def test_ctrl_e_changes_the_model_from_the_next_step_on(store: Store) -> None:
    """The new-session screen's model dialog on an open trace: the next step is the new
    model's (each call records its own), the header names it, help lists the key, and a
    step that replay/bbm cannot write says which key changes the model."""
    from bbm_tui.ui.dialogs import HelpScreen, ModelScreen

    app = make_app(task="multistep_arithmetic", question=7)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 1 and not screen.view.running)
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        dialog = app.screen
        assert dialog.query_one("#model").value == "replay/bbm"
        assert "next step" in str(dialog.query_one(".dialog-title").render())
        dialog.query_one("#model").value = "solver/bbm"
        dialog.query_one("#temperature").value = "0"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        assert screen.view.trace.spec.model == "solver/bbm" and "solver/bbm" in title_of(screen)
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 2 and not screen.view.running)
        assert call_models(app.store, screen.view.trace.id) == ["replay/bbm", "solver/bbm"]
        assert app.store.session(screen.view.trace.id).model == "solver/bbm"
        # Back to the replay: it cannot go on from the solver's step, and says which key
        # chooses another model (whole, at 80x24).
        await pilot.press("ctrl+e")
        await wait_for(pilot, lambda: isinstance(app.screen, ModelScreen))
        app.screen.query_one("#model").value = "replay/bbm"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await pilot.press("n")
        await wait_for(pilot, lambda: not screen.view.running
                       and screen.query_one("#run-status").has_class("-error"))
        await pilot.pause()
        shown = str(screen.query_one("#run-status").render())
        assert shown.startswith("Thought 3 failed: replay/bbm cannot invent")
        assert shown.endswith("n tries it again, ^e changes the model.") and "…" in shown
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        assert any(row.binding_id == "trace_edit_model" and row.keys == "^e"
                   for row in app.screen.rows)


@pytest.mark.parametrize("size", [(80, 24), SIZE, (250, 50)])
async def test_each_sample_shows_where_it_differs_and_whole_a_key_away(size) -> None:
    """Word sorting #15, Thought 2 flagged, b: the samples differ from the original late in a
    long thought (every row once ended at '(14) "necroman…'). Each row starts a few words
    before its first difference, which is marked and in view; all eight rows are in view;
    the highlighted sample is shown whole under the list, and ↓ shows the next."""
    from bbm_tui.core.textsafe import one_line
    from bbm_tui.ui.screens.backtrack import DIFFERS

    app = make_app(task="word_sorting", question=15)
    async with app.run_test(size=size) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=30)
        await pilot.press("2", "enter", "x", "b")
        dialog = await samples_in(pilot)
        await pilot.pause()
        options = dialog.query_one(OptionList)
        width = options.scrollable_content_region.width
        assert options.region.height >= 8 + (0 if size == (80, 24) else 2)
        assert dialog.query_one("#candidates").max_scroll_y == 0  # no scrolling to reach it
        stored = dialog.ready.stored
        differing = [i for i, c in enumerate(stored) if not c.dropped and c.text.strip()]
        assert differing
        for index in differing:
            row = options.get_option_at_index(index).prompt
            spans = [span for span in row.spans if str(span.style) == DIFFERS]
            assert spans, row.plain
            assert row.plain.index("…") < spans[0].start < width - 4  # in view, not cut
        chosen = dialog.ready.resample.chosen
        assert options.highlighted == chosen
        whole = str(dialog.query_one("#candidates-whole").render())
        assert whole == f"{chosen + 1}. {one_line(stored[chosen].text)}"
        # A sample longer than its box (four lines at 80x24) reads on with the page keys,
        # which the footer offers only then; the highlighted row stays.
        detail = dialog.query_one("#candidates-detail")
        await wait_for(pilot, lambda: footers_current(app))
        offered = {key.action for key in dialog.query(FooterKey)}
        assert detail.max_scroll_y > 0 or size != (80, 24)
        assert ("read_sample(1)" in offered) == (detail.max_scroll_y > 0)
        if detail.max_scroll_y > 0:
            await pilot.press("pagedown")
            await pilot.pause()
            assert detail.scroll_y > 0 and options.highlighted == chosen
            await pilot.press("pageup")
            await pilot.pause()
            assert detail.scroll_y == 0
        if size == (80, 24):  # wider, it fits its box, and the footer says so
            await pilot.resize_terminal(*SIZE)
            await wait_for(pilot, lambda: detail.max_scroll_y == 0)
            await wait_for(pilot, lambda: footers_current(app))
            assert "read_sample(1)" not in {key.action for key in dialog.query(FooterKey)}
        others = [i for i in differing if i > chosen]
        if others:
            await pilot.press("down")
            whole = str(dialog.query_one("#candidates-whole").render())
            assert one_line(stored[others[0]].text) in whole


async def test_at_80x24_the_hand_over_is_said_in_the_dialog_not_over_its_legend() -> None:
    """Issue 34, item 15: at 80x24, b on replay/bbm's trace put a toast ("replay/bbm can only
    repeat its recorded trace…") over the samples dialog's legend, the line that says what
    ★ and enter mean. The dialog says it on a line of its own; no toast covers the legend."""
    from textual.widgets._toast import Toast

    app = make_app(task="multistep_arithmetic", question=7)
    # Toasts drawn (a test run leaves them out unless asked).
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        screen = await open_trace(pilot)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.view.trace.finished and not screen.view.running,
                       timeout=30)
        app.clear_notifications()
        await pilot.press("2", "enter", "x", "b")
        dialog = await samples_in(pilot)
        await pilot.pause(0.5)
        hint = dialog.query_one("#candidates-hint").region
        assert hint.height > 0 and dialog.region.contains_region(hint)
        toasts = [toast.region for toast in app.screen.query(Toast)]
        assert not any(toast.overlaps(hint) for toast in toasts)
        assert dialog.query_one("#candidates").max_scroll_y == 0  # the note's line fits
        note = dialog.query_one("#candidates-note")
        assert note.display and str(note.render()) == (
            "solver/bbm samples and goes on: replay/bbm can only repeat its recording.")
        assert "the highest log-probability" in str(
            dialog.query_one("#candidates-hint").render())
