"""A mistake finder's answer on a slow model, over real HTTP: the answer is streamed and read
to its end, so a long answer written over more time than the call's timeout arrives and is
parsed (the call's timeout bounds the wait for its first text, the idle timeout each silence
after it, `answer_timeout` the whole); a server silent before its first chunk, a stall
mid-answer and a stream cut short are each retried, the whole answer asked for again (never
half of one parsed), and each retry is said as it happens (`CallRetried`, to the app's
status line and find's progress line); usage and cost are stored as each provider's wire
reports them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.cli.find import find_detail
from bbm_tui.core import llm
from bbm_tui.core.batch.find import FindProgress, find_batch, jobs_from_files
from bbm_tui.core.config import ConfigError, load_config
from bbm_tui.core.dataset import bundled_path, bundled_rows, read_rows
from bbm_tui.core.judging.finders import (
    FINDER_MAX_TOKENS,
    CallRetried,
    FindFinished,
    TraceJudged,
    find_mistake,
)
from bbm_tui.core.prompts.finding import build_messages
from bbm_tui.core.store import Store
from bbm_tui.core.trace.recording import record_find
from tests.fake_server import FakeServer, Reply, is_streamed, pieces_of
from tests.test_usage_wires import by_hand

TASK = "word_sorting"
ROW = bundled_rows(TASK)[0]  # 10+ thoughts
RETRY = llm.RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)
# A critic's answer: reasoning over many words, then its verdict in a box at the very end,
# so that any part of it short of the whole has no verdict.
CRITIC = " ".join(f"Thought {n} sorts the words it was given, which is right." for n in
                  range(1, 4)) + " Thought 2 drops a word, so the first mistake is \\boxed{2}"
PIECES = len(pieces_of(CRITIC, None))


def settings(**limits: float) -> llm.CallSettings:
    """A finder's settings with small timeouts, so a slow server shows in a second."""
    values = {"timeout_s": 1.0, "idle_timeout_s": 1.0} | limits
    return llm.CallSettings(temperature=0.0, max_tokens=FINDER_MAX_TOKENS, retry=RETRY,
                            **values)


def spec(server: FakeServer, model: str = "openai/test") -> llm.ModelSpec:
    return llm.ModelSpec(model, api_base=server.base_url)


async def critic_events(server: FakeServer, call: llm.CallSettings) -> list[object]:
    """The critic's events, with each retry it was told of in its place among them."""
    events: list[object] = []
    async for event in find_mistake(TASK, "critic", ROW.input, ROW.steps, spec(server),
                                    settings=call, on_retry=events.append):
        events.append(event)
    return events


def verdict_of(events: list[object]) -> TraceJudged:
    [judged] = [event for event in events if isinstance(event, TraceJudged)]
    return judged


def retries_of(events: list[object]) -> list[CallRetried]:
    return [event for event in events if isinstance(event, CallRetried)]


# -- a slow model's long answer


async def test_a_long_answer_written_over_more_than_the_timeout_arrives_and_is_parsed(
    openai_server: FakeServer,
) -> None:
    """Before: the answer was asked for whole, so nothing came until the model had written
    all of it (here ~4 s, over the 1.5 s timeout): every attempt timed out, and a critic on
    a slow local model never finished."""
    # The clock is for the answer, not litellm's import and first call (seconds on a busy
    # machine): one short call first.
    openai_server.enqueue(Reply("OK"))
    await llm.complete(spec(openai_server), [{"role": "user", "content": "Hi"}],
                       settings(timeout_s=30))
    openai_server.requests.clear()
    openai_server.enqueue(Reply(CRITIC, chunk_delay_s=4.0 / PIECES))
    started = time.monotonic()
    events = await critic_events(openai_server, settings(timeout_s=1.5, idle_timeout_s=1.5))
    assert time.monotonic() - started > 3.0  # far longer than the timeout, in one attempt
    judged = verdict_of(events)
    assert judged.raw == CRITIC and judged.answer.mistake_number == 2
    assert not retries_of(events)
    [request] = openai_server.requests
    assert is_streamed(request.path, request.body) and "stop" not in request.body
    assert request.body["stream_options"] == {"include_usage": True}
    call = judged.call
    assert (call.attempts, call.finish_reason, call.completion_tokens) == (1, "stop", PIECES)
    assert call.prompt_tokens and not call.usage_estimated
    [finished] = [event for event in events if isinstance(event, FindFinished)]
    assert finished.result.mistake_index == 1 and finished.result.parsed


async def test_an_answer_longer_than_its_time_limit_is_kept_as_far_as_it_came(
    openai_server: FakeServer,
) -> None:
    """`answer_timeout` bounds the whole answer, as `step_timeout` does a step: a model still
    writing then is cut, what it wrote kept (unparseable here: its box had not come)."""
    openai_server.enqueue(Reply(CRITIC, chunk_delay_s=3.0 / PIECES))
    events = await critic_events(openai_server, settings(answer_timeout_s=1.2))
    judged = verdict_of(events)
    assert judged.call.finish_reason == "time_limit" and judged.call.attempts == 1
    assert 0 < len(judged.raw) < len(CRITIC) and CRITIC.startswith(judged.raw)
    assert not judged.answer.parsed
    assert len(openai_server.requests) == 1 and not retries_of(events)


def test_the_finders_timeouts_are_settings(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("timeout = 7\nidle_timeout = 9\nanswer_timeout = 42\n")
    config = load_config(path)
    finder = config.finder_settings()
    assert (finder.timeout_s, finder.idle_timeout_s, finder.answer_timeout_s) == (7, 9, 42)
    assert config.stepper_settings().call.idle_timeout_s == 9
    default = load_config(tmp_path / "none.toml").finder_settings()
    assert (default.idle_timeout_s, default.answer_timeout_s) == (30.0, 600.0)
    path.write_text("answer_timeout = 0\n")
    with pytest.raises(ConfigError, match="'answer_timeout' must be a number of seconds"):
        load_config(path)


# -- faults: each retried, the whole answer asked again, and said


async def test_a_server_silent_before_its_first_text_is_retried_and_named(
    openai_server: FakeServer,
) -> None:
    openai_server.enqueue(Reply(CRITIC, first_chunk_delay_s=8.0), Reply(CRITIC))
    events = await critic_events(openai_server, settings(timeout_s=2.0))
    [retry] = retries_of(events)
    assert (retry.number, retry.attempt, retry.attempts, retry.why) == (None, 2, 3, "timed out")
    assert retry.words() == "retry 2 of 3 (timed out)"
    assert "did not answer in time" in retry.reason
    judged = verdict_of(events)
    assert judged.raw == CRITIC and judged.call.attempts == 2
    assert events.index(retry) < events.index(judged)
    assert len(openai_server.requests) == 2


async def test_a_stall_mid_answer_is_retried(openai_server: FakeServer) -> None:
    """A silence mid-answer longer than the idle timeout (the call's, where shorter) is a
    timeout, retried. Before: one that stopped half-way was waited for up to the call's
    timeout, whatever the idle timeout."""
    openai_server.enqueue(Reply(CRITIC, stall_s=6.0), Reply(CRITIC))
    events = await critic_events(openai_server, settings(timeout_s=20.0, idle_timeout_s=1.5))
    [retry] = retries_of(events)
    assert retry.why == "timed out" and "did not answer in time" in retry.reason
    assert retry.reason.endswith("(silent for 1.5 s mid-answer)")
    judged = verdict_of(events)
    assert judged.raw == CRITIC and judged.answer.mistake_number == 2


@pytest.mark.parametrize("cut", ["connection dropped", "ended without a finish reason"])
async def test_a_stream_cut_short_is_retried_and_the_whole_answer_parsed(
    openai_server: FakeServer, cut: str,
) -> None:
    """Never half an answer parsed. Before: an answer that ended with no finish reason (as
    llama-cpp-python's server ends one it interrupted) was taken as the whole answer."""
    first = (Reply(CRITIC, drop_after_chunks=5) if cut == "connection dropped"
             else Reply(CRITIC[:60], finish_reason=None))
    openai_server.enqueue(first, Reply(CRITIC))
    events = await critic_events(openai_server, settings())
    [retry] = retries_of(events)
    assert retry.attempt == 2
    assert retry.why == ("connection failed" if cut == "connection dropped"
                         else "answer cut short")
    judged = verdict_of(events)
    assert judged.raw == CRITIC and judged.answer.mistake_number == 2
    assert judged.call.attempts == 2
    assert all(is_streamed(r.path, r.body) for r in openai_server.requests)


async def test_a_step_level_finders_retry_names_its_thought(openai_server: FakeServer) -> None:
    """The retries reach whoever runs the judge (the app, through record_find), and only the
    verdicts are saved."""
    openai_server.enqueue(Reply("Yes"), Reply("No", first_chunk_delay_s=8.0), Reply("No"))
    store = Store.open()
    session = store.create_session(task=TASK, input=ROW.input, model="openai/test")
    retries: list[CallRetried] = []
    events = [event async for event in record_find(
        store, session.id, TASK, "direct-step", ROW.input, ROW.steps, spec(openai_server),
        settings=settings(timeout_s=2.0), on_retry=retries.append)]
    assert not retries_of(events)  # told, not among the events
    [retry] = retries
    assert (retry.number, retry.attempt, retry.why) == (2, 2, "timed out")
    [run] = store.finder_runs(session.id)
    assert run.finished and run.mistake_number == 2
    assert [verdict.raw for verdict in run.verdicts] == ["Yes", "No"]


# -- find: the progress line says it


async def test_finds_progress_line_says_a_call_is_retried(openai_server: FakeServer,
                                                          tmp_path: Path) -> None:
    openai_server.enqueue(Reply(CRITIC, first_chunk_delay_s=8.0), Reply(CRITIC))
    jobs = jobs_from_files([bundled_path(TASK)], TASK, "critic", limit=1)
    lines: list[str] = []

    def on_progress(progress: FindProgress) -> None:
        lines.append(find_detail(progress))

    outcome = await find_batch(jobs, "critic", spec(openai_server), tmp_path / "preds.jsonl",
                               concurrency=1, settings=settings(timeout_s=2.0),
                               on_progress=on_progress)
    assert outcome.progress.done == 1 and not outcome.progress.retrying
    retrying = [line for line in lines if "retry" in line]
    assert retrying and retrying[0].startswith("0 calls · ")
    assert retrying[0].endswith(" · retry 2 of 3 (timed out)")
    assert lines[-1].startswith("1 call · ") and "retry" not in lines[-1]  # off once answered
    [row] = read_rows(tmp_path / "preds.jsonl")
    assert row.extra["raw"] == [CRITIC]


def test_the_progress_line_counts_the_other_traces_retrying() -> None:
    progress = FindProgress()
    progress.retrying[("a", ())] = "retry 2 of 4 (timed out)"
    progress.retrying[("b", ())] = "retry 3 of 4 (server error)"
    assert find_detail(progress).endswith(" · retry 3 of 4 (server error), 1 more trace "
                                          "retrying")


# -- usage and cost on each provider's wire, as before


WIRES = [
    # fixture, model, key variable, prompt tokens, cached, written (None: not reported)
    ("openai_server", "openai/gpt-4o-mini", "OPENAI_API_KEY", 1500, 1024, None),
    ("anthropic_server", "anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY", 2000, 1500, 300),
    ("gemini_server", "gemini/gemini-2.5-flash", "GEMINI_API_KEY", 1800, 1024, None),
    ("ollama_server", "ollama_chat/llama3", None, 900, None, None),
    ("ollama_server", "ollama/llama3", None, 900, None, None),
]


@pytest.mark.parametrize(("fixture", "model", "key", "prompt", "cached", "written"), WIRES,
                         ids=[wire[1].split("/")[0] for wire in WIRES])
def test_find_on_a_slow_model_stores_each_wires_usage_and_cost(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    capsys: pytest.CaptureFixture, fixture: str, model: str, key: str | None, prompt: int,
    cached: int | None, written: int | None,
) -> None:
    """`find` with `timeout = 1` in the config, against a model that writes its answer over
    ~2 s: the verdict parses, and the usage is the provider's own (cache parts and all) with
    litellm's price of it. Before: every attempt timed out."""
    server: FakeServer = request.getfixturevalue(fixture)
    if key:
        monkeypatch.setenv(key, "test-key")
        server.api_key = "test-key"
    Path(os.environ["BBM_TUI_CONFIG"]).write_text("timeout = 1\n")
    server.responder = lambda path, body: Reply(
        CRITIC, chunk_delay_s=2.0 / PIECES, prompt_tokens=prompt, cached_tokens=cached,
        cache_write_tokens=written)
    source = tmp_path / f"{TASK}.jsonl"
    source.write_text(bundled_path(TASK).read_text().splitlines()[0] + "\n")
    out = tmp_path / "preds.jsonl"
    mode = "completion" if model.startswith("ollama/") else "chat"
    code = main(["find", "--model", model, "--api-base", server.base_url, "--mode", mode,
                 "--method", "critic", "--input", str(source), "--out", str(out),
                 "--no-progress", "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    [row] = read_rows(out)
    assert row.extra["raw"] == [CRITIC] and row.extra["predicted_mistake_index"] == 1
    usage = json.loads(captured.out)["usage"]
    assert (usage["calls"], usage["prompt_tokens"], usage["completion_tokens"]) == (
        1, prompt, PIECES)
    assert usage["cached_tokens"] == (cached or 0)
    assert usage["cache_write_tokens"] == (written or 0)
    assert usage["estimated_calls"] == 0
    if model.startswith("ollama"):
        assert usage["cost"] == 0.0  # a local model, as litellm prices ollama/
    else:
        assert usage["cost"] == pytest.approx(
            by_hand(model, prompt, cached or 0, written or 0, PIECES), rel=1e-6)
    [request_] = server.requests
    assert is_streamed(request_.path, request_.body)



@pytest.mark.parametrize(("model", "assemblies"), [("openai/test", 0), ("replay/bbm", 0)])
async def test_a_whole_answer_is_closed_after_the_providers_last_chunk(
    openai_server: FakeServer, assembled: list[int], model: str, assemblies: int
) -> None:
    """litellm's work after the provider's stream has ended (the answer assembled again in
    a thread, twice, its logging, its price: 2-3 ms of CPU a call, bench/finder_stream.py)
    is not done: the stream is closed once litellm has handed on the provider's last chunk,
    with the answer, the finish reason and the usage whole (the HTTP provider's from the
    wire, the offline model's told by it: offline/handler.py)."""
    openai_server.enqueue(Reply("No, it is not"))
    call_spec = (spec(openai_server) if model == "openai/test"
                 else llm.ModelSpec("replay/bbm"))
    messages = ([{"role": "user", "content": "Is it right?"}] if model == "openai/test" else
                build_messages(TASK, "direct-trace", ROW.input, ROW.steps))
    completion = await llm.complete(call_spec, messages, settings())
    assert completion.text.strip()
    assert completion.call.finish_reason == "stop"
    assert completion.call.prompt_tokens and completion.call.completion_tokens
    assert assembled[0] == assemblies
    # A stream read to its end through litellm alone is assembled twice.
    openai_server.enqueue(Reply("No"))
    stream = await llm.litellm_module().acompletion(
        model="openai/test", api_base=openai_server.base_url, api_key="no-key",
        messages=messages, stream=True, stream_options={"include_usage": True})
    async for _chunk in stream:
        pass
    assert assembled[0] == assemblies + 2
