"""One call for many steps (core/llm/one_call.py, the stepper's one-call mode) over HTTP, against
the local server answering like the dataset's model that goes on with the prompt's format
(`dataset_trace_responder`): the same steps and store rows as one call a step when the model
writes every label; the fall back to one call a step at a line without its label, at a
stream cut and at a silence, with nothing lost and nothing shown twice."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import (
    StepDelta,
    StepFinished,
    StepperSettings,
    StepRestarted,
    StepStarted,
    TraceFinished,
    run_steps,
)
from bbm_tui.core.records import SessionSource, TraceEnd
from bbm_tui.core.store import Store, Totals
from bbm_tui.core.tasks import TASK_NAMES
from bbm_tui.core.trace.session import NewTrace, TraceSession, on_the_loop
from tests.fake_server import dataset_trace_responder
from tests.openai_server import FakeOpenAI, Reply

RETRIES = llm.RetryPolicy(attempts=2, base_delay_s=0.01)
PER_STEP = StepperSettings(call=llm.CallSettings(retry=RETRIES, logprobs=True))
ONE_CALL = dataclasses.replace(PER_STEP, one_call=True)


def spec_of(server: FakeOpenAI) -> llm.ModelSpec:
    return llm.ModelSpec("openai/test", server.base_url)


def longest_row(task: str, below: int = 30) -> int:
    """A row with many steps (but not the longest Dyck ones: the test stays quick)."""
    rows = bundled_rows(task)
    return max((i for i, r in enumerate(rows) if len(r.steps) < below),
               key=lambda i: len(rows[i].steps))


async def stored_trace(store: Store, task: str, index: int, spec: llm.ModelSpec,
                       settings: StepperSettings) -> tuple[TraceSession, list[object]]:
    row = bundled_rows(task)[index]
    trace = TraceSession.create(store, NewTrace(task, row.input, row.target), spec,
                                source=SessionSource.RUN, store_work=on_the_loop)
    events = [event async for event in trace.generate(settings=settings)]
    return trace, events


def step_rows(store: Store, session_id: int) -> list[tuple[Any, ...]]:
    """What a step is, beyond how it was called: place, text, origin, answer, its tokens."""
    found = []
    for step in store.branch(session_id):
        full = store.step(step.id)
        found.append((full.number, full.text, full.origin, full.answer, full.truncated,
                      full.logprob, full.ntokens, full.tokens))
    return found


@pytest.mark.parametrize("task", TASK_NAMES)
async def test_one_call_stores_what_one_call_a_step_stores(
    openai_server: FakeOpenAI, tmp_path: Path, task: str
) -> None:
    openai_server.responder = lambda path, body: dataclasses.replace(
        dataset_trace_responder(path, body), logprob_per_token=-0.25)
    index = longest_row(task)
    recorded = bundled_rows(task)[index].steps
    spec = spec_of(openai_server)
    with Store.open(tmp_path / "per_step.sqlite3") as store:
        per_step, _ = await stored_trace(store, task, index, spec, PER_STEP)
        expected = step_rows(store, per_step.id)
        expected_tokens = [step.completion_tokens for step in store.branch(per_step.id)]
        assert store.totals(per_step.id).calls == len(recorded)
    assert len(openai_server.requests) == len(recorded)
    openai_server.requests.clear()

    with Store.open(tmp_path / "one_call.sqlite3") as store:
        one_call, events = await stored_trace(store, task, index, spec, ONE_CALL)
        assert step_rows(store, one_call.id) == expected
        assert [text for _, text, *_ in expected] == recorded
        steps = store.branch(one_call.id)
        # One call, with every step's share of it marked as taken from it.
        [request] = openai_server.requests
        assert "stop" not in request.body and request.body["stream"] is True
        assert {step.one_call for step in steps} == {steps[0].one_call} != {None}
        latencies = [step.latency_s for step in steps]
        assert latencies == sorted(latencies)
        # Each step's share of the call's tokens: its own, and those of the label the model
        # wrote before it (two pieces of this server's, "Thought " and "N: ").
        shares = [step.completion_tokens for step in steps]
        assert shares == [expected_tokens[0]] + [n + 2 for n in expected_tokens[1:]]
        assert all(step.usage_estimated for step in steps)
        assert store.totals(one_call.id).calls == 1
    # The app's events: each step started, streamed and finished in order, nothing voided.
    started = [event.number for event in events if isinstance(event, StepStarted)]
    finished = [event.number for event in events if isinstance(event, StepFinished)]
    assert started == finished == list(range(1, len(recorded) + 1))
    assert not [event for event in events if isinstance(event, StepRestarted)]
    streamed: dict[int, str] = {}
    for event in events:
        if isinstance(event, StepDelta):
            streamed[event.number] = streamed.get(event.number, "") + event.text
    assert [streamed[number].strip() for number in finished] == recorded
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == TraceEnd.ANSWER


def scripted_trace(server: FakeOpenAI, first_reply: Reply) -> None:
    """The first request (the one call) answered as scripted; every later one (one call a
    step) like the dataset's model."""
    server.enqueue(first_reply)
    server.responder = dataset_trace_responder


def trace_text(task: str, index: int, upto: int | None = None) -> str:
    steps = bundled_rows(task)[index].steps
    return steps[0] + "".join(f"\nThought {n}: {s}" for n, s in enumerate(steps[1:upto], 2))


async def events_of(task: str, index: int, spec: llm.ModelSpec,
                    settings: StepperSettings = ONE_CALL) -> list[object]:
    row = bundled_rows(task)[index]
    return [event async for event in run_steps(task, row.input, spec, [], target=row.target,
                                               settings=settings)]


def finished_texts(events: list[object]) -> list[str]:
    return [event.text for event in events if isinstance(event, StepFinished)]


async def test_a_line_without_its_label_ends_the_call_and_the_trace_goes_on_step_by_step(
    openai_server: FakeOpenAI,
) -> None:
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    tail = "\nI think the next one is something else." + " and so on" * 200
    scripted_trace(openai_server, Reply(text=trace_text(task, index, 3) + tail,
                                        chunk_delay_s=0.002))
    events = await events_of(task, index, spec_of(openai_server))
    assert finished_texts(events) == recorded
    requests = openai_server.requests
    assert "stop" not in requests[0].body
    assert all(request.body["stop"] == ["\n"] for request in requests[1:])
    # Three steps from the call, then one call for each of the others.
    assert len(requests) == 1 + len(recorded) - 3
    # The stream was closed at the unlabelled line: the server saw the client go.
    assert not requests[0].finished and requests[0].chunks_sent < len(requests[0].body) + 400
    calls = [event.call for event in events if isinstance(event, StepFinished)]
    assert [call.one_call_share for call in calls[:3]] == [0, 1, 2]
    assert calls[0].one_call == calls[2].one_call and calls[3].one_call is None
    # The unlabelled line was never shown: nothing to void.
    assert not [event for event in events if isinstance(event, StepRestarted)]


@pytest.mark.parametrize("line", ["", "Thought 9: a thought with the wrong number",
                                  "thought 3 something"])
async def test_other_lines_that_are_not_the_next_thought_end_the_call(
    openai_server: FakeOpenAI, line: str
) -> None:
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    scripted_trace(openai_server, Reply(text=trace_text(task, index, 2) + f"\n{line}\n"))
    events = await events_of(task, index, spec_of(openai_server))
    assert finished_texts(events) == recorded
    assert len(openai_server.requests) == 1 + len(recorded) - 2  # two steps from the call


async def test_a_stream_cut_mid_step_keeps_the_whole_steps_and_voids_the_shown_text(
    openai_server: FakeOpenAI,
) -> None:
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    text = trace_text(task, index)
    # Cut a couple of words into Thought 3.
    words = len(trace_text(task, index, 2).split()) + 4
    scripted_trace(openai_server, Reply(text=text, drop_after_chunks=words))
    events = await events_of(task, index, spec_of(openai_server))
    assert finished_texts(events) == recorded
    [voided] = [event for event in events if isinstance(event, StepRestarted)]
    assert voided.number == 3
    # Thought 3 was started once: its view is reused by the call a step that writes it.
    assert [e.number for e in events if isinstance(e, StepStarted)].count(3) == 1
    assert len(openai_server.requests) == 1 + len(recorded) - 2


async def test_a_silence_mid_call_ends_it_and_the_trace_goes_on(
    openai_server: FakeOpenAI,
) -> None:
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    words = len(trace_text(task, index, 2).split()) + 1
    scripted_trace(openai_server, Reply(text=trace_text(task, index), stall_s=5.0,
                                        stall_after=words))
    quick = dataclasses.replace(ONE_CALL, call=dataclasses.replace(
        ONE_CALL.call, idle_timeout_s=0.3))
    events = await events_of(task, index, spec_of(openai_server), quick)
    assert finished_texts(events) == recorded
    calls = [event.call for event in events if isinstance(event, StepFinished)]
    assert [call.one_call is not None for call in calls[:3]] == [True, True, False]
    assert len(openai_server.requests) == 1 + len(recorded) - 2


async def test_a_failed_call_falls_back_to_one_call_a_step(openai_server: FakeOpenAI) -> None:
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    scripted_trace(openai_server, Reply(status=503))
    events = await events_of(task, index, spec_of(openai_server))
    assert finished_texts(events) == recorded
    assert all(event.call.one_call is None for event in events
               if isinstance(event, StepFinished))


async def test_the_step_limit_and_the_steps_asked_for_close_the_call(
    openai_server: FakeOpenAI,
) -> None:
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    openai_server.responder = dataset_trace_responder
    row = bundled_rows(task)[index]
    paused = [event async for event in run_steps(task, row.input, spec_of(openai_server), [],
                                                 settings=ONE_CALL, max_new_steps=3)]
    assert finished_texts(paused) == recorded[:3]
    assert isinstance(paused[-1], TraceFinished) and paused[-1].reason == TraceEnd.PAUSED
    limited = dataclasses.replace(ONE_CALL, step_limit=4)
    events = await events_of(task, index, spec_of(openai_server), limited)
    assert finished_texts(events) == recorded[:4]
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == TraceEnd.STEP_LIMIT
    assert len(openai_server.requests) == 2


def test_a_step_says_it_was_taken_from_one_call_and_which_deployment_served_it() -> None:
    """Under a thought: its share of one call, and the router deployment of its call."""
    from bbm_tui.core.store import Step
    from bbm_tui.ui.text import step_meta

    shared = Step(1, 1, None, 2, "So the order is fig, pear.", "model", None, False, 0.0,
                  latency_s=0.31, completion_tokens=9, usage_estimated=True, call_id=3,
                  one_call="abc", deployment="gpu-\x1b[31m1")
    meta = step_meta(shared)
    assert "0.31 s · taken from one call · served by gpu-" in meta
    assert "~9 tok" in meta
    from bbm_tui.core.textsafe import one_line  # what the thought's view draws of it

    assert "\x1b" not in one_line(meta) and "served by gpu-" in one_line(meta)
    own = shared._replace(one_call=None, deployment=None)
    assert "one call" not in step_meta(own) and "served by" not in step_meta(own)


async def test_one_calls_prompt_is_counted_once_so_a_priced_model_has_a_cost(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """The stream is closed at the answer, before the provider's usage: the prompt is counted
    by litellm (an estimate, on the first share), so a model with a price has one, the call's
    prompt paid once, its output by each share; never "cost unknown" for want of a count."""
    openai_server.responder = dataset_trace_responder
    spec = llm.ModelSpec("openai/gpt-4o-mini", openai_server.base_url)
    index = longest_row("word_sorting")
    with Store.open(tmp_path / "store.sqlite3") as store:
        trace, events = await stored_trace(store, "word_sorting", index, spec, ONE_CALL)
        first, *others = store.branch(trace.id)
        assert others and len(openai_server.requests) == 1
        assert first.prompt_tokens and first.prompt_tokens > 500 and first.prompt_estimated
        assert all(step.prompt_tokens is None for step in others)
        assert all(step.cost for step in [first, *others])
        assert first.cost > max(step.cost or 0 for step in others)  # the prompt's price
        totals = store.totals(trace.id)
        assert (totals.calls, totals.unpriced_calls) == (1, 0)
        assert totals.prompt_tokens == first.prompt_tokens and totals.prompt_estimated_calls
        assert totals.cost == pytest.approx(sum(step.cost or 0 for step in [first, *others]))
        # What a screen keeps in step from the steps as they come (its title) is the same.
        running = Totals(0, 0, 0, 0.0)
        for event in events:
            if isinstance(event, StepFinished):
                running = running.plus(event.call)
        assert (running.calls, running.unpriced_calls, running.prompt_tokens) == (
            1, 0, totals.prompt_tokens)
        assert running.cost == pytest.approx(totals.cost)
        # A column of models side by side, and a run's row: one call, its time once.
        from bbm_tui.core.store import calls_latency
        from bbm_tui.core.trace.side_by_side import BranchFigures

        figures = BranchFigures.of([first, *others])
        assert (figures.calls, figures.unpriced_calls) == (1, 0)
        assert figures.latency_s == calls_latency([first, *others]) == others[-1].latency_s


@pytest.mark.parametrize("chunk_chars", [None, 1, 3])
async def test_a_model_that_writes_crlf_gives_every_step_from_its_call(
    openai_server: FakeOpenAI, chunk_chars: int | None
) -> None:
    """Line breaks written "\\r\\n" (issue 33, item 15): before, a chunk that ended between
    the "\\r" and the "\\n" read the "\\n" as an empty line, and the call ended at Thought 1."""
    task, index = "word_sorting", longest_row("word_sorting")
    recorded = bundled_rows(task)[index].steps
    text = trace_text(task, index).replace("\n", "\r\n")
    scripted_trace(openai_server, Reply(text=text, chunk_chars=chunk_chars))
    events = await events_of(task, index, spec_of(openai_server))
    assert finished_texts(events) == recorded
    assert len(openai_server.requests) == 1  # every step from the one call
