"""Every request is a call with its tokens and cost (issue 33, item 9), over HTTP with the
local OpenAI-compatible server: a one call that gives no whole step, and the text a one call
streamed past its last kept line, are counted and stored; the command line says when one
call fell back to one call a step; a step whose stream was closed before the provider's count
came (a server that ignores `stop`) gets its prompt counted by litellm, marked an estimate."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import OneCallEnded, StepFinished, StepperSettings
from bbm_tui.core.records import SessionSource
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession, on_the_loop
from tests.cli_helpers import run_all
from tests.fake_server import dataset_responder, dataset_trace_responder
from tests.openai_server import FakeOpenAI, Reply

PRICED = "openai/gpt-4o-mini"  # litellm knows its price


def no_whole_step_then_per_step(path: str, body: dict) -> Reply:
    """The one call (no `stop`) writes 3,000 characters and no line break, and ends with no
    finish reason: no whole step. The calls a step after it answer as the dataset's model."""
    if "stop" not in body:
        return Reply(text="word " * 600, finish_reason=None)
    return dataset_responder(path, body)


def test_a_one_call_that_gives_no_whole_step_is_counted_and_the_fallback_said(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    openai_server.responder = no_whole_step_then_per_step
    out = tmp_path / "out.jsonl"
    [ran] = run_all([("run", "--model", PRICED, "--api-base", openai_server.base_url,
                      "--task", "word_sorting", "--dataset", "--limit", "1", "--one-call",
                      "--no-progress", "--json", "--out", str(out))])
    assert ran.code == 0, ran.err
    requests = len(openai_server.requests)
    summary = json.loads(ran.out)
    assert summary["usage"]["calls"] == requests  # before: one fewer than served
    assert "one call fell back to one call a step in 1 trace" in ran.err
    [row] = [json.loads(line) for line in out.read_text().splitlines()]
    assert row["usage"]["calls"] == requests
    assert row["usage"]["completion_tokens"] > len(row["steps"])  # the lost call's chunks
    with Store.open() as store:
        [summary_row] = store.sessions()
        totals = store.totals(summary_row.session.id)
        assert totals.calls == requests
        assert totals.cost == sum_costs(store.path)


def sum_costs(path: Path) -> float:
    with sqlite3.connect(path) as connection:
        return connection.execute("SELECT SUM(cost) FROM calls").fetchone()[0]


async def test_text_streamed_past_the_last_kept_line_is_counted(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """The one call gives two whole steps, then a third line that runs past a step's token
    limit: the call is closed, that line voided, and the trace goes on a call a step. What
    the voided line streamed is counted, on the same call."""
    task = "word_sorting"
    row = bundled_rows(task)[0]

    def two_steps_then_a_runaway(path: str, body: dict) -> Reply:
        if "stop" in body:
            return dataset_responder(path, body)
        lines = dataset_trace_responder(path, body).text.split("\n")
        return Reply(text="\n".join(lines[:2]) + "\nThought 3: " + "word " * 3000)

    openai_server.responder = two_steps_then_a_runaway
    spec = llm.ModelSpec(PRICED, openai_server.base_url)
    settings = StepperSettings(one_call=True)
    with Store.open(tmp_path / "store.sqlite3") as store:
        trace = TraceSession.create(store, NewTrace(task, row.input, row.target), spec,
                                    source=SessionSource.RUN, store_work=on_the_loop)
        events = [event async for event in trace.generate(settings=settings)]
        steps = [event for event in events if isinstance(event, StepFinished)]
        [ended] = [event for event in events if isinstance(event, OneCallEnded)]
        assert [step.text for step in steps] == row.steps
        assert ended.fell_back is not None
        assert ended.unkept is not None and ended.unkept.completion_tokens
        assert ended.unkept.completion_tokens > 100  # the runaway line's chunks
        assert ended.unkept.one_call == steps[0].call.one_call  # the same call, not another
        totals = store.totals(trace.id)
        assert totals.calls == len(openai_server.requests)
        assert totals.completion_tokens == sum(
            event.call.completion_tokens or 0 for event in steps
        ) + ended.unkept.completion_tokens


async def test_a_step_closed_before_the_usage_came_has_its_prompt_estimated(
    openai_server: FakeOpenAI, tmp_path: Path
) -> None:
    """A server that ignores `stop`: the client closes the stream at the newline, before
    the usage chunk; the prompt's count was left empty."""
    openai_server.responder = lambda path, body: Reply(
        text="The words sorted.\nThought 2: and on" + " and on" * 200, honor_stop=False,
        chunk_delay_s=0.001)
    spec = llm.ModelSpec(PRICED, openai_server.base_url)
    text = await anext(
        item async for item in llm.stream_step(spec, "Q: sort a b\nThought 1:",
                                               llm.CallSettings())
        if isinstance(item, llm.StepText))
    assert text.text == "The words sorted."
    assert text.call.prompt_tokens is not None and text.call.prompt_tokens > 0
    assert text.call.prompt_estimated and text.call.usage_estimated
    assert text.call.cost is not None and text.call.cost > 0
