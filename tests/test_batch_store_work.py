"""A headless batch's store work on its event loop (core/trace/session.py's `on_the_loop`),
on a real SQLite file that another connection (another `--processes` child, say) holds the
write lock of: the work does not wait for that lock on the loop, the loop's other tasks go on
meanwhile, and no work is ever done twice."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.batch.backtrack import BacktrackJob, backtrack_batch
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store
from bbm_tui.core.trace.session import on_the_loop
from tests.openai_server import FakeOpenAI, Reply
from tests.test_store import new_session

# How long the other connection holds the write lock: long enough for the loop to turn many
# times meanwhile, far inside the store's busy timeout (10 s).
HELD_S = 1.0


class OtherWriter:
    """Another connection to the store's file that holds its write lock until `let_go()`
    (from a timer thread, so that a loop held by SQLite's busy handler cannot stop it)."""

    def __init__(self, path: Path) -> None:
        self.connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.connection.execute("BEGIN IMMEDIATE")
        self.released = threading.Event()

    def let_go(self) -> None:
        self.connection.execute("COMMIT")
        self.released.set()

    def let_go_after(self, seconds: float) -> threading.Timer:
        timer = threading.Timer(seconds, self.let_go)
        timer.start()
        return timer


def eight_samples_then_the_answer(_path: str, body: dict) -> Reply:
    """Backtracking's two calls, as bench/backtrack_concurrency.py's server answers them."""
    if body.get("stream"):
        return Reply("So the answer is 42")
    return Reply(choices=[f"a different step, version {index}" for index in range(8)],
                 honor_stop=False, choice_logprobs=[-0.1 * (index + 1) for index in range(8)])


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store.open(tmp_path / "store.sqlite3") as opened:
        yield opened


async def ticks_until(event: threading.Event, counted: list[int]) -> None:
    """A task of the loop's own: counts its turns until `event` is set."""
    while not event.is_set():
        counted[0] += 1
        await asyncio.sleep(0.01)


def sessions_named(store: Store, name: str | None) -> int:
    """Counted on a connection of its own: what the file holds."""
    with sqlite3.connect(store.path) as reader:
        (count,) = reader.execute("SELECT COUNT(*) FROM sessions WHERE name IS ?",
                                  (name,)).fetchone()
    return count


async def test_a_write_waits_for_another_process_off_the_loop(store: Store) -> None:
    other = OtherWriter(store.path)
    timer = other.let_go_after(HELD_S)
    ticks = [0]
    work = asyncio.ensure_future(on_the_loop(new_session, store, "made once"))
    ticker = asyncio.ensure_future(ticks_until(other.released, ticks))
    session_id = await work
    timer.join()
    await ticker
    # Before: SQLite's busy handler held the loop for the whole second, and the ticker first
    # ran once the lock was let go.
    assert ticks[0] >= 10
    assert store.session(session_id).name == "made once"
    assert sessions_named(store, "made once") == 1


async def test_a_work_that_has_written_is_never_begun_again(store: Store) -> None:
    """The lock taken by another connection between a work's two transactions: the second
    waits as every write does; the first is not done twice."""
    other: list[OtherWriter] = []

    def two_writes() -> int:
        first = new_session(store, "first of two")
        other.append(OtherWriter(store.path))
        other[0].let_go_after(0.3)
        new_session(store, "second of two")
        return first

    await on_the_loop(two_writes)
    assert other[0].released.is_set()
    assert sessions_named(store, "first of two") == 1
    assert sessions_named(store, "second of two") == 1


async def test_a_work_cancelled_while_it_waits_is_done_once(store: Store) -> None:
    other = OtherWriter(store.path)
    work = asyncio.ensure_future(on_the_loop(new_session, store, "handed over"))
    await asyncio.sleep(0.05)  # it found the lock held, and waits off the loop
    assert not work.done()
    timer = other.let_go_after(0.3)
    work.cancel()
    with pytest.raises(asyncio.CancelledError):
        await work
    timer.join()
    assert sessions_named(store, "handed over") == 1


async def test_a_batch_makes_its_sessions_without_holding_its_loop(
    openai_server: FakeOpenAI, store: Store, tmp_path: Path,
) -> None:
    """The first write of a backtracked trace (its session, made whole in one transaction)
    goes through `on_the_loop` too: it waited for the lock on the loop before."""
    openai_server.responder = eight_samples_then_the_answer
    row = next(row for row in bundled_rows("dyck_languages") if row.mistake_index is not None)
    spec = llm.ModelSpec("openai/test", api_base=openai_server.base_url)
    other = OtherWriter(store.path)
    timer = other.let_go_after(HELD_S)
    ticks = [0]
    ticker = asyncio.ensure_future(ticks_until(other.released, ticks))
    result = await backtrack_batch([BacktrackJob("dyck_languages", row, row.mistake_index)],
                                   spec, store, tmp_path / "out.jsonl", concurrency=1)
    timer.join()
    await ticker
    assert result.progress.done == 1 and not result.progress.failed
    assert ticks[0] >= 10
    with sqlite3.connect(store.path) as reader:
        assert reader.execute("SELECT COUNT(*) FROM sessions").fetchone() == (1,)
