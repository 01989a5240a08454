"""Labels and annotation work: each annotator's verdict on a session (the first mistake, or
none; with the per-step protocol each thought's rating), withdrawn and in force; the
annotation queues' sessions, made once per trace, and each annotator's work on them."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace

from bbm_tui.core.records import SessionSource, WorkStatus
from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.records import (
    AnnotatorLabel,
    Label,
    QueueWork,
    RecordedReasoning,
    TaskDefinition,
)
from bbm_tui.core.store.sessions import keep_task_definition
from bbm_tui.core.types import DEFAULT_ANNOTATOR, StepOrigin


class LabelQueries(StoreBase):
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
            label_id = _insert_label(connection, session_id, mistake_step_id, leaf_step_id,
                                     annotator, assisted, kept, finish_reason, note, now)
        return Label(label_id, session_id, mistake_step_id, leaf_step_id, now, annotator,
                     assisted, kept, finish_reason, note)

    def submit_work(
        self,
        work: QueueWork,
        mistake_step_id: int | None,
        leaf_step_id: int | None,
        *,
        ratings: Sequence[int] | None = None,
        finish_reason: str | None = None,
    ) -> Label | None:
        """A queued trace's label and its work marked done, in one transaction, once: None
        (nothing written) when the annotator's work on it is done already, submitted from
        another window of theirs (`bbm-tui serve` runs one app per browser), so that two
        windows of one annotator never record a label twice."""
        now = time.time()
        kept = None if ratings is None else tuple(ratings)
        with self._write() as connection:
            self._require_session(connection, work.session_id)
            found = connection.execute(
                "SELECT status FROM annotation_work WHERE session_id = ? AND annotator = ?",
                (work.session_id, work.annotator),
            ).fetchone()
            if found is not None and found[0] == WorkStatus.DONE:
                return None
            label_id = _insert_label(connection, work.session_id, mistake_step_id,
                                     leaf_step_id, work.annotator, work.assisted, kept,
                                     finish_reason, work.note, now)
            _upsert_work(connection, replace(work, status=WorkStatus.DONE))
        return Label(label_id, work.session_id, mistake_step_id, leaf_step_id, now,
                     work.annotator, work.assisted, kept, finish_reason, work.note)

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
                (label_id,) = row
                connection.execute("UPDATE labels SET undone = 1 WHERE id = ?", (label_id,))
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
        return label_from_row(rows[0]) if rows else None

    def label_history(self, session_id: int, annotator: str) -> list[Label]:
        """`annotator`'s verdicts in force on the session (not withdrawn), newest first: one
        per branch at most matters (trace/session.py picks the branch's)."""
        rows = self._read(
            "SELECT * FROM labels WHERE session_id = ? AND annotator = ? AND undone = 0 "
            "ORDER BY id DESC",
            (session_id, annotator),
        )
        return [label_from_row(row) for row in rows]

    def withdraw_label(self, session_id: int, label_id: int) -> None:
        """Undo one verdict."""
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute("UPDATE labels SET undone = 1 WHERE id = ? AND session_id = ?",
                               (label_id, session_id))
            connection.execute("UPDATE sessions SET updated_at = ? WHERE id = ?",
                               (time.time(), session_id))

    def first_label_id(self, session_id: int) -> int | None:
        """The id of the session's first label ever (withdrawn or not): an imported
        session's is the one its file gave."""
        rows = self._read("SELECT MIN(id) AS first FROM labels WHERE session_id = ?",
                          (session_id,))
        return rows[0]["first"] if rows else None

    def labels(self, session_id: int) -> list[Label]:
        """Every annotator's verdict in force on the session, one per annotator."""
        rows = self._read(
            """SELECT * FROM labels WHERE id IN (
                   SELECT MAX(id) FROM labels WHERE session_id = ? AND undone = 0
                   GROUP BY annotator)
               ORDER BY annotator""",
            (session_id,),
        )
        return [label_from_row(row) for row in rows]

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

    # -- annotation queues (v6)

    def queue_links(self) -> dict[str, int]:
        """Every queued trace's key and its session (one query: a queue over 10^4 traces
        opens without a read per trace)."""
        rows = self._read("SELECT trace_key, session_id FROM queue_items")
        return {row["trace_key"]: row["session_id"] for row in rows}

    def queued_work(self, trace_key: str, annotator: str) -> tuple[int | None, QueueWork | None]:
        """A queued trace's session (None: no one has worked on it) and `annotator`'s work
        on it as stored now: what another window of theirs may have done since this one
        last looked (two indexed reads)."""
        found = self._read("SELECT session_id FROM queue_items WHERE trace_key = ?",
                           (trace_key,))
        if not found:
            return None, None
        session_id = found[0]["session_id"]
        rows = self._read("SELECT * FROM annotation_work WHERE session_id = ? AND annotator = ?",
                          (session_id, annotator))
        return session_id, (work_from_row(rows[0]) if rows else None)

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
        reasoning: RecordedReasoning | None = None,
    ) -> int:
        """The session of a queued trace, with its recorded steps, made once: a second caller
        (another annotator's process) gets the one already there. All in one transaction. A
        thinking trace's `reasoning` is stored whole with it, its steps a view of it (store
        v17), as a thinking run stores them."""
        now = time.time()
        with self._write() as connection:
            found = connection.execute(
                "SELECT session_id FROM queue_items WHERE trace_key = ?", (trace_key,)
            ).fetchone()
            if found is not None:
                (session_id,) = found
                return session_id
            digest = keep_task_definition(connection, task, task_definition, now)
            session_id = inserted_id(connection.execute(
                """INSERT INTO sessions (name, task, input, target, gold_mistake_index, model,
                       mode, source, created_at, updated_at, task_digest)
                   VALUES (?, ?, ?, ?, ?, ?, 'chat', ?, ?, ?, ?)""",
                (name, task, input, target, gold_mistake_index, model, SessionSource.ANNOTATE,
                 now, now, digest),
            ))
            reasoning_id, split, origin = None, None, StepOrigin.DATASET
            if reasoning is not None:
                reasoning_id = inserted_id(connection.execute(
                    """INSERT INTO reasonings (session_id, model, text, kind, answer_text,
                           complete, created_at, updated_at) VALUES (?, ?, ?, ?, ?, 1, ?, ?)""",
                    (session_id, model, reasoning.text, reasoning.kind, reasoning.answer_text,
                     now, now)))
                split, origin = reasoning.split, StepOrigin.THINKING
            parent = None
            for number, (text, answer) in enumerate(steps, start=1):
                parent = inserted_id(connection.execute(
                    """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
                           truncated, created_at, reasoning_id, split)
                       VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?)""",
                    (session_id, parent, number, text, origin, answer, now, reasoning_id,
                     split),
                ))
            connection.execute("UPDATE sessions SET head_step_id = ? WHERE id = ?",
                               (parent, session_id))
            connection.execute(
                "INSERT INTO queue_items (trace_key, session_id, has_gold) VALUES (?, ?, ?)",
                (trace_key, session_id, int(has_gold)),
            )
            return session_id

    def queue_work(self, annotator: str) -> dict[int, QueueWork]:
        """`annotator`'s work on every queued trace they touched, by session."""
        rows = self._read("SELECT * FROM annotation_work WHERE annotator = ?", (annotator,))
        return {row["session_id"]: work_from_row(row) for row in rows}

    def all_queue_work(self) -> list[QueueWork]:
        return [work_from_row(row) for row in self._read(
            "SELECT * FROM annotation_work ORDER BY session_id, annotator")]

    def save_work(self, work: QueueWork) -> None:
        with self._write() as connection:
            self._require_session(connection, work.session_id)
            _upsert_work(connection, work)


def _insert_label(connection: sqlite3.Connection, session_id: int, mistake_step_id: int | None,
                  leaf_step_id: int | None, annotator: str, assisted: bool,
                  ratings: tuple[int, ...] | None, finish_reason: str | None,
                  note: str | None, now: float) -> int:
    cursor = connection.execute(
        """INSERT INTO labels (session_id, leaf_step_id, mistake_step_id, created_at,
               annotator, assisted, ratings, finish_reason, note)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (session_id, leaf_step_id, mistake_step_id, now, annotator, int(assisted),
         None if ratings is None else json.dumps(list(ratings), allow_nan=False),
         finish_reason, note),
    )
    connection.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))
    return inserted_id(cursor)


def _upsert_work(connection: sqlite3.Connection, work: QueueWork) -> None:
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


def label_from_row(row: sqlite3.Row, prefix: str = "") -> Label:
    """A labels row; beside another table's columns (the sessions list), its columns are
    named with `prefix`."""
    return Label(row[f"{prefix}id"], row[f"{prefix}session_id"],
                 row[f"{prefix}mistake_step_id"], row[f"{prefix}leaf_step_id"],
                 row[f"{prefix}created_at"], row[f"{prefix}annotator"],
                 bool(row[f"{prefix}assisted"]), ratings_from_json(row[f"{prefix}ratings"]),
                 row[f"{prefix}finish_reason"], row[f"{prefix}note"])


def work_from_row(row: sqlite3.Row) -> QueueWork:
    return QueueWork(row["session_id"], row["annotator"], row["judged"], row["status"],
                     row["flag_reason"], row["note"], row["time_spent_s"],
                     bool(row["assisted"]), row["updated_at"])


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


def _annotator_clause(session_id: int, annotator: str | None) -> tuple[str, tuple]:
    if annotator is None:
        return "session_id = ? AND undone = 0", (session_id,)
    return "session_id = ? AND undone = 0 AND annotator = ?", (session_id, annotator)
