"""The sessions list: a page of the sessions a query lets through (by text, task, model,
label, date), in its order, each with its branch's length and answer and the label in force,
in two queries whatever their number; how many there are; where one of them is."""

from __future__ import annotations

import sqlite3
from typing import Any

from bbm_tui.core.records import LabelFilter, SessionQuery, SessionSort
from bbm_tui.core.store.calls import CallQueries
from bbm_tui.core.store.labels import label_from_row
from bbm_tui.core.store.records import ModelSummary, SessionSummary
from bbm_tui.core.store.sessions import session_from_row

# Each session's head step (its number is the branch's length), the label in force (the
# latest not withdrawn, anyone's) and the thought it flags.
_SUMMARY_JOINS = """
    LEFT JOIN steps AS h ON h.id = s.head_step_id
    LEFT JOIN labels AS l ON l.id = (SELECT MAX(x.id) FROM labels AS x
                                     WHERE x.session_id = s.id AND x.undone = 0)
    LEFT JOIN steps AS m ON m.id = l.mistake_step_id
"""
# The label's columns beside the session's, named as `label_from_row(row, "_label_")` reads.
_LABEL_COLUMNS = ", ".join(
    f"l.{column} AS _label_{column}" for column in (
        "id", "session_id", "mistake_step_id", "leaf_step_id", "created_at", "annotator",
        "assisted", "ratings", "finish_reason", "note"))

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


class SessionListing(CallQueries):
    def sessions(self, query: SessionQuery | None = None) -> list[SessionSummary]:
        """Every session (that `query` lets through), the most recently changed first."""
        return self.session_page(query or SessionQuery(), 0, None)

    def count_sessions(self, query: SessionQuery) -> int:
        where, parameters = _session_filter(query)
        rows = self._read(f"SELECT COUNT(*) AS sessions FROM sessions AS s "
                          f"{_joins_for(query)} WHERE {where}", parameters)
        return rows[0]["sessions"]

    def session_page(
        self, query: SessionQuery, offset: int, limit: int | None
    ) -> list[SessionSummary]:
        """`limit` sessions (None: all) from position `offset` of the list `query` asks for,
        in three queries whatever their number: the rows with their step count, answer and
        label, which flagged mistakes lie on the branch on show, and what their calls cost."""
        where, parameters = _session_filter(query)
        rows = self._read(
            f"""SELECT s.*, h.number AS _steps, h.answer AS _answer, {_LABEL_COLUMNS},
                       m.number AS _mistake_number
                FROM sessions AS s {_SUMMARY_JOINS}
                WHERE {where} ORDER BY {_session_order(query)} LIMIT ? OFFSET ?""",
            (*parameters, -1 if limit is None else limit, offset),
        )
        on_branch = self._mistakes_on_branch(
            [row["id"] for row in rows if row["_label_mistake_step_id"] is not None])
        spend = self.spend([row["id"] for row in rows])
        models = self._models_side_by_side([row["id"] for row in rows])
        return [_summary(row, on_branch, spend.get(row["id"], (0, 0.0, 0)),
                         models.get(row["id"], ())) for row in rows]

    def _models_side_by_side(self, session_ids: list[int]) -> dict[int, tuple[ModelSummary,
                                                                              ...]]:
        """Each of these sessions that has several models side by side: each model's length,
        label in force (the newest not withdrawn whose leaf is on its branch) and answer, by
        column."""
        found: dict[int, list[sqlite3.Row]] = {}
        for start in range(0, len(session_ids), 500):  # under SQLite's limit on parameters
            chunk = session_ids[start:start + 500]
            marks = ",".join("?" * len(chunk))
            for row in self._read(
                    f"""SELECT b.id AS _branch, b.session_id AS _session, b.model AS _model,
                               b.head_step_id AS _head, h.number AS _steps,
                               h.answer AS _answer, {_LABEL_COLUMNS},
                               m.number AS _mistake_number
                        FROM model_branches AS b
                        LEFT JOIN steps AS h ON h.id = b.head_step_id
                        LEFT JOIN labels AS l ON l.id = (
                            SELECT MAX(x.id) FROM labels AS x JOIN steps AS leaf
                                ON leaf.id = x.leaf_step_id
                            WHERE x.session_id = b.session_id AND x.undone = 0
                                  AND leaf.model_branch_id = b.id)
                        LEFT JOIN steps AS m ON m.id = l.mistake_step_id
                        WHERE b.session_id IN ({marks})
                        ORDER BY b.session_id, b.position""", tuple(chunk)):
                found.setdefault(row["_session"], []).append(row)
        flagged = [(row["_branch"], row["_head"], row["_label_mistake_step_id"])
                   for rows in found.values() for row in rows
                   if row["_label_mistake_step_id"] is not None]
        on_branch = self._on_path(flagged)
        return {session_id: tuple(_model_summary(row, on_branch) for row in rows)
                for session_id, rows in found.items()}

    def _on_path(self, heads: list[tuple[int, int | None, int]]) -> set[int]:
        """Which of these (key, head step, flagged step) have the flagged step on the path
        from the root to the head: one walk up from each head, all in one query."""
        heads = [item for item in heads if item[1] is not None]
        if not heads:
            return set()
        values = ",".join("(?, ?, ?)" for _ in heads)
        rows = self._read(
            f"""WITH RECURSIVE wanted(key, head, target) AS (VALUES {values}),
                walk(key, step_id, parent_id, target, floor) AS (
                    SELECT w.key, h.id, h.parent_id, w.target, m.number
                    FROM wanted AS w JOIN steps AS h ON h.id = w.head
                    JOIN steps AS m ON m.id = w.target
                    WHERE h.number >= m.number
                    UNION ALL
                    SELECT w.key, p.id, p.parent_id, w.target, w.floor
                    FROM walk AS w JOIN steps AS p ON p.id = w.parent_id
                    WHERE w.step_id != w.target AND p.number >= w.floor)
                SELECT key FROM walk WHERE step_id = target""",
            tuple(value for item in heads for value in item),
        )
        return {row["key"] for row in rows}

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
        return rows[0]["position"] if rows else None

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
        return {row["session_id"] for row in rows}


def _summary(row: sqlite3.Row, on_branch: set[int], spend: tuple[int, float, int],
             branches: tuple[ModelSummary, ...] = ()) -> SessionSummary:
    session = session_from_row(row)
    label = None if row["_label_id"] is None else label_from_row(row, "_label_")
    number = row["_mistake_number"] if session.id in on_branch else None
    calls, cost, unpriced = spend
    return SessionSummary(session, row["_steps"] or 0, label, number, row["_answer"], calls,
                          cost, unpriced, tuple(branch.model for branch in branches),
                          branches)


def _model_summary(row: sqlite3.Row, on_branch: set[int]) -> ModelSummary:
    label = None if row["_label_id"] is None else label_from_row(row, "_label_")
    number = row["_mistake_number"] if row["_branch"] in on_branch else None
    return ModelSummary(row["_model"], row["_steps"] or 0, label, number, row["_answer"])


def _joins_for(query: SessionQuery) -> str:
    """The joins a count or a position needs: none unless the label or the steps filter or
    order the list (a count of 10^5 sessions takes a tenth of the time without them)."""
    needed = query.label is not None or query.sort in (SessionSort.STEPS, SessionSort.LABEL)
    return _SUMMARY_JOINS if needed else ""


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
    if query.task:
        clauses.append("s.task LIKE ? ESCAPE '\\'")
        parameters.append(_like(query.task))
    if query.model:  # the session's model, or any of its models side by side
        clauses.append("(s.model LIKE ? ESCAPE '\\' OR EXISTS (SELECT 1 FROM model_branches "
                       "AS b WHERE b.session_id = s.id AND b.model LIKE ? ESCAPE '\\'))")
        parameters += [_like(query.model)] * 2
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
