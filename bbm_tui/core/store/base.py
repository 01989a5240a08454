"""What every area of the store's queries stands on: the one connection, shared by the
threads of one process under a lock; writes in transactions that take the lock up front
(`BEGIN IMMEDIATE`) and wait out another process's (or, asked to, refuse to wait:
`first_write_without_waiting`); reads; and the errors SQLite's own become (store.py opens
the connection, migrates it and composes the areas)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TypeVar

from bbm_tui.core.store.errors import SessionDeleted, StoreError
from bbm_tui.core.store.files import system_error

T = TypeVar("T")

# How long a write waits for another connection's write lock (SQLite's busy handler).
BUSY_TIMEOUT_MS = 10_000


class WriteLockBusy(BaseException):
    """Raised by the first write within `first_write_without_waiting()` when another
    connection (another process) holds the store's write lock: that write began nothing.
    A BaseException, so that a work's own `except Exception` cannot swallow it on its way
    to whoever tries the work again."""


# Per thread: whether this thread's next write is to refuse to wait (armed by
# first_write_without_waiting, disarmed by that write).
_fail_fast = threading.local()


@contextmanager
def first_write_without_waiting() -> Iterator[None]:
    """Within the block, on this thread: the first write to open a transaction tries the
    store's write lock once and raises WriteLockBusy if another connection holds it, rather
    than wait in SQLite's busy handler (which would hold an event loop's thread, and every
    task on it, for as long). The writes after it wait as every write does: a work that has
    committed something must not be begun again."""
    _fail_fast.armed = True
    try:
        yield
    finally:
        _fail_fast.armed = False


class StoreBase:
    """The connection and its transactions; each area of queries (sessions, steps, labels,
    finder runs, calls) is a subclass, and `Store` all of them."""

    def __init__(self, path: Path, connection: sqlite3.Connection) -> None:
        self.path = path
        self._connection = connection
        self._lock = threading.RLock()
        # Inside `transaction()` (on the thread holding the lock): writes join its one.
        self._joined = 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The store's writes in the block as one transaction: all kept or none, and one
        commit (one turn at the file's write lock, which other processes on the store queue
        for) rather than one each. Nothing may await inside it: on an event loop's thread,
        another task's writes would join it (the lock is per thread)."""
        with self._write():
            self._joined += 1
            try:
                yield
            finally:
                self._joined -= 1

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed at the end of the block, rolled back on any error
        (within `transaction()`, part of its: an error rolls all of it back)."""
        with self._lock:
            connection = self._connection
            if self._joined:
                yield connection
                return
            if getattr(_fail_fast, "armed", False):
                _fail_fast.armed = False
                _begin_without_waiting(connection)
            else:
                retry_locked(lambda: connection.execute("BEGIN IMMEDIATE"))
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
                    retry_locked(lambda: connection.execute("COMMIT"))
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

    def _read_tuples(self, sql: str, parameters: tuple | dict = ()) -> list[tuple]:
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


def inserted_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row the cursor's INSERT made (sqlite3 says None only when none was)."""
    row_id = cursor.lastrowid
    if row_id is None:
        raise StoreError("the session store made no row where one was inserted")
    return row_id


def _begin_without_waiting(connection: sqlite3.Connection) -> None:
    """`BEGIN IMMEDIATE`, or WriteLockBusy at once (nothing begun) if another connection
    holds the write lock."""
    connection.execute("PRAGMA busy_timeout = 0")
    try:
        connection.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as error:
        if not _is_busy(error):
            raise
        raise WriteLockBusy from None
    finally:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")


def _is_busy(error: sqlite3.OperationalError) -> bool:
    message = str(error).lower()
    return "locked" in message or "busy" in message


def retry_locked(action: Callable[[], T]) -> T:
    """busy_timeout covers most waits; this covers the rest ("database is locked" can still
    surface, e.g. when a checkpoint holds the lock longer than the timeout)."""
    delay = 0.05
    deadline = time.monotonic() + 60
    while True:
        try:
            return action()
        except sqlite3.OperationalError as error:
            if not _is_busy(error):
                raise
            if time.monotonic() > deadline:
                raise StoreError(f"the session store stayed locked for a minute: {error}") from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
