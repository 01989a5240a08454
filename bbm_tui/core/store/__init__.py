"""The session store (DESIGN §8): one SQLite file, WAL mode, schema versioned by
`PRAGMA user_version` with forward migrations.

A trace is a tree of steps (`parent_id`); the branch on show is the path from the root to the
session's `head_step_id`. Every finished step, label and call is committed in its own
transaction as it happens, so a crash loses at most the step being streamed. Writes take the
lock up front (`BEGIN IMMEDIATE`) and wait for another process's writes instead of failing,
so the app and a headless run can share one store.

API keys are never written here: nothing that reaches this module carries one.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bbm_tui.core.types import CallRecord

HOME_ENV = "BBM_TUI_HOME"
DATABASE_NAME = "bbm-tui.sqlite3"
SQLITE_HEADER = b"SQLite format 3\x00"
BUSY_TIMEOUT_MS = 10_000

T = TypeVar("T")


class StoreError(Exception):
    """The store cannot be used; the message names the file."""


class SessionDeleted(StoreError):
    """The session is not in the store (another process deleted it, or it never was)."""

    def __init__(self, message: str, session_id: int) -> None:
        super().__init__(message)
        self.session_id = session_id


def system_error(path: Path, error: sqlite3.Error) -> StoreError:
    """One message for what SQLite reports when the machine, not the store, is at fault, and
    for a store whose schema was changed by hand; each says what to do."""
    return _known_failure(path, error) or StoreError(
        f"{path}: the session store failed: {error}")


def _known_failure(path: Path, error: BaseException) -> StoreError | None:
    text = str(error).lower()
    if "disk is full" in text or ("i/o error" in text and _disk_is_full(path)):
        return StoreError(f"{path}: the disk is full, so nothing of this change was saved (the "
                          "store itself is fine); free some space and try again")
    if "readonly" in text or "read-only" in text:
        return StoreError(f"{path}: the store cannot be written (the file or its folder is "
                          f"read-only); make it writable, or set {HOME_ENV} to a folder that is")
    if "unable to open database file" in text:
        return StoreError(f"{path}: cannot open the store (its folder is missing or cannot be "
                          f"written); create the folder, or set {HOME_ENV} to one that works")
    if "disk i/o error" in text:
        return StoreError(f"{path}: the disk reported an I/O error; check the disk and try "
                          "again (the store was left as it was)")
    if "no such column" in text or "no such table" in text or "has no column" in text:
        return StoreError(f"{path}: the store's tables are not what this bbm-tui wrote "
                          f"({error}); it was left untouched: restore a backup, or set "
                          f"{HOME_ENV} to a new folder")
    return None


def home_dir() -> Path:
    """Where bbm-tui keeps its data: $BBM_TUI_HOME, else the platform's user data folder."""
    override = os.environ.get(HOME_ENV)
    if override:
        return Path(override).expanduser()
    from platformdirs import user_data_path

    return user_data_path("bbm-tui", appauthor=False)


def default_path() -> Path:
    return home_dir() / DATABASE_NAME


# ---------------------------------------------------------------------------- schema

MIGRATIONS: list[str] = [
    # 1: sessions, the step tree, model calls, the person's labels.
    """
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        task TEXT NOT NULL,
        input TEXT NOT NULL,
        target TEXT,
        dataset_index INTEGER,
        gold_mistake_index INTEGER,
        model TEXT NOT NULL,
        api_base TEXT,
        mode TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT 'app',
        head_step_id INTEGER REFERENCES steps(id) ON DELETE SET NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX sessions_by_question ON sessions(task, input, model, source);
    CREATE TABLE steps (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        text TEXT NOT NULL,
        origin TEXT NOT NULL,
        answer TEXT,
        truncated INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX steps_by_session ON steps(session_id, parent_id);
    CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        purpose TEXT NOT NULL,
        model TEXT NOT NULL,
        params TEXT NOT NULL,
        latency_s REAL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cost REAL,
        logprobs TEXT,
        finish_reason TEXT,
        attempts INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    );
    CREATE INDEX calls_by_session ON calls(session_id);
    CREATE INDEX calls_by_step ON calls(step_id);
    CREATE TABLE labels (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        leaf_step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        mistake_step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        undone INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX labels_by_session ON labels(session_id);
    """,
    # 2: mistake-finder runs and their verdicts, each raw answer verbatim. A verdict's call
    # stats live in `calls` (purpose 'find'), so the session's totals include them.
    """
    CREATE TABLE finder_runs (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        leaf_step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        method TEXT NOT NULL,
        model TEXT NOT NULL,
        params TEXT NOT NULL,
        mistake_number INTEGER,
        parsed INTEGER,
        finished_at REAL,
        created_at REAL NOT NULL
    );
    CREATE INDEX finder_runs_by_session ON finder_runs(session_id);
    CREATE TABLE finder_verdicts (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES finder_runs(id) ON DELETE CASCADE,
        step_number INTEGER,
        raw TEXT NOT NULL,
        verdict TEXT,
        parsed INTEGER NOT NULL,
        call_id INTEGER REFERENCES calls(id) ON DELETE SET NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX finder_verdicts_by_run ON finder_verdicts(run_id);
    """,
    # 3: how a finder run without a result ended: 'failed' (with the error's message) or
    # 'stopped' by the person. NULL with no result: the process died mid-run.
    """
    ALTER TABLE finder_runs ADD COLUMN ended TEXT;
    ALTER TABLE finder_runs ADD COLUMN error TEXT;
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


@functools.cache
def expected_columns() -> dict[str, frozenset[str]]:
    """Each table's columns at SCHEMA_VERSION, read off the migrations run in memory."""
    connection = sqlite3.connect(":memory:")
    try:
        for script in MIGRATIONS:
            for statement in _statements(script):
                connection.execute(statement)
        tables = [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {table: frozenset(row[1] for row in connection.execute(
            f"PRAGMA table_info({table})")) for table in tables}
    finally:
        connection.close()


# ---------------------------------------------------------------------------- records

@dataclass(frozen=True)
class Session:
    id: int
    name: str
    task: str
    input: str
    target: str | None
    dataset_index: int | None
    gold_mistake_index: int | None
    model: str
    api_base: str | None
    mode: str
    source: str
    head_step_id: int | None
    created_at: float
    updated_at: float


@dataclass(frozen=True)
class Step:
    id: int
    session_id: int
    parent_id: int | None
    number: int
    text: str
    origin: str
    answer: str | None
    truncated: bool
    created_at: float
    latency_s: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    # The sum of the step's token log-probabilities, when they were asked for and sent.
    logprob: float | None = None


@dataclass(frozen=True)
class Label:
    """The person's verdict on a trace: the first mistaken step, or (None) no mistake."""

    id: int
    session_id: int
    mistake_step_id: int | None
    leaf_step_id: int | None
    created_at: float


@dataclass(frozen=True)
class SessionSummary:
    session: Session
    steps: int
    label: Label | None
    mistake_number: int | None
    answer: str | None


@dataclass(frozen=True)
class FinderVerdict:
    """One answer of a finder: about Thought `step_number` (step-level) or the whole trace
    (None). `verdict` is the parsed answer in the paper's format ("Yes"/"No" for a thought,
    "No"/"N" for a trace), None when unparseable; `raw` is the answer verbatim."""

    id: int
    run_id: int
    step_number: int | None
    raw: str
    verdict: str | None
    parsed: bool
    created_at: float
    call: CallRecord | None = None


@dataclass(frozen=True)
class FinderRun:
    """A finder run on a session's trace. `mistake_number` (1-based; None = no mistake) and
    `parsed` are set when it finished (`finished_at`); a run cut short has neither, and
    `ended` says how: "failed" (`error` says why), "stopped", or None if its process died."""

    id: int
    session_id: int
    leaf_step_id: int | None
    method: str
    model: str
    params: dict[str, Any]
    mistake_number: int | None
    parsed: bool | None
    finished_at: float | None
    created_at: float
    verdicts: tuple[FinderVerdict, ...] = ()
    ended: str | None = None
    error: str | None = None

    @property
    def finished(self) -> bool:
        return self.finished_at is not None


@dataclass(frozen=True)
class Totals:
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float


# ---------------------------------------------------------------------------- the store

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
        _check_is_sqlite(path)
        creating = not path.exists()
        if creating:
            _create_store_file(path)
        try:
            connection = sqlite3.connect(
                path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None,
                check_same_thread=False,
            )
        except sqlite3.Error as error:
            raise _known_failure(path, error) or StoreError(
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
            raise _known_failure(path, error) or StoreError(
                f"{path}: not a usable bbm-tui session store: {error}") from None
        except StoreError:
            connection.close()
            raise
        for suffix in ("-wal", "-shm"):
            sidecar = Path(f"{path}{suffix}")
            if sidecar.exists():
                _chmod_owner_only(sidecar)
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
            raise StoreError(_newer_message(self.path, version))
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
                raise StoreError(
                    f"{self.path}: the store's table {table!r} has no column "
                    f"{', '.join(repr(c) for c in missing)} (was it edited by another "
                    f"program?); it was left untouched: restore a backup, or set {HOME_ENV} "
                    "to a new folder")

    def _migrate(self) -> None:
        version = self._connection.execute("PRAGMA user_version").fetchone()[0]
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self._write() as connection:
                # Another process opening the store at the same time may have got here first.
                if connection.execute("PRAGMA user_version").fetchone()[0] >= target:
                    continue
                for statement in _statements(MIGRATIONS[target - 1]):
                    connection.execute(statement)
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
        source: str = "app",
    ) -> Session:
        now = time.time()
        if name is None:
            name = default_session_name(task, dataset_index, input)
        with self._write() as connection:
            cursor = connection.execute(
                """INSERT INTO sessions (name, task, input, target, dataset_index,
                       gold_mistake_index, model, api_base, mode, source, created_at, updated_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (name, task, input, target, dataset_index, gold_mistake_index, model, api_base,
                 mode, source, now, now),
            )
            session_id = cursor.lastrowid
        return self.session(session_id)

    def session(self, session_id: int) -> Session:
        rows = self._read("SELECT * FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            raise SessionDeleted(f"{self.path}: there is no session {session_id}", session_id)
        return _session(rows[0])

    def sessions(self) -> list[SessionSummary]:
        """Every session, the most recently changed first."""
        rows = self._read("SELECT * FROM sessions ORDER BY updated_at DESC, id DESC")
        return [self._summary(_session(row)) for row in rows]

    def _summary(self, session: Session) -> SessionSummary:
        branch = self.branch(session.id)
        label = self.current_label(session.id)
        number = None
        if label is not None and label.mistake_step_id is not None:
            number = next(
                (step.number for step in branch if step.id == label.mistake_step_id), None
            )
        answer = next((step.answer for step in reversed(branch) if step.answer), None)
        return SessionSummary(session, len(branch), label, number, answer)

    def find_session(self, *, task: str, input: str, model: str, source: str) -> Session | None:
        rows = self._read(
            """SELECT * FROM sessions WHERE task = ? AND input = ? AND model = ? AND source = ?
               ORDER BY id LIMIT 1""",
            (task, input, model, source),
        )
        return _session(rows[0]) if rows else None

    def update_session_model(
        self, session_id: int, *, model: str, api_base: str | None, mode: str
    ) -> Session:
        """Record the model settings a session is now generated with (the api base as given:
        callers store it redacted, see TraceSession)."""
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET model = ?, api_base = ?, mode = ?, updated_at = ? "
                "WHERE id = ?",
                (model, api_base, mode, time.time(), session_id),
            )
        return self.session(session_id)

    def rename_session(self, session_id: int, name: str) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET name = ?, updated_at = ? WHERE id = ?",
                (name, time.time(), session_id),
            )

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
    ) -> Step:
        """Append a finished step below `parent_id`, make it the head, and commit."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            cursor = connection.execute(
                """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
                       truncated, created_at)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?)""",
                (session_id, parent_id, number, text, origin, answer, int(truncated), now),
            )
            step_id = cursor.lastrowid
            if call is not None:
                _insert_call(connection, session_id, step_id, "step", call, now)
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (step_id, now, session_id),
            )
        return self.step(step_id)

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
                parent = cursor.lastrowid
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (parent, now, session_id),
            )
        return self.branch(session_id)

    def record_call(
        self, session_id: int, purpose: str, call: CallRecord, step_id: int | None = None
    ) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            _insert_call(connection, session_id, step_id, purpose, call, time.time())

    def step(self, step_id: int) -> Step:
        rows = self._read(_STEP_SELECT + " WHERE s.id = ?", (step_id,))
        if not rows:
            raise StoreError(f"{self.path}: there is no step {step_id}")
        return _step(rows[0])

    def branch(self, session_id: int, leaf_id: int | None = None) -> list[Step]:
        """The steps from the root to `leaf_id` (default: the session's head), in order."""
        if leaf_id is None:
            leaf_id = self.session(session_id).head_step_id
        if leaf_id is None:
            return []
        rows = self._read(
            _STEP_SELECT + " WHERE s.session_id = ?", (session_id,)
        )
        by_id = {row["id"]: row for row in rows}
        path: list[Step] = []
        current: int | None = leaf_id
        while current is not None and current in by_id:
            row = by_id[current]
            path.append(_step(row))
            current = row["parent_id"]
        path.reverse()
        return path

    def set_head(self, session_id: int, step_id: int | None) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (step_id, time.time(), session_id),
            )

    # -- labels

    def set_label(
        self, session_id: int, mistake_step_id: int | None, leaf_step_id: int | None
    ) -> Label:
        """Record the person's verdict: first mistake at `mistake_step_id`, or no mistake."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            cursor = connection.execute(
                """INSERT INTO labels (session_id, leaf_step_id, mistake_step_id, created_at)
                   VALUES (?, ?, ?, ?)""",
                (session_id, leaf_step_id, mistake_step_id, now),
            )
            connection.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
            )
            label_id = cursor.lastrowid
        return Label(label_id, session_id, mistake_step_id, leaf_step_id, now)

    def undo_label(self, session_id: int) -> Label | None:
        """Withdraw the latest verdict; return the one now in force (or None)."""
        with self._write() as connection:
            self._require_session(connection, session_id)
            row = connection.execute(
                "SELECT id FROM labels WHERE session_id = ? AND undone = 0 "
                "ORDER BY id DESC LIMIT 1",
                (session_id,),
            ).fetchone()
            if row is not None:
                connection.execute("UPDATE labels SET undone = 1 WHERE id = ?", (row[0],))
                connection.execute(
                    "UPDATE sessions SET updated_at = ? WHERE id = ?", (time.time(), session_id)
                )
        return self.current_label(session_id)

    def current_label(self, session_id: int) -> Label | None:
        rows = self._read(
            "SELECT * FROM labels WHERE session_id = ? AND undone = 0 ORDER BY id DESC LIMIT 1",
            (session_id,),
        )
        if not rows:
            return None
        row = rows[0]
        return Label(row["id"], row["session_id"], row["mistake_step_id"], row["leaf_step_id"],
                     row["created_at"])

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
                (session_id, leaf_step_id, method, model, json.dumps(params, sort_keys=True),
                 time.time()),
            )
            return cursor.lastrowid

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
                call_id = _insert_call(connection, session_id, None, "find", call, now)
            cursor = connection.execute(
                """INSERT INTO finder_verdicts (run_id, step_number, raw, verdict, parsed,
                       call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (run_id, step_number, raw, verdict, int(verdict is not None), call_id, now),
            )
            connection.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
            )
            return cursor.lastrowid

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
                      c.completion_tokens, c.cost, c.logprobs, c.finish_reason, c.attempts
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
        rows = self._read(
            """SELECT COUNT(*) AS calls, COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,
                      COALESCE(SUM(completion_tokens), 0) AS completion_tokens,
                      COALESCE(SUM(cost), 0) AS cost
               FROM calls WHERE session_id = ?""",
            (session_id,),
        )
        row = rows[0]
        return Totals(row["calls"], row["prompt_tokens"], row["completion_tokens"], row["cost"])

    def integrity_check(self) -> str:
        return self._read("PRAGMA integrity_check")[0][0]


# ---------------------------------------------------------------------------- helpers

_STEP_SELECT = """
    SELECT s.*, c.latency_s, c.prompt_tokens, c.completion_tokens, c.cost, c.logprobs
    FROM steps AS s
    LEFT JOIN calls AS c ON c.id = (
        SELECT id FROM calls WHERE step_id = s.id AND purpose = 'step' ORDER BY id DESC LIMIT 1
    )
"""


def _step(row: sqlite3.Row) -> Step:
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
        logprob=sum(json.loads(row["logprobs"])) if row["logprobs"] else None,
    )


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


def _session(row: sqlite3.Row) -> Session:
    return Session(**dict(zip(row.keys(), tuple(row), strict=True)))


def _insert_call(
    connection: sqlite3.Connection,
    session_id: int,
    step_id: int | None,
    purpose: str,
    call: CallRecord,
    now: float,
) -> int:
    cursor = connection.execute(
        """INSERT INTO calls (session_id, step_id, purpose, model, params, latency_s,
               prompt_tokens, completion_tokens, cost, logprobs, finish_reason, attempts,
               created_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            session_id,
            step_id,
            purpose,
            call.model,
            json.dumps(call.params, sort_keys=True),
            call.latency_s,
            call.prompt_tokens,
            call.completion_tokens,
            call.cost,
            json.dumps(call.logprobs) if call.logprobs is not None else None,
            call.finish_reason,
            call.attempts,
            now,
        ),
    )
    return cursor.lastrowid


def _statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]


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


def _check_is_sqlite(path: Path) -> None:
    if not path.exists():
        return
    if path.is_dir():
        raise StoreError(f"{path}: is a folder, not a session store")
    try:
        with path.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError as error:
        raise StoreError(f"{path}: cannot read the session store: {error.strerror}") from None
    if header and header != SQLITE_HEADER:
        raise StoreError(
            f"{path}: is not a SQLite file, so not a bbm-tui session store; "
            "the file was left untouched"
        )


def _newer_message(path: Path, version: int) -> str:
    return (
        f"{path}: this store was written by a newer bbm-tui (schema version {version}; this "
        f"version knows up to {SCHEMA_VERSION}). Upgrade bbm-tui, or point {HOME_ENV} "
        "somewhere else; the file was left untouched."
    )


def preflight(path: Path | str | None = None) -> None:
    """The checks that need no connection, no lock and no write, for the app to make before it
    starts (the store itself opens in a thread once the app is up): a folder, a file that is
    not SQLite, a store from a newer bbm-tui. Raises StoreError; a missing store is fine."""
    path = Path(path) if path is not None else default_path()
    _check_is_sqlite(path)
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except FileNotFoundError:
        return
    except OSError as error:
        raise StoreError(f"{path}: cannot read the session store: {error.strerror}") from None
    # The header's copy of PRAGMA user_version (big-endian, at offset 60). In WAL mode it may
    # lag behind the database, never run ahead of it.
    if len(header) == 100 and int.from_bytes(header[60:64], "big") > SCHEMA_VERSION:
        raise StoreError(_newer_message(path, int.from_bytes(header[60:64], "big")))


def _disk_is_full(path: Path) -> bool:
    """SQLite reports a disk that filled while it wrote the WAL as an I/O error."""
    try:
        return shutil.disk_usage(path.parent).free < 1 << 20
    except OSError:
        return False


def _create_store_file(path: Path) -> None:
    """The data folder (0700) and an empty store file only its owner can read: sessions may
    hold private text. A folder that cannot be made gets one message saying what to do."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with suppress(FileExistsError):  # another process created it just now
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except OSError as error:
        where = error.filename or path.parent
        raise StoreError(
            f"{path}: cannot create the session store ({where}: {error.strerror}); create the "
            f"folder or make it writable, or set {HOME_ENV} to a folder that works"
        ) from None


def _chmod_owner_only(path: Path) -> None:
    with suppress(OSError):
        os.chmod(path, 0o600)


def default_session_name(task: str, dataset_index: int | None, input_text: str) -> str:
    if dataset_index is not None:
        return f"{task} #{dataset_index}"
    first_line = " ".join(input_text.split())[:40]
    return f"{task}: {first_line}"


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
    )
