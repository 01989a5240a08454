"""Backtracking a step of a thinking trace in a session (issue 35, the app's `b`;
core/trace/thinking_backtrack.py), over HTTP against the suite's llama-server and offline:
the server receives the template, the opened reasoning and exactly steps 1..k-1; the samples
are cut at the split rule, the original's repeats dropped, the paper's choice starred, all
stored; going on from one makes a new branch whose reasoning is stored whole (re-cut by `S`),
the original kept."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.core import llm
from bbm_tui.core.annotation.export import dpo_rows, export_from_store
from bbm_tui.core.generation.backtrack import SampleArrived
from bbm_tui.core.generation.splitting import split_text
from bbm_tui.core.generation.stepper import TraceFinished
from bbm_tui.core.llm.prefix import PrefixSettings
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import BranchMade, NewTrace, TraceSession
from bbm_tui.core.trace.thinking_backtrack import (
    ThinkingSamples,
    continue_thinking,
    prefixer_for,
    resample_thinking,
    thinking_refusal,
)
from bbm_tui.core.types import SplitRule, StepOrigin
from tests.llama_server import FakeLlamaServer, Fault, qwen3_template
from tests.openai_server import Reply

TASK = "multistep_arithmetic"
QUESTION = "((1 + 1) * 2) ="
TARGET = "4"
REASONING = "Plan: add, then multiply.  \n\n1 + 1 = 3.\r\n\n3 * 2 = 6. \n\nSo 6."
RAW = split_text(REASONING, SplitRule.PARAGRAPH)
SAMPLES = ["1 + 1 = 3.\r\n\nmore", "One and one make two, not three. \n\nmore",
           "1 + 1 = 2. \n\nmore"]
ENDING = "2 * 2 = 4.\n\nSo 4.</think>\n\nSo the answer is 4"


@pytest.fixture
def llama() -> Iterator[FakeLlamaServer]:
    server = FakeLlamaServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def script(server: FakeLlamaServer) -> None:
    turn = itertools.cycle(SAMPLES)
    lock = threading.Lock()

    def continuation(prompt: str, body: dict[str, Any]) -> str:
        if prompt.endswith(("1 + 1 = 2. \n\n", "not three. \n\n")):
            return ENDING
        with lock:
            return next(turn)

    server.continuation = continuation


def thinking_trace(store: Store, server: FakeLlamaServer) -> TraceSession:
    """A thinking trace of a model behind llama-server, as the app's thinking mode made it."""
    server.enqueue(Reply(text="So the answer is 6", reasoning=REASONING))
    spec = llm.ModelSpec("openai/qwen3", api_base=server.base_url, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, QUESTION, TARGET), spec)

    async def generate() -> None:
        async for _event in trace.generate():
            pass

    asyncio.run(generate())
    assert trace.texts == [step.strip() for step in RAW]
    return trace


def test_a_thinking_step_is_resampled_stored_and_goes_on_on_a_new_branch(
        llama: FakeLlamaServer, tmp_path: Path) -> None:
    store = Store.open()
    trace = thinking_trace(store, llama)
    original = list(trace.steps)
    first_reasoning = trace.reasoning()
    assert first_reasoning is not None and first_reasoning.text == REASONING
    trace.flag_mistake(2)
    script(llama)
    llama.requests.clear()
    arrived: list[SampleArrived] = []

    async def backtrack() -> tuple[ThinkingSamples, list[object]]:
        prefixer = prefixer_for(trace)
        try:
            samples = await resample_thinking(trace, prefixer, 2, PrefixSettings(),
                                              on_sample=arrived.append)
            resample = samples.ready.resample
            assert resample.chosen is not None
            chosen = samples.ready.stored[resample.chosen]
            return samples, [event async for event in continue_thinking(
                trace, prefixer, samples, chosen, PrefixSettings())]
        finally:
            await prefixer.aclose()

    samples, events = asyncio.run(backtrack())
    head = qwen3_template([{"role": "user",
                            "content": llama.requests[0].body["messages"][0]["content"]}])
    head += "<think>\n"
    completions = [record for record in llama.requests if record.path == "/completion"]
    # The prefix byte for byte: the template, the reasoning opened, step 1 as it was.
    assert {record.body["prompt"] for record in completions[:8]} == {head + RAW[0]}
    assert all(record.body["temperature"] == 1.0 for record in completions[:8])
    assert len(arrived) == 8
    ready = samples.ready
    chosen = ready.resample.chosen
    assert chosen is not None
    stored = ready.stored
    # Cut at the paragraph rule; the original again dropped; the likeliest of the rest
    # ("1 + 1 = 2.": 5 tokens at -1.0) starred; all stored with their log-probabilities.
    assert {candidate.text for candidate in stored} == {
        "1 + 1 = 3.", "One and one make two, not three.", "1 + 1 = 2."}
    assert all(candidate.dropped == (candidate.text == "1 + 1 = 3.") for candidate in stored)
    assert stored[chosen].text == "1 + 1 = 2."
    assert stored[chosen].logprob == pytest.approx(-5.0)
    assert ready.resample.chosen_by == "logprob"
    again = store.candidates(trace.id, original[0].id, 2)
    assert [candidate.id for candidate in again] == [candidate.id for candidate in stored]
    # Going on greedily from the chosen sample: a new branch, streamed as thinking steps.
    (going_on,) = completions[8:]
    assert going_on.body["prompt"] == head + RAW[0] + "1 + 1 = 2. \n\n"
    assert going_on.body["temperature"] == 0.0
    assert going_on.body["stream"] is True  # its thoughts shown as they come
    assert isinstance(events[0], BranchMade)
    assert isinstance(events[-1], TraceFinished) and events[-1].answer == "4"
    assert trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4.", "So 4."]
    assert [step.origin for step in trace.steps] == [
        StepOrigin.THINKING, StepOrigin.BACKTRACK, StepOrigin.THINKING, StepOrigin.THINKING]
    assert trace.answer == "4" and trace.correct and trace.label is None
    assert trace.steps[0].id == original[0].id  # Thought 1 shared with the original
    # The sample taken is marked chosen (the tree and compare say where the branch came from).
    assert again[chosen].step_id == trace.steps[1].id
    # The new branch's reasoning is stored whole: step 1 raw, the sample raw, the rest.
    reasoning = trace.reasoning()
    assert reasoning is not None and reasoning.complete and reasoning.id != first_reasoning.id
    assert reasoning.text == RAW[0] + "1 + 1 = 2. \n\n" + "2 * 2 = 4.\n\nSo 4."
    assert reasoning.answer_text == "\n\nSo the answer is 4"
    assert trace.split_rule() == SplitRule.PARAGRAPH
    # The original branch is kept.
    assert len(trace.tree.children(original[0].id)) == 2
    assert [step.id for step in trace.tree.path(original[-1].id)] == [s.id for s in original]
    # Exports take the new branch as they take a backtracked paper trace's: the branch on
    # show, the flagged original as a row of its own, and a preference pair (the flagged
    # thought rejected, the sample that went on to the target chosen).
    out = tmp_path / "out.jsonl"
    export_from_store(store, "jsonl", out, [trace.id])
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(row["steps"], row.get("mistake_index")) for row in rows] == [
        (["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4.", "So 4."], None),
        ([step.strip() for step in RAW], 1)]
    (pair,) = dpo_rows(store, [trace.id])
    assert (pair["rejected"], pair["chosen"]) == (" 1 + 1 = 3.", " 1 + 1 = 2.")
    assert pair["bbm_tui"]["chosen_origin"] == StepOrigin.BACKTRACK
    # S re-cuts the new branch's reasoning, no new call.
    calls = store.totals(trace.id).calls
    assert trace.recut(SplitRule.SENTENCE)
    assert trace.texts[:2] == ["Plan: add, then multiply.", "1 + 1 = 2."]
    assert store.totals(trace.id).calls == calls
    store.close()


def test_a_stopped_branch_goes_on_from_its_reasoning_so_far(llama: FakeLlamaServer) -> None:
    """The new branch stopped once Thought 3 is stored (esc in the app): it is a stopped
    branch whose reasoning so far is its steps raw; going on sends exactly that after the
    template and stores the rest below Thought 3, in the same reasoning, whole at the end.
    The original branch, whole, is no stopped branch."""
    from collections.abc import AsyncGenerator
    from contextlib import aclosing
    from typing import cast

    from bbm_tui.core.generation.stepper import StepFinished
    from bbm_tui.core.trace.thinking_backtrack import go_on_from_stopped, stopped_branch

    store = Store.open()
    trace = thinking_trace(store, llama)
    assert stopped_branch(trace) is None  # whole, finished
    script(llama)
    so_far = RAW[0] + "1 + 1 = 2. \n\n" + "2 * 2 = 4.\n\n"

    async def stopped_after_thought_3() -> None:
        prefixer = prefixer_for(trace)
        try:
            samples = await resample_thinking(trace, prefixer, 2, PrefixSettings())
            chosen = samples.ready.resample.chosen
            assert chosen is not None
            # Closed as the app's esc closes it (an async generator).
            events = cast(AsyncGenerator[object, None], continue_thinking(
                trace, prefixer, samples, samples.ready.stored[chosen], PrefixSettings()))
            async with aclosing(events):
                async for event in events:
                    if isinstance(event, StepFinished) and event.number == 3:
                        break
        finally:
            await prefixer.aclose()

    asyncio.run(stopped_after_thought_3())
    assert trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4."]
    kept = [step.id for step in trace.steps]
    stopped = stopped_branch(trace)
    assert stopped is not None and stopped.text == so_far
    assert stopped.rule == SplitRule.PARAGRAPH
    # Kept in step as the steps came: what the store says, loaded afresh.
    assert TraceSession.load(store, trace.id).stopped == stopped
    llama.requests.clear()
    llama.continuation = lambda prompt, body: "So 4.</think>\n\nSo the answer is 4"

    async def go_on() -> list[object]:
        prefixer = prefixer_for(trace)
        try:
            return [event async for event in go_on_from_stopped(trace, prefixer, stopped,
                                                                PrefixSettings())]
        finally:
            await prefixer.aclose()

    events = asyncio.run(go_on())
    head = qwen3_template([{"role": "user",
                            "content": llama.requests[0].body["messages"][0]["content"]}])
    (completion,) = [record for record in llama.requests if record.path == "/completion"]
    assert completion.body["prompt"] == head + "<think>\n" + so_far
    assert completion.body["temperature"] == 0.0
    assert isinstance(events[-1], TraceFinished) and events[-1].answer == "4"
    assert trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4.", "So 4."]
    assert [step.id for step in trace.steps[:3]] == kept
    reasoning = trace.reasoning()
    assert reasoning is not None and reasoning.complete and reasoning.id == stopped.reasoning_id
    assert reasoning.text == so_far + "So 4."
    assert stopped_branch(trace) is None
    assert TraceSession.load(store, trace.id).stopped is None
    assert len(trace.tree.leaves()) == 2
    store.close()


def went_on(trace: TraceSession, server: FakeLlamaServer, fault: Fault) -> list[object]:
    """Thought 2 resampled, then the branch going on from the chosen sample, its first
    request failing with `fault`: the going on's events."""
    async def backtrack() -> list[object]:
        prefixer = prefixer_for(trace)
        try:
            samples = await resample_thinking(trace, prefixer, 2, PrefixSettings())
            chosen = samples.ready.resample.chosen
            assert chosen is not None
            server.faults.append(fault)
            return [event async for event in continue_thinking(
                trace, prefixer, samples, samples.ready.stored[chosen], PrefixSettings())]
        finally:
            await prefixer.aclose()

    return asyncio.run(backtrack())


def test_going_on_is_retried_when_the_server_is_not_ready(llama: FakeLlamaServer) -> None:
    """llama-server answers the going-on call 503 (its model loading) with Retry-After: the
    call is made again, and the branch goes on to its answer."""
    store = Store.open()
    trace = thinking_trace(store, llama)
    script(llama)
    events = went_on(trace, llama, Fault(503, {"Retry-After": "0"}))
    going_on = [record for record in llama.requests
                if record.path == "/completion" and record.body.get("stream")]
    assert len(going_on) == 2 and going_on[0].body == going_on[1].body
    assert isinstance(events[-1], TraceFinished) and events[-1].answer == "4"
    assert trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4.", "So 4."]
    store.close()


def test_a_going_on_cut_after_text_keeps_what_came_and_says_so(
        llama: FakeLlamaServer) -> None:
    """The connection reset once Thought 3 has come: not retried (another text would follow
    it); Thought 3 kept, Thought 4 failed with the reason; the branch is a stopped one that
    `r` goes on from."""
    from bbm_tui.core.generation.stepper import StepFailed
    from bbm_tui.core.trace.thinking_backtrack import stopped_branch

    store = Store.open()
    trace = thinking_trace(store, llama)
    script(llama)
    events = went_on(trace, llama, Fault(after_tokens=6))  # "2 * 2 = 4.\n\nSo" sent
    going_on = [record for record in llama.requests
                if record.path == "/completion" and record.body.get("stream")]
    assert len(going_on) == 1
    failed = events[-1]
    assert isinstance(failed, StepFailed) and failed.number == 4
    assert failed.error.kind == "connection"
    assert trace.texts == ["Plan: add, then multiply.", "1 + 1 = 2.", "2 * 2 = 4."]
    stopped = stopped_branch(trace)
    assert stopped is not None and stopped.text == RAW[0] + "1 + 1 = 2. \n\n2 * 2 = 4.\n\n"
    assert TraceSession.load(store, trace.id).stopped == stopped
    store.close()


def test_the_offline_thinking_model_backtracks_with_no_key() -> None:
    """solver/thinking's trace: its slip resampled offline, the right step starred, and the
    new branch reaches the target."""
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.llm.offline import thinking

    row = next(row for row in bundled_rows(TASK)
               if row.labelled and row.mistake_index is not None and row.answer != row.target
               and not thinking._catches(TASK, row.input))
    assert row.mistake_index is not None
    store = Store.open()
    spec = llm.ModelSpec(thinking.MODEL, mode="thinking")
    trace = TraceSession.create(store, NewTrace(TASK, row.input, row.target), spec)

    async def run() -> None:
        async for _event in trace.generate():
            pass
        assert trace.answer == row.answer
        assert thinking_refusal(trace) is None
        prefixer = prefixer_for(trace)
        assert row.mistake_index is not None
        number = 2 + row.mistake_index
        for seed in range(20):  # until a seed draws the right step among the 8
            samples = await resample_thinking(trace, prefixer, number,
                                              PrefixSettings(seed=seed), n=1)
            chosen = samples.ready.resample.chosen
            if chosen is not None and not samples.ready.stored[chosen].text.startswith(
                    ("Hmm", "Let me", "Okay", "Right")):
                break
        else:
            raise AssertionError("no seed drew the right step")
        async for _event in continue_thinking(trace, prefixer, samples,
                                              samples.ready.stored[chosen], PrefixSettings()):
            pass

    asyncio.run(run())
    assert trace.answer == row.target and trace.correct
    reasoning = trace.reasoning()
    assert reasoning is not None and reasoning.complete
    assert [step.strip() for step in split_text(reasoning.text, SplitRule.PARAGRAPH)] == \
        trace.texts
    store.close()


def test_a_summary_is_not_resampled(llama: FakeLlamaServer) -> None:
    store = Store.open()
    trace = thinking_trace(store, llama)
    reasoning = trace.reasoning()
    assert reasoning is not None
    store.finish_reasoning(reasoning.id, text=reasoning.text, kind="summary",
                           answer_text=reasoning.answer_text, reasoning_tokens=None)
    refusal = thinking_refusal(trace)
    assert refusal is not None and "summary" in refusal
    store.close()


def test_the_end_of_the_reasoning_is_found_when_its_tag_comes_in_pieces(
        llama: FakeLlamaServer) -> None:
    """llama-server cuts `</think>` across tokens: the going-on stream still ends the
    reasoning there, and the answer after it is never a step."""
    store = Store.open()
    trace = thinking_trace(store, llama)
    script(llama)
    llama.tokenize = lambda text: [text[i:i + 3] for i in range(0, len(text), 3)]

    async def backtrack() -> None:
        prefixer = prefixer_for(trace)
        try:
            samples = await resample_thinking(trace, prefixer, 2, PrefixSettings(), n=3)
            chosen = samples.ready.resample.chosen
            assert chosen is not None
            async for _event in continue_thinking(trace, prefixer, samples,
                                                  samples.ready.stored[chosen],
                                                  PrefixSettings()):
                pass
        finally:
            await prefixer.aclose()

    asyncio.run(backtrack())
    assert trace.texts[2:] == ["2 * 2 = 4.", "So 4."] and trace.answer == "4"
    reasoning = trace.reasoning()
    assert reasoning is not None and reasoning.text.endswith("2 * 2 = 4.\n\nSo 4.")
    assert reasoning.answer_text == "\n\nSo the answer is 4"
    store.close()
