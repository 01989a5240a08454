"""Sessions: one question of one task with its model, made, found, renamed, deleted; the
definition of a task of one's own a session was made with; where a session's trace came from
(its row's format and other fields); and who is generating a session (its claim)."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bbm_tui.core.records import SessionSource
from bbm_tui.core.redact import redact_url
from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.errors import SessionBusy, SessionDeleted
from bbm_tui.core.store.records import Session, TaskDefinition, default_session_name

# A session's claim (claim_session): renewed every CLAIM_HEARTBEAT_S by whoever generates it,
# and held by nobody once it is CLAIM_STALE_S old (a holder on another machine that died),
# or at once when its holder's pid is gone on this machine.
CLAIM_HEARTBEAT_S = 3.0
CLAIM_STALE_S = 20.0

# The tables whose rows make a session worth keeping (see delete_session_if_empty).
_SESSION_HISTORY = ("steps", "calls", "labels", "finder_runs", "candidates", "queue_items",
                    "annotation_work")

_HOST = socket.gethostname()


class SessionQueries(StoreBase):
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
        run_key: str | None = None,
    ) -> Session:
        """A new session. A task of one's own comes with its definition (digest and text),
        kept by its digest in the same transaction."""
        now = time.time()
        if name is None:
            name = default_session_name(task, dataset_index, input)
        with self._write() as connection:
            digest = keep_task_definition(connection, task, task_definition, now)
            cursor = connection.execute(
                """INSERT INTO sessions (name, task, input, target, dataset_index,
                       gold_mistake_index, model, api_base, mode, source, created_at, updated_at,
                       task_digest, run_key)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (name, task, input, target, dataset_index, gold_mistake_index, model,
                 redact_url(api_base), mode, source, now, now, digest, run_key),
            )
            session_id = inserted_id(cursor)
        return self.session(session_id)

    def task_definition(self, digest: str) -> str | None:
        """The stored definition of a task of one's own (JSON text), by its digest."""
        rows = self._read("SELECT definition FROM task_definitions WHERE digest = ?",
                          (digest,))
        return rows[0]["definition"] if rows else None

    def session(self, session_id: int) -> Session:
        rows = self._read("SELECT * FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            raise SessionDeleted(f"{self.path}: there is no session {session_id}", session_id)
        return session_from_row(rows[0])

    def find_session(self, *, task: str, input: str, model: str, source: SessionSource,
                     task_digest: str | None = None, run_key: str | None = None,
                     any_run: bool = True) -> Session | None:
        """The first session of one question by one model made by `source`, made with the
        task definition `task_digest` (None: one of the paper's five): one made for the run
        `run_key` first, else any other; without `any_run`, only one made for `run_key`."""
        rows = self._read(
            """SELECT * FROM sessions WHERE task = ? AND input = ? AND model = ? AND source = ?
                   AND task_digest IS ? AND (run_key IS ? OR ?)
                   ORDER BY run_key IS NOT ?, id LIMIT 1""",
            (task, input, model, source, task_digest, run_key, any_run, run_key),
        )
        return session_from_row(rows[0]) if rows else None

    def sessions_of_question(self, *, task: str, input: str, model: str) -> list[Session]:
        """Every session of one question by one model, whatever made it, oldest first."""
        rows = self._read(
            "SELECT * FROM sessions WHERE task = ? AND input = ? AND model = ? ORDER BY id",
            (task, input, model),
        )
        return [session_from_row(row) for row in rows]

    def hand_run_sessions_over(self, run_key: str, to_run_key: str) -> int:
        """The sessions made for the run `run_key` are the run `to_run_key`'s from now on (an
        OUT moved aside by `run --new-out` takes its sessions with it); how many."""
        with self._write() as connection:
            return connection.execute("UPDATE sessions SET run_key = ? WHERE run_key = ?",
                                      (to_run_key, run_key)).rowcount

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

    def delete_session_if_empty(self, session_id: int, *, recorded: bool = False) -> bool:
        """Delete a session nothing was ever done in (no step, call, label, finder run or
        annotation): one a person opened and left without generating, or a batch's refused
        before any call. `recorded`: what a batch loaded from a recorded row (its steps and
        its gold label) does not count: nothing was generated. True if deleted."""
        with self._write() as connection:
            for table in _SESSION_HISTORY:
                if recorded and table == "labels":
                    continue
                only = " AND origin != 'dataset'" if table == "steps" and recorded else ""
                if connection.execute(f"SELECT 1 FROM {table} WHERE session_id = ?{only} "
                                      "LIMIT 1", (session_id,)).fetchone():
                    return False
            if recorded:
                connection.execute("UPDATE sessions SET head_step_id = NULL WHERE id = ?",
                                   (session_id,))
                connection.execute("DELETE FROM labels WHERE session_id = ?", (session_id,))
                connection.execute("DELETE FROM steps WHERE session_id = ?", (session_id,))
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
        return origin_from_json(rows[0]["origin"]) if rows else None

    def origins(self) -> dict[int, dict[str, Any]]:
        """Every session's origin, by session (one query, for an export of them all)."""
        found = {}
        for row in self._read("SELECT session_id, origin FROM session_origins"):
            origin = origin_from_json(row["origin"])
            if origin is not None:
                found[row["session_id"]] = origin
        return found

    # -- who is generating a session (store v13)

    def claim_session(self, session_id: int, owner: str) -> None:
        """Take (or, for its holder, renew) the claim to generate the session. Raises
        SessionBusy while another owner holds a live claim: its process is alive (on this
        machine) and its heartbeat is under CLAIM_STALE_S old."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            cursor = connection.execute(f"{_CLAIM_SELECT} WHERE session_id = ?", (session_id,))
            cursor.row_factory = sqlite3.Row
            row = cursor.fetchone()
            held = None if row is None else claim_from_row(row)
            if held is not None and held.owner != owner and held.live(now):
                raise held.busy(session_id)
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
        rows = self._read(f"{_CLAIM_SELECT} WHERE session_id = ?", (session_id,))
        if not rows:
            return None
        held = claim_from_row(rows[0])
        if held.owner == owner or not held.live(time.time()):
            return None
        return held.busy(session_id)


@dataclass(frozen=True)
class Claim:
    """A row of session_claims: who generates the session, where, and when it last said so."""

    owner: str
    host: str
    pid: int
    heartbeat_at: float

    def live(self, now: float) -> bool:
        """Still held: renewed within CLAIM_STALE_S, and, on this machine, its process still
        there (a killed holder frees the session at once)."""
        if now - self.heartbeat_at > CLAIM_STALE_S:
            return False
        if self.host != _HOST:
            return True
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:  # another user's process: alive
            return True
        return True

    def busy(self, session_id: int) -> SessionBusy:
        """The error a claim on the session meets while this one holds it."""
        return SessionBusy(session_id, self.pid, self.host, self.host == _HOST)


_CLAIM_SELECT = "SELECT owner, host, pid, heartbeat_at FROM session_claims"


def claim_from_row(row: sqlite3.Row) -> Claim:
    return Claim(row["owner"], row["host"], row["pid"], row["heartbeat_at"])


def session_from_row(row: sqlite3.Row) -> Session:
    """A sessions row (`SELECT *`); columns a query adds beside it are named with a leading
    underscore and left out."""
    return Session(**{key: row[key] for key in row.keys()  # noqa: SIM118
                      if not key.startswith("_")})


def keep_task_definition(connection: sqlite3.Connection, task: str,
                         definition: TaskDefinition | None, now: float) -> str | None:
    """Inside a write: keep a task's definition by its digest (once), and give the digest."""
    if definition is None:
        return None
    connection.execute(
        """INSERT OR IGNORE INTO task_definitions (digest, name, definition, created_at)
           VALUES (?, ?, ?, ?)""", (definition.digest, task, definition.text, now))
    return definition.digest


def origin_from_json(text: str) -> dict[str, Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) and isinstance(value.get("format"), str) else None
