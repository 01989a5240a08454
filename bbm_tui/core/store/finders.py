"""Finder runs: a mistake-finding method run over a session's trace, each answer committed as
it arrives with the call that gave it, then its result (or how it ended without one)."""

from __future__ import annotations

import json
import sqlite3
import time
from typing import Any

from bbm_tui.core.records import CallPurpose, CallRecord
from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.calls import call_from_row, insert_call
from bbm_tui.core.store.errors import SessionDeleted, StoreError
from bbm_tui.core.store.records import FinderRun, FinderVerdict

# A run's verdicts, each beside the columns of the call that gave it (if any).
_VERDICTS_SELECT = """
    SELECT v.*, c.model, c.params, c.latency_s, c.prompt_tokens, c.completion_tokens, c.cost,
           c.logprobs, c.finish_reason, c.attempts, c.usage_estimated, c.cached_tokens,
           c.cache_write_tokens, c.prompt_estimated
    FROM finder_verdicts AS v LEFT JOIN calls AS c ON c.id = v.call_id
    WHERE v.run_id = ? ORDER BY v.id
"""


class FinderQueries(StoreBase):
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
            return inserted_id(cursor)

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
            (session_id,) = found
            call_id = None
            if call is not None:
                call_id = insert_call(connection, session_id, None, CallPurpose.FIND, call, now)
            cursor = connection.execute(
                """INSERT INTO finder_verdicts (run_id, step_number, raw, verdict, parsed,
                       call_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (run_id, step_number, raw, verdict, int(verdict is not None), call_id, now),
            )
            connection.execute(
                "UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id)
            )
            return inserted_id(cursor)

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

    def drop_unanswered_finder_run(self, run_id: int) -> bool:
        """Delete a run that got no answer at all (refused before any: no key, a model that
        does not know the trace): nothing ran, so nothing is kept. True if it was deleted."""
        with self._write() as connection:
            cursor = connection.execute(
                """DELETE FROM finder_runs WHERE id = ? AND finished_at IS NULL AND NOT EXISTS
                   (SELECT 1 FROM finder_verdicts WHERE run_id = ?)""", (run_id, run_id))
            return cursor.rowcount > 0

    def finder_run(self, run_id: int) -> FinderRun:
        rows = self._read("SELECT * FROM finder_runs WHERE id = ?", (run_id,))
        if not rows:
            raise StoreError(f"{self.path}: there is no finder run {run_id}")
        return self._with_verdicts(rows[0])

    def finder_runs(self, session_id: int) -> list[FinderRun]:
        """The session's finder runs, oldest first, each with its verdicts."""
        rows = self._read(
            "SELECT * FROM finder_runs WHERE session_id = ? ORDER BY id", (session_id,)
        )
        return [self._with_verdicts(row) for row in rows]

    def _with_verdicts(self, row: sqlite3.Row) -> FinderRun:
        verdicts = self._read(_VERDICTS_SELECT, (row["id"],))
        return finder_run_from_row(row, tuple(verdict_from_row(v) for v in verdicts))


def finder_run_from_row(row: sqlite3.Row, verdicts: tuple[FinderVerdict, ...]) -> FinderRun:
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
        verdicts=verdicts,
        ended=row["ended"],
        error=row["error"],
    )


def verdict_from_row(row: sqlite3.Row) -> FinderVerdict:
    """A finder_verdicts row, with its call's columns beside it (_VERDICTS_SELECT)."""
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
