"""A hostile server (issue 8, items 3, 5, 7 and 8), through litellm over real HTTP: replies
with status 200 that are not a model's answer, a gzip bomb, absurd usage, line breaks other
than "\\n", invalid UTF-8, a stream interrupted without a finish reason, and a server that
drips one character at a time. Nothing of that is ever stored as a step; the batch carries
on; memory stays bounded."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.config import load_config
from bbm_tui.core.dataset import bundled_rows, read_rows
from bbm_tui.core.generation.stepper import StepFailed, StepFinished, StepperSettings, TraceFinished
from bbm_tui.core.llm.sampling import sample_steps
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import NewTrace, TraceSession
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

TASK = "multistep_arithmetic"
ROW = bundled_rows(TASK)[0]
FAST = llm.RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)
CALL = llm.CallSettings(timeout_s=10, idle_timeout_s=10, retry=FAST)
HTML = b"<!doctype html><html><body><h1>502 Bad Gateway</h1><p>nginx</p></body></html>\n"

@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "store.sqlite3") as opened:
        yield opened


NOT_ANSWERS = {
    "an HTML page": lambda: Reply(raw_body=HTML, headers={"Content-Type": "text/html"}),
    "an event stream whose body is HTML": lambda: Reply(
        raw_body=HTML, headers={"Content-Type": "text/event-stream"}),
    "[DONE] first": lambda: Reply(text="4 + 4 = 8\n", raw_events=[b"[DONE]"]),
    "an empty event stream": lambda: Reply(text="", finish_reason=None, usage=False),
}


def spec(server: FakeOpenAI, mode: llm.Mode = "chat") -> llm.ModelSpec:
    return llm.ModelSpec("openai/test-model", server.base_url, mode)


async def one_step(server: FakeOpenAI, settings: llm.CallSettings = CALL,
                   mode: llm.Mode = "chat") -> llm.StepText:
    items = [item async for item in llm.stream_step(spec(server, mode), "Q: 1\nThought 1:",
                                                   settings)]
    return items[-1]


# ------------------------------------------------------------- 3. replies that are not answers

@pytest.mark.parametrize("name", NOT_ANSWERS)
@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_a_200_that_is_not_an_answer_is_retried_then_fails(
    openai_server: FakeOpenAI, name: str, mode: llm.Mode
) -> None:
    openai_server.responder = lambda path, body: NOT_ANSWERS[name]()
    with pytest.raises(llm.LLMError) as raised:
        await one_step(openai_server, mode=mode)
    error = raised.value
    assert error.kind == "stream" and error.attempts == FAST.attempts
    assert "was not a model's answer" in error.message
    assert "openai/test-model" in error.message and openai_server.base_url in error.message
    assert len(openai_server.requests) == FAST.attempts


async def test_a_not_answer_then_an_answer_is_one_good_step(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(NOT_ANSWERS["an HTML page"](), Reply("4 + 4 = 8\nThought 2: x"))
    step = await one_step(openai_server)
    assert (step.text, step.call.attempts) == ("4 + 4 = 8", 2)


async def test_a_legitimately_empty_step_is_still_a_step(openai_server: FakeOpenAI) -> None:
    """The provider's own finish reason with no text: an empty thought, not a fault."""
    openai_server.enqueue(Reply(""))
    step = await one_step(openai_server)
    assert step.text == "" and step.call.finish_reason == "stop"


@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_a_stream_cut_short_without_a_finish_reason_is_a_fault(
    openai_server: FakeOpenAI, mode: llm.Mode
) -> None:
    """llama-cpp-python ends an interrupted stream with [DONE] and no finish reason; litellm
    then reports "stop". Text with no line break and no finish reason is not a step."""
    openai_server.enqueue(Reply("Let me think about", finish_reason=None),
                          Reply("4 + 4 = 8\n"))
    step = await one_step(openai_server, mode=mode)
    assert (step.text, step.call.attempts) == ("4 + 4 = 8", 2)
    openai_server.responder = lambda path, body: Reply("Let me think about",
                                                       finish_reason=None)
    with pytest.raises(llm.LLMError) as raised:
        await one_step(openai_server, mode=mode)
    assert raised.value.kind == "stream" and "ended mid-step without a finish reason" in (
        raised.value.message)


@pytest.mark.parametrize("server_finish", ["stop", None])
async def test_litellm_makes_up_stop_and_keeps_what_the_provider_sent(
    openai_server: FakeOpenAI, server_finish: str | None
) -> None:
    """The evidence the check above stands on (litellm 1.103.7): a stream that ends with
    [DONE] and no finish reason still yields finish_reason "stop"; only the wrapper's
    `received_finish_reason` (or `intermittent_finish_reason`, where a provider's chunk carried
    it, as Gemini's last one does: tests/test_providers_http.py) tells the two apart. If
    litellm changes either, this fails."""
    litellm = llm.litellm_module()
    openai_server.enqueue(Reply("Let me think about", finish_reason=server_finish))
    stream = await litellm.acompletion(
        model="openai/test-model", api_base=openai_server.base_url, max_retries=0,
        api_key="test", messages=[{"role": "user", "content": "Q"}], stream=True)
    reasons = [chunk.choices[0].finish_reason async for chunk in stream if chunk.choices]
    assert reasons[-1] == "stop"
    assert stream.received_finish_reason == server_finish
    assert (stream.received_finish_reason or stream.intermittent_finish_reason) == (
        server_finish)


def test_run_never_writes_a_not_answer_as_a_trace(openai_server: FakeOpenAI,
                                                  tmp_path: Path, capsys) -> None:
    """Before: an HTML 200 became a finished, empty trace in OUT, skipped by the next run.
    Now that trace fails (no row, named model and api base); the others are written; the
    next run, against a healthy server, does it."""
    source = tmp_path / f"{TASK}.jsonl"
    rows = bundled_rows(TASK)[:3]
    source.write_text("".join(row.to_line() + "\n" for row in rows))
    poisoned = rows[1].input

    def responder(path: str, body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        if poisoned in prompt:
            return NOT_ANSWERS["an HTML page"]()
        return dataset_responder(path, body)

    openai_server.responder = responder
    out = tmp_path / "out.jsonl"
    args = ["run", "--model", "openai/test-model", "--api-base", openai_server.base_url,
            "--input", str(source), "--out", str(out), "--no-progress"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "was not a model's answer" in err and openai_server.base_url in err
    assert sorted(row.input for row in read_rows(out)) == sorted(
        row.input for row in rows if row.input != poisoned)
    with Store.open() as store:
        for summary in store.sessions():
            if summary.session.input == poisoned:
                assert summary.steps == 0
    openai_server.responder = dataset_responder
    assert main(args) == 0
    assert {row.input: row.steps for row in read_rows(out)} == {r.input: r.steps for r in rows}


NOT_WHOLE_ANSWERS = {
    "an HTML page": lambda: Reply(raw_body=HTML, headers={"Content-Type": "text/html"}),
    "no choice": lambda: Reply(raw_body=json.dumps(
        {"id": "1", "object": "chat.completion", "created": 1, "model": "m", "choices": [],
         "usage": {"prompt_tokens": 3, "completion_tokens": 0, "total_tokens": 3}}).encode(),
        headers={"Content-Type": "application/json"}),
    "an empty object": lambda: Reply(raw_body=b"{}",
                                     headers={"Content-Type": "application/json"}),
}


@pytest.mark.parametrize("name", NOT_WHOLE_ANSWERS)
@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_a_whole_answer_that_is_not_one_is_retried_then_fails(
    openai_server: FakeOpenAI, name: str, mode: llm.Mode
) -> None:
    """Before: no choice failed once with "IndexError" (not retried), a text completion's
    `{}` was an empty answer, and an HTML page one "'str' object has no attribute"."""
    openai_server.responder = lambda path, body: NOT_WHOLE_ANSWERS[name]()
    with pytest.raises(llm.LLMError) as raised:
        await llm.complete(spec(openai_server, mode), [{"role": "user", "content": "Q"}],
                           llm.CallSettings(max_tokens=None, timeout_s=10, retry=FAST))
    error = raised.value
    assert error.retryable and error.attempts == FAST.attempts
    assert "was not a model's answer" in error.message
    assert "openai/test-model" in error.message and openai_server.base_url in error.message
    assert len(openai_server.requests) == FAST.attempts


@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_samples_with_no_choice_are_a_fault(openai_server: FakeOpenAI,
                                                  mode: llm.Mode) -> None:
    """Before: three calls that returned no choice made an empty set of candidates."""
    openai_server.responder = lambda path, body: NOT_WHOLE_ANSWERS["no choice"]()
    with pytest.raises(llm.LLMError) as raised:
        await sample_steps(spec(openai_server, mode), "Q: 1\nThought 1:", 2, CALL)
    assert "was not a model's answer" in raised.value.message
    assert raised.value.attempts == FAST.attempts


# ------------------------------------------------------------- 3. a gzip bomb

BOMB_BYTES = 1 << 30  # 1 GiB of spaces once decompressed (about 1 MB on the wire)


def gzip_bomb() -> Iterator[bytes]:
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1 << 20)
    for _ in range(BOMB_BYTES // len(block)):
        yield compressor.compress(block)
    yield compressor.flush()


BOMB_CLIENT = textwrap.dedent("""
    import asyncio, json, resource, sys
    from bbm_tui.core import llm

    async def main(base, mode, kind):
        spec = llm.ModelSpec("openai/test-model", base, mode)
        settings = llm.CallSettings(timeout_s=30, retry=llm.RetryPolicy(attempts=1))
        llm.litellm_module()
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        try:
            if kind == "step":
                [x async for x in llm.stream_step(spec, "Q\\nThought 1:", settings)]
            else:
                await llm.complete(spec, [{"role": "user", "content": "Q"}], settings)
            outcome = "answered"
        except llm.LLMError as error:
            outcome = error.message
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(json.dumps({"outcome": outcome, "grew_mb": (after - before) / 1024}))

    asyncio.run(main(*sys.argv[1:]))
""")


@pytest.mark.parametrize(("kind", "content_type"), [
    ("step", "text/event-stream"), ("whole", "application/json")])
def test_a_gzip_bomb_is_read_to_a_bound(openai_server: FakeOpenAI, kind: str,
                                        content_type: str) -> None:
    """Before: the client decompressed the whole body (4.4 GB once). Now a reply is read to
    32 MiB at most; memory grows by far less than the bomb."""
    openai_server.responder = lambda path, body: Reply(
        raw_chunks=gzip_bomb,
        headers={"Content-Type": content_type, "Content-Encoding": "gzip"})
    result = subprocess.run(
        [sys.executable, "-c", BOMB_CLIENT, openai_server.base_url, "chat", kind],
        capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[1],
        env={**os.environ, "OPENAI_API_KEY": "test"},
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert "passed 32 MiB and was not read further" in report["outcome"]
    assert report["grew_mb"] < 300, report


async def test_a_compressed_answer_still_reads(openai_server: FakeOpenAI) -> None:
    """Honest compression is decoded (by the guard, not the HTTP library)."""
    chunk = {"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "m",
             "choices": [{"index": 0, "delta": {"content": "4 + 4 = 8\n"},
                          "finish_reason": None}]}
    body = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
    openai_server.enqueue(Reply(raw_body=gzip.compress(body), headers={
        "Content-Type": "text/event-stream", "Content-Encoding": "gzip"}))
    assert (await one_step(openai_server)).text == "4 + 4 = 8"


# ------------------------------------------------------------- 5. absurd usage

ABSURD = [
    {"prompt_tokens": 2**64, "completion_tokens": 3, "total_tokens": 2**64 + 3},
    {"prompt_tokens": 1e23, "completion_tokens": 1e23, "total_tokens": 2e23},
    {"prompt_tokens": -5, "completion_tokens": -1, "total_tokens": -6},
    {"prompt_tokens": float("nan"), "completion_tokens": 3, "total_tokens": 3},
    {"prompt_tokens": "lots", "completion_tokens": "many", "total_tokens": "all"},
]


@pytest.mark.parametrize("usage", ABSURD, ids=["2**64", "1e23", "negative", "NaN", "strings"])
async def test_absurd_usage_is_unknown_and_the_step_is_kept(
    openai_server: FakeOpenAI, store: Store, usage: dict
) -> None:
    """Before: `run` stopped with an internal error (2**64 overflows SQLite) or the step was
    lost (litellm could not parse the usage), and the app asked the model again on every
    key. Now the step is kept and committed, its usage and cost unknown."""
    # The server honours stop, so the step ends with its finish reason and usage chunk.
    openai_server.enqueue(Reply(ROW.steps[0] + "\nThought 2: more", usage_values=usage))
    trace = TraceSession.create(store, NewTrace(TASK, ROW.input, ROW.target),
                                spec(openai_server))
    events = [e async for e in trace.generate(max_new_steps=1,
                                              settings=StepperSettings(call=CALL))]
    finished = [e for e in events if isinstance(e, StepFinished)]
    assert [e.text for e in finished] == ROW.steps[:1]
    assert not [e for e in events if isinstance(e, StepFailed)]
    call = finished[0].call
    for value in (call.prompt_tokens, call.completion_tokens):
        assert value is None or 0 <= value <= llm.MAX_CALL_TOKENS
    assert call.cost is None or 0 <= call.cost <= llm.MAX_CALL_COST
    again = TraceSession.load(store, trace.id)
    assert again.texts == ROW.steps[:1]
    totals = again.totals()
    assert totals.prompt_tokens <= llm.MAX_CALL_TOKENS and totals.cost <= llm.MAX_CALL_COST


@pytest.mark.parametrize("usage", ABSURD, ids=["2**64", "1e23", "negative", "NaN", "strings"])
@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_absurd_usage_in_a_whole_answer_keeps_the_answer(
    openai_server: FakeOpenAI, usage: dict, mode: llm.Mode
) -> None:
    """Before: 1e23, NaN or strings made litellm fail the whole answer (a finder's verdict or
    a backtracking sample lost, after every retry); 2**64 or -5 were half kept. Now the
    answer is kept and its usage is unknown."""
    openai_server.responder = lambda path, body: Reply("4 + 4 = 8", usage_values=usage)
    answer = await llm.complete(spec(openai_server, mode), [{"role": "user", "content": "Q"}],
                                llm.CallSettings(max_tokens=None, timeout_s=10, retry=FAST))
    assert answer.text == "4 + 4 = 8" and answer.call.attempts == 1
    assert (answer.call.prompt_tokens, answer.call.completion_tokens, answer.call.cost) == (
        None, None, None)
    samples = await sample_steps(spec(openai_server, mode), "Q: 1\nThought 1:", 2, CALL)
    assert [candidate.text for candidate in samples.candidates] == ["4 + 4 = 8"] * 2
    assert {(call.prompt_tokens, call.completion_tokens) for call in samples.calls} == {
        (None, None)}


async def test_a_whole_answer_without_usage_has_unknown_usage(
    openai_server: FakeOpenAI
) -> None:
    """Before: litellm's zeros for a reply that sent no usage were stored as 0 tokens."""
    openai_server.enqueue(Reply("4 + 4 = 8", usage=False),
                          Reply("4 + 4 = 8", usage_values={"prompt_tokens": 7,
                                                           "completion_tokens": 5,
                                                           "total_tokens": 12}))
    settings = llm.CallSettings(max_tokens=None, timeout_s=10, retry=FAST)
    messages = [{"role": "user", "content": "Q"}]
    unknown = await llm.complete(spec(openai_server), messages, settings)
    assert (unknown.call.prompt_tokens, unknown.call.completion_tokens) == (None, None)
    counted = await llm.complete(spec(openai_server), messages, settings)
    assert (counted.call.prompt_tokens, counted.call.completion_tokens) == (7, 5)


def test_the_store_keeps_absurd_usage_as_unknown(store: Store) -> None:
    """The last line of defence: before, 2**64 stopped the insert with OverflowError and
    7.5e16 dollars went into every total."""
    session = store.create_session(task=TASK, input=ROW.input, model="openai/test-model").id
    call = llm.CallRecord(model="openai/test-model", params={}, latency_s=0.1,
                          prompt_tokens=2**64, completion_tokens=-3, cost=7.5e16)
    step = store.add_step(session, parent_id=None, number=1, text="4 + 4 = 8", call=call)
    assert (step.prompt_tokens, step.completion_tokens, step.cost) == (None, None, None)
    store.record_call(session, "find", llm.CallRecord(
        model="openai/test-model", params={}, latency_s=0.1, prompt_tokens=10,
        completion_tokens=True, cost=float("nan")))
    totals = store.totals(session)
    assert (totals.calls, totals.prompt_tokens, totals.completion_tokens, totals.cost) == (
        2, 10, 0, 0)


def test_sane_bounds() -> None:
    assert [llm.sane_tokens(v) for v in (0, 12, 10**9, 10**9 + 1, -1, 2**64, 1.0, True, "3",
                                         None)] == [0, 12, 10**9] + [None] * 7
    assert [llm.sane_cost(v) for v in (0, 0.5, 1000, 1000.01, -0.1, float("nan"),
                                       float("inf"), 7.5e16, "1")] == [0.0, 0.5, 1000.0] + [
        None] * 6


# ------------------------------------------------------------- 7. every line break

@pytest.mark.parametrize("line_break", ["\r", "\r\n", "\u2028", "\u2029", "\x85", "\v", "\f",
                                        "\x1c", "\x1d", "\x1e"])
async def test_every_unicode_line_break_ends_a_step(openai_server: FakeOpenAI,
                                                    line_break: str) -> None:
    """Before: only "\\n" cut, so "4 + 4 = 8\\rSo the answer is 9" became one thought whose
    answer came from the next one."""
    openai_server.enqueue(Reply(f"4 + 4 = 8{line_break}So the answer is 9{line_break}",
                                honor_stop=False, chunk_chars=3))
    step = await one_step(openai_server)
    assert step.text == "4 + 4 = 8" and step.call.finish_reason == "newline"


async def test_a_line_break_split_across_chunks(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("4 + 4 = 8\r\nThought 2: x", honor_stop=False,
                                chunk_chars=10))  # "\r" ends chunk one, "\n" starts two
    assert (await one_step(openai_server)).text == "4 + 4 = 8"


async def test_invalid_utf8_becomes_replacement_characters(openai_server: FakeOpenAI) -> None:
    """Before: one invalid byte failed the whole step ("broke off mid-answer")."""
    openai_server.enqueue(Reply(raw_text=b"caf\xc3\xa9 \xff\xfe ok\n", chunk_chars=64))
    step = await one_step(openai_server)
    assert step.text == "café \ufffd\ufffd ok"


# ------------------------------------------------------------- 8. a step's wall-clock limit

async def test_a_dripping_server_is_cut_at_the_step_time_limit(
    openai_server: FakeOpenAI
) -> None:
    """One character every 0.3 s with no newline never ended before (each chunk reset the
    idle deadline). Now the step is cut at its limit, kept, and marked like a token cut."""
    openai_server.enqueue(Reply("x" * 200, chunk_chars=1, chunk_delay_s=0.3,
                                honor_max_tokens=False))
    settings = llm.CallSettings(timeout_s=10, idle_timeout_s=10, step_timeout_s=1.5,
                                retry=FAST)
    step = await one_step(openai_server, settings)
    assert step.truncated and step.call.finish_reason == "time_limit"
    assert 2 <= len(step.text) <= 10 and set(step.text) == {"x"}


def test_the_step_time_limit_is_a_setting(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("step_timeout = 42\n")
    assert load_config(path).stepper_settings().call.step_timeout_s == 42.0
    assert load_config(tmp_path / "none.toml").stepper_settings().call.step_timeout_s == 300.0


async def test_the_stepper_ends_the_trace_at_a_time_cut(openai_server: FakeOpenAI,
                                                        store: Store) -> None:
    openai_server.enqueue(Reply("x" * 200, chunk_chars=1, chunk_delay_s=0.3,
                                honor_max_tokens=False))
    settings = StepperSettings(call=llm.CallSettings(timeout_s=10, step_timeout_s=1.0,
                                                     retry=FAST))
    trace = TraceSession.create(store, NewTrace(TASK, ROW.input, ROW.target),
                                spec(openai_server))
    events = [e async for e in trace.generate(settings=settings)]
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == "truncated"
    assert TraceSession.load(store, trace.id).steps[0].truncated
