"""Thinking generation (issue 32, items 1, 2 and the store of 3): one call a trace, the
reasoning cut into steps as it streams and given as the stepper's events; the raw reasoning
stored whole with its kind, the steps a view of it that can be re-cut without a call; a
stream cut mid-reasoning keeps the steps it finished."""

from __future__ import annotations

from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.splitting import split_text, stripped_steps
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    StepDelta,
    StepFailed,
    StepFinished,
    StepStarted,
    TraceFinished,
)
from bbm_tui.core.generation.thinking import ReasoningFinished, answer_of, run_thinking
from bbm_tui.core.llm.offline import thinking as offline
from bbm_tui.core.llm.records import UsageCounts
from bbm_tui.core.llm.usage import cost_of
from bbm_tui.core.prompts.thinking import thinking_prompt
from bbm_tui.core.records import ReasoningKind, TraceEnd
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import TASK_NAMES, get_task
from bbm_tui.core.trace.session import NewTrace, TraceSession
from bbm_tui.core.types import SplitRule, StepOrigin, StepperSettings
from tests.fake_server import Reply
from tests.openai_server import FakeOpenAI

THINKING = llm.ModelSpec("solver/thinking", mode="thinking")
TASK = "multistep_arithmetic"


@pytest.fixture(autouse=True)
def _instant(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "0")


async def events_of(spec: llm.ModelSpec, task: str, question: str,
                    settings: StepperSettings | None = None, target: str | None = None
                    ) -> list[object]:
    return [event async for event in run_thinking(task, question, spec, target=target,
                                                  settings=settings)]


@pytest.mark.parametrize("rule", list(SplitRule))
async def test_the_steps_are_the_reasoning_cut_by_the_rule(rule: SplitRule) -> None:
    row = bundled_rows(TASK)[4]
    events = await events_of(THINKING, TASK, row.input, StepperSettings(split=rule), row.target)
    reply = offline.respond(offline.MODEL, [{"role": "user",
                                             "content": thinking_prompt(TASK, row.input)}])
    finished = [event for event in events if isinstance(event, StepFinished)]
    assert [event.text for event in finished] == stripped_steps(split_text(reply.reasoning, rule))
    assert "".join(event.raw or "" for event in finished) == reply.reasoning
    assert [event.number for event in finished] == list(range(1, len(finished) + 1))
    reasoning = next(event for event in events if isinstance(event, ReasoningFinished))
    assert reasoning.text == reply.reasoning and reasoning.answer_text == reply.content
    assert reasoning.kind == ReasoningKind.RAW and reasoning.split == rule
    answer = get_task(TASK).extract_answer(reply.content)
    assert finished[-1].answer == answer and all(e.answer is None for e in finished[:-1])
    found = next(event for event in events if isinstance(event, AnswerFound))
    assert found.answer == answer and found.correct == (answer == row.target)
    end = events[-1]
    assert isinstance(end, TraceFinished) and end.reason == TraceEnd.ANSWER
    # One call: every step's share carries its id; only the first its prompt.
    assert len({event.call.one_call for event in finished}) == 1
    assert [event.call.one_call_share for event in finished] == list(range(len(finished)))


async def test_steps_stream_as_the_stepper_streams_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BBM_TUI_REPLAY_TPS", "5000")
    row = bundled_rows("word_sorting")[2]
    events = await events_of(THINKING, "word_sorting", row.input)
    opened: list[int] = []
    shown: dict[int, str] = {}
    for event in events:
        if isinstance(event, StepStarted):
            opened.append(event.number)
        elif isinstance(event, StepDelta):
            assert event.number == opened[-1]  # text only for the open step
            shown[event.number] = shown.get(event.number, "") + event.text
        elif isinstance(event, StepFinished):
            assert event.number == opened[-1]
            assert shown[event.number].strip().startswith(event.text[:20])
    finished = [event.number for event in events if isinstance(event, StepFinished)]
    assert opened == finished and len(finished) > 3
    # The deltas of a step given while the call streamed are more than one: it grew live.
    assert sum(isinstance(event, StepDelta) for event in events) > 3 * len(finished)


def test_the_answer_is_the_last_line_that_states_one() -> None:
    task = get_task("tracking_shuffled_objects")
    assert answer_of(task, "So the answer is (A)\nActually, so the answer is (B)") == "(B)"
    assert answer_of(task, "I could not say.") is None


def test_a_paper_tasks_answer_ends_without_the_sentences_full_stop() -> None:
    arithmetic = get_task("multistep_arithmetic")
    assert answer_of(arithmetic, "So the answer is 12.") == "12"
    assert arithmetic.is_correct(answer_of(arithmetic, "So the answer is -12."), "-12")
    assert answer_of(get_task("dyck_languages"), "So the answer is ) ].") == ") ]"
    # No target of the paper's ends with a full stop, in the shipped dataset either.
    assert not any(row.target.strip().endswith(".") for name in TASK_NAMES
                   for row in bundled_rows(name))


async def test_a_session_stores_the_reasoning_whole_and_re_cuts_it_without_a_call(
    tmp_path: Path,
) -> None:
    row = bundled_rows(TASK)[4]
    with Store.open(tmp_path / "store.sqlite3") as store:
        trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target), THINKING)
        async for _event in trace.generate(settings=StepperSettings(split=SplitRule.PARAGRAPH)):
            pass
        reasoning = trace.reasoning()
        assert reasoning is not None and reasoning.complete
        assert reasoning.kind == "raw"
        assert (reasoning.answer_text or "").startswith("So the answer is")
        assert reasoning.reasoning_tokens and reasoning.reasoning_tokens > 20
        assert all(step.origin == StepOrigin.THINKING for step in trace.steps)
        assert trace.split_rule() == SplitRule.PARAGRAPH
        paragraphs = trace.texts
        assert trace.answer is not None and trace.finished
        calls_before = store.totals(trace.id).calls
        assert calls_before == 1  # one call for the whole trace

        assert trace.recut(SplitRule.SENTENCE)
        assert trace.split_rule() == SplitRule.SENTENCE
        assert trace.texts == stripped_steps(split_text(reasoning.text, SplitRule.SENTENCE))
        assert len(trace.texts) > len(paragraphs) and trace.answer is not None
        assert store.totals(trace.id).calls == calls_before  # no new call
        # Back to paragraphs: the view made first, not a third one.
        before = len(store.steps_of(trace.id))
        assert trace.recut(SplitRule.PARAGRAPH)
        assert trace.texts == paragraphs and len(store.steps_of(trace.id)) == before

        # Reopened, it is as it was.
        again = TraceSession.load(store, trace.id)
        assert again.texts == paragraphs and again.reasoning() == trace.reasoning()


async def test_a_stream_cut_mid_reasoning_keeps_the_finished_steps(
    tmp_path: Path, openai_server: FakeOpenAI
) -> None:
    reasoning = "First I plan the work here.\n\nThen I compute it all.\n\nWait, I check the sum."
    openai_server.enqueue(Reply(text="So the answer is 5", reasoning=reasoning, chunk_chars=10,
                                drop_after_chunks=5))
    spec = llm.ModelSpec("openai/thinker", api_base=openai_server.base_url, mode="thinking")
    with Store.open(tmp_path / "store.sqlite3") as store:
        trace = TraceSession.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), spec)
        events = [event async for event in trace.generate()]
        assert isinstance(events[-1], StepFailed)
        assert trace.texts == ["First I plan the work here."]
        stored = trace.reasoning()
        assert stored is not None and not stored.complete
        assert stored.text == "First I plan the work here.\n\n"
        # Reopened, the finished step is there; generating again starts a new call.
        openai_server.enqueue(Reply(text="So the answer is 5", reasoning=reasoning))
        again = TraceSession.load(store, trace.id)
        again.use_model(spec)
        assert again.texts == ["First I plan the work here."]
        async for _event in again.generate():
            pass
        assert again.texts == ["First I plan the work here.", "Then I compute it all.",
                               "Wait, I check the sum."]
        assert again.answer == "5" and again.correct


async def test_a_thinking_model_over_http_with_a_summary(
    tmp_path: Path, openai_server: FakeOpenAI
) -> None:
    """A Claude 4 model behind an OpenAI-compatible proxy sends a summary: stored as one."""
    openai_server.enqueue(Reply(text="So the answer is 5", reasoning="Sum it.\n\nIt is 5."))
    spec = llm.ModelSpec("openai/claude-sonnet-4-5", api_base=openai_server.base_url,
                         mode="thinking")
    with Store.open(tmp_path / "store.sqlite3") as store:
        trace = TraceSession.create(store, NewTrace(TASK, "((1 + 4) * 1) =", "5"), spec)
        async for _event in trace.generate():
            pass
        stored = trace.reasoning()
        assert stored is not None and stored.kind == "summary" and stored.complete
        assert trace.texts == ["Sum it.", "It is 5."] and trace.correct


async def test_a_thinking_trace_exports_in_every_step_level_format(tmp_path: Path) -> None:
    """A thinking trace is ProcessBench's shape: the steps and the earliest wrong one."""
    import json

    from bbm_tui.cli import main
    from bbm_tui.core.store import default_path

    row = bundled_rows(TASK)[4]
    with Store.open(default_path()) as store:
        trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target), THINKING)
        async for _event in trace.generate():
            pass
        trace.flag_mistake(6)
        steps = trace.texts
    for fmt, check in (
        ("jsonl", lambda r: r["steps"] == steps and r["mistake_index"] == 5),
        ("processbench", lambda r: r["steps"] == steps and r["label"] == 5),
        ("prm800k", lambda r: r["question"]["pre_generated_steps"] == steps
         and [s["completions"][0]["rating"] for s in r["label"]["steps"]] == [1] * 5 + [-1]),
    ):
        out = tmp_path / f"out-{fmt}.jsonl"
        assert main(["export", "--format", fmt, "--out", str(out)]) == 0, fmt
        (exported,) = [json.loads(line) for line in out.read_text().splitlines()]
        assert check(exported), (fmt, exported)


def test_a_kill_mid_stream_loses_at_most_the_open_step(tmp_path: Path) -> None:
    """A process streaming a thinking trace, SIGKILLed once a few steps are stored: every
    stored step is one the reasoning's cut gives, in order; the stored reasoning is exactly
    their raw slices joined (the text of the open step lost, nothing else); the store is
    sound; and the session, opened again, makes a whole trace."""
    import os
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    db = tmp_path / "store.sqlite3"
    row = bundled_rows("word_sorting")[3]
    env = {**os.environ, "BBM_TUI_REPLAY_TPS": "40"}
    child = subprocess.Popen([sys.executable, "-m", "tests.kill_helpers", "think", str(db),
                              "word_sorting", "3"], cwd=root, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    try:
        while True:
            assert child.poll() is None, "the child ended before it was killed"
            assert time.monotonic() < deadline, "the child never stored three steps"
            if db.exists():
                try:
                    with sqlite3.connect(db) as connection:
                        (count,) = connection.execute(
                            "SELECT COUNT(*) FROM steps WHERE origin = 'thinking'").fetchone()
                except sqlite3.Error:
                    count = 0
                if count >= 3:
                    break
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    reply = offline.respond(offline.MODEL, [{"role": "user", "content": thinking_prompt(
        "word_sorting", row.input)}])
    raw_steps = split_text(reply.reasoning, SplitRule.PARAGRAPH)
    with Store.open(db) as store:
        assert store.integrity_check() == "ok"
        (session,) = store.sessions()
        trace = TraceSession.load(store, session.session.id)
        stored = trace.texts
        assert 3 <= len(stored) < len(raw_steps)
        assert stored == stripped_steps(raw_steps)[: len(stored)]
        reasoning = trace.reasoning()
        assert reasoning is not None and not reasoning.complete
        assert reasoning.text == "".join(raw_steps[: len(stored)])
    # Opened again, generating makes the whole trace (a new call, on a branch of its own).
    with Store.open(db) as store:
        trace = TraceSession.load(store, session.session.id)
        trace.use_model(THINKING)

        async def again() -> None:
            async for _event in trace.generate():
                pass

        import asyncio

        asyncio.run(again())
        assert trace.texts == stripped_steps(raw_steps) and trace.finished


@pytest.mark.parametrize("reasoning", ["", "Plan.\n\nWork.\n\nCheck."], ids=["o-series", "tail"])
async def test_the_steps_shares_sum_to_the_whole_calls_cost(
    openai_server: FakeOpenAI, reasoning: str
) -> None:
    """Several steps given at once when the call ends (o-series' answer cut into steps, the
    last steps a reasoning's end closes): the ones that took no piece of the stream cost
    nothing of their own, and the last carries the rest of the call, so that the steps' costs
    sum to what the call cost, the reasoning tokens priced (a share of no tokens once left the
    whole call unpriced: an o-series trace showed 1 of its 1,560 tokens' cost)."""
    openai_server.enqueue(Reply(text="A is 5.\n\nB is 1.\n\nSo the answer is 5",
                                reasoning=reasoning, reasoning_tokens=1536))
    spec = llm.ModelSpec("openai/o4-mini" if not reasoning else "openai/gpt-4o-mini",
                         api_base=openai_server.base_url, mode="thinking")
    events = await events_of(spec, TASK, "((1 + 4) * 1) =", target="5")
    finished = [event for event in events if isinstance(event, StepFinished)]
    assert len(finished) == 3
    whole = finished[-1].call
    assert whole.prompt_tokens is not None and whole.completion_tokens is not None
    costs = [event.call.cost for event in finished]
    assert all(cost is not None for cost in costs), costs
    tokens = sum(event.call.completion_tokens or 0 for event in finished)
    if not reasoning:  # o-series: the reasoning tokens are billed as output
        assert tokens >= 1536
    expected = cost_of(spec, UsageCounts(whole.prompt_tokens, tokens))
    assert expected is not None
    assert sum(cost for cost in costs if cost is not None) == pytest.approx(expected)
