"""The session store (docs/DESIGN.md §8): one SQLite file, WAL mode, schema versioned by
`PRAGMA user_version` with forward migrations (schema.py).

A trace is a tree of steps (`parent_id`); the branch on show is the path from the root to the
session's `head_step_id`. Every finished step, label and call is committed in its own
transaction as it happens, so a crash loses at most the step being streamed. Writes take the
lock up front (`BEGIN IMMEDIATE`) and wait for another process's writes instead of failing,
so the app and a headless run can share one store.

API keys are never written here: nothing that reaches this module carries one, and an api
base is stored redacted (core/redact.py) whoever hands it over.
"""

from __future__ import annotations

import gc
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, TypeVar

from bbm_tui.core.redact import redact_url
from bbm_tui.core.store.errors import SessionBusy, SessionDeleted, StoreError
from bbm_tui.core.store.files import (
    HOME_ENV,
    check_is_sqlite,
    chmod_owner_only,
    create_store_file,
    default_path,
    known_failure,
    newer_message,
    system_error,
)
from bbm_tui.core.store.records import (
    AnnotatorLabel,
    FinderRun,
    FinderVerdict,
    Label,
    QueueWork,
    Session,
    SessionSummary,
    Step,
    StoredCandidate,
    TaskDefinition,
    Totals,
    default_session_name,
)
from bbm_tui.core.store.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    expected_columns,
    run_migration,
)
from bbm_tui.core.types import (
    DEFAULT_ANNOTATOR,
    CallPurpose,
    CallRecord,
    LabelFilter,
    SessionQuery,
    SessionSort,
    SessionSource,
    StepOrigin,
    TokenLogprob,
    sane_cost,
    sane_logprob,
    sane_tokens,
)

BUSY_TIMEOUT_MS = 10_000
# A session's claim (claim_session): renewed every CLAIM_HEARTBEAT_S by whoever generates it,
# and held by nobody once it is CLAIM_STALE_S old (a holder on another machine that died),
# or at once when its holder's pid is gone on this machine.
CLAIM_HEARTBEAT_S = 3.0
CLAIM_STALE_S = 20.0


T = TypeVar("T")


# The tables whose rows make a session worth keeping (see delete_session_if_empty).
_SESSION_HISTORY = ("steps", "calls", "labels", "finder_runs", "candidates", "queue_items",
                    "annotation_work")

class Store:
    """One connection, shared by the threads of one process under a lock."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection = connection
        self._lock = threading.RLock()

    # -- opening

    @classmethod
    def open(cls, path: Path | str | None = None) -> Store:
        path = Path(path) if path is not None else default_path()
        check_is_sqlite(path)
        creating = not path.exists()
        if creating:
            create_store_file(path)
        try:
            connection = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise known_failure(path, error) or StoreError(
                f"{path}: cannot open the session store: {error}") from None
        store = cls(path, connection)
        try:
            # Refuse a newer store or another program's database before the WAL switch,
            # which would rewrite its header.
            store._check_compatible()
            store._configure()
            store._migrate()
            store._check_schema()
        except sqlite3.DatabaseError as error:
            connection.close()
            # The disk being full or read-only is not the store's fault: say what it is.
            raise known_failure(path, error) or StoreError(
                f"{path}: not a usable bbm-tui session store: {error}") from None
        except StoreError:
            connection.close()
            raise
        for suffix in ("-wal", "-shm"):
            sidecar = Path(f"{path}{suffix}")
            if sidecar.exists():
                chmod_owner_only(sidecar)
        return store

    def close(self) -> None:
        with self._lock:
            self._connection.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _configure(self) -> None:
        connection = self._connection
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        # The switch wants the file to itself and can report "locked" at once, without
        # waiting out busy_timeout, while another process opens the new store too.
        mode = _retry_locked(
            lambda: connection.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        )
        if str(mode).lower() != "wal":
            raise StoreError(f"{self.path}: cannot switch the store to WAL mode")
        # NORMAL in WAL mode: a power cut may lose the last commits, never corrupt the file;
        # a killed process loses nothing that was committed.
        connection.execute("PRAGMA synchronous = NORMAL")
        connection.execute("PRAGMA foreign_keys = ON")

    def _check_compatible(self) -> None:
        # One statement, one snapshot: read apart, another process's first migration could
        # commit in between (version 0, yet tables) and the store look like a foreign file.
        version, tables = self._connection.execute(
            "SELECT (SELECT user_version FROM pragma_user_version), "
            "(SELECT COUNT(*) FROM sqlite_master WHERE type = 'table')"
        ).fetchone()
        if version > SCHEMA_VERSION:
            raise StoreError(newer_message(self.path, version))
        if version == 0 and tables:
            raise StoreError(
                f"{self.path}: this SQLite file is not a bbm-tui session store; "
                "the file was left untouched."
            )

    def _check_schema(self) -> None:
        """Every column this version reads is there (a store edited by hand, say a dropped
        column, is refused here with one message rather than failing at some later read)."""
        for table, columns in expected_columns().items():
            found = {row[1] for row in self._connection.execute(
                f"PRAGMA table_info({table})").fetchall()}
            missing = sorted(columns - found)
            if missing:
                what = (f"table {table!r} has no column {', '.join(repr(c) for c in missing)}"
                        if found else f"table {table!r} is missing")
                raise StoreError(
                    f"{self.path}: the store's {what} (was it edited by another program?); it "
                    f"was left untouched: restore a backup, or set {HOME_ENV} to a new folder")

    def _migrate(self) -> None:
        version = self._connection.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self._write() as connection:
                # Another process opening the store at the same time may have got here first.
                if connection.execute("PRAGMA user_version").fetchone()[0] >= target:
                    continue
                run_migration(connection, MIGRATIONS[target - 1])
                connection.execute(f"PRAGMA user_version = {target}")

    # -- transactions

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            connection = self._connection
            _retry_locked(lambda: connection.execute("BEGIN IMMEDIATE"))
            try:
                yield connection
            except UnicodeEncodeError as error:
                connection.execute("ROLLBACK")
                raise self._not_unicode(error) from None
            except sqlite3.OperationalError as error:
                self._rollback()
                raise system_error(self.path, error) from None
            except BaseException:
                self._rollback()
                raise
            else:
                try:
                    _retry_locked(lambda: connection.execute("COMMIT"))
                except sqlite3.OperationalError as error:  # e.g. the disk filled at commit
                    self._rollback()
                    raise system_error(self.path, error) from None

    def _rollback(self) -> None:
        with suppress(sqlite3.Error):
            if self._connection.in_transaction:
                self._connection.execute("ROLLBACK")

    def _require_session(self, connection: sqlite3.Connection, session_id: int) -> None:
        """Inside a write: the session must still be there (another process may have deleted
        it); its rows would otherwise fail on a foreign key, or be orphans."""
        found = connection.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,))
        if found.fetchone() is None:
            raise SessionDeleted(
                f"session {session_id} was deleted (by another bbm-tui process?); nothing more "
                "is saved to it", session_id)

    def _read(self, sql: str, parameters: tuple | dict = ()) -> list[sqlite3.Row]:
        with self._lock:
            try:
                cursor = self._connection.execute(sql, parameters)
                cursor.row_factory = sqlite3.Row
                return cursor.fetchall()
            except UnicodeEncodeError as error:
                raise self._not_unicode(error) from None
            except sqlite3.OperationalError as error:
                raise system_error(self.path, error) from None

    def _read_tuples(self, sql: str, parameters: tuple = ()) -> list[tuple]:
        """As `_read`, as plain tuples (for many rows)."""
        with self._lock:
            try:
                return self._connection.execute(sql, parameters).fetchall()
            except UnicodeEncodeError as error:
                raise self._not_unicode(error) from None
            except sqlite3.OperationalError as error:
                raise system_error(self.path, error) from None

    def _not_unicode(self, error: UnicodeEncodeError) -> StoreError:
        """Text SQLite cannot hold (a lone surrogate, e.g. from a JSON "\\ud800"): refused,
        nothing written, rather than stored changed."""
        character = error.object[error.start] if error.start < len(error.object) else "?"
        return StoreError(
            f"{self.path}: text that is not valid Unicode (a lone surrogate "
            f"\\u{ord(character):04x}) cannot go into the session store; nothing was saved"
        )

    # -- sessions

    def create_session(
        self,
        *,
        task: str,
        input: str,
        model: str,
        mode: str = "chat",
        api_base: str | None = None,
        target: str | None = None,
        dataset_index: int | None = None,
        gold_mistake_index: int | None = None,
        name: str | None = None,
        source: SessionSource = SessionSource.APP,
        task_definition: TaskDefinition | None = None,
    ) -> Session:
        """A new session. A task of one's own comes with its definition (digest and text),
        kept by its digest in the same transaction."""
        now = time.time()
        if name is None:
            name = default_session_name(task, dataset_index, input)
        with self._write() as connection:
            digest = _keep_task_definition(connection, task, task_definition, now)
            cursor = connection.execute(
                """INSERT INTO sessions (name, task, input, target, dataset_index,
                       gold_mistake_index, model, api_base, mode, source, created_at, updated_at,
                       task_digest)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (name, task, input, target, dataset_index, gold_mistake_index, model,
                 redact_url(api_base), mode, source, now, now, digest),
            )
            session_id = _inserted_id(cursor)
        return self.session(session_id)

    def task_definition(self, digest: str) -> str | None:
        """The stored definition of a task of one's own (JSON text), by its digest."""
        rows = self._read("SELECT definition FROM task_definitions WHERE digest = ?",
                          (digest,))
        return rows[0][0] if rows else None

    def session(self, session_id: int) -> Session:
        rows = self._read("SELECT * FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            raise SessionDeleted(f"{self.path}: there is no session {session_id}", session_id)
        return _session(rows[0])

    def sessions(self, query: SessionQuery | None = None) -> list[SessionSummary]:
        """Every session (that `query` lets through), the most recently changed first."""
        return self.session_page(query or SessionQuery(), 0, None)

    def count_sessions(self, query: SessionQuery) -> int:
        where, parameters = _session_filter(query)
        rows = self._read(f"SELECT COUNT(*) FROM sessions AS s {_joins_for(query)} "
                          f"WHERE {where}", parameters)
        return rows[0][0]

    def session_page(
        self, query: SessionQuery, offset: int, limit: int | None
    ) -> list[SessionSummary]:
        """`limit` sessions (None: all) from position `offset` of the list `query` asks for,
        in three queries whatever their number: the rows with their step count, answer and
        label, which flagged mistakes lie on the branch on show, and what their calls cost."""
        where, parameters = _session_filter(query)
        rows = self._read(
            f"""SELECT s.*, h.number AS _steps, h.answer AS _answer, l.id AS _label_id,
                       l.mistake_step_id AS _mistake_step_id, l.leaf_step_id AS _leaf_step_id,
                       l.created_at AS _label_at, l.annotator AS _annotator,
                       l.assisted AS _assisted, m.number AS _mistake_number
                FROM sessions AS s {_SUMMARY_JOINS}
                WHERE {where} ORDER BY {_session_order(query)} LIMIT ? OFFSET ?""",
            (*parameters, -1 if limit is None else limit, offset),
        )
        on_branch = self._mistakes_on_branch(
            [row["id"] for row in rows if row["_mistake_step_id"] is not None])
        spend = self._spend([row["id"] for row in rows])
        return [_summary(row, on_branch, spend.get(row["id"], (0, 0.0, 0))) for row in rows]

    def _spend(self, session_ids: list[int]) -> dict[int, tuple[int, float, int]]:
        """Each session's calls, their known cost and how many have none, by session id."""
        found: dict[int, tuple[int, float, int]] = {}
        for start in range(0, len(session_ids), 500):  # SQLite's limit on parameters
            chunk = session_ids[start:start + 500]
            marks = ", ".join("?" * len(chunk))
            for session_id, calls, cost, unpriced in self._read_tuples(
                f"""SELECT session_id, {_CALLS_COUNTED}, COALESCE(SUM(cost), 0),
                           {_UNPRICED_COUNTED}
                    FROM calls WHERE session_id IN ({marks}) GROUP BY session_id""",
                tuple(chunk),
            ):
                found[session_id] = (calls, cost, unpriced)
        return found

    def session_position(self, query: SessionQuery, session_id: int) -> int | None:
        """Where session `session_id` is in the list `query` asks for (None: not in it)."""
        where, parameters = _session_filter(query)
        rows = self._read(
            f"""SELECT position FROM (
                    SELECT s.id, ROW_NUMBER() OVER (ORDER BY {_session_order(query)}) - 1
                           AS position
                    FROM sessions AS s {_joins_for(query)} WHERE {where})
                WHERE id = ?""",
            (*parameters, session_id),
        )
        return rows[0][0] if rows else None

    def _mistakes_on_branch(self, session_ids: list[int]) -> set[int]:
        """Which of these sessions' flagged mistakes are on the branch on show: one walk up
        from each head to the flagged thought's number, all in one query."""
        if not session_ids:
            return set()
        marks = ",".join("?" * len(session_ids))
        rows = self._read(
            f"""WITH RECURSIVE walk(session_id, step_id, parent_id, number, target, floor) AS (
                    SELECT s.id, h.id, h.parent_id, h.number, m.id, m.number
                    FROM sessions AS s {_SUMMARY_JOINS}
                    WHERE s.id IN ({marks}) AND h.number >= m.number
                    UNION ALL
                    SELECT w.session_id, p.id, p.parent_id, p.number, w.target, w.floor
                    FROM walk AS w JOIN steps AS p ON p.id = w.parent_id
                    WHERE w.step_id != w.target AND p.number >= w.floor)
                SELECT session_id FROM walk WHERE step_id = target""",
            tuple(session_ids),
        )
        return {row[0] for row in rows}

    def find_session(self, *, task: str, input: str, model: str, source: SessionSource,
                     task_digest: str | None = None) -> Session | None:
        """The first session of one question by one model made by `source`, made with the
        task definition `task_digest` (None: one of the paper's five)."""
        rows = self._read(
            """SELECT * FROM sessions WHERE task = ? AND input = ? AND model = ? AND source = ?
                   AND task_digest IS ? ORDER BY id LIMIT 1""",
            (task, input, model, source, task_digest),
        )
        return _session(rows[0]) if rows else None

    def sessions_of_question(self, *, task: str, input: str, model: str) -> list[Session]:
        """Every session of one question by one model, whatever made it, oldest first."""
        rows = self._read(
            "SELECT * FROM sessions WHERE task = ? AND input = ? AND model = ? ORDER BY id",
            (task, input, model),
        )
        return [_session(row) for row in rows]

    def update_session_model(
        self, session_id: int, *, model: str, api_base: str | None, mode: str
    ) -> Session:
        """Record the model settings a session is now generated with (the api base redacted:
        a password or key in it is never written)."""
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET model = ?, api_base = ?, mode = ?, updated_at = ? "
                "WHERE id = ?",
                (model, redact_url(api_base), mode, time.time(), session_id),
            )
        return self.session(session_id)

    def rename_session(self, session_id: int, name: str) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET name = ?, updated_at = ? WHERE id = ?",
                (name, time.time(), session_id),
            )

    def delete_session_if_empty(self, session_id: int) -> bool:
        """Delete a session nothing was ever done in (no step, call, label, finder run or
        annotation): one a person opened and left without generating. True if deleted."""
        with self._write() as connection:
            for table in _SESSION_HISTORY:
                if connection.execute(f"SELECT 1 FROM {table} WHERE session_id = ? LIMIT 1",
                                      (session_id,)).fetchone():
                    return False
            deleted = connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,))
            return deleted.rowcount > 0

    def delete_session(self, session_id: int) -> None:
        with self._write() as connection:
            connection.execute("UPDATE sessions SET head_step_id = NULL WHERE id = ?",
                               (session_id,))
            connection.execute("DELETE FROM labels WHERE session_id = ?", (session_id,))
            connection.execute("DELETE FROM calls WHERE session_id = ?", (session_id,))
            connection.execute("DELETE FROM steps WHERE session_id = ?", (session_id,))
            connection.execute("DELETE FROM sessions WHERE id = ?", (session_id,))

    # -- steps

    def add_step(
        self,
        session_id: int,
        *,
        parent_id: int | None,
        number: int,
        text: str,
        origin: str = "model",
        answer: str | None = None,
        truncated: bool = False,
        call: CallRecord | None = None,
        call_id: int | None = None,
        choice: int | None = None,
        tokens: Sequence[TokenLogprob] | None = None,
        candidate_id: int | None = None,
    ) -> Step:
        """Append a finished step below `parent_id`, make it the head, and commit. It was made
        by `call` (recorded with it), or by the call `call_id` already recorded (a chosen
        candidate, `candidate_id`, marked chosen in the same transaction, so that a kill
        leaves no step its candidate does not point at), as its `choice`. Its tokens default
        to the call's."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            same = _same_step(connection, session_id, parent_id, number, text, origin)
            if same is not None:  # another window stored it first: it is that step
                self._take_same_step(connection, session_id, same, call, candidate_id, now)
                step_id = same
            else:
                step_id = self._insert_step(
                    connection, session_id, parent_id=parent_id, number=number, text=text,
                    origin=origin, answer=answer, truncated=truncated, call=call,
                    call_id=call_id, choice=choice, tokens=tokens, candidate_id=candidate_id,
                    now=now)
        return self.step(step_id)

    def _take_same_step(self, connection: sqlite3.Connection, session_id: int, step_id: int,
                        call: CallRecord | None, candidate_id: int | None, now: float) -> None:
        """The step is there already: the call that made it again was paid for all the same
        (kept, in the session's totals), the candidate points at it, and it is the head."""
        if call is not None:
            _insert_call(connection, session_id, step_id, CallPurpose.STEP, call, now)
        if candidate_id is not None:
            connection.execute("UPDATE candidates SET step_id = ? WHERE id = ?",
                               (step_id, candidate_id))
        connection.execute("UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                           (step_id, now, session_id))

    def _insert_step(self, connection: sqlite3.Connection, session_id: int, *,
                     parent_id: int | None, number: int, text: str, origin: str,
                     answer: str | None, truncated: bool, call: CallRecord | None,
                     call_id: int | None, choice: int | None,
                     tokens: Sequence[TokenLogprob] | None, candidate_id: int | None,
                     now: float) -> int:
        """A new step (add_step's, inside its transaction); its id."""
        if call is not None:
            call_id = _insert_call(connection, session_id, None, CallPurpose.STEP, call, now)
            choice = call.choice if choice is None else choice
            tokens = call.tokens if tokens is None else tokens
        tokens = _sane_tokens(tokens)
        cursor = connection.execute(
            """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
                   truncated, created_at, call_id, choice, tokens, alternatives, logprob,
                   ntokens, call_choices)
               VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                       (SELECT NULLIF(COUNT(*), 0) FROM candidates WHERE call_id = ?))""",
            (session_id, parent_id, number, text, origin, answer, int(truncated), now,
             call_id, choice, tokens_json(tokens), alternatives_json(tokens),
             sum(token.logprob for token in tokens) if tokens else None,
             len(tokens) if tokens else None,
             # A call of the step's own made no candidates.
             None if call is not None else call_id),
        )
        step_id = _inserted_id(cursor)
        if not tokens and call_id is not None:  # the call's own list, as before v4
            connection.execute(_CALL_LOGPROB_UPDATE, (step_id,))
        if call is not None:  # the call's own link to its step (a v3 reader follows it)
            connection.execute("UPDATE calls SET step_id = ? WHERE id = ?",
                               (step_id, call_id))
        if candidate_id is not None:
            connection.execute("UPDATE candidates SET step_id = ? WHERE id = ?",
                               (step_id, candidate_id))
        connection.execute(
            "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
            (step_id, now, session_id),
        )
        return step_id

    def add_steps(
        self, session_id: int, steps: list[tuple[str, str | None]], origin: str
    ) -> list[Step]:
        """Append several steps, each (text, the answer it states), in one transaction (e.g.
        a recorded trace loaded to label)."""
        now = time.time()
        head = self.session(session_id).head_step_id
        parent = head
        number = len(self.branch(session_id))
        with self._write() as connection:
            self._require_session(connection, session_id)
            for text, answer in steps:
                number += 1
                cursor = connection.execute(
                    """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
                           truncated, created_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)""",
                    (session_id, parent, number, text, origin, answer, now),
                )
                parent = _inserted_id(cursor)
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (parent, now, session_id),
            )
        return self.branch(session_id)

    def record_call(
        self, session_id: int, purpose: CallPurpose, call: CallRecord,
        step_id: int | None = None
    ) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            _insert_call(connection, session_id, step_id, purpose, call, time.time())

    def call_models(self, call_ids: Sequence[int]) -> dict[int, str]:
        """The model each of these calls asked, by call id."""
        found: dict[int, str] = {}
        unique = list(dict.fromkeys(call_ids))
        for start in range(0, len(unique), 500):  # under SQLite's limit on parameters
            chunk = unique[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update(self._read_tuples(
                f"SELECT id, model FROM calls WHERE id IN ({marks})", tuple(chunk)))
        return found

    def step(self, step_id: int) -> Step:
        rows = self._read(_STEP_SELECT + " WHERE s.id = ?", (step_id,))
        if not rows:
            raise StoreError(f"{self.path}: there is no step {step_id}")
        return _step(rows[0])

    def steps_of(self, session_id: int) -> list[Step]:
        """Every step of the session, on every branch, oldest first. Without their tokens
        (`step()` has them): a trace of 10^5 steps would spend seconds and gigabytes on them."""
        with _collector_paused():
            rows = self._read_tuples(_STEPS_SELECT + " WHERE s.session_id = ?", (session_id,))
            rows.sort()  # by id: cheaper here than SQLite's sort of the join (a third of it)
            return [_bulk_step(row) for row in rows]

    def branch(self, session_id: int, leaf_id: int | None = None) -> list[Step]:
        """The steps from the root to `leaf_id` (default: the session's head), in order."""
        if leaf_id is None:
            leaf_id = self.session(session_id).head_step_id
        if leaf_id is None:
            return []
        rows = self._read_tuples(_STEPS_SELECT + " WHERE s.session_id = ?", (session_id,))
        by_id = {row[0]: row for row in rows}
        path: list[Step] = []
        current: int | None = leaf_id
        while current is not None and current in by_id:
            row = by_id[current]
            path.append(_bulk_step(row))
            current = row[2]  # its parent
        path.reverse()
        return path

    # -- who is generating a session (store v13)

    def claim_session(self, session_id: int, owner: str) -> None:
        """Take (or, for its holder, renew) the claim to generate the session. Raises
        SessionBusy while another owner holds a live claim: its process is alive (on this
        machine) and its heartbeat is under CLAIM_STALE_S old."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            held = connection.execute(
                "SELECT owner, host, pid, heartbeat_at FROM session_claims WHERE session_id = ?",
                (session_id,)).fetchone()
            if held is not None and held[0] != owner and _claim_live(held[1], held[2], held[3],
                                                                      now):
                raise SessionBusy(session_id, held[2], held[1], held[1] == _HOST)
            connection.execute(
                "INSERT OR REPLACE INTO session_claims (session_id, owner, host, pid, "
                "heartbeat_at) VALUES (?, ?, ?, ?, ?)",
                (session_id, owner, _HOST, os.getpid(), now))

    def release_claim(self, session_id: int, owner: str) -> None:
        with self._write() as connection:
            connection.execute("DELETE FROM session_claims WHERE session_id = ? AND owner = ?",
                               (session_id, owner))

    def claim_holder(self, session_id: int, owner: str) -> SessionBusy | None:
        """Who else holds a live claim on the session (as the error a claim would raise), or
        None: nobody, or `owner` itself."""
        rows = self._read("SELECT owner, host, pid, heartbeat_at FROM session_claims "
                          "WHERE session_id = ?", (session_id,))
        if not rows or rows[0][0] == owner or not _claim_live(
                rows[0]["host"], rows[0]["pid"], rows[0]["heartbeat_at"], time.time()):
            return None
        return SessionBusy(session_id, rows[0]["pid"], rows[0]["host"],
                           rows[0]["host"] == _HOST)

    def set_head(self, session_id: int, step_id: int | None) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (step_id, time.time(), session_id),
            )

    # -- labels

    def set_label(
        self,
        session_id: int,
        mistake_step_id: int | None,
        leaf_step_id: int | None,
        *,
        annotator: str = DEFAULT_ANNOTATOR,
        assisted: bool = False,
        ratings: Sequence[int] | None = None,
        finish_reason: str | None = None,
        note: str | None = None,
    ) -> Label:
        """Record `annotator`'s verdict: first mistake at `mistake_step_id`, or no mistake;
        with the per-step protocol, every thought's rating and the finish reason too."""
        now = time.time()
        kept = None if ratings is None else tuple(ratings)
        with self._write() as connection:
            self._require_session(connection, session_id)
            cursor = connection.execute(
                """INSERT INTO labels (session_id, leaf_step_id, mistake_step_id, created_at,
                       annotator, assisted, ratings, finish_reason, note)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (session_id, leaf_step_id, mistake_step_id, now, annotator, int(assisted),
                 None if kept is None else json.dumps(list(kept), allow_nan=False),
                 finish_reason, note),
            )
            connection.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
            )
            label_id = _inserted_id(cursor)
        return Label(label_id, session_id, mistake_step_id, leaf_step_id, now, annotator,
                     assisted, kept, finish_reason, note)

    def undo_label(self, session_id: int, annotator: str | None = None) -> Label | None:
        """Withdraw the latest verdict (of `annotator`, or anyone's); return the one now in
        force."""
        where, parameters = _annotator_clause(session_id, annotator)
        with self._write() as connection:
            self._require_session(connection, session_id)
            row = connection.execute(
                f"SELECT id FROM labels WHERE {where} ORDER BY id DESC LIMIT 1", parameters
            ).fetchone()
            if row is not None:
                connection.execute("UPDATE labels SET undone = 1 WHERE id = ?", (row[0],))
                connection.execute(
                    "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id)
                )
        return self.current_label(session_id, annotator)

    def current_label(self, session_id: int, annotator: str | None = None) -> Label | None:
        """The verdict in force: `annotator`'s latest, or (None) the latest of anyone's."""
        where, parameters = _annotator_clause(session_id, annotator)
        rows = self._read(
            f"SELECT * FROM labels WHERE {where} ORDER BY id DESC LIMIT 1", parameters
        )
        return _label(rows[0]) if rows else None

    def label_history(self, session_id: int, annotator: str) -> list[Label]:
        """`annotator`'s verdicts in force on the session (not withdrawn), newest first: one
        per branch at most matters (trace/session.py picks the branch's)."""
        rows = self._read(
            "SELECT * FROM labels WHERE session_id = ? AND annotator = ? AND undone = 0 "
            "ORDER BY id DESC",
            (session_id, annotator),
        )
        return [_label(row) for row in rows]

    def withdraw_label(self, session_id: int, label_id: int) -> None:
        """Undo one verdict."""
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute("UPDATE labels SET undone = 1 WHERE id = ? AND session_id = ?",
                               (label_id, session_id))
            connection.execute("UPDATE sessions SET updated_at = ? WHERE id = ?",
                               (time.time(), session_id))

    def labels(self, session_id: int) -> list[Label]:
        """Every annotator's verdict in force on the session, one per annotator."""
        rows = self._read(
            """SELECT * FROM labels WHERE id IN (
                   SELECT MAX(id) FROM labels WHERE session_id = ? AND undone = 0
                   GROUP BY annotator)
               ORDER BY annotator""",
            (session_id,),
        )
        return [_label(row) for row in rows]

    # -- annotation queues (v6)

    def queue_links(self) -> dict[str, int]:
        """Every queued trace's key and its session (one query: a queue over 10^4 traces
        opens without a read per trace)."""
        rows = self._read("SELECT trace_key, session_id FROM queue_items")
        return {row["trace_key"]: row["session_id"] for row in rows}

    def queue_gold(self) -> dict[int, int | None]:
        """The gold label of every queued session whose file carried one."""
        rows = self._read(
            """SELECT q.session_id, s.gold_mistake_index FROM queue_items AS q
               JOIN sessions AS s ON s.id = q.session_id WHERE q.has_gold = 1""")
        return {row["session_id"]: row["gold_mistake_index"] for row in rows}

    def create_queued_session(
        self, trace_key: str, *, has_gold: bool, task: str, input: str, target: str | None,
        model: str, name: str, gold_mistake_index: int | None,
        steps: Sequence[tuple[str, str | None]], task_definition: TaskDefinition | None = None,
    ) -> int:
        """The session of a queued trace, with its recorded steps, made once: a second caller
        (another annotator's process) gets the one already there. All in one transaction."""
        now = time.time()
        with self._write() as connection:
            found = connection.execute(
                "SELECT session_id FROM queue_items WHERE trace_key = ?", (trace_key,)
            ).fetchone()
            if found is not None:
                return found[0]
            digest = _keep_task_definition(connection, task, task_definition, now)
            session_id = _inserted_id(connection.execute(
                """INSERT INTO sessions (name, task, input, target, gold_mistake_index, model,
                       mode, source, created_at, updated_at, task_digest)
                   VALUES (?, ?, ?, ?, ?, ?, 'chat', ?, ?, ?, ?)""",
                (name, task, input, target, gold_mistake_index, model, SessionSource.ANNOTATE,
                 now, now, digest),
            ))
            parent = None
            for number, (text, answer) in enumerate(steps, start=1):
                parent = _inserted_id(connection.execute(
                    """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
                           truncated, created_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)""",
                    (session_id, parent, number, text, StepOrigin.DATASET, answer, now),
                ))
            connection.execute("UPDATE sessions SET head_step_id = ? WHERE id = ?",
                               (parent, session_id))
            connection.execute(
                "INSERT INTO queue_items (trace_key, session_id, has_gold) VALUES (?, ?, ?)",
                (trace_key, session_id, int(has_gold)),
            )
            return session_id

    def step_ids(self, session_id: int) -> list[int]:
        """The ids of the branch on show, Thought 1 first (a queued trace has one branch)."""
        return [step.id for step in self.branch(session_id)]

    def queue_work(self, annotator: str) -> dict[int, QueueWork]:
        """`annotator`'s work on every queued trace they touched, by session."""
        rows = self._read("SELECT * FROM annotation_work WHERE annotator = ?", (annotator,))
        return {row["session_id"]: _work(row) for row in rows}

    def all_queue_work(self) -> list[QueueWork]:
        return [_work(row) for row in self._read(
            "SELECT * FROM annotation_work ORDER BY session_id, annotator")]

    def save_work(self, work: QueueWork) -> None:
        with self._write() as connection:
            self._require_session(connection, work.session_id)
            connection.execute(
                """INSERT INTO annotation_work (session_id, annotator, judged, status,
                       flag_reason, note, time_spent_s, assisted, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                   ON CONFLICT (session_id, annotator) DO UPDATE SET judged = excluded.judged,
                       status = excluded.status, flag_reason = excluded.flag_reason,
                       note = excluded.note, time_spent_s = excluded.time_spent_s,
                       assisted = excluded.assisted, updated_at = excluded.updated_at""",
                (work.session_id, work.annotator, work.judged, work.status, work.flag_reason,
                 work.note, work.time_spent_s, int(work.assisted), time.time()),
            )

    def annotator_labels(self) -> list[AnnotatorLabel]:
        """Every annotator's label in force on every session (the latest not withdrawn), with
        the mistake as a 0-based index: what agreement, adjudication and the CSV export read."""
        rows = self._read(
            """SELECT l.session_id, l.annotator, l.assisted, l.created_at,
                      l.mistake_step_id, s.number, l.ratings, l.finish_reason, l.note
               FROM labels AS l LEFT JOIN steps AS s ON s.id = l.mistake_step_id
               WHERE l.id IN (SELECT MAX(id) FROM labels WHERE undone = 0
                              GROUP BY session_id, annotator)
               ORDER BY l.session_id, l.annotator""")
        return [
            AnnotatorLabel(row["session_id"], row["annotator"],
                           None if row["mistake_step_id"] is None else row["number"] - 1,
                           bool(row["assisted"]), row["created_at"],
                           ratings_from_json(row["ratings"]), row["finish_reason"],
                           row["note"])
            for row in rows
        ]

    # -- where a session's trace came from (v12)

    def set_origin(self, session_id: int, origin: Mapping[str, Any]) -> None:
        """What the row a session was made from carried beyond its trace (its format, its
        other fields), kept so the session is written back in that format losing nothing."""
        text = json.dumps(origin, ensure_ascii=False, allow_nan=False)
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                """INSERT INTO session_origins (session_id, origin) VALUES (?, ?)
                   ON CONFLICT (session_id) DO UPDATE SET origin = excluded.origin""",
                (session_id, text))

    def origin(self, session_id: int) -> dict[str, Any] | None:
        rows = self._read("SELECT origin FROM session_origins WHERE session_id = ?",
                          (session_id,))
        return _origin(rows[0]["origin"]) if rows else None

    def origins(self) -> dict[int, dict[str, Any]]:
        """Every session's origin, by session (one query, for an export of them all)."""
        found = {}
        for row in self._read("SELECT session_id, origin FROM session_origins"):
            origin = _origin(row["origin"])
            if origin is not None:
                found[row["session_id"]] = origin
        return found

    # -- candidates (backtracking)

    def add_candidates(
        self,
        session_id: int,
        *,
        parent_id: int | None,
        number: int,
        calls: Sequence[CallRecord],
        candidates: Sequence[tuple[int, int, str, Sequence[TokenLogprob] | None, bool]],
    ) -> list[StoredCandidate]:
        """Commit the calls that sampled Thought `number` after `parent_id`, and each
        candidate as (index of its call in `calls`, choice, text, tokens, dropped)."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            call_ids = [_insert_call(connection, session_id, None, CallPurpose.SAMPLE, call,
                                     now) for call in calls]
            ids = []
            for call_index, choice, text, tokens, dropped in candidates:
                tokens = _sane_tokens(tokens)
                cursor = connection.execute(
                    """INSERT INTO candidates (session_id, call_id, choice, parent_id, number,
                           text, tokens, alternatives, logprob, dropped, created_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (session_id, call_ids[call_index], choice, parent_id, number, text,
                     tokens_json(tokens), alternatives_json(tokens),
                     sum(t.logprob for t in tokens) if tokens else None,
                     int(dropped), now),
                )
                ids.append(_inserted_id(cursor))
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        return self._candidates(f"c.id IN ({marks})", tuple(ids))

    def candidates(self, session_id: int, parent_id: int | None, number: int
                   ) -> list[StoredCandidate]:
        """The candidates sampled for Thought `number` after `parent_id`, oldest first."""
        return self._candidates(
            "c.session_id = ? AND c.parent_id IS ? AND c.number = ?",
            (session_id, parent_id, number),
        )

    def choose_candidate(self, candidate_id: int, step_id: int) -> None:
        """The candidate became step `step_id`."""
        with self._write() as connection:
            connection.execute("UPDATE candidates SET step_id = ? WHERE id = ?",
                               (step_id, candidate_id))

    def _candidates(self, where: str, parameters: tuple) -> list[StoredCandidate]:
        rows = self._read(f"SELECT * FROM candidates AS c WHERE {where} ORDER BY c.id",
                          parameters)
        return [
            StoredCandidate(
                id=row["id"], session_id=row["session_id"], call_id=row["call_id"],
                choice=row["choice"], parent_id=row["parent_id"], number=row["number"],
                text=row["text"], tokens=tokens_from_json(row["tokens"], row["alternatives"]),
                logprob=row["logprob"], dropped=bool(row["dropped"]), step_id=row["step_id"],
                created_at=row["created_at"],
            )
            for row in rows
        ]

    # -- mistake finders

    def create_finder_run(
        self,
        session_id: int,
        *,
        method: str,
        model: str,
        params: dict[str, Any],
        leaf_step_id: int | None = None,
    ) -> int:
        """Start recording a finder run on the session's trace; returns the run's id."""
        with self._write() as connection:
            self._require_session(connection, session_id)
            cursor = connection.execute(
                """INSERT INTO finder_runs (session_id, leaf_step_id, method, model, params,
                       created_at) VALUES (?, ?, ?, ?, ?, ?)""",
                (session_id, leaf_step_id, method, model,
                 json.dumps(params, sort_keys=True, allow_nan=False), time.time()),
            )
            return _inserted_id(cursor)

    def add_finder_verdict(
        self,
        run_id: int,
        *,
        step_number: int | None,
        raw: str,
        verdict: str | None,
        call: CallRecord | None = None,
    ) -> int:
        """Commit one answer as it arrives, with its call (purpose 'find')."""
        now = time.time()
        with self._write() as connection:
            found = connection.execute(
                "SELECT session_id FROM finder_runs WHERE id = ?", (run_id,)
            ).fetchone()
            if found is None:  # the run went with its session
                raise SessionDeleted(f"finder run {run_id} was deleted with its session (by "
                                     "another bbm-tui process?)", -1)
            session_id = found[0]
            call_id = None
            if call is not None:
                call_id = _insert_call(connection, session_id, None, CallPurpose.FIND, call, now)
            cursor = connection.execute(
                """INSERT INTO finder_verdicts (run_id, step_number, raw, verdict, parsed,
                       call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (run_id, step_number, raw, verdict, int(verdict is not None), call_id, now),
            )
            connection.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
            )
            return _inserted_id(cursor)

    def finish_finder_run(self, run_id: int, *, mistake_number: int | None, parsed: bool) -> None:
        with self._write() as connection:
            connection.execute(
                """UPDATE finder_runs SET mistake_number = ?, parsed = ?, finished_at = ?
                   WHERE id = ?""",
                (mistake_number, int(parsed), time.time(), run_id),
            )

    def end_finder_run(self, run_id: int, *, ended: str, error: str | None = None) -> None:
        """A run that will have no result: `ended` is "failed" (`error` says why) or
        "stopped". The answers it got are kept."""
        with self._write() as connection:
            connection.execute(
                "UPDATE finder_runs SET ended = ?, error = ? WHERE id = ? AND finished_at IS NULL",
                (ended, error, run_id),
            )

    def finder_run(self, run_id: int) -> FinderRun:
        rows = self._read("SELECT * FROM finder_runs WHERE id = ?", (run_id,))
        if not rows:
            raise StoreError(f"{self.path}: there is no finder run {run_id}")
        return self._finder_run(rows[0])

    def finder_runs(self, session_id: int) -> list[FinderRun]:
        """The session's finder runs, oldest first, each with its verdicts."""
        rows = self._read(
            "SELECT * FROM finder_runs WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [self._finder_run(row) for row in rows]

    def _finder_run(self, row: sqlite3.Row) -> FinderRun:
        verdicts = self._read(
            """SELECT v.*, c.model, c.params, c.latency_s, c.prompt_tokens,
                      c.completion_tokens, c.cost, c.logprobs, c.finish_reason, c.attempts,
                      c.usage_estimated, c.cached_tokens, c.cache_write_tokens,
                      c.prompt_estimated
               FROM finder_verdicts AS v LEFT JOIN calls AS c ON c.id = v.call_id
               WHERE v.run_id = ? ORDER BY v.id""",
            (row["id"],),
        )
        return FinderRun(
            id=row["id"],
            session_id=row["session_id"],
            leaf_step_id=row["leaf_step_id"],
            method=row["method"],
            model=row["model"],
            params=json.loads(row["params"]),
            mistake_number=row["mistake_number"],
            parsed=None if row["parsed"] is None else bool(row["parsed"]),
            finished_at=row["finished_at"],
            created_at=row["created_at"],
            verdicts=tuple(_finder_verdict(v) for v in verdicts),
            ended=row["ended"],
            error=row["error"],
        )

    # -- accounting

    def totals(self, session_id: int) -> Totals:
        """Every call of the session, summed: each step's, sample's and finder's."""
        rows = self._read(
            f"""SELECT {_CALLS_COUNTED} AS calls, {_TOTALS_COLUMNS}
                FROM calls WHERE session_id = ?""",
            (session_id,),
        )
        row = rows[0]
        return Totals(row["calls"], row["prompt_tokens"], row["completion_tokens"], row["cost"],
                      row["estimated_calls"], row["cached_tokens"], row["cache_write_tokens"],
                      row["unpriced_calls"], tuple(row["unpriced_models"].split("\n"))
                      if row["unpriced_models"] else (), row["prompt_estimated_calls"])

    def integrity_check(self) -> str:
        return self._read("PRAGMA integrity_check")[0][0]


# A set of calls counted: the steps one streamed call gave have a row each (their shares of
# it, schema.py v15), all with its id in `one_call`, and are one call.
_CALLS_COUNTED = "COUNT(DISTINCT COALESCE(one_call, id))"
_UNPRICED_COUNTED = "COUNT(DISTINCT CASE WHEN cost IS NULL THEN COALESCE(one_call, id) END)"
# What Totals sums over a set of calls. The models of calls with no known price, one a line
# (a model's name has no line break: providers' names and model ids never do).
_TOTALS_COLUMNS = f"""
    COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,
    COALESCE(SUM(completion_tokens), 0) AS completion_tokens,
    COALESCE(SUM(cost), 0) AS cost,
    COALESCE(SUM(usage_estimated), 0) AS estimated_calls,
    COALESCE(SUM(prompt_estimated), 0) AS prompt_estimated_calls,
    COALESCE(SUM(cached_tokens), 0) AS cached_tokens,
    COALESCE(SUM(cache_write_tokens), 0) AS cache_write_tokens,
    {_UNPRICED_COUNTED} AS unpriced_calls,
    (SELECT GROUP_CONCAT(model, char(10)) FROM (
        SELECT DISTINCT model FROM calls AS u
        WHERE u.session_id = calls.session_id AND u.cost IS NULL ORDER BY model
    )) AS unpriced_models
"""

# A step's completion tokens and cost are its call's, except for a step chosen among a call's
# several samples (`call_choices` > 1): the call's figures are for all of them, so it counts
# its own tokens (None without log-probabilities) and no cost of its own (schema.py, v7).
_COMPLETION_TOKENS = "CASE WHEN s.call_choices > 1 THEN s.ntokens ELSE c.completion_tokens END"
_COST = "CASE WHEN s.call_choices > 1 THEN NULL ELSE c.cost END"
_STEP_SELECT = f"""
    SELECT s.*, c.latency_s, c.prompt_tokens, {_COMPLETION_TOKENS} AS completion_tokens,
           {_COST} AS cost, COALESCE(c.usage_estimated, 0) AS usage_estimated, c.cached_tokens,
           COALESCE(c.prompt_estimated, 0) AS prompt_estimated, c.one_call, c.deployment
    FROM steps AS s
    LEFT JOIN calls AS c ON c.id = s.call_id
"""
# Steps in bulk: the same, less each step's tokens, in the order of Step's fields (read as
# plain tuples: 10^5 steps load in about half the time sqlite3.Row takes).
_STEPS_SELECT = f"""
    SELECT s.id, s.session_id, s.parent_id, s.number, s.text, s.origin, s.answer, s.truncated,
           s.created_at, c.latency_s, c.prompt_tokens, {_COMPLETION_TOKENS}, {_COST}, s.logprob,
           s.call_id, s.choice, s.ntokens, s.call_choices, COALESCE(c.usage_estimated, 0),
           c.cached_tokens, COALESCE(c.prompt_estimated, 0), c.one_call, c.deployment
    FROM steps AS s
    LEFT JOIN calls AS c ON c.id = s.call_id
"""


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while many records are built: none of them holds
    a cycle, yet the collector would walk them all again and again (10^5 steps load in about
    half the time without it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _same_step(connection: sqlite3.Connection, session_id: int, parent_id: int | None,
               number: int, text: str, origin: str) -> int | None:
    """A step already at this place with this text and origin (inside the write, so that two
    processes cannot both miss it): one step is never stored twice."""
    found = connection.execute(
        "SELECT id FROM steps WHERE session_id = ? AND parent_id IS ? AND number = ? "
        "AND text = ? AND origin = ? ORDER BY id LIMIT 1",
        (session_id, parent_id, number, text, origin)).fetchone()
    return found[0] if found else None


def _bulk_step(row: tuple) -> Step:
    return Step(row[0], row[1], row[2], row[3], row[4], row[5], row[6], bool(row[7]), row[8],
                row[9], row[10], row[11], row[12], row[13], row[14], row[15], None, row[16],
                row[17], bool(row[18]), row[19], bool(row[20]), row[21], row[22])


_CALL_LOGPROB_UPDATE = """
    UPDATE steps SET
        logprob = (SELECT SUM(l.value) FROM calls AS c, json_each(c.logprobs) AS l
                   WHERE c.id = steps.call_id),
        ntokens = (SELECT json_array_length(c.logprobs) FROM calls AS c
                   WHERE c.id = steps.call_id AND c.logprobs IS NOT NULL)
    WHERE id = ?
"""


def _step(row: sqlite3.Row) -> Step:
    tokens = tokens_from_json(row["tokens"], row["alternatives"])
    return Step(
        id=row["id"],
        session_id=row["session_id"],
        parent_id=row["parent_id"],
        number=row["number"],
        text=row["text"],
        origin=row["origin"],
        answer=row["answer"],
        truncated=bool(row["truncated"]),
        created_at=row["created_at"],
        latency_s=row["latency_s"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cost=row["cost"],
        logprob=row["logprob"],
        call_id=row["call_id"],
        choice=row["choice"],
        tokens=tokens,
        ntokens=row["ntokens"],
        call_choices=row["call_choices"],
        usage_estimated=bool(row["usage_estimated"]),
        cached_tokens=row["cached_tokens"],
        prompt_estimated=bool(row["prompt_estimated"]),
        one_call=row["one_call"],
        deployment=row["deployment"],
    )


# The sessions list: each session's head step (its number is the branch's length), the label
# in force (the latest not withdrawn, anyone's) and the thought it flags.
_SUMMARY_JOINS = """
    LEFT JOIN steps AS h ON h.id = s.head_step_id
    LEFT JOIN labels AS l ON l.id = (SELECT MAX(x.id) FROM labels AS x
                                     WHERE x.session_id = s.id AND x.undone = 0)
    LEFT JOIN steps AS m ON m.id = l.mistake_step_id
"""

def _joins_for(query: SessionQuery) -> str:
    """The joins a count or a position needs: none unless the label or the steps filter or
    order the list (a count of 10^5 sessions takes a tenth of the time without them)."""
    needed = query.label is not None or query.sort in (SessionSort.STEPS, SessionSort.LABEL)
    return _SUMMARY_JOINS if needed else ""


_SORT_KEYS: dict[SessionSort, tuple[str, ...]] = {
    SessionSort.UPDATED: ("s.updated_at",),
    SessionSort.NAME: ("s.name COLLATE NOCASE",),
    SessionSort.TASK: ("s.task",),
    SessionSort.MODEL: ("s.model COLLATE NOCASE",),
    SessionSort.STEPS: ("COALESCE(h.number, 0)",),
    # Unlabelled, then no mistake, then by the flagged thought's number.
    SessionSort.LABEL: ("CASE WHEN l.id IS NULL THEN 0 WHEN l.mistake_step_id IS NULL "
                        "THEN 1 ELSE 2 END", "COALESCE(m.number, 0)"),
}


def _session_order(query: SessionQuery) -> str:
    direction = "DESC" if query.descending else "ASC"
    keys = [f"{key} {direction}" for key in _SORT_KEYS[query.sort]]
    if query.sort == SessionSort.UPDATED:
        keys.append(f"s.id {direction}")
    else:
        # Ties newest first whatever the order, so that a page boundary is always the same.
        keys += ["s.updated_at DESC", "s.id DESC"]
    return ", ".join(keys)


def _session_filter(query: SessionQuery) -> tuple[str, tuple]:
    clauses = ["1"]
    parameters: list[Any] = []
    if query.text.strip():
        clauses.append("(s.name LIKE ? ESCAPE '\\' OR s.input LIKE ? ESCAPE '\\')")
        pattern = _like(query.text.strip())
        parameters += [pattern, pattern]
    for column, value in (("s.task", query.task), ("s.model", query.model)):
        if value:
            clauses.append(f"{column} LIKE ? ESCAPE '\\'")
            parameters.append(_like(value))
    if query.label == LabelFilter.UNLABELLED:
        clauses.append("l.id IS NULL")
    elif query.label == LabelFilter.MISTAKE:
        clauses.append("l.mistake_step_id IS NOT NULL")
    elif query.label == LabelFilter.NO_MISTAKE:
        clauses.append("l.id IS NOT NULL AND l.mistake_step_id IS NULL")
    if query.since is not None:
        clauses.append("s.updated_at >= ?")
        parameters.append(query.since)
    if query.before is not None:
        clauses.append("s.updated_at < ?")
        parameters.append(query.before)
    return " AND ".join(clauses), tuple(parameters)


def _like(text: str) -> str:
    """A LIKE pattern for `text` anywhere (its own % and _ taken literally)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _summary(row: sqlite3.Row, on_branch: set[int], spend: tuple[int, float, int]
             ) -> SessionSummary:
    columns = [key for key in row.keys() if not key.startswith("_")]  # noqa: SIM118
    session = Session(**{key: row[key] for key in columns})
    label = None
    if row["_label_id"] is not None:
        label = Label(row["_label_id"], session.id, row["_mistake_step_id"],
                      row["_leaf_step_id"], row["_label_at"], row["_annotator"],
                      bool(row["_assisted"]))
    number = row["_mistake_number"] if session.id in on_branch else None
    calls, cost, unpriced = spend
    return SessionSummary(session, row["_steps"] or 0, label, number, row["_answer"], calls,
                          cost, unpriced)


def _sane_tokens(tokens: Sequence[TokenLogprob] | None) -> Sequence[TokenLogprob] | None:
    """The last line of defence, as for usage (the model-call boundary refuses them first):
    tokens holding a log-probability no model could give are stored as none."""
    if tokens and all(sane_logprob(token.logprob) is not None for token in tokens):
        return tokens
    return None


def _logprobs_json(logprobs: Sequence[float] | None) -> str | None:
    if logprobs is None or not all(sane_logprob(value) is not None for value in logprobs):
        return None
    return json.dumps(list(logprobs), allow_nan=False)


def tokens_json(tokens: Sequence[TokenLogprob] | None) -> str | None:
    """[[text, log-probability], ...], or None."""
    if not tokens:
        return None
    return json.dumps([[token.text, token.logprob] for token in tokens], allow_nan=False)


def alternatives_json(tokens: Sequence[TokenLogprob] | None) -> str | None:
    """[[[text, log-probability], ...] for each token], or None when no token has any."""
    if not tokens or not any(token.alternatives for token in tokens):
        return None
    return json.dumps([[list(pair) for pair in token.alternatives] for token in tokens],
                      allow_nan=False)


def tokens_from_json(text: str | None, alternatives: str | None = None
                     ) -> tuple[TokenLogprob, ...] | None:
    if not text:
        return None
    pairs = json.loads(text)
    tops = json.loads(alternatives) if alternatives else None
    if not isinstance(tops, list) or len(tops) != len(pairs):
        tops = [[]] * len(pairs)
    return tuple(
        TokenLogprob(token, float(value), tuple((str(alt), float(lp)) for alt, lp in top))
        for (token, value), top in zip(pairs, tops, strict=True)
    )


def _label(row: sqlite3.Row) -> Label:
    return Label(row["id"], row["session_id"], row["mistake_step_id"], row["leaf_step_id"],
                 row["created_at"], row["annotator"], bool(row["assisted"]),
                 ratings_from_json(row["ratings"]), row["finish_reason"], row["note"])


def ratings_from_json(text: str | None) -> tuple[int, ...] | None:
    """A label's stored ratings; anything that is not a list of -1/0/+1 reads as none."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or any(
            isinstance(item, bool) or item not in (-1, 0, 1) for item in value):
        return None
    return tuple(value)


def _origin(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("format"), str) else None


def _work(row: sqlite3.Row) -> QueueWork:
    return QueueWork(row["session_id"], row["annotator"], row["judged"], row["status"],
                     row["flag_reason"], row["note"], row["time_spent_s"],
                     bool(row["assisted"]), row["updated_at"])


def _annotator_clause(session_id: int, annotator: str | None) -> tuple[str, tuple]:
    if annotator is None:
        return "session_id = ? AND undone = 0", (session_id,)
    return "session_id = ? AND undone = 0 AND annotator = ?", (session_id, annotator)


def _finder_verdict(row: sqlite3.Row) -> FinderVerdict:
    return FinderVerdict(
        id=row["id"],
        run_id=row["run_id"],
        step_number=row["step_number"],
        raw=row["raw"],
        verdict=row["verdict"],
        parsed=bool(row["parsed"]),
        created_at=row["created_at"],
        call=call_from_row(dict(row)) if row["call_id"] is not None else None,
    )


def _keep_task_definition(connection: sqlite3.Connection, task: str,
                          definition: TaskDefinition | None, now: float) -> str | None:
    """Inside a write: keep a task's definition by its digest (once), and give the digest."""
    if definition is None:
        return None
    connection.execute(
        """INSERT OR IGNORE INTO task_definitions (digest, name, definition, created_at)
           VALUES (?, ?, ?, ?)""", (definition.digest, task, definition.text, now))
    return definition.digest


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row the cursor's INSERT made (sqlite3 says None only when none was)."""
    row_id = cursor.lastrowid
    if row_id is None:
        raise StoreError("the session store made no row where one was inserted")
    return row_id


def _session(row: sqlite3.Row) -> Session:
    return Session(**dict(zip(row.keys(), tuple(row), strict=True)))


def _insert_call(
    connection: sqlite3.Connection,
    session_id: int,
    step_id: int | None,
    purpose: CallPurpose,
    call: CallRecord,
    now: float,
) -> int:
    cursor = connection.execute(
        """INSERT INTO calls (session_id, step_id, purpose, model, params, latency_s,
               prompt_tokens, completion_tokens, cost, logprobs, finish_reason, attempts,
               created_at, usage_estimated, cached_tokens, cache_write_tokens,
               prompt_estimated, one_call, deployment)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            session_id,
            step_id,
            purpose,
            call.model,
            json.dumps(call.params, sort_keys=True, allow_nan=False),
            call.latency_s,
            # The last line of defence (the model-call boundary bounds them already): 2**64
            # would stop the insert (OverflowError), 1e23 would poison every total.
            sane_tokens(call.prompt_tokens),
            sane_tokens(call.completion_tokens),
            sane_cost(call.cost),
            _logprobs_json(call.logprobs),
            call.finish_reason,
            call.attempts,
            now,
            int(call.usage_estimated),
            sane_tokens(call.cached_tokens),
            sane_tokens(call.cache_write_tokens),
            int(call.prompt_estimated),
            call.one_call,
            call.deployment,
        ),
    )
    return _inserted_id(cursor)


_HOST = socket.gethostname()


def _claim_live(host: str, pid: int, heartbeat_at: float, now: float) -> bool:
    """A claim still held: renewed within CLAIM_STALE_S, and, on this machine, its process
    still there (a killed holder frees the session at once)."""
    if now - heartbeat_at > CLAIM_STALE_S:
        return False
    if host != _HOST:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _retry_locked(action: Callable[[], T]) -> T:
    """busy_timeout covers most waits; this covers the rest ("database is locked" can still
    surface, e.g. when a checkpoint holds the lock longer than the timeout)."""
    delay = 0.05
    deadline = time.monotonic() + 60
    while True:
        try:
            return action()
        except sqlite3.OperationalError as error:
            message = str(error).lower()
            if "locked" not in message and "busy" not in message:
                raise
            if time.monotonic() > deadline:
                raise StoreError(f"the session store stayed locked for a minute: {error}") from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def call_from_row(row: dict[str, Any]) -> CallRecord:
    return CallRecord(
        model=row["model"],
        params=json.loads(row["params"]),
        latency_s=row["latency_s"],
        prompt_tokens=row["prompt_tokens"],
        completion_tokens=row["completion_tokens"],
        cost=row["cost"],
        logprobs=json.loads(row["logprobs"]) if row["logprobs"] else None,
        finish_reason=row["finish_reason"],
        attempts=row["attempts"],
        usage_estimated=bool(row.get("usage_estimated") or 0),
        cached_tokens=row.get("cached_tokens"),
        cache_write_tokens=row.get("cache_write_tokens"),
        prompt_estimated=bool(row.get("prompt_estimated") or 0),
    )
