"""TraceSession: the store's rows plus the stepper. Each finished step is committed before its
event is handed on; errors and cancellation save no half step; labels, rename, delete."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    StepDelta,
    StepFailed,
    StepFinished,
    StepperSettings,
    TraceFinished,
)
from bbm_tui.core.store import Store, StoreError
from bbm_tui.core.trace.session import NewTrace, TraceSession
from tests.openai_server import FakeOpenAI, Reply, dataset_responder
from tests.test_llm_http import eventually

FAST = StepperSettings(call=llm.CallSettings(retry=llm.RetryPolicy(attempts=2, base_delay_s=0.01)))
REPLAY = llm.ModelSpec("replay/bbm")
TASK, INDEX = "word_sorting", 0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store.open(tmp_path / "sessions.sqlite3") as opened:
        yield opened


def row():
    return bundled_rows(TASK)[INDEX]


def new(store: Store, spec: llm.ModelSpec = REPLAY) -> TraceSession:
    r = row()
    return TraceSession.create(store, NewTrace(TASK, r.input, r.target, INDEX, r.mistake_index),
                               spec)


def saved_texts(path: Path, session_id: int) -> list[str]:
    """What a fresh connection to the same file sees."""
    with Store.open(path) as other:
        return [step.text for step in other.branch(session_id)]


async def test_each_finished_step_is_committed_before_its_event(store: Store) -> None:
    session = new(store)
    seen = 0
    async for event in session.generate(settings=FAST):
        # At every event a second connection sees exactly the steps finished so far,
        # the one a StepFinished announces included.
        if isinstance(event, StepFinished):
            seen += 1
        assert saved_texts(store.path, session.id) == row().steps[:seen]
        assert session.texts == row().steps[:seen]
    assert seen == len(row().steps)
    with Store.open(store.path) as other:
        reopened = TraceSession.load(other, session.id)
        assert reopened.texts == row().steps
        assert reopened.answer == row().answer
        assert reopened.finished
        assert reopened.correct is (row().answer == row().target)
        assert [s.origin for s in reopened.steps] == ["model"] * len(row().steps)
        assert all(s.latency_s is not None and s.completion_tokens for s in reopened.steps)
        totals = reopened.totals()
        assert totals.calls == len(row().steps)
        assert totals.cost == 0.0
        assert reopened.session.dataset_index == INDEX
        assert reopened.spec == REPLAY


async def test_generate_a_few_steps_then_the_rest(store: Store) -> None:
    session = new(store)
    events = [e async for e in session.generate(max_new_steps=2, settings=FAST)]
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == "paused"
    assert saved_texts(store.path, session.id) == row().steps[:2]
    events = [e async for e in session.generate(settings=FAST)]
    assert next(e for e in events if isinstance(e, AnswerFound)).answer == row().answer
    assert saved_texts(store.path, session.id) == row().steps
    # A finished trace generates nothing more.
    events = [e async for e in session.generate(settings=FAST)]
    assert events == [TraceFinished("answer", row().steps, row().answer)]
    assert saved_texts(store.path, session.id) == row().steps


async def test_an_error_mid_trace_saves_no_half_step_and_the_session_goes_on(
    store: Store, openai_server: FakeOpenAI
) -> None:
    requests = 0

    def responder(path: str, body: dict[str, Any]) -> Reply:
        nonlocal requests
        requests += 1
        reply = dataset_responder(path, body)
        if requests == 3:  # half of step 3 streams, then the connection drops, then a 401
            return dataclasses.replace(reply, drop_after_chunks=2)
        if requests == 4:
            return Reply(status=401)
        return reply

    openai_server.responder = responder
    session = new(store, llm.ModelSpec("openai/test", openai_server.base_url))
    events = [e async for e in session.generate(settings=FAST)]
    assert isinstance(events[-1], StepFailed) and events[-1].number == 3
    assert events[-1].error.kind == "auth"
    assert any(isinstance(e, StepDelta) and e.number == 3 for e in events)
    assert saved_texts(store.path, session.id) == row().steps[:2]
    assert session.texts == row().steps[:2]
    # The same object carries on from the saved steps once the server is good again.
    events = [e async for e in session.generate(settings=FAST)]
    assert next(e.number for e in events if isinstance(e, StepFinished)) == 3
    assert saved_texts(store.path, session.id) == row().steps
    with Store.open(store.path) as other:
        assert [s.number for s in other.branch(session.id)] == list(
            range(1, len(row().steps) + 1))


async def test_cancel_mid_stream_saves_no_half_step_and_the_session_goes_on(
    store: Store, openai_server: FakeOpenAI
) -> None:
    def responder(path: str, body: dict[str, Any]) -> Reply:
        reply = dataset_responder(path, body)
        if len(openai_server.requests) == 3:
            return dataclasses.replace(reply, chunk_chars=1, chunk_delay_s=0.02)
        return reply

    openai_server.responder = responder
    session = new(store, llm.ModelSpec("openai/test", openai_server.base_url))
    streaming = asyncio.Event()

    async def consume() -> None:
        async for event in session.generate(settings=FAST):
            if isinstance(event, StepDelta) and event.number == 3:
                streaming.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(streaming.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    request = openai_server.requests[2]
    await eventually(lambda: request.client_closed_early)
    assert saved_texts(store.path, session.id) == row().steps[:2]
    assert session.texts == row().steps[:2]
    openai_server.responder = dataset_responder
    events = [e async for e in session.generate(settings=FAST)]
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"
    assert saved_texts(store.path, session.id) == row().steps


async def test_labels_set_undo_current_and_reopen(store: Store) -> None:
    session = new(store)
    _ = [e async for e in session.generate(settings=FAST)]
    assert session.label is None and session.mistake_number is None
    session.flag_mistake(3)
    assert session.mistake_number == 3 and not session.no_mistake
    session.mark_no_mistake()
    assert session.no_mistake and session.mistake_number is None
    with Store.open(store.path) as other:
        assert TraceSession.load(other, session.id).no_mistake
    assert session.undo_label() is not None
    assert session.mistake_number == 3
    with Store.open(store.path) as other:
        reopened = TraceSession.load(other, session.id)
        assert reopened.mistake_number == 3
        assert reopened.label.leaf_step_id == reopened.steps[-1].id
        [summary] = other.sessions()
        assert summary.mistake_number == 3
    assert session.undo_label() is None
    assert session.label is None and not session.no_mistake
    with Store.open(store.path) as other:
        assert TraceSession.load(other, session.id).label is None


async def test_a_recorded_trace_can_be_labelled(store: Store) -> None:
    session = new(store)
    session.load_recorded(row().steps)
    assert session.texts == row().steps
    assert session.answer == row().answer
    session.flag_mistake(row().mistake_index + 1)
    with Store.open(store.path) as other:
        reopened = TraceSession.load(other, session.id)
        assert [s.origin for s in reopened.steps] == ["dataset"] * len(row().steps)
        assert reopened.mistake_number - 1 == row().mistake_index
        assert reopened.totals().calls == 0


async def test_typed_steps_then_generation(store: Store) -> None:
    session = new(store)
    session.append_typed(row().steps[0])
    events = [e async for e in session.generate(max_new_steps=1, settings=FAST)]
    assert [e.text for e in events if isinstance(e, StepFinished)] == [row().steps[1]]
    with Store.open(store.path) as other:
        steps = TraceSession.load(other, session.id).steps
        assert [s.origin for s in steps] == ["typed", "model"]
        assert [s.number for s in steps] == [1, 2]


def test_rename_and_delete(store: Store) -> None:
    session = new(store)
    other = new(store)
    session.rename("my favourite trace")
    assert session.session.name == "my favourite trace"
    store.delete_session(other.id)
    with Store.open(store.path) as reopened:
        assert [s.session.name for s in reopened.sessions()] == ["my favourite trace"]
        with pytest.raises(StoreError):
            TraceSession.load(reopened, other.id)


async def test_cancel_while_a_finished_step_waits_for_the_disk(
    store: Store, openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Esc can land while a finished step is being committed (e.g. while another process
    holds the store's write lock). The step is saved, and once the cancelled run is over the
    session and the store agree, so the next run neither loses nor repeats it."""
    openai_server.responder = dataset_responder
    session = new(store, llm.ModelSpec("openai/test", openai_server.base_url))
    committing = threading.Event()

    def trace(statement: str) -> None:
        # The session's claim to generate is a write too (store v11): the first write after
        # it is the step's (the claim's heartbeat is put off past the test).
        if statement.startswith("INSERT OR REPLACE INTO session_claims"):
            claimed.set()
        elif statement.startswith("BEGIN IMMEDIATE") and claimed.is_set():
            committing.set()

    claimed = threading.Event()
    monkeypatch.setattr("bbm_tui.core.trace.session.CLAIM_HEARTBEAT_S", 3600.0)
    store._connection.set_trace_callback(trace)
    blocker = sqlite3.connect(store.path, isolation_level=None)

    async def consume() -> None:
        async for _ in session.generate(settings=FAST):
            pass

    task = asyncio.create_task(consume())
    await asyncio.to_thread(claimed.wait, 10)
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock
    await asyncio.to_thread(committing.wait, 10)  # step 1 is finished and being committed
    asyncio.get_running_loop().call_later(0.2, blocker.rollback)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    store._connection.set_trace_callback(None)
    blocker.close()
    assert session.texts == row().steps[:1]
    assert saved_texts(store.path, session.id) == row().steps[:1]
    events = [e async for e in session.generate(settings=FAST)]
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"
    assert session.texts == row().steps
    assert saved_texts(store.path, session.id) == row().steps
    with sqlite3.connect(store.path) as connection:
        count = connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
    assert count == len(row().steps)


FAULTS = {
    # name: (replies for step 3, whether the step then succeeds, error kind otherwise)
    "429 then success": ([Reply(status=429, headers={"Retry-After": "0"})], True, None),
    "500 every time": ([Reply(status=500)] * 2, False, "server"),
    "dropped every time": ([Reply(text="half a step here", drop_after_chunks=2)] * 2, False,
                           "stream"),
    "dropped then success": ([Reply(text="half a step here", drop_after_chunks=2)], True, None),
    "malformed every time": ([Reply(text="a b c d", malformed_after_chunks=1)] * 2, False,
                             "stream"),
    "401": ([Reply(status=401)], False, "auth"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
async def test_faults_at_step_3_save_exactly_the_finished_steps(
    store: Store, openai_server: FakeOpenAI, fault: str
) -> None:
    replies, recovers, kind = FAULTS[fault]
    script = list(replies)
    requests = 0

    def responder(path: str, body: dict[str, Any]) -> Reply:
        nonlocal requests
        requests += 1
        if requests >= 3 and script:
            return script.pop(0)
        return dataset_responder(path, body)

    openai_server.responder = responder
    session = new(store, llm.ModelSpec("openai/test", openai_server.base_url))
    events = [e async for e in session.generate(settings=FAST)]
    with Store.open(store.path) as other:
        saved = [s.text for s in other.branch(session.id)]
        numbers = [s.number for s in other.branch(session.id)]
    if recovers:
        assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"
        assert saved == row().steps
    else:
        assert isinstance(events[-1], StepFailed)
        assert (events[-1].number, events[-1].error.kind) == (3, kind)
        assert saved == row().steps[:2]
    assert numbers == list(range(1, len(saved) + 1))
    assert session.texts == saved


async def test_api_keys_are_never_written_to_the_store(
    store: Store, openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-test-never-stored-4f9a1c"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    openai_server.responder = dataset_responder
    session = new(store, llm.ModelSpec("openai/test", openai_server.base_url))
    events = [e async for e in session.generate(max_new_steps=2, settings=FAST)]
    assert events[-1] == TraceFinished("paused", row().steps[:2], None)
    openai_server.responder = lambda path, body: Reply(status=401)
    events = [e async for e in session.generate(settings=FAST)]
    assert isinstance(events[-1], StepFailed) and secret not in events[-1].error.message
    assert all(r.headers.get("Authorization") == f"Bearer {secret}"
               for r in openai_server.requests)
    files = sorted(store.path.parent.glob(store.path.name + "*"))
    assert files  # the database, and its -wal and -shm
    for path in files:
        assert secret.encode() not in path.read_bytes(), path


async def test_the_datasets_empty_thought_is_saved_in_its_place(store: Store) -> None:
    trace = bundled_rows("dyck_languages")[538]
    session = TraceSession.create(
        store, NewTrace("dyck_languages", trace.input, trace.target, 538), REPLAY
    )
    events = [e async for e in session.generate(settings=FAST)]
    assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"
    with Store.open(store.path) as other:
        steps = other.branch(session.id)
        assert [s.text for s in steps] == trace.steps
        assert steps[54].text == "" and steps[54].number == 55
        assert [s.number for s in steps] == list(range(1, len(trace.steps) + 1))


def test_a_big_trace_holds_its_branch_as_ids_not_steps(tmp_path: Path) -> None:
    """A session of 10^4 steps opened holds no Python object a step: its branch on show is
    its ids, each step read from the store when asked for (issue 36: 10^5 steps held whole
    took 101 MB). The steps read are the stored ones, in order, at either end."""
    import tracemalloc

    from tests.big_stores import big_session

    path = tmp_path / "big.sqlite3"
    count = 10_000
    session_id = big_session(path, count)
    with Store.open(path) as opened:
        tracemalloc.start()
        try:
            trace = TraceSession.load(opened, session_id)
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        # About 1 MB held whole (100 bytes a step); the ids alone are 80 kB.
        assert held < 400_000, f"{held:,} bytes held for {count:,} steps"
        assert len(trace.steps) == count
        assert [trace.steps[i].number for i in (0, 1, count // 2, -1)] == [
            1, 2, count // 2 + 1, count]
        assert trace.steps[-1].id == trace.head_id == opened.session(session_id).head_step_id
        assert [s.number for s in trace.steps] == list(range(1, count + 1))


async def test_the_place_of_a_step_on_the_branch_on_show(store: Store) -> None:
    """A step's number is its place on its path: the flagged mistake and a label's last step
    are found at once on the branch on show, and a step of another branch is on none."""
    session = new(store)
    session.load_recorded(row().steps)
    first_branch = list(session.steps)
    session.flag_mistake(3)
    assert session.mistake_number == 3
    assert [session.place_of(step.id) for step in first_branch] == list(
        range(1, len(first_branch) + 1))
    session.fork_at(2)
    session.append_typed("another second thought")
    assert session.place_of(first_branch[0].id) == 1
    assert session.place_of(first_branch[1].id) is None  # the old Thought 2, off the branch
    assert session.place_of(first_branch[2].id) is None
    assert session.place_of(session.steps[1].id) == 2
    assert session.place_of(None) is None and session.place_of(10**9) is None
    assert session.mistake_number is None  # the flag is on the other branch


async def test_statuses_under_the_label_thought_by_thought(store: Store) -> None:
    """The glyphs the trace screen draws, worked out for the thoughts asked for: before the
    flagged first mistake "ok", it "mistake", after it "after"; a "no mistake" label covers
    the thoughts it saw; none: "plain"."""
    from bbm_tui.ui.viewmodels.trace import statuses

    session = new(store)
    session.load_recorded(row().steps)
    count = len(session.steps)
    assert list(statuses(session)) == ["plain"] * count
    session.flag_mistake(3)
    shown = statuses(session)
    assert len(shown) == count and list(shown) == ["ok", "ok", "mistake"] + ["after"] * (
        count - 3)
    assert shown[-1] == "after" and shown[1:3] == ["ok", "mistake"]
    with pytest.raises(IndexError):
        shown[count]
    session.mark_no_mistake()
    session.append_typed("one thought more")
    assert list(statuses(session)) == ["ok"] * count + ["plain"]
