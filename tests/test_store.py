"""The session store on real SQLite files: schema, WAL, refusals that leave files untouched,
permissions, several processes at once, and a process killed mid-trace."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import StepFinished, TraceFinished
from bbm_tui.core.store import (
    DATABASE_NAME,
    MIGRATIONS,
    SCHEMA_VERSION,
    Store,
    StoreError,
    default_path,
)
from bbm_tui.core.tasks import extract_answer
from bbm_tui.core.trace.session import TraceSession
from bbm_tui.core.trace.tree import StepTree

ROOT = Path(__file__).resolve().parents[1]


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path)


def call(**overrides: object) -> llm.CallRecord:
    values: dict[str, object] = {
        "model": "openai/test", "params": {"temperature": 0.0}, "latency_s": 0.25,
        "prompt_tokens": 100, "completion_tokens": 7, "cost": 0.001,
        "logprobs": [-0.5, -0.25], "finish_reason": "newline", "attempts": 2,
    }
    values.update(overrides)
    return llm.CallRecord(**values)  # type: ignore[arg-type]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "store" / DATABASE_NAME


def new_session(store: Store, name: str | None = None) -> int:
    return store.create_session(
        task="word_sorting", input="oven costume counterpart", model="replay/bbm",
        target="costume counterpart oven", name=name,
    ).id


def add_chain(store: Store, session_id: int, texts: list[str]) -> list[int]:
    ids: list[int] = []
    parent = None
    for number, text in enumerate(texts, start=1):
        step = store.add_step(session_id, parent_id=parent, number=number, text=text,
                              answer=extract_answer(text), call=call())
        ids.append(step.id)
        parent = step.id
    return ids


# ------------------------------------------------------------------------ schema and files


def test_new_store_is_wal_versioned_and_private(db: Path) -> None:
    with Store.open(db) as store:
        new_session(store)
        connection = raw(db)
        assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"sessions", "steps", "calls", "labels"} <= tables
        connection.close()
        assert store.integrity_check() == "ok"
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm")):
            assert path.exists(), path
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700


def test_default_path_follows_bbm_tui_home(isolated_home: Path) -> None:
    assert default_path() == isolated_home / DATABASE_NAME
    with Store.open() as store:
        assert store.path == isolated_home / DATABASE_NAME
    assert (isolated_home / DATABASE_NAME).exists()


def test_reopening_shows_exactly_what_was_there(db: Path) -> None:
    with Store.open(db) as store:
        first = new_session(store, "first")
        ids = add_chain(store, first, ["one", "two", "So the answer is x."])
        store.set_label(first, ids[1], ids[-1])
        second = new_session(store, "second")
    with Store.open(db) as store:
        assert [s.session.name for s in store.sessions()] == ["second", "first"]
        branch = store.branch(first)
        assert [s.text for s in branch] == ["one", "two", "So the answer is x."]
        assert [s.number for s in branch] == [1, 2, 3]
        assert branch[-1].answer == "x."
        assert branch[0].latency_s == 0.25 and branch[0].completion_tokens == 7
        assert store.current_label(first).mistake_step_id == ids[1]
        summary = next(s for s in store.sessions() if s.session.id == first)
        assert (summary.steps, summary.mistake_number, summary.answer) == (3, 2, "x.")
        assert store.branch(second) == []
        assert store.totals(first).calls == 3
        assert store.totals(first).completion_tokens == 21
        assert store.totals(first).cost == pytest.approx(0.003)


def test_calls_are_recorded_in_full(db: Path) -> None:
    with Store.open(db) as store:
        session = new_session(store)
        add_chain(store, session, ["one"])
    connection = raw(db)
    connection.row_factory = sqlite3.Row
    row = dict(connection.execute("SELECT * FROM calls").fetchone())
    connection.close()
    assert row["purpose"] == "step"
    assert row["model"] == "openai/test"
    assert row["params"] == '{"temperature": 0.0}'
    assert row["logprobs"] == "[-0.5, -0.25]"
    assert (row["prompt_tokens"], row["completion_tokens"], row["attempts"]) == (100, 7, 2)
    assert row["finish_reason"] == "newline"


def test_each_tokens_alternatives_survive_a_reopen(db: Path) -> None:
    """A step's and a sample's tokens keep their top alternatives, in the provider's order,
    aligned to the tokens, after the store is closed and opened again; tokens without any
    store none (NULL), as a store before v8 has."""
    from bbm_tui.core.records import TokenLogprob

    tokens = [TokenLogprob(" 2", -0.01, ((" 2", -0.01), (" two", -4.5), (" 3", -6.0))),
              TokenLogprob(" +\n", -0.5, ()),  # a token the provider sent none for
              TokenLogprob(" 5", -2.9, ((" 4", -0.1), (" 5", -2.9)))]
    plain = [TokenLogprob("So", -0.2), TokenLogprob(" 4", -0.3)]
    with Store.open(db) as store:
        session = new_session(store)
        step = store.add_step(session, parent_id=None, number=1, text=" 2 +\n 5",
                              call=call(tokens=tokens, logprobs=[t.logprob for t in tokens]))
        other = store.add_step(session, parent_id=step.id, number=2, text="So 4", tokens=plain)
        [sample] = store.add_candidates(session, parent_id=None, number=1,
                                        calls=[call(params={"n": 1})],
                                        candidates=[(0, 0, " 2 +\n 5", tokens, False)])
    with Store.open(db) as store:
        assert store.step(step.id).tokens == tuple(tokens)
        assert store.step(step.id).tokens[2].alternatives == ((" 4", -0.1), (" 5", -2.9))
        assert store.candidates(session, None, 1)[0].tokens == tuple(tokens)
        assert store.step(other.id).tokens == tuple(plain)
        assert sample.tokens == tuple(tokens)
    connection = raw(db)
    stored = dict(connection.execute("SELECT id, alternatives FROM steps").fetchall())
    connection.close()
    assert stored[other.id] is None and stored[step.id].startswith('[[[" 2", -0.01]')


def test_samples_come_back_from_their_commit_as_a_read_gives_them_without_a_read(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """add_candidates hands back what it stored as a later read of it gives it (tokens,
    their alternatives, the summed log-probability, dropped, the call), without reading it
    back: a read each sampling on a backtracking batch's busy loop."""
    from bbm_tui.core.records import TokenLogprob

    tokens = [TokenLogprob(" 2", -0.01, ((" 2", -0.01), (" two", -4.5))),
              TokenLogprob(" +", -1, ()), TokenLogprob(" 5", -2.9, ((" 4", -0.1),))]
    plain = [TokenLogprob("So", -0.25)]
    impossible = [TokenLogprob("x", 3.0)]  # stored as no tokens
    with Store.open(db) as store:
        session = new_session(store)
        reads: list[str] = []
        read = Store._read
        monkeypatch.setattr(Store, "_read", lambda self, sql, *args: (
            reads.append(sql), read(self, sql, *args))[1])
        given = store.add_candidates(
            session, parent_id=None, number=1,
            calls=[call(params={"n": 2}), call(params={"n": 2})],
            candidates=[(0, 0, " 2 + 5", tokens, False), (0, 1, "So", plain, True),
                        (1, 0, "x", impossible, False), (1, 1, "", None, False)])
        assert reads == []
        monkeypatch.undo()
        assert given == store.candidates(session, None, 1)
    with Store.open(db) as store:
        assert given == store.candidates(session, None, 1)
    assert [g.tokens for g in given] == [tuple(tokens), tuple(plain), None, None]
    assert [g.logprob for g in given] == [-3.91, -0.25, None, None]
    first = given[0].tokens
    assert first is not None and isinstance(first[1].logprob, float)
    assert [g.dropped for g in given] == [False, True, False, False]
    assert given[0].call_id == given[1].call_id != given[2].call_id


def test_an_older_store_is_migrated_forward_keeping_its_data(db: Path) -> None:
    db.parent.mkdir()
    connection = raw(db)
    connection.executescript(MIGRATIONS[0])
    connection.execute("PRAGMA user_version = 1")
    connection.execute(
        "INSERT INTO sessions (name, task, input, model, mode, created_at, updated_at) "
        "VALUES ('old', 'word_sorting', 'a b', 'replay/bbm', 'chat', 1, 1)"
    )
    connection.commit()
    connection.close()
    with Store.open(db) as store:
        assert [s.session.name for s in store.sessions()] == ["old"]
    connection = raw(db)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    connection.close()


def test_a_version_2_store_keeps_its_finder_runs(db: Path) -> None:
    """Version 3 records how a run without a result ended; runs from before say nothing."""
    db.parent.mkdir()
    connection = raw(db)
    connection.executescript(MIGRATIONS[0] + MIGRATIONS[1])
    connection.execute("PRAGMA user_version = 2")
    connection.execute(
        "INSERT INTO sessions (name, task, input, model, mode, created_at, updated_at) "
        "VALUES ('old', 'word_sorting', 'a b', 'replay/bbm', 'chat', 1, 1)"
    )
    connection.execute(
        "INSERT INTO finder_runs (session_id, method, model, params, mistake_number, parsed, "
        "finished_at, created_at) VALUES (1, 'direct-trace', 'replay/bbm', '{}', 2, 1, 5, 4)"
    )
    connection.commit()
    connection.close()
    with Store.open(db) as store:
        [run] = store.finder_runs(1)
        assert (run.finished, run.mistake_number, run.ended, run.error) == (True, 2, None, None)
        failed = store.create_finder_run(1, method="direct-step", model="m", params={})
        store.end_finder_run(failed, ended="failed", error="m refused the request")
        assert (store.finder_run(failed).ended, store.finder_run(failed).error) == (
            "failed", "m refused the request")
        # A finished run is not turned into a failed one.
        store.end_finder_run(run.id, ended="stopped")
        assert store.finder_run(run.id).ended is None


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(db: Path) -> None:
    db.parent.mkdir()
    db.write_text("these are my notes, not a database\n" * 50)
    before = digest(db)
    with pytest.raises(StoreError) as caught:
        Store.open(db)
    assert str(db) in str(caught.value)
    assert "not a SQLite file" in str(caught.value)
    assert digest(db) == before
    assert sorted(p.name for p in db.parent.iterdir()) == [db.name]


def test_a_damaged_sqlite_file_is_refused_and_left_alone(db: Path) -> None:
    db.parent.mkdir()
    db.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 16)
    before = digest(db)
    with pytest.raises(StoreError) as caught:
        Store.open(db)
    assert str(db) in str(caught.value)
    assert digest(db) == before


def test_a_newer_store_is_refused_and_left_untouched(db: Path) -> None:
    db.parent.mkdir()
    connection = raw(db)  # a rollback-journal file, as another version might leave it
    connection.execute("CREATE TABLE sessions (id INTEGER PRIMARY KEY, future TEXT)")
    connection.execute("PRAGMA user_version = 99")
    connection.commit()
    connection.close()
    before = digest(db)
    with pytest.raises(StoreError) as caught:
        Store.open(db)
    message = str(caught.value)
    assert str(db) in message
    assert "newer bbm-tui" in message and "99" in message
    assert digest(db) == before
    connection = raw(db)
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    connection.close()


def test_another_programs_database_is_refused_and_left_untouched(db: Path) -> None:
    db.parent.mkdir()
    connection = raw(db)
    connection.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    connection.execute("INSERT INTO photos (path) VALUES ('/a.jpg')")
    connection.commit()
    connection.close()
    before = digest(db)
    with pytest.raises(StoreError) as caught:
        Store.open(db)
    assert str(db) in str(caught.value)
    assert "not a bbm-tui session store" in str(caught.value)
    assert digest(db) == before


def test_a_folder_is_refused(db: Path) -> None:
    db.mkdir(parents=True)
    with pytest.raises(StoreError, match="is a folder"):
        Store.open(db)


# ------------------------------------------------------------------------ steps and labels


def test_branches_and_head(db: Path) -> None:
    with Store.open(db) as store:
        session = new_session(store)
        one, two, three = add_chain(store, session, ["one", "two", "three"])
        sibling = store.add_step(session, parent_id=two, number=3, text="three again")
        assert [s.text for s in store.branch(session)] == ["one", "two", "three again"]
        assert [s.text for s in store.branch(session, three)] == ["one", "two", "three"]
        store.set_head(session, three)
    with Store.open(db) as store:
        assert [s.id for s in store.branch(session)] == [one, two, three]
        assert store.step(sibling.id).parent_id == two


def test_a_branch_is_read_without_the_rest_of_its_tree(db: Path) -> None:
    """The branch on show is walked up from its end, one step at a time: a branch of three
    thoughts beside 3,000 others costs SQLite about what it costs alone (every step of the
    session was loaded to walk it before)."""
    with Store.open(db) as store:
        alone = new_session(store)
        alone_tip = add_chain(store, alone, ["one", "two", "three"])[-1]
        crowded = new_session(store)
        first, _, crowded_tip = add_chain(store, crowded, ["one", "two", "three"])
    connection = raw(db)
    with connection:  # another branch of 3,000 thoughts from Thought 1
        parent = first
        for number in range(2, 3002):
            parent = connection.execute(
                "INSERT INTO steps (session_id, parent_id, number, text, origin, truncated, "
                "created_at) VALUES (?, ?, ?, ?, 'model', 0, 0)",
                (crowded, parent, number, f"other {number}")).lastrowid
    connection.close()
    with Store.open(db) as store:
        def cost(session: int, tip: int) -> int:
            """SQLite's work for the branch, in its virtual machine's steps (by the hundred)."""
            ticks = [0]

            def tick() -> int:
                ticks[0] += 1
                return 0

            store._connection.set_progress_handler(tick, 100)
            try:
                assert [s.text for s in store.branch(session, tip)] == ["one", "two", "three"]
            finally:
                store._connection.set_progress_handler(None, 100)
            return ticks[0]

        assert cost(crowded, crowded_tip) <= 2 * cost(alone, alone_tip) + 5


def test_a_branchs_ids_are_its_path_however_its_steps_were_written(db: Path) -> None:
    """`branch_ids` reads a branch as runs of consecutive ids: every leaf's ids are its path
    in the tree all the same when forks, two branches written in turn and another
    session's steps break the runs; a step of another session or none has no branch."""
    with Store.open(db) as store:
        session = new_session(store)
        other = new_session(store)
        trunk = add_chain(store, session, ["one", "two", "three", "four"])
        add_chain(store, other, ["elsewhere"])  # an id between two of the session's
        # A fork at Thought 2, then two branches from Thought 3 written one step each in turn.
        fork = store.add_step(session, parent_id=trunk[0], number=2, text="two again").id
        left = right = trunk[2]
        for number in range(4, 8):
            left = store.add_step(session, parent_id=left, number=number, text="l").id
            right = store.add_step(session, parent_id=right, number=number, text="r").id
        tail = add_chain(store, session, ["a new first thought"])
        tree = StepTree(store.steps_of(session))
        leaves = [step.id for step in tree.leaves()]
        assert {trunk[3], fork, left, right, tail[0]} <= set(leaves)
        for leaf in leaves + trunk + [fork]:
            assert list(store.branch_ids(session, leaf)) == [s.id for s in tree.path(leaf)]
        assert len(store.branch_ids(session, right)) == 7
        assert list(store.branch_ids(other, trunk[3])) == []
        assert list(store.branch_ids(session, None)) == []


def test_labels_set_undo_current(db: Path) -> None:
    with Store.open(db) as store:
        session = new_session(store)
        ids = add_chain(store, session, ["one", "two", "three"])
        assert store.current_label(session) is None
        flagged = store.set_label(session, ids[1], ids[-1])
        assert store.current_label(session) == flagged
        none = store.set_label(session, None, ids[-1])
        assert store.current_label(session).mistake_step_id is None
        assert store.current_label(session).id == none.id
        assert store.undo_label(session) == flagged
        assert store.undo_label(session) is None
        assert store.undo_label(session) is None  # nothing left to undo
    with Store.open(db) as store:
        assert store.current_label(session) is None


def test_rename_and_delete(db: Path) -> None:
    with Store.open(db) as store:
        keep = new_session(store, "keep")
        gone = new_session(store, "gone")
        add_chain(store, keep, ["k1", "k2"])
        ids = add_chain(store, gone, ["g1", "g2"])
        store.set_label(gone, ids[0], ids[-1])
        store.rename_session(keep, "kept, renamed")
        store.delete_session(gone)
    with Store.open(db) as store:
        assert [s.session.name for s in store.sessions()] == ["kept, renamed"]
        assert [s.text for s in store.branch(keep)] == ["k1", "k2"]
        with pytest.raises(StoreError, match=f"no session {gone}"):
            store.session(gone)
        assert store.integrity_check() == "ok"
    connection = raw(db)
    for table in ("steps", "calls", "labels"):
        count = connection.execute(
            f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", (gone,)
        ).fetchone()[0]
        assert count == 0, table
    connection.close()


# ------------------------------------------------------------------------ processes


def helper(*args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.kill_helpers", *args],
        cwd=ROOT, env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def finish(process: subprocess.Popen, timeout: float = 60) -> str:
    out, err = process.communicate(timeout=timeout)
    assert process.returncode == 0, err
    return out


def test_two_processes_writing_at_once_do_not_fail(db: Path, tmp_path: Path) -> None:
    with Store.open(db):
        pass
    go = tmp_path / "go"
    writers = [helper("write", str(db), str(go), "150", name) for name in ("left", "right")]
    go.touch()
    with Store.open(db) as store:  # and this process reads and writes meanwhile
        mine = new_session(store, "mine")
        add_chain(store, mine, [f"mine {n}" for n in range(30)])
    outputs = [finish(writer) for writer in writers]
    assert all("wrote 150" in out for out in outputs)
    with Store.open(db) as store:
        assert store.integrity_check() == "ok"
        for summary in store.sessions():
            name = summary.session.name
            expected = 30 if name == "mine" else 150
            texts = [s.text for s in store.branch(summary.session.id)]
            assert len(texts) == expected, name
            if name != "mine":
                assert texts == [f"{name} step {n}" for n in range(1, 151)]
                assert summary.mistake_number == 150


def test_processes_opening_a_new_store_at_once_all_succeed(db: Path, tmp_path: Path) -> None:
    go = tmp_path / "go"
    openers = [helper("open", str(db), str(go)) for _ in range(6)]
    deadline = time.monotonic() + 30
    while len(list(tmp_path.glob("go.ready.*"))) < len(openers):  # all at the same line
        assert time.monotonic() < deadline, "the openers never got ready"
        time.sleep(0.005)
    go.touch()
    for opener in openers:
        assert "opened" in finish(opener)
    with Store.open(db) as store:
        assert len(store.sessions()) == 6
        assert store.integrity_check() == "ok"
    connection = raw(db)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    connection.close()


def committed_steps(db: Path) -> int:
    """Steps committed so far, read without taking any lock a writer needs."""
    if not db.exists():
        return 0
    try:
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1)
        try:
            return connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0]
        finally:
            connection.close()
    except sqlite3.Error:
        return 0  # not created or migrated yet


async def test_a_process_killed_mid_trace_leaves_a_store_that_resumes(
    db: Path,
) -> None:
    task, index = "dyck_languages", 1
    row = bundled_rows(task)[index]
    assert len(row.steps) == 34
    # 50 tokens a second: each step streams for a while (the trace ~5 s), so the kill
    # lands mid-trace, most likely mid-step.
    child = helper("generate", str(db), task, str(index), env={"BBM_TUI_REPLAY_TPS": "50"})
    try:
        deadline = time.monotonic() + 60
        while committed_steps(db) < 3:
            assert child.poll() is None, child.communicate()[1]
            assert time.monotonic() < deadline, "the child never committed three steps"
            await asyncio.sleep(0.02)
        child.send_signal(signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
    assert child.returncode == -signal.SIGKILL

    with Store.open(db) as store:
        assert store.integrity_check() == "ok"
        [summary] = store.sessions()
        saved = store.branch(summary.session.id)
        assert 3 <= len(saved) < len(row.steps)
        assert [s.text for s in saved] == row.steps[: len(saved)]
        assert [s.number for s in saved] == list(range(1, len(saved) + 1))
        assert all(s.latency_s is not None for s in saved)  # each with its call

        session = TraceSession.load(store, summary.session.id)
        assert session.texts == row.steps[: len(saved)]
        events = [event async for event in session.generate()]
        new = [e.number for e in events if isinstance(e, StepFinished)]
        assert new == list(range(len(saved) + 1, len(row.steps) + 1))
        assert isinstance(events[-1], TraceFinished) and events[-1].reason == "answer"

    with Store.open(db) as store:
        assert store.integrity_check() == "ok"
        resumed = TraceSession.load(store, summary.session.id)
        assert resumed.texts == row.steps
        assert resumed.answer == row.answer
        assert [s.number for s in resumed.steps] == list(range(1, len(row.steps) + 1))
        connection = raw(db)
        assert connection.execute("SELECT COUNT(*) FROM steps").fetchone()[0] == len(row.steps)
        assert connection.execute(
            "SELECT COUNT(*) FROM calls WHERE purpose = 'step'").fetchone()[0] == len(row.steps)
        connection.close()
