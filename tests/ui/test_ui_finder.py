"""The mistake finder on the main screen (f), through the real store and the offline models
(replay/bbm answers from the gold label) or the local OpenAI-compatible server: each method's
verdicts on screen and in the store with their raw answers, stopping at the first "No" or
judging every step, the agreement with the person's flag, failures, Esc, resume, and the gold
label (g)."""

from __future__ import annotations

import re

import pytest
from textual.widgets import Checkbox, Input
from ui_helpers import (
    SIZE,
    make_app,
    notifications,
    recorded_session,
    run_finder,
    thought,
    wait_for,
)

from bbm_tui.core.config import Config
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.llm import ModelSpec
from bbm_tui.core.store import Store
from bbm_tui.core.trace.recording import record_find
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.ui.dialogs import ConfirmScreen, FindScreen
from bbm_tui.ui.screens.trace import TraceScreen
from bbm_tui.ui.widgets.chrome import StatusLine
from bbm_tui.ui.widgets.thought import ThoughtView
from tests.openai_server import FakeOpenAI, Reply

TRACKING = "tracking_shuffled_objects"


def text_of(screen: TraceScreen, selector: str) -> str:
    return str(screen.query_one(selector).render())


def marks(screen: TraceScreen) -> list[str | None]:
    return [view.judgement for view in screen.query(ThoughtView) if not view.streaming]


async def open_screen(pilot) -> TraceScreen:
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, TraceScreen)
                   and pilot.app.screen.is_mounted)
    await pilot.pause()
    return pilot.app.screen


# -- each method with the oracle: its verdicts are the gold label's

@pytest.mark.parametrize(("task", "index", "method"), [
    (TRACKING, 0, "direct-trace"),
    (TRACKING, 0, "direct-step"),
    (TRACKING, 0, "cot-step"),
    (TRACKING, 1, "direct-step"),  # no mistake: every thought judged, all Yes
    (TRACKING, 1, "direct-trace"),
    ("word_sorting", 0, "cot-trace"),
    ("word_sorting", 2, "cot-trace"),  # no mistake
    ("word_sorting", 0, "cot-step"),
    (TRACKING, 0, "critic"),  # ours, offered for the paper's tasks too
    ("word_sorting", 2, "critic"),  # no mistake
])
async def test_each_method_with_replay_finds_the_gold_label(
    store: Store, task: str, index: int, method: str
) -> None:
    row = bundled_rows(task)[index]
    gold = None if row.mistake_index is None else row.mistake_index + 1
    trace = recorded_session(store, task, index)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        offered = [choice.name for choice in app.screen._methods]
        # The paper's methods for the task, the critic, then the task verifier.
        assert offered == (["direct-trace", "direct-step", "cot-step", "cot-trace", "critic",
                            "verify"] if task == "word_sorting"
                           else ["direct-trace", "direct-step", "cot-step", "critic", "verify"])
        # The session's model is the default.
        assert app.screen.query_one("#find-model", Input).value == "replay/bbm"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)

        await run_finder(pilot, method)
        [run] = store.finder_runs(trace.id)
        assert (run.method, run.model, run.finished, run.parsed) == (method, "replay/bbm",
                                                                    True, True)
        assert run.mistake_number == gold
        assert run.leaf_step_id == trace.steps[-1].id
        assert all(verdict.raw and verdict.call is not None for verdict in run.verdicts)
        said = f"first mistake in Thought {gold}" if gold else "no mistake"
        assert said in text_of(screen, "#finder")
        assert f"{method} · replay/bbm" in text_of(screen, "#finder")
        assert text_of(screen, "#run-status").startswith(f"Model says: {said}.")
        step_level = method.endswith("-step")
        if step_level:
            judged = gold or len(row.steps)  # stops at the first No
            assert [v.step_number for v in run.verdicts] == list(range(1, judged + 1))
            expected = ["Yes"] * (judged - 1) + ["No" if gold else "Yes"]
            assert [v.verdict for v in run.verdicts] == expected
            assert marks(screen) == ([{"Yes": "yes", "No": "no"}[v] for v in expected]
                                     + [None] * (len(row.steps) - judged))
            views = list(screen.query(ThoughtView))
            assert [views[i].judge_raw for i in range(judged)] == [v.raw for v in run.verdicts]
            assert "model: ✓" in views[0].meta
            if gold:
                assert "model: ✗" in views[gold - 1].meta
        else:
            [verdict] = run.verdicts
            assert verdict.step_number is None and verdict.verdict == (str(gold) if gold
                                                                       else "No")
            assert screen.view.finder.trace_raw == verdict.raw
            assert marks(screen) == [("first" if n == gold else None)
                                     for n in range(1, len(row.steps) + 1)]
        # Every call is counted in the title's totals.
        calls = len(run.verdicts)
        assert f"{calls} call{'' if calls == 1 else 's'} · " in text_of(
            screen, "#title-bar .title-right")


async def test_stop_at_the_first_no_or_judge_every_step(store: Store) -> None:
    row = bundled_rows(TRACKING)[3]  # first mistake in Thought 5 of 7
    assert (row.mistake_index, len(row.steps)) == (4, 7)
    trace = recorded_session(store, TRACKING, 3)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-step")
        assert marks(screen) == ["yes"] * 4 + ["no", None, None]
        first = store.finder_runs(trace.id)[-1]
        assert [v.verdict for v in first.verdicts] == ["Yes"] * 4 + ["No"]
        assert first.params["judge_all"] is False

        await run_finder(pilot, "direct-step", judge_all=True)
        assert marks(screen) == ["yes"] * 4 + ["no"] * 3
        second = store.finder_runs(trace.id)[-1]
        assert [v.verdict for v in second.verdicts] == ["Yes"] * 4 + ["No"] * 3
        assert second.params["judge_all"] is True
        # Still the first "No" is the mistake.
        assert second.mistake_number == 5
        assert "every step" in text_of(screen, "#finder")
        # The dialog remembers the last run's choices.
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        assert app.screen.method.name == "direct-step"
        assert app.screen.query_one("#find-judge-all", Checkbox).value is True
        await pilot.press("up")  # a trace-level method cannot judge every step
        assert app.screen.query_one("#find-judge-all", Checkbox).disabled
        await pilot.press("escape")


# -- the model's verdict beside the person's flag

async def test_agreement_with_the_persons_label(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 0)  # gold: Thought 4
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        assert not screen.query_one("#agreement").display  # nothing to compare yet
        await run_finder(pilot, "direct-trace")
        assert text_of(screen, "#agreement") == "You: not labelled yet · Model: Thought 4"
        assert "You have not labelled the trace yet" in text_of(screen, "#run-status")
        # The cursor went to the thought the model faults: x agrees with the model.
        assert screen.view.selected == 4
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        assert text_of(screen, "#agreement") == "agree ✓ · You: Thought 4 · Model: Thought 4"
        # The person's flag and the model's mark stand side by side on the thought.
        view = thought(screen, 4)
        assert view.status == "mistake" and view.judgement == "first"

        await pilot.press("k", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 3)
        assert text_of(screen, "#agreement") == (
            "disagree ✗ · You: Thought 3 · Model: Thought 4")

        await pilot.press("c")  # the answer is wrong: c asks first (issue 10, item 5)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.view.trace.no_mistake)
        assert text_of(screen, "#agreement") == (
            "disagree ✗ · You: no mistake · Model: Thought 4")

        await pilot.press("u", "u", "u")
        await wait_for(pilot, lambda: screen.view.trace.label is None)
        assert text_of(screen, "#agreement") == "You: not labelled yet · Model: Thought 4"

        # A new run with the person's label in place says so in the status line.
        assert screen.view.selected == 3
        await pilot.press("j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await run_finder(pilot, "direct-step")
        assert "You said Thought 4: you agree." in text_of(screen, "#run-status")


async def test_the_simulated_reward_model_runs_and_is_compared(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("j", "j", "j", "x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 4)
        await run_finder(pilot, "direct-trace", model="simulated/rm-0.0")
        run = store.finder_runs(trace.id)[-1]
        # Never right: some other location than the gold one.
        assert run.model == "simulated/rm-0.0" and run.finished and run.mistake_number != 4
        assert "simulated/rm-0.0" in text_of(screen, "#finder")
        assert text_of(screen, "#agreement").startswith(
            "disagree ✗ · You: Thought 4 · Model: Thought ")


# -- failures, Esc, resume

async def test_a_failing_finder_is_one_message_and_no_result(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.enqueue(Reply("Yes"), Reply(status=401,
                                              error_body={"error": {"message": "bad key"}}))
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-step", model="openai/test",
                         api_base=openai_server.base_url)
        assert screen.view.finder.state == "failed"
        # Said once, in the status line (no toast repeating it).
        assert not notifications(app)
        status = text_of(screen, "#run-status")
        assert status.startswith("Mistake finding failed") and "no result" in status
        assert screen.query_one("#run-status").has_class("-error")
        assert "failed after 1 answer: no result" in text_of(screen, "#finder")
        assert not screen.query_one("#agreement").display
        assert marks(screen) == ["yes", None, None, None, None]  # no "judging…" left over
        [run] = store.finder_runs(trace.id)
        assert not run.finished and run.mistake_number is None and run.parsed is None
        assert [v.raw for v in run.verdicts] == ["Yes"]
        assert run.ended == "failed" and run.error.rstrip(".") in status
        assert len(openai_server.requests) == 2  # a 401 is not retried

        # The dialog offers the same model and api base again.
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        assert app.screen.query_one("#find-model", Input).value == "openai/test"
        assert app.screen.query_one("#find-api-base", Input).value == openai_server.base_url
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        # The app is still usable: another run, then generating keys.
        await run_finder(pilot, "direct-step", model="replay/bbm", api_base="")
        assert screen.view.finder.state == "finished" and screen.view.finder.mistake_number == 4
        assert not notifications(app)
        assert screen.view.check_action("step", ()) is True


async def test_resume_tells_a_failed_run_from_a_stopped_one(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """The store keeps how a run without a result ended, so a resumed session says "failed"
    and why, not "stopped"."""
    openai_server.enqueue(Reply("Yes"), Reply(status=401,
                                              error_body={"error": {"message": "bad key"}}))
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-step", model="openai/test",
                         api_base=openai_server.base_url)
        live = text_of(screen, "#finder")
    again = make_app(session_id=trace.id)
    async with again.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await wait_for(pilot, lambda: screen.view.finder is not None)
        await pilot.pause()
        assert screen.view.finder.state == "failed"
        resumed = text_of(screen, "#finder")
        assert resumed == live
        assert "failed after 1 answer: no result (openai/test at " in resumed
        assert "needs an API key: set OPENAI_API_KEY" in resumed
        assert marks(screen) == ["yes", None, None, None, None]


async def test_the_oracle_on_a_trace_it_does_not_know_says_so(store: Store) -> None:
    trace = TraceSession.create(store, NewTrace("word_sorting", "zebra apple"), ModelSpec())
    trace.load_recorded(["z comes after a.", "So the answer is apple zebra"])
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-step")
        assert not notifications(app)
        assert "replay/bbm does not know this trace" in text_of(screen, "#run-status")
        assert text_of(screen, "#run-status").endswith("choose another model. The run has "
                                                       "no result.")
        assert "failed: no result" in text_of(screen, "#finder")
        # Refused before any answer: no failed run is stored (issue 34, item 9).
        assert store.finder_runs(trace.id) == []


async def test_escape_stops_a_finder_and_the_run_has_no_result(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.enqueue(Reply("Yes"), Reply("Yes", delay_s=30))
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-step", model="openai/test",
                         api_base=openai_server.base_url, wait=False)
        await wait_for(pilot, lambda: screen.view.finding and len(screen.view.finder.verdicts) == 1
                       and len(openai_server.requests) == 2, timeout=30)
        assert marks(screen)[:2] == ["yes", "pending"]
        assert "judging Thought 2 of 5" in text_of(screen, "#run-status")
        # n and r wait while the finder runs; esc is the key that works.
        assert screen.view.check_action("step", ()) is None
        assert screen.view.check_action("stop", ()) is True
        await pilot.press("escape")
        await wait_for(pilot, lambda: not screen.view.finding)
        await wait_for(pilot, lambda: screen.view.finder is not None
                       and screen.view.finder.state == "stopped")
        await wait_for(pilot, lambda: "Stopped the mistake finder"
                       in text_of(screen, "#run-status"))
        assert marks(screen) == ["yes", None, None, None, None]
        assert "stopped after 1 answer: no result" in text_of(screen, "#finder")
        [run] = store.finder_runs(trace.id)
        assert not run.finished and [v.verdict for v in run.verdicts] == ["Yes"]
        assert (run.ended, run.error) == ("stopped", None)
        assert not notifications(app)
        assert screen.view.check_action("find", ()) is True
        assert screen.view.check_action("step", ()) is True


async def test_resume_shows_the_latest_run_from_the_store(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 3)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-trace")
        await run_finder(pilot, "cot-step", judge_all=True)
        assert screen.view.selected == 5
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 5)
        before = ([(v.meta, v.judge_raw) for v in screen.query(ThoughtView)],
                  text_of(screen, "#finder"), text_of(screen, "#agreement"))
    again = make_app(session_id=trace.id)
    async with again.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await wait_for(pilot, lambda: screen.view.finder is not None)
        await pilot.pause()
        after = ([(v.meta, v.judge_raw) for v in screen.query(ThoughtView)],
                 text_of(screen, "#finder"), text_of(screen, "#agreement"))
        assert after == before
        assert "cot-step · replay/bbm · every step" in after[1]
        assert after[2] == "agree ✓ · You: Thought 5 · Model: Thought 5"
        # The reasoning is there to expand, collapsed at first.
        assert screen.view.selected == 5
        view = thought(screen, 5)
        assert not view.expanded and "The model's answer" not in view.shown
        await pilot.press("e")
        assert view.expanded and "Thought 5 is the first mistake" in view.shown
        await pilot.press("e")
        assert not view.expanded


async def test_e_expands_the_answer_and_trace_level_answers_show_on_the_left(
    store: Store,
) -> None:
    trace = recorded_session(store, "word_sorting", 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        # No run yet: e is not offered.
        assert screen.view.check_action("reasoning", ()) is False
        await run_finder(pilot, "cot-trace")
        answer = screen.query_one("#finder-answer")
        assert not answer.display
        await pilot.press("e")
        assert answer.display
        assert "So the answer is 2" in str(answer.render())
        await pilot.press("e")
        assert not answer.display

        await run_finder(pilot, "cot-step")
        # Thought 1 was judged; Thought 3 was not (the run stopped at Thought 2).
        assert screen.view.selected == 2
        await pilot.press("k", "e")
        first = thought(screen, 1)
        assert first.expanded and "The model's answer: Comment 1:" in first.shown
        await pilot.press("j", "j", "e")
        assert any("has not judged Thought 3" in note for note in notifications(app))


async def test_a_trace_that_grew_after_the_run_says_what_was_judged(store: Store) -> None:
    row = bundled_rows(TRACKING)[0]
    trace = TraceSession.create(
        store, NewTrace(TRACKING, row.input, row.target, 0, row.mistake_index), ModelSpec())
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        for count in (1, 2, 3):
            await pilot.press("n")
            await wait_for(pilot, lambda count=count: len(screen.view.trace.steps) == count
                           and not screen.view.running)
        await run_finder(pilot, "direct-step")
        assert "no mistake" in text_of(screen, "#finder")  # nothing wrong in 1-3
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 4 and not screen.view.running)
        assert "on Thoughts 1–3" in text_of(screen, "#finder")
        assert marks(screen) == ["yes", "yes", "yes", None]


async def test_finder_runs_saved_outside_the_app_are_shown(store: Store) -> None:
    """A run recorded by the core (as `bbm-tui find` could) on the session shows on open."""
    trace = recorded_session(store, TRACKING, 0)
    async for _ in record_find(store, trace.id, TRACKING, "direct-step", trace.session.input,
                               trace.texts, ModelSpec("simulated/rm-1.0"),
                               leaf_step_id=trace.steps[-1].id):
        pass
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await wait_for(pilot, lambda: screen.view.finder is not None)
        await pilot.pause()
        assert marks(screen) == ["yes", "yes", "yes", "no", None]
        assert "simulated/rm-1.0" in text_of(screen, "#finder")


# -- untrusted answers stay text

HOSTILE = "[bold]x[/ \x1b[31mred \x1b]52;c;SGVsbG8=\x07 \u202eevil [@click=app.quit]q[/]"


async def test_hostile_finder_answers_render_literally(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.enqueue(Reply(f"{HOSTILE}\nSo Thought 1 is correct. Yes"),
                          Reply(f"{HOSTILE} and nothing else"))
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "cot-step", model="openai/test",
                         api_base=openai_server.base_url)
        assert marks(screen)[:2] == ["yes", "unparsed"]
        assert "unparseable answer on Thought 2" in text_of(screen, "#finder")
        await pilot.press("e")
        shown = str(thought(screen, 1).render())
        for literal in ("[bold]x[/", "␛[31mred", "␛]52;c;SGVsbG8=␇", "<U+202E>evil",
                        "[@click=app.quit]q[/]"):
            assert literal in shown
        assert not any(bad in shown for bad in ("\x1b", "\x07", "\u202e"))
        # Stored verbatim.
        assert store.finder_runs(trace.id)[-1].verdicts[0].raw.startswith(HOSTILE)
        assert app.is_running

        openai_server.enqueue(Reply(f"{HOSTILE}"))
        await run_finder(pilot, "direct-trace", model="openai/test",
                         api_base=openai_server.base_url)
        finder = text_of(screen, "#finder")
        assert "unparseable: [bold]x[/ ␛[31mred" in finder and "\x1b" not in finder
        assert "Model says: unparseable: [bold]x[/" in text_of(screen, "#run-status")
        assert app.is_running


# -- the gold label, hidden until asked for

async def test_g_shows_and_hides_the_gold_label(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        gold = screen.query_one("#gold")
        assert not gold.display  # not shown unless asked: it would bias an annotator
        await pilot.press("g")
        await wait_for(pilot, lambda: gold.display)
        assert text_of(screen, "#gold") == "Gold: ✗ first mistake in Thought 4"
        await pilot.press("g")
        assert not gold.display


@pytest.mark.parametrize(("case", "expected"), [
    ("no mistake", r"^Gold: ✓ no mistake$"),
    ("typed", r"^Gold: none \(not a question of the dataset\)$"),
    ("prefix", r"^Gold: ✗ first mistake in Thought 4\n\(for the dataset's 5 thoughts; 2 are "
               r"written so far\)$"),
    ("different", r"^Gold: ✗ first mistake in Thought 4\n\(for the dataset's recorded trace; "
                  r"this one departs from it at Thought 2\)$"),
])
async def test_the_gold_label_says_what_it_is_about(
    store: Store, case: str, expected: str
) -> None:
    steps = bundled_rows(TRACKING)[0].steps
    if case == "no mistake":
        trace = recorded_session(store, TRACKING, 1)
    elif case == "typed":
        trace = TraceSession.create(store, NewTrace(TRACKING, "Q: a question of my own"),
                                    ModelSpec())
        trace.load_recorded(["Thought one."])
    elif case == "prefix":
        trace = recorded_session(store, TRACKING, 0, steps=steps[:2])
    else:
        trace = recorded_session(store, TRACKING, 0, steps=[steps[0], "Something else."])
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("g")
        await wait_for(pilot, lambda: screen.query_one("#gold").display)
        assert re.match(expected, text_of(screen, "#gold")), text_of(screen, "#gold")


# -- small fixes: the header, the answer line, redacted errors

async def test_the_header_and_the_answer_read_cleanly(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        assert text_of(screen, "#title-bar .title-left") == (
            "bbm-tui — tracking_shuffled_objects #0 — replay/bbm")
        assert text_of(screen, "#answer") == "Answer: (A)  ✗ not the target"
        # In an SVG screenshot no run of text there starts with a space: librsvg drops such
        # spaces, which read "bbm-tui—  tracking_shuffled_objects#0" and "(A)✗ not the target".
        svg = app.export_screenshot()
        runs = [text.replace("&#160;", " ") for line, text in
                re.findall(r'clip-path="url\(#terminal-\d+-line-(\d+)\)">([^<]*)<', svg)
                if line == "0" or "target" in text or "Answer" in text]
        assert any("tracking_shuffled_objects" in run for run in runs)
        assert any("not the target" in run for run in runs)
        assert not [run for run in runs if run.startswith(" ") and run.strip()], runs


async def test_a_worker_error_is_redacted(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-live-0123456789abcdefSECRET"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    trace = recorded_session(store, TRACKING, 0)

    def broken(self, number):
        raise RuntimeError(f"proxy said: key {secret} refused \x1b[31m[bold]")

    monkeypatch.setattr(TraceSession, "flag_mistake", broken)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot)
        await pilot.press("x")
        await wait_for(pilot, lambda: bool(notifications(app)))
        [note] = notifications(app)
        assert secret not in note and "[redacted]" in note
        assert "\x1b" not in note and "␛[31m[bold]" in note


# -- the task verifier as a method (issue 13, item 2)

async def test_the_verifier_is_a_method_with_no_model(store: Store) -> None:
    row = bundled_rows("word_sorting")[66]  # 'scorch' given the wrong letter number
    trace = recorded_session(store, "word_sorting", 66)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        dialog = app.screen
        names = [choice.name for choice in dialog._methods]
        assert names[-1] == "verify"
        await pilot.pause()
        await pilot.press(*["down"] * (len(names) - 1 - names.index(dialog.method.name)))
        assert dialog.method.name == "verify"
        assert dialog.query_one("#find-model", Input).disabled
        offered = dialog.query_one("#find-model", Input).value
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await run_finder(pilot, "verify")
        shown = screen.view.finder
        assert (shown.method, shown.model, shown.state) == ("verify", "verifier", "finished")
        assert shown.mistake_number == 1
        # A program judged, not a model: the verdict and the status say so.
        status = text_of(screen, "#run-status")
        assert status.startswith("Verifier says: first mistake in Thought 1.")
        assert "shows the verifier's reason" in status and "model" not in status.lower()
        assert text_of(screen, "#finder").startswith("Verifier: ✗ first mistake in Thought 1")
        # Every step judged, each with its reason; no model call counted.
        assert len(shown.verdicts) == len(row.steps)
        assert "'scorch' starts with s (19)" in shown.verdicts[1][1]
        assert screen.view.totals.calls == 0
        view = thought(screen, 1)
        assert view.judgement == "no"
        runs = store.finder_runs(trace.id)
        assert (runs[-1].method, runs[-1].model, runs[-1].mistake_number) == (
            "verify", "verifier", 1)
        # Asked again, the dialog offers the model it had, not the verifier's name (a model
        # method run with "verifier" failed: "LLM Provider NOT provided").
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        assert app.screen.method.name == "verify"
        assert app.screen.query_one("#find-model", Input).value == offered != "verifier"


async def test_live_verifier_marks_each_thought_as_it_finishes(store: Store) -> None:
    from bbm_tui.core.config import Config

    app = make_app(Config(verify_live=True), task="word_sorting", question=66)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.trace.steps) == 1 and not screen.view.running
                       and screen.view.finder is not None and len(screen.view.finder.verdicts) == 1)
        # Thought 1 gives 'scorch' the wrong letter number: marked at once, with the reason.
        assert screen.view.finder.method == "verify" and screen.view.finder.verdicts[1][0] == "No"
        assert "'scorch' starts with s" in screen.view.finder.verdicts[1][1]
        assert thought(screen, 1).judgement == "no"
        await pilot.press("n")
        await wait_for(pilot, lambda: len(screen.view.finder.verdicts) == 2
                       and not screen.view.running)
        assert store.finder_runs(screen.view.trace.id) == []  # live marks are not saved runs
        await pilot.press("V")
        await wait_for(pilot, lambda: screen.view.finder is None)
        assert "Live verifier off" in text_of(screen, "#run-status")


async def test_enter_runs_the_finder_from_the_checkbox_and_space_toggles_it(
    store: Store,
) -> None:
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        dialog = app.screen
        await pilot.press("down")  # a step-level method: the checkbox counts
        box = dialog.query_one("#find-judge-all", Checkbox)
        box.focus()
        before = box.value
        await pilot.press("space")
        assert box.value is not before
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: screen.view.finder is not None and not screen.view.finding,
                       timeout=30)
        assert screen.view.finder.judge_all is box.value


async def test_finder_runs_stay_with_their_branch(store: Store) -> None:
    """A finder run belongs to the branch it judged, as a label does: on a new branch
    (backtracking from the flag) its marks and its verdict are not shown as the new branch's;
    the new branch's own run shows there; < and > bring each branch's run back with it."""
    from bbm_tui.ui.screens.backtrack import CandidatesScreen

    task, index = "multistep_arithmetic", 7  # first mistake in Thought 2; answer 0, not -7
    trace = recorded_session(store, task, index)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-step", model="replay/bbm")
        assert marks(screen) == ["yes", "no", None, None]
        original = [step.id for step in screen.view.trace.steps]
        screen.view.selected = 2
        await pilot.press("x")
        await wait_for(pilot, lambda: screen.view.trace.mistake_number == 2)
        await pilot.press("b")
        await wait_for(pilot, lambda: isinstance(app.screen, CandidatesScreen)
                       and app.screen.all_arrived, timeout=30)
        await pilot.press("enter")
        await wait_for(pilot, lambda: screen.view.trace.correct and not screen.view.running,
                       timeout=30)
        # The new branch: no finder has judged it.
        await wait_for(pilot, lambda: screen.view.finder is None)
        assert marks(screen) == [None] * len(screen.view.trace.steps)
        assert not screen.query_one("#finder").display
        assert not screen.query_one("#agreement").display
        # Its own run (the task's verifier: every thought right now).
        await run_finder(pilot, "verify")
        assert marks(screen) == ["yes"] * len(screen.view.trace.steps)
        backtracked = [step.id for step in screen.view.trace.steps]
        # < on Thought 2: the original branch, with its own run's marks and verdict again.
        screen.view.selected = 2
        await pilot.press("less_than_sign")
        await wait_for(pilot, lambda: [s.id for s in screen.view.trace.steps] == original)
        await wait_for(pilot, lambda: marks(screen) == ["yes", "no", None, None])
        assert screen.view.finder.method == "direct-step" and screen.view.finder.mistake_number == 2
        assert "agree" in text_of(screen, "#agreement")
        await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: [s.id for s in screen.view.trace.steps] == backtracked)
        await wait_for(pilot, lambda: screen.view.finder is not None
                       and screen.view.finder.method == "verify")
        assert marks(screen) == ["yes"] * len(screen.view.trace.steps)


async def tab_to(pilot, widget_id: str) -> None:
    """Tab (as a person would) until the widget `widget_id` has the focus."""
    for _ in range(10):
        focused = pilot.app.focused
        if focused is not None and focused.id == widget_id:
            return
        await pilot.press("tab")
    raise AssertionError(f"tab never reached #{widget_id}")


async def test_enter_runs_the_finder_from_the_model_field(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await tab_to(pilot, "find-model")
        await pilot.press(*"simulated/rm-1", "enter")  # typed over the selected model
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: screen.view.finder is not None and not screen.view.finding,
                       timeout=30)
        assert screen.view.finder.model == "simulated/rm-1"
        assert screen.view.finder.method == "direct-step"  # the dialog's first choice here


async def test_enter_runs_the_finder_from_the_api_base_field(store: Store) -> None:
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.press("up")  # direct, trace-level
        await tab_to(pilot, "find-api-base")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen)
        await wait_for(pilot, lambda: screen.view.finder is not None and not screen.view.finding,
                       timeout=30)
        assert (screen.view.finder.method, screen.view.finder.model) == ("direct-trace",
                                                                         "replay/bbm")
        assert store.finder_runs(screen.view.trace.id)


async def test_the_description_follows_the_highlighted_method(store: Store) -> None:
    from bbm_tui.core.judging.judges import judges_for

    # Every method word sorting has, CoT trace-level too (the zero-shot ones are for tasks
    # without few-shot finding prompts).
    METHOD_HINTS = {judge.name: judge.hint for judge in judges_for("word_sorting")}
    trace = recorded_session(store, "word_sorting", 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        await open_screen(pilot)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        dialog = app.screen
        names = [choice.name for choice in dialog._methods]
        assert set(names) == set(METHOD_HINTS)

        def described() -> str:
            return str(dialog.query_one("#find-method-hint").render()).strip()

        seen = []
        for _ in names:  # down through every method, round to the first again
            await pilot.press("down")
            await wait_for(pilot, lambda: described() == METHOD_HINTS[dialog.method.name])
            seen.append(dialog.method.name)
        assert sorted(seen) == sorted(names)
        await pilot.press("up")
        await wait_for(pilot, lambda: described() == METHOD_HINTS[dialog.method.name])
        assert dialog.method.name == seen[-2]


@pytest.mark.parametrize("size", [(80, 24), SIZE])
async def test_the_finder_dialog_greys_what_the_method_does_not_use(store: Store,
                                                                    size) -> None:
    """The model and api base mean nothing to the task verifier, and "judge every step"
    nothing to a trace-level method or the verifier: each is disabled and says so as the
    arrows go through the methods. The checkbox shows a tick when on and nothing when off
    (Textual's X read as ticked either way)."""
    trace = recorded_session(store, "word_sorting", 3)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TraceScreen))
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, FindScreen))
        await pilot.pause()
        dialog = app.screen
        model, api_base = dialog.query_one("#find-model"), dialog.query_one("#find-api-base")
        judge_all = dialog.query_one("#find-judge-all", Checkbox)
        seen = {}
        for _ in dialog._methods:
            method = dialog.method
            seen[method.name] = (model.disabled, api_base.disabled, judge_all.disabled,
                                 str(model.border_title), str(judge_all.label))
            await pilot.press("down")
        assert seen["verify"][:3] == (True, True, True)
        assert "not used" in seen["verify"][3] and "step-level methods only" in seen["verify"][4]
        assert seen["direct-trace"][:3] == (False, False, True)
        assert seen["direct-trace"][3] == "Model"
        assert seen["direct-step"][:3] == seen["cot-step"][:3] == (False, False, False)
        while dialog.method.name != "direct-step":
            await pilot.press("down")
        assert "✓" not in judge_all.render().plain and not judge_all.value
        judge_all.value = True
        await pilot.pause()
        assert "✓" in judge_all.render().plain


async def test_the_status_line_says_when_a_finders_call_is_retried(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """A call that timed out is made again, and the status line says so while it runs
    ("retry 2 of 4 (timed out)"); the answer that then comes is the run's."""
    critic = "Thought 1 swaps the balls the question says. So the first mistake is \\boxed{1}"
    # Margins wide enough for a loaded machine: silent 12 s against a 3 s timeout.
    openai_server.enqueue(Reply(critic, first_chunk_delay_s=12.0),
                          Reply(critic, chunk_chars=4, chunk_delay_s=0.15))
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(Config(timeout=3.0), session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "critic", model="openai/test", api_base=openai_server.base_url,
                         wait=False)
        await wait_for(pilot, lambda: "retry 2 of 4 (timed out)"
                       in text_of(screen, "#run-status"), timeout=40)
        status = text_of(screen, "#run-status")
        assert status.startswith("The model (") and "is reading the whole trace…" in status
        await wait_for(pilot, lambda: not screen.view.finding, timeout=60)
        assert screen.view.finder.state == "finished"
        assert screen.view.finder.mistake_number == 1
        assert "retry" not in text_of(screen, "#run-status")
        [run] = store.finder_runs(trace.id)
        assert run.finished and [v.raw for v in run.verdicts] == [critic]
        assert len(openai_server.requests) == 2


async def test_a_refused_finder_is_not_stored_and_its_reason_is_whole(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """No key: the finder is refused before any call. Nothing ran, so no failed run is
    stored (each attempt was one, its reason cut at 400 characters; issue 34, item 9); the
    reason is said whole (the messages screen has it all)."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    trace = recorded_session(store, TRACKING, 0)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_screen(pilot)
        await run_finder(pilot, "direct-trace", model="openai/gpt-4o-mini", api_base="")
        await wait_for(pilot, lambda: not screen.view.finding)
        assert "needs an API key: set OPENAI_API_KEY" in \
            screen.query_one("#run-status", StatusLine).said
        assert store.finder_runs(trace.id) == []
        kept = [entry.text for entry in app.message_log.newest_first()]
        assert any("Mistake finding failed: openai/gpt-4o-mini needs an API key: set "
                   "OPENAI_API_KEY" in text and "…" not in text for text in kept), kept


async def test_a_long_finder_error_is_cut_in_the_pane_and_whole_in_the_messages(
        store: Store) -> None:
    """Issue 34 item 12: the pane cuts a failed run's reason at 100 characters; it says the
    messages screen has it, and there it is whole (a run read back from the store too)."""
    trace = recorded_session(store, TRACKING, 0)
    reason = ("the server said: " + "every word of a long reason " * 12 + "END").strip()
    run_id = store.create_finder_run(trace.id, method="direct-trace", model="openai/test",
                                     params={})
    store.end_finder_run(run_id, ended="failed", error=reason)
    app = make_app(session_id=trace.id)
    async with app.run_test(size=SIZE) as pilot:
        screen = await open_screen(pilot)
        await wait_for(pilot, lambda: screen.view.finder is not None)
        await pilot.pause()
        shown = text_of(screen, "#finder")
        assert "END" not in shown
        assert "(whole in messages, M)" in shown, shown
        assert [entry.text for entry in app.message_log.newest_first()
                if reason in entry.text], app.message_log.newest_first()
        # Shown again (another branch, a resize), it is kept once.
        screen.view.finder = screen.view.finder
        await pilot.pause()
        assert sum(reason in entry.text for entry in app.message_log.newest_first()) == 1
