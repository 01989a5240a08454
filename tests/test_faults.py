"""Provider faults through litellm against the local server, for every kind of model call the
project makes: generation through TraceSession (with the store), mistake finding through
record_find (trace- and step-level, with the store), and the batch paths (`run`, `find`).

Each fault: bounded retries where retrying makes sense (the server counts the requests), no
half step or half verdict stored, the store intact (reopened from its file, integrity_check
ok), one clear message, and the step (or the finder run) can be tried again afterwards.
"""

from __future__ import annotations

import os
import re
import sqlite3
import string
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.batch.find import find_batch
from bbm_tui.core.batch.find import jobs_from_files as find_jobs_from_files
from bbm_tui.core.batch.run import FatalRunError, RunJob, run_batch
from bbm_tui.core.dataset import bundled_path, bundled_rows, read_rows
from bbm_tui.core.generation.stepper import (
    StepFailed,
    StepFinished,
    StepperSettings,
    StepRestarted,
    TraceFinished,
)
from bbm_tui.core.judging.finders import FINDER_MAX_TOKENS, FindFinished, StepJudged, TraceJudged
from bbm_tui.core.llm.offline.replay import parse_generation_prompt
from bbm_tui.core.store import Store, default_path
from bbm_tui.core.trace.recording import record_find
from bbm_tui.core.trace.session import NewTrace, TraceSession
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

TASK = "multistep_arithmetic"
ROWS = bundled_rows(TASK)
ROW = ROWS[0]  # five thoughts; the recorded first mistake is Thought 4
ATTEMPTS = 3
FAST = llm.RetryPolicy(attempts=ATTEMPTS, base_delay_s=0.01, max_delay_s=0.02)
# Small deadlines so that a stalled server costs about a second per attempt, yet long enough
# that a good reply on a loaded machine (the suite's four workers on two cores) is never
# taken for a stall. The transport's own timeout is a little longer than the idle deadline,
# so that a stream that goes silent is always caught by the same one.
CALL = llm.CallSettings(timeout_s=1.2, idle_timeout_s=1.0, retry=FAST)
STEPPER = StepperSettings(call=CALL)
FINDER = llm.CallSettings(temperature=0.0, max_tokens=FINDER_MAX_TOKENS, timeout_s=1.2,
                          retry=FAST)
ENDLESS = 20_000
STALL_S = 6.0


def varied_text(length: int) -> str:
    """No newline, no space, no chunk repeated (litellm aborts a stream that repeats one)."""
    letters = string.ascii_lowercase
    return "".join(letters[(i * 7 + i // 26) % 26] for i in range(length))


@dataclass(frozen=True)
class Fault:
    """A failing reply the server gives to every request, and what the client must make of
    it: the error kind per call kind (streamed step, whole answer), None when it is no error;
    whether it is retried; words the message must hold."""

    reply: Callable[[], Reply]
    step_kind: str | None
    whole_kind: str | None
    retried: bool
    words: tuple[str, ...] = ()
    whole_words: tuple[str, ...] | None = None

    def kind(self, whole: bool) -> str | None:
        return self.whole_kind if whole else self.step_kind

    def message_words(self, whole: bool) -> tuple[str, ...]:
        return self.whole_words if whole and self.whole_words is not None else self.words


FAULTS: dict[str, Fault] = {
    "429 Retry-After": Fault(
        lambda: Reply(status=429, headers={"Retry-After": "0"},
                      error_body={"error": {"message": "Rate limit reached", "type": "rl"}}),
        "rate_limit", "rate_limit", True, ("is rate-limiting requests",)),
    "500": Fault(lambda: Reply(status=500), "server", "server", True, ("server error (500)",)),
    "503": Fault(lambda: Reply(status=503), "server", "server", True, ("server error (503)",)),
    "stall before answering": Fault(
        lambda: Reply(text="Too late.", delay_s=STALL_S), "timeout", "timeout", True,
        ("did not answer in time",)),
    "stall mid-answer": Fault(
        lambda: Reply(text="Half of it, then nothing.", stall_s=STALL_S), "timeout", "timeout",
        True, ("did not answer in time",)),
    "dropped mid-answer": Fault(
        lambda: Reply(text="Half of a step that never ends.", drop_after_chunks=2),
        "stream", "connection", True, ("broke off mid-answer",)),
    "malformed chunk": Fault(
        lambda: Reply(text="a b c d e", malformed_after_chunks=2), "stream", "server", True,
        ("sent a malformed stream chunk",), ("sent a malformed response",)),
    "401": Fault(
        lambda: Reply(status=401, error_body={"error": {"message": "Incorrect API key"}}),
        "auth", "auth", False, ("needs an API key: set OPENAI_API_KEY",)),
    "empty answer": Fault(lambda: Reply(text=""), None, None, False),
    "endless line": Fault(
        lambda: Reply(text=varied_text(ENDLESS), honor_max_tokens=False, chunk_chars=ENDLESS,
                      finish_reason="length"),
        None, None, False),
}
ERRORS = [name for name, fault in FAULTS.items() if fault.step_kind is not None]
NOISE = re.compile(r"Traceback|litellm|LiteLLM|\b[A-Z]\w*(?:Error|Exception)\b|<\w+|\{'|\"error\"")


def assert_clear(message: str, words: tuple[str, ...], kind: str, retried: bool) -> None:
    """One line, kind-specific, without Python's or litellm's noise."""
    assert "\n" not in message, message
    assert not NOISE.search(message), message
    for word in words:
        assert word in message, (word, message)
    assert message.startswith(("openai/test at ", "the stream from openai/test",
                               "the connection to openai/test")), message
    assert (f"(after {ATTEMPTS} attempts)" in message) is retried, message
    if kind == "auth":
        assert "OPENAI_API_KEY" in message


def open_copy(path: Path) -> Store:
    """The store as another process would see it: a new connection to the same file."""
    return Store.open(path)


@dataclass
class Saved:
    texts: list[str]
    numbers: list[int]
    truncated: list[bool]
    step_rows: int
    step_calls: int
    find_calls: int
    integrity: str
    runs: list[Any] = field(default_factory=list)


def saved(path: Path, session_id: int) -> Saved:
    with open_copy(path) as store:
        branch = store.branch(session_id)
        runs = store.finder_runs(session_id)
        integrity = store.integrity_check()
    with sqlite3.connect(path) as connection:
        step_rows = connection.execute(
            "SELECT COUNT(*) FROM steps WHERE session_id = ?", (session_id,)).fetchone()[0]
        step_calls, find_calls = (
            connection.execute(
                "SELECT COUNT(*) FROM calls WHERE session_id = ? AND purpose = ?",
                (session_id, purpose)).fetchone()[0]
            for purpose in ("step", "find")
        )
    return Saved([s.text for s in branch], [s.number for s in branch],
                 [s.truncated for s in branch], step_rows, step_calls, find_calls, integrity,
                 runs)


def new_trace(store: Store, server: FakeOpenAI, row=ROW) -> TraceSession:
    return TraceSession.create(
        store, NewTrace(TASK, row.input, row.target, 0, row.mistake_index),
        llm.ModelSpec("openai/test", server.base_url),
    )


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "store.sqlite3") as opened:
        yield opened


# ------------------------------------------------------------------------------- generation


@pytest.mark.parametrize("name", list(FAULTS))
async def test_generation_fault_at_step_3(
    name: str, store: Store, openai_server: FakeOpenAI, capfd: pytest.CaptureFixture[str]
) -> None:
    fault = FAULTS[name]
    openai_server.responder = dataset_responder
    trace = new_trace(store, openai_server)
    events = [e async for e in trace.generate(max_new_steps=2, settings=STEPPER)]
    assert events[-1] == TraceFinished("paused", ROW.steps[:2], None)

    openai_server.requests.clear()
    openai_server.responder = lambda path, body: fault.reply()
    started = time.monotonic()
    events = [e async for e in trace.generate(settings=STEPPER)]
    elapsed = time.monotonic() - started
    requests = len(openai_server.requests)
    after = saved(store.path, trace.id)
    assert after.integrity == "ok"

    if fault.step_kind is not None:
        failed = events[-1]
        assert isinstance(failed, StepFailed) and failed.number == 3
        assert failed.error.kind == fault.step_kind
        assert requests == (ATTEMPTS if fault.retried else 1)
        assert failed.error.attempts == requests
        restarts = [e for e in events if isinstance(e, StepRestarted)]
        assert len(restarts) == requests - 1
        assert_clear(failed.error.message, fault.words, fault.step_kind, fault.retried)
        assert not any(isinstance(e, StepFinished) for e in events)
        expected = ROW.steps[:2]
        # A stalled server is given up on at the deadline, not when it wakes up.
        assert elapsed < ATTEMPTS * STALL_S / 2
    elif name == "empty answer":
        # The model went silent: two empty steps in a row end the trace, neither is kept.
        assert events[-1] == TraceFinished("empty", ROW.steps[:2], None)
        assert requests == 2
        expected = ROW.steps[:2]
    else:
        # Cut at its token limit's character cap, kept, marked truncated; the run stops there.
        cut = CALL.max_tokens * llm.CHARS_PER_TOKEN_CAP
        finished = [e for e in events if isinstance(e, StepFinished)]
        assert [(e.number, e.truncated, len(e.text)) for e in finished] == [(3, True, cut)]
        assert events[-1].reason == "truncated"
        assert requests == 1
        expected = [*ROW.steps[:2], varied_text(ENDLESS)[:cut]]
    # Exactly the finished steps, numbered from 1, each with its one call: no half step.
    assert after.texts == expected == trace.texts
    assert after.numbers == list(range(1, len(expected) + 1))
    assert after.truncated == [False, False] + [True] * (len(expected) - 2)
    assert after.step_rows == after.step_calls == len(expected)

    # The step can be tried again: the trace goes on with the right number, nothing twice.
    if name == "endless line":
        openai_server.responder = lambda path, body: Reply(text="A step after the cut one.")
        events = [e async for e in trace.generate(max_new_steps=1, settings=STEPPER)]
        expected = [*expected, "A step after the cut one."]
    else:
        openai_server.responder = dataset_responder
        events = [e async for e in trace.generate(settings=STEPPER)]
        assert events[-1].reason == "answer"
        expected = ROW.steps
    again = saved(store.path, trace.id)
    assert again.texts == expected == trace.texts
    assert again.numbers == list(range(1, len(expected) + 1))
    assert again.step_rows == again.step_calls == len(expected)
    assert again.integrity == "ok"
    out, err = capfd.readouterr()
    assert not re.search(r"Traceback|LiteLLM|Give Feedback", out + err)


async def test_retry_after_is_waited_out_between_attempts(
    store: Store, openai_server: FakeOpenAI
) -> None:
    """The backoff here is a few milliseconds: only Retry-After explains the wait. The call
    deadlines are generous (a busy machine must not turn a slow answer into a third retry)."""
    patient = llm.CallSettings(timeout_s=30, idle_timeout_s=30, retry=FAST)
    openai_server.enqueue(Reply(status=429, headers={"Retry-After": "0.4"}),
                          Reply(status=429, headers={"Retry-After": "0.4"}))
    openai_server.responder = dataset_responder
    trace = new_trace(store, openai_server)
    started = time.monotonic()
    events = [e async for e in trace.generate(max_new_steps=1,
                                              settings=StepperSettings(call=patient))]
    elapsed = time.monotonic() - started
    assert [e.delay_s for e in events if isinstance(e, StepRestarted)] == [0.4, 0.4]
    assert elapsed >= 0.8
    step = next(e for e in events if isinstance(e, StepFinished))
    assert (step.number, step.text, step.call.attempts) == (1, ROW.steps[0], 3)
    assert saved(store.path, trace.id).texts == ROW.steps[:1]

    # And for a whole answer (the finders): the same policy, the same wait.
    openai_server.enqueue(Reply(status=429, headers={"Retry-After": "0.4"}), Reply("4"))
    started = time.monotonic()
    events = [e async for e in record_find(store, trace.id, TASK, "direct-trace", ROW.input,
                                           ROW.steps, trace.spec,
                                           settings=replace(FINDER, timeout_s=30))]
    assert time.monotonic() - started >= 0.4
    assert events[0].call.attempts == 2 and events[-1].result.mistake_number == 4


# ------------------------------------------------------------------------------- finding

FINDER_FAULTS = [*ERRORS, "empty answer", "endless line"]


@pytest.mark.parametrize("name", FINDER_FAULTS)
async def test_trace_level_finder_fault(
    name: str, store: Store, openai_server: FakeOpenAI
) -> None:
    fault = FAULTS[name]
    trace = new_trace(store, openai_server)
    trace.load_recorded(list(ROW.steps))
    openai_server.responder = lambda path, body: fault.reply()

    async def find() -> list[Any]:
        return [e async for e in record_find(
            store, trace.id, TASK, "direct-trace", ROW.input, ROW.steps, trace.spec,
            leaf_step_id=trace.steps[-1].id, settings=FINDER)]

    if fault.whole_kind is not None:
        with pytest.raises(llm.LLMError) as caught:
            await find()
        error = caught.value
        assert error.kind == fault.whole_kind
        assert len(openai_server.requests) == (ATTEMPTS if fault.retried else 1)
        assert_clear(error.message, fault.message_words(True), error.kind, fault.retried)
        after = saved(store.path, trace.id)
        # The run is there, cut short: no verdict, no result, no call recorded for it.
        [failed] = after.runs
        assert (failed.finished, failed.parsed, failed.mistake_number) == (False, None, None)
        assert failed.verdicts == () and after.find_calls == 0
        # ...and says how it ended, in the words the person was shown.
        assert (failed.ended, failed.error) == ("failed", error.message)
    else:
        events = await find()
        judged = events[0]
        assert isinstance(judged, TraceJudged) and not judged.parsed
        after = saved(store.path, trace.id)
        # An empty or endless answer is an answer: kept verbatim, unparseable, run finished.
        [run] = after.runs
        assert (run.finished, run.parsed, run.mistake_number) == (True, False, None)
        [verdict] = run.verdicts
        assert verdict.verdict is None and not verdict.parsed
        assert verdict.raw == ("" if name == "empty answer" else varied_text(ENDLESS))
        assert verdict.call.finish_reason == ("length" if name == "endless line" else "stop")
        assert len(openai_server.requests) == 1
    assert after.integrity == "ok"
    assert after.texts == ROW.steps  # the trace itself is untouched

    # A new run afterwards gets its verdict; the earlier one stays as it was.
    openai_server.responder = lambda path, body: Reply("4")
    events = await find()
    assert isinstance(events[-1], FindFinished) and events[-1].result.mistake_number == 4
    again = saved(store.path, trace.id)
    assert [(r.finished, r.mistake_number) for r in again.runs] == [
        (after.runs[0].finished, None), (True, 4)]
    assert (again.runs[1].ended, again.runs[1].error) == (None, None)
    assert again.runs[0].verdicts == after.runs[0].verdicts
    assert [v.verdict for v in again.runs[1].verdicts] == ["4"]
    assert again.integrity == "ok"


@pytest.mark.parametrize("name", FINDER_FAULTS)
async def test_step_level_finder_fault_on_thought_2(
    name: str, store: Store, openai_server: FakeOpenAI
) -> None:
    fault = FAULTS[name]
    trace = new_trace(store, openai_server)
    trace.load_recorded(list(ROW.steps))
    openai_server.enqueue(Reply("Yes"))  # Thought 1
    openai_server.responder = lambda path, body: fault.reply()

    async def find() -> list[Any]:
        return [e async for e in record_find(
            store, trace.id, TASK, "direct-step", ROW.input, ROW.steps, trace.spec,
            settings=FINDER)]

    if fault.whole_kind is not None:
        with pytest.raises(llm.LLMError) as caught:
            await find()
        assert caught.value.kind == fault.whole_kind
        assert len(openai_server.requests) == 1 + (ATTEMPTS if fault.retried else 1)
        assert_clear(caught.value.message, fault.message_words(True), caught.value.kind,
                     fault.retried)
        after = saved(store.path, trace.id)
        [failed] = after.runs
        # Thought 1's verdict was committed as it came; Thought 2's never came.
        assert [(v.step_number, v.verdict) for v in failed.verdicts] == [(1, "Yes")]
        assert not failed.finished and failed.parsed is None
        assert (failed.ended, failed.error) == ("failed", caught.value.message)
        assert after.find_calls == 1
    else:
        events = await find()
        assert [(e.number, e.correct) for e in events if isinstance(e, StepJudged)] == [
            (1, True), (2, None)]
        after = saved(store.path, trace.id)
        [run] = after.runs
        # An unparseable answer before any "No" leaves the location unknown: finished,
        # unparsed, and the judging stops there.
        assert (run.finished, run.parsed, run.mistake_number) == (True, False, None)
        assert [v.verdict for v in run.verdicts] == ["Yes", None]
        assert len(openai_server.requests) == 2
    assert after.integrity == "ok"

    openai_server.responder = None
    openai_server.enqueue(Reply("Yes"), Reply("Yes"), Reply("Yes"), Reply("No"))
    events = await find()
    assert events[-1].result.mistake_number == 4
    again = saved(store.path, trace.id)
    assert len(again.runs) == 2 and again.runs[0].verdicts == after.runs[0].verdicts
    assert [v.verdict for v in again.runs[1].verdicts] == ["Yes", "Yes", "Yes", "No"]


# ------------------------------------------------------------------------------- batches

BATCH = ["429 Retry-After", "503", "stall mid-answer", "dropped mid-answer", "malformed chunk",
         "empty answer", "endless line"]


def run_jobs(n: int = 3) -> list[RunJob]:
    return [RunJob(TASK, row) for row in ROWS[:n]]


def faulty_at_step_2(question: str, fault: Fault) -> Callable[[str, dict], Reply]:
    """The dataset's steps, except from the second step on of one question."""
    def respond(path: str, body: dict) -> Reply:
        request = parse_generation_prompt(body["messages"][-1]["content"])
        if request is not None and request.question.endswith(question) and len(request.steps) >= 1:
            return fault.reply()
        return dataset_responder(path, body)
    return respond


def sessions_by_input(path: Path) -> dict[str, list[str]]:
    with open_copy(path) as store:
        assert store.integrity_check() == "ok"
        return {s.session.input: [step.text for step in store.branch(s.session.id)]
                for s in store.sessions()}


@pytest.mark.parametrize("name", BATCH)
async def test_run_batch_fault_on_one_trace(
    name: str, tmp_path: Path, store: Store, openai_server: FakeOpenAI
) -> None:
    fault = FAULTS[name]
    jobs = run_jobs()
    victim = jobs[1].row
    openai_server.responder = faulty_at_step_2(victim.input, fault)
    out = tmp_path / "out.jsonl"
    progress = await run_batch(jobs, llm.ModelSpec("openai/test", openai_server.base_url),
                               store, out, concurrency=2, settings=STEPPER)
    rows = {row.input: row for row in read_rows(out)}
    stored = sessions_by_input(store.path)
    victim_requests = sum(
        1 for r in openai_server.requests
        if (req := parse_generation_prompt(r.body["messages"][-1]["content"]))
        and req.question.endswith(victim.input) and len(req.steps) == 1
    )
    for job in (jobs[0], jobs[2]):
        assert rows[job.row.input].steps == job.row.steps == stored[job.row.input]
    if fault.step_kind is not None:
        assert (progress.done, progress.failed) == (2, 1)
        [message] = progress.errors
        assert message.startswith(f"{TASK}: ")
        assert_clear(message.removeprefix(f"{TASK}: "), fault.words, fault.step_kind, True)
        assert victim.input not in rows
        assert stored[victim.input] == victim.steps[:1]
        assert victim_requests == ATTEMPTS
        # Run again: only the failed trace is worked on, from where it stopped.
        openai_server.requests.clear()
        openai_server.responder = dataset_responder
        progress = await run_batch(jobs, llm.ModelSpec("openai/test", openai_server.base_url),
                                   store, out, concurrency=2, settings=STEPPER)
        assert (progress.skipped, progress.done, progress.failed) == (2, 1, 0)
        assert len(openai_server.requests) == len(victim.steps) - 1
        rows = {row.input: row for row in read_rows(out)}
        assert rows[victim.input].steps == victim.steps
        assert sessions_by_input(store.path)[victim.input] == victim.steps
    else:
        # The trace is over (the model went silent, or its step was cut): its row is written
        # with what it has, and the store holds the same steps.
        assert (progress.done, progress.failed) == (3, 0)
        expected = victim.steps[:1] if name == "empty answer" else [
            victim.steps[0], varied_text(ENDLESS)[: CALL.max_tokens * llm.CHARS_PER_TOKEN_CAP]]
        assert rows[victim.input].steps == expected == stored[victim.input]
        assert rows[victim.input].answer is None
    assert len(read_rows(out)) == len(rows) == len({*rows})


async def test_run_batch_stops_at_a_401_keeping_what_it_finished(
    tmp_path: Path, store: Store, openai_server: FakeOpenAI
) -> None:
    jobs = run_jobs()
    openai_server.responder = faulty_at_step_2(jobs[1].row.input, FAULTS["401"])
    out = tmp_path / "out.jsonl"
    with pytest.raises(FatalRunError) as caught:
        await run_batch(jobs, llm.ModelSpec("openai/test", openai_server.base_url), store, out,
                        concurrency=1, settings=STEPPER)
    assert_clear(str(caught.value), FAULTS["401"].words, "auth", False)
    assert [row.input for row in read_rows(out)] == [jobs[0].row.input]
    stored = sessions_by_input(store.path)
    assert stored[jobs[1].row.input] == jobs[1].row.steps[:1]
    assert jobs[2].row.input not in stored


def preds(path: Path) -> list[dict]:
    import json

    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("name", BATCH)
async def test_find_batch_fault_on_one_trace(
    name: str, tmp_path: Path, openai_server: FakeOpenAI
) -> None:
    fault = FAULTS[name]
    jobs = find_jobs_from_files([bundled_path(TASK)], None, "direct-trace", limit=4)
    victim = jobs[1].row.input

    def respond(path: str, body: dict) -> Reply:
        if victim in body["messages"][-1]["content"]:
            return fault.reply()
        return Reply("No")

    openai_server.responder = respond
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    out = tmp_path / "preds.jsonl"
    outcome = await find_batch(jobs, "direct-trace", spec, out, concurrency=2, settings=FINDER)
    progress = outcome.progress
    lines = {line["input"]: line for line in preds(out)}
    if fault.whole_kind is not None:
        assert (progress.done, progress.failed, progress.calls) == (3, 1, 3)
        [message] = progress.errors
        assert_clear(message.removeprefix(f"{TASK}: "), fault.message_words(True),
                     fault.whole_kind, True)
        assert victim not in lines
        assert len(openai_server.requests) == 3 + ATTEMPTS
        # Run again: only the failed trace is judged.
        openai_server.requests.clear()
        openai_server.responder = lambda path, body: Reply("No")
        outcome = await find_batch(jobs, "direct-trace", spec, out, concurrency=2,
                                   settings=FINDER)
        assert (outcome.progress.skipped, outcome.progress.done) == (3, 1)
        assert len(openai_server.requests) == 1
        lines = {line["input"]: line for line in preds(out)}
        assert lines[victim]["parsed"] is True
    else:
        # An answer, if a useless one: written as unparseable (the paper counts it wrong).
        assert (progress.done, progress.failed) == (4, 0)
        assert lines[victim]["parsed"] is False
        assert lines[victim]["predicted_mistake_index"] is None
        assert outcome.report.overall.unparseable == 1
    assert len(preds(out)) == len(lines) == 4


TOO_LONG = Reply(status=400, error_body={"error": {
    "message": "This model's maximum context length is 8192 tokens. However, your messages "
               "resulted in 9001 tokens. Please reduce the length of the messages.",
    "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})


async def test_a_prompt_too_long_fails_one_trace_and_the_batches_go_on(
    tmp_path: Path, store: Store, openai_server: FakeOpenAI
) -> None:
    """One long trace must not stop a batch over a dataset: the others are still worked on."""
    jobs = find_jobs_from_files([bundled_path(TASK)], None, "direct-trace", limit=4)
    victim = jobs[1].row.input

    def judge(path: str, body: dict) -> Reply:
        return TOO_LONG if victim in body["messages"][-1]["content"] else Reply("No")

    openai_server.responder = judge
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    outcome = await find_batch(jobs, "direct-trace", spec, tmp_path / "preds.jsonl",
                               concurrency=2, settings=FINDER)
    assert (outcome.progress.done, outcome.progress.failed) == (3, 1)
    [message] = outcome.progress.errors
    assert message.startswith(f"{TASK}: the prompt is too long for openai/test")
    assert len(openai_server.requests) == 4  # not retried

    openai_server.requests.clear()
    generation_victim = run_jobs()[1].row.input

    def generate(path: str, body: dict) -> Reply:
        if generation_victim in body["messages"][-1]["content"]:
            return TOO_LONG
        return dataset_responder(path, body)

    openai_server.responder = generate
    progress = await run_batch(run_jobs(), spec, store, tmp_path / "out.jsonl", concurrency=2,
                               settings=STEPPER)
    assert (progress.done, progress.failed) == (2, 1)
    assert generation_victim not in {row.input for row in read_rows(tmp_path / "out.jsonl")}


# ------------------------------------------------------------------------------- the commands


def test_run_command_server_errors_then_resume(
    tmp_path: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """The command's own policy (4 attempts; Retry-After 0 keeps the test fast), its exit
    code and its one line per failed trace."""
    source = tmp_path / f"{TASK}.jsonl"
    source.write_text("".join(row.to_line() + "\n" for row in ROWS[:2]))
    victim = ROWS[1]
    fault = Fault(lambda: Reply(status=503, headers={"Retry-After": "0"}), "server", "server",
                  True)
    openai_server.responder = faulty_at_step_2(victim.input, fault)
    out = tmp_path / "out.jsonl"
    args = ["run", "--model", "openai/test", "--api-base", openai_server.base_url,
            "--input", str(source), "--out", str(out), "--no-progress"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "1 trace written" in err and "1 failed" in err
    failures = [line for line in err.splitlines() if "server error (503)" in line]
    assert failures == [f"bbm-tui: {TASK}: openai/test at {openai_server.base_url} had a "
                        "server error (503): scripted status 503 (after 4 attempts)"]
    assert "Traceback" not in err
    openai_server.responder = dataset_responder
    assert main(args) == 0
    assert {row.input: row.steps for row in read_rows(out)} == {
        row.input: row.steps for row in ROWS[:2]}
    assert sessions_by_input(default_path())[victim.input] == victim.steps


@pytest.mark.parametrize("command", ["run", "find"])
def test_commands_stop_at_a_401_with_one_line(
    command: str, tmp_path: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    openai_server.responder = lambda path, body: FAULTS["401"].reply()
    out = tmp_path / "out.jsonl"
    args = [command, "--model", "openai/test", "--api-base", openai_server.base_url,
            "--input", str(bundled_path(TASK)), "--limit", "3", "--concurrency", "1",
            "--out", str(out), "--no-progress"]
    if command == "find":
        args += ["--method", "direct-step", "--json"]
    assert main(args) == 1
    captured = capsys.readouterr()
    verb = "run" if command == "run" else "find"
    assert captured.err == (f"bbm-tui: {verb} stopped: openai/test at {openai_server.base_url}"
                            " needs an API key: set OPENAI_API_KEY\n")
    assert captured.out == ""
    assert len(openai_server.requests) == 1
    assert out.read_bytes() == b""


@pytest.mark.parametrize("command", ["run", "find"])
def test_the_config_timeout_bounds_every_call(
    command: str, tmp_path: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """`timeout` in the config is what generation and mistake finding wait for an answer."""
    Path(os.environ["BBM_TUI_CONFIG"]).write_text("timeout = 0.3\n")
    openai_server.responder = lambda path, body: Reply("No", delay_s=5, first_chunk_delay_s=5)
    out = tmp_path / "out.jsonl"
    args = [command, "--model", "openai/test", "--api-base", openai_server.base_url,
            "--input", str(bundled_path(TASK)), "--limit", "1", "--out", str(out),
            "--no-progress"]
    if command == "find":
        args += ["--method", "direct-trace"]
    llm.warm_up()
    started = time.monotonic()
    assert main(args) == 1
    # 4 attempts of 0.3 s and at most 4.4 s of backoff between them; with the default
    # timeout each attempt would wait out the server's 5 s.
    assert time.monotonic() - started < 8
    assert "did not answer in time" in capsys.readouterr().err


def test_what_the_batches_stop_on_is_never_retried() -> None:
    """401 stops a batch (no other trace can do better); what is retried fails one trace."""
    assert "auth" in llm.STOPS_A_BATCH
    assert not llm.STOPS_A_BATCH & llm.RETRYABLE


def test_find_command_where_every_trace_fails(
    tmp_path: Path, openai_server: FakeOpenAI, capsys: pytest.CaptureFixture[str]
) -> None:
    """No trace judged: the scores table has only its "overall" row (this was an internal
    error), each failure is one line, and the exit code says it failed."""
    openai_server.responder = lambda path, body: Reply(status=503, headers={"Retry-After": "0"})
    out = tmp_path / "preds.jsonl"
    code = main(["find", "--model", "openai/test", "--api-base", openai_server.base_url,
                 "--method", "direct-trace", "--input", str(bundled_path(TASK)), "--limit", "2",
                 "--out", str(out), "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1
    assert "internal error" not in captured.err and "Traceback" not in captured.err
    assert "0 traces judged" in captured.err and "2 failed" in captured.err
    failures = [line for line in captured.err.splitlines() if "(503)" in line]
    assert len(failures) == 2 and all(line.endswith("(after 4 attempts)") for line in failures)
    assert "overall" in captured.out
    assert len(openai_server.requests) == 2 * 4
    assert out.read_bytes() == b""
