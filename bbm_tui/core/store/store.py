"""The session store (docs/DESIGN.md §8): one SQLite file, WAL mode, schema versioned by
`PRAGMA user_version` with forward migrations (schema.py).

Here: opening the file (refusing a newer store or another program's database), migrating it,
checking its schema and its integrity, and the `Store` made of every area's queries:
sessions.py (sessions, their origins and claims), listing.py (the sessions list), steps.py
(steps, branches and the candidates of a backtrack), labels.py (labels and annotation work),
finders.py (finder runs), calls.py (calls and totals) and model_branches.py (several models
side by side), all on base.py's connection and transactions.

A trace is a tree of steps (`parent_id`); the branch on show is the path from the root to the
session's `head_step_id`. Every finished step, label and call is committed in its own
transaction as it happens, so a crash loses at most the step being streamed. Writes take the
lock up front (`BEGIN IMMEDIATE`) and wait for another process's writes instead of failing,
so the app and a headless run can share one store.

API keys are never written here: nothing that reaches this module carries one, and an api
base is stored redacted (core/redact.py) whoever hands it over.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bbm_tui.core.store.base import BUSY_TIMEOUT_MS, retry_locked
from bbm_tui.core.store.calls import CallQueries
from bbm_tui.core.store.errors import StoreError
from bbm_tui.core.store.files import (
    HOME_ENV,
    check_is_sqlite,
    chmod_owner_only,
    create_store_file,
    default_path,
    known_failure,
    newer_message,
)
from bbm_tui.core.store.finders import FinderQueries
from bbm_tui.core.store.labels import LabelQueries
from bbm_tui.core.store.listing import SessionListing
from bbm_tui.core.store.model_branches import ModelBranchQueries
from bbm_tui.core.store.reasonings import ReasoningQueries
from bbm_tui.core.store.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    expected_columns,
    run_migration,
)
from bbm_tui.core.store.sessions import SessionQueries
from bbm_tui.core.store.steps import StepQueries


class Store(SessionQueries, SessionListing, StepQueries, LabelQueries, FinderQueries,
            CallQueries, ModelBranchQueries, ReasoningQueries):
    """One connection, shared by the threads of one process under a lock."""

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
        (mode,) = retry_locked(
            lambda: connection.execute("PRAGMA journal_mode = WAL").fetchone()
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
            found = {name for _number, name, *_ in self._connection.execute(
                f"PRAGMA table_info({table})").fetchall()}
            missing = sorted(columns - found)
            if missing:
                what = (f"table {table!r} has no column {', '.join(repr(c) for c in missing)}"
                        if found else f"table {table!r} is missing")
                raise StoreError(
                    f"{self.path}: the store's {what} (was it edited by another program?); it "
                    f"was left untouched: restore a backup, or set {HOME_ENV} to a new folder")

    def _migrate(self) -> None:
        (version,) = self._connection.execute("PRAGMA user_version").fetchone()
        for target in range(version + 1, SCHEMA_VERSION + 1):
            with self._write() as connection:
                # Another process opening the store at the same time may have got here first.
                (now,) = connection.execute("PRAGMA user_version").fetchone()
                if now >= target:
                    continue
                run_migration(connection, MIGRATIONS[target - 1])
                connection.execute(f"PRAGMA user_version = {target}")

    def integrity_check(self) -> str:
        (result,) = self._read_tuples("PRAGMA integrity_check")[0]
        return result
