"""The app where what it is given cannot be: a store holding log-probabilities no model could
give, written by an earlier bbm-tui, opens, and so does its token view; such values arriving
are said, never used."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from textual.widgets import OptionList
from ui_helpers import SIZE, make_app, wait_for

from bbm_tui.core import llm
from bbm_tui.core.config import Config
from bbm_tui.core.store import Store, default_path
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.screens.backtrack import CandidatesScreen
from bbm_tui.ui.screens.tokens import TokenScreen
from bbm_tui.ui.screens.trace import TraceScreen
from tests.openai_server import FakeOpenAI, Reply
from tests.test_backtrack import LOGPROBS, ORIGINAL, QUESTION, SAMPLED, TARGET, responder

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def store_from_fixture(version: int) -> Path:
    """The frozen store of schema `version` as the app's own store."""
    path = default_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path)
    connection.executescript((FIXTURES / f"store_v{version}.sql").read_text(encoding="utf-8"))
    connection.commit()
    connection.close()
    return path


async def test_a_session_holding_impossible_log_probabilities_opens() -> None:
    """Session 3 of the v9 fixture: a thought whose sum is 7999.88 (its confidence overflowed:
    OverflowError on opening), one whose tokens are NaN and Infinity (the token view stopped:
    StopIteration). Both open, and the token view says there are none to show, and why."""
    store_from_fixture(9)
    app = make_app(session_id=3)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        for number in (1, 2):
            screen.view.selected = number
            await pilot.press("l")
            await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
            text = " ".join(str(w.render()) for w in app.screen.query(".dialog-text"))
            assert "No log-probabilities" in text and "no model could give" in text
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is screen)
        screen.view.selected = 3
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, TokenScreen))
        assert [t.text for t in app.screen.tokens] == ["So the answer is", " 4"]


async def test_the_app_says_when_log_probabilities_could_not_be(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """A sample with NaN among its tokens: its row says its log-probabilities were
    impossible and not used, and the choice goes to the best of the others; a step streamed
    with a value of 3999.94 is kept without them, and a notice says so."""
    values = list(LOGPROBS)
    values[1] = float("nan")
    base = responder()

    def respond(path: str, body: dict) -> Reply:
        if body.get("stream"):
            reply = base(path, body)
            reply.logprob_values = [3999.94]
            return reply
        return Reply(choices=SAMPLED, honor_stop=False, choice_logprobs=values)

    openai_server.responder = respond
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", openai_server.base_url))
    trace.load_recorded(ORIGINAL)
    trace.flag_mistake(2)
    app = make_app(Config(logprobs=True), session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        options = app.screen.query_one(OptionList)
        rows = [str(options.get_option_at_index(i).prompt) for i in range(8)]
        assert "its log-probabilities were impossible: not used" in rows[1]
        assert rows[1].startswith("2. n/a") and "★ chosen" in rows[3]
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.answer == "4" and not screen.view.running,
                       timeout=30)
        said = [n.message for n in app._notifications]
        assert any("Thought 3 came with log-probabilities no model could give" in m
                   for m in said), said
        assert screen.view.trace.steps[2].logprob is None


async def test_samples_left_with_esc_are_chosen_from_by_the_next_batch(
    store: Store, openai_server: FakeOpenAI, tmp_path: Path, capsys
) -> None:
    """The batch's session of a trace, opened in the app: `b` samples Thought 2, esc leaves
    the samples saved and the trace as it was. The next `backtrack` read that as "no sample
    differed" (kept as it was, every `chosen` false though 7 differ, 0 calls); it now applies
    the rule to the stored samples and continues, sampling nothing again."""
    from bbm_tui.cli import main
    from bbm_tui.core.records import SessionSource
    from tests.strict_json import strict_json_lines

    openai_server.responder = responder()
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", openai_server.base_url),
                                source=SessionSource.BACKTRACK)
    trace.load_recorded(ORIGINAL)
    trace.flag_mistake(2)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted)
        screen = app.screen
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen and not screen.view.running)
    assert len(store.candidates(trace.id, trace.steps[0].id, 2)) == 8
    assert store.branch(trace.id)[-1].text == ORIGINAL[-1]
    sampled = sum(1 for request in openai_server.requests if request.body.get("n") == 8)
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text(json.dumps({"input": QUESTION, "steps": ORIGINAL, "answer": "5",
                                  "target": TARGET, "mistake_index": 1}) + "\n")
    out = tmp_path / "out.jsonl"
    assert await asyncio.to_thread(main, [
        "backtrack", "--model", "openai/test", "--api-base", openai_server.base_url, "--input",
        str(source), "--out", str(out), "--locations", "gold", "--no-progress", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["tasks"]["multistep_arithmetic"]["delta_accuracy_incorrect"] == 100.0
    assert sum(1 for r in openai_server.requests if r.body.get("n") == 8) == sampled
    [row] = strict_json_lines(out)
    assert [sample["chosen"] for sample in row["samples"]] == [
        index == 1 for index in range(8)]
    assert row["new_steps"] == [ORIGINAL[0], "2 + 2 = 4", "4 * 1 = 4", "So the answer is 4"]
    assert len(store.sessions()) == 1  # the same session, now with both branches


BIG_QUESTION = "w " * 5_000_000  # 10 MB, as an earlier bbm-tui let into its store


async def test_a_session_with_a_10_mb_question_opens_cut_and_q_copies_all_of_it(
    store: Store,
) -> None:
    """It took 47 s and 871 MB to the first frame: the question pane wrapped all of it. It
    shows the first QUESTION_SHOWN characters and says how many more; Q copies the whole
    question; the target is cut the same way."""
    from bbm_tui.ui.text import QUESTION_SHOWN

    made = store.create_session(task="word_sorting", input=BIG_QUESTION, target="t" * 50_000,
                                model="replay/bbm", name="big")
    store.add_step(made.id, parent_id=None, number=1, text="Let me sort them.")
    app = make_app(session_id=made.id)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen)
                       and app.screen.is_mounted, timeout=30)
        shown = str(app.screen.query_one("#question").render())
        hidden = len("Sort the following words alphabetically: List: " + BIG_QUESTION) - (
            QUESTION_SHOWN)
        assert shown.endswith(f"… {hidden:,} more characters (Q copies the whole question)")
        assert len(shown) < QUESTION_SHOWN + 100
        target = str(app.screen.query_one("#target").render())
        assert len(target) < QUESTION_SHOWN + 100 and "30,000 more characters" in target
        await pilot.press("Q")
        await wait_for(pilot, lambda: app.clipboard.endswith(BIG_QUESTION))
        assert len(app.clipboard) == len(BIG_QUESTION) + len(
            "Sort the following words alphabetically: List: ")


async def test_the_annotation_queue_shows_a_long_question_cut(tmp_path: Path) -> None:
    """The largest question bbm-tui takes, in the queue: cut on screen, Q copies it, and
    judging a thought does not paint it again whole (the first c took 37 s with 10 MB)."""
    from bbm_tui.cli.annotate import read_annotation_files
    from bbm_tui.core.types import MAX_QUESTION_CHARS
    from bbm_tui.ui.app import AnnotateRequest
    from bbm_tui.ui.text import QUESTION_SHOWN

    question = "w" * (MAX_QUESTION_CHARS - 11) + " tail words"
    path = tmp_path / "word_sorting.jsonl"
    path.write_text(json.dumps({"input": question, "steps": ["Let me sort.", "So it is w."],
                                "answer": "w", "target": "w", "mistake_index": None}) + "\n")
    app = make_app(annotate=AnnotateRequest("ana", read_annotation_files([path], None)))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: type(app.screen).__name__ == "AnnotateScreen"
                       and app.screen.is_mounted, timeout=30)
        await pilot.pause()
        shown = str(app.screen.query_one("#a-question").render())
        assert "more characters (Q copies the whole question)" in shown
        assert len(shown) < QUESTION_SHOWN + 100 and "tail words" not in shown
        await pilot.press("c")
        await wait_for(pilot, lambda: len(app.screen.queue.judged) == 1)
        await pilot.press("Q")
        await wait_for(pilot, lambda: app.clipboard.endswith("tail words"))


async def test_a_typed_question_past_the_limit_is_refused(store: Store) -> None:
    from textual.widgets import TextArea

    from bbm_tui.core.tasks import get_task
    from bbm_tui.core.types import MAX_QUESTION_CHARS
    from bbm_tui.ui.dialogs import TypedQuestionScreen

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.store is not None)
        dialog = TypedQuestionScreen(get_task("word_sorting"))
        answers = []
        app.push_screen(dialog, answers.append)
        await wait_for(pilot, lambda: dialog.is_mounted)
        dialog.query_one(TextArea).text = "w" * (MAX_QUESTION_CHARS + 1)
        dialog.action_submit()
        await pilot.pause()
        assert answers == [] and app.screen is dialog
        said = [n.message for n in app._notifications]
        assert any(f"takes questions of up to {MAX_QUESTION_CHARS:,} characters" in m
                   for m in said), said
        dialog.query_one(TextArea).text = "b a"
        dialog.action_submit()
        await wait_for(pilot, lambda: answers == [("b a", None)])


async def test_two_apps_on_one_session_store_each_step_once(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """`bbm-tui --session 1` in two terminals, n in both: the same Thought 3 was stored
    twice as siblings (and r doubled the continuation as versions). Now the second is told
    the session is being generated elsewhere and shows it read-only (n does nothing, the
    status says why); it shows the first's thought once saved, and takes the session back
    when the first stops. A third window opened meanwhile opens read-only at once."""
    import threading

    held = threading.Event()
    openai_server.responder = lambda path, body: Reply("4 * 1 = 4\nThought 4: x", hold=held)
    trace = TraceSession.create(store, NewTrace("multistep_arithmetic", QUESTION, TARGET),
                                llm.ModelSpec("openai/test", openai_server.base_url))
    trace.load_recorded(ORIGINAL[:2])
    first, second, third = (make_app(session_id=trace.id) for _ in range(3))
    async with first.run_test(size=SIZE) as one, second.run_test(size=SIZE) as two:
        for pilot in (one, two):
            await wait_for(pilot, lambda p=pilot: isinstance(p.app.screen, TraceScreen)
                           and p.app.screen.is_mounted)
        mine, theirs = first.screen.view, second.screen.view
        await one.press("n")
        await wait_for(one, lambda: len(openai_server.requests) == 1, timeout=30)
        await two.press("n")
        await wait_for(two, lambda: theirs.busy_elsewhere is not None, timeout=30)
        status = str(theirs.query_one("#run-status").render())
        assert f"session {trace.id} is being generated by another bbm-tui" in status
        assert theirs.check_action("step", ()) is None
        await two.press("n", "r")
        await two.pause(0.2)
        assert len(openai_server.requests) == 1  # the second window asked for nothing
        async with third.run_test(size=SIZE) as three:
            await wait_for(three, lambda: isinstance(third.screen, TraceScreen)
                           and third.screen.view.busy_elsewhere is not None, timeout=30)
        held.set()
        await wait_for(one, lambda: len(mine.trace.steps) == 3 and not mine.running,
                       timeout=30)
        await wait_for(two, lambda: theirs.busy_elsewhere is None
                       and len(theirs.trace.steps) == 3, timeout=30)
        assert "it is yours again" in str(theirs.query_one("#run-status").render())
        assert theirs.trace.steps[2].id == mine.trace.steps[2].id
    steps = [step for step in store.steps_of(trace.id) if step.number == 3]
    assert [step.text for step in steps] == ["4 * 1 = 4"]
