"""Several models on one question, side by side (store v15, docs/DESIGN.md §15): a session's
model branches, each one model's trace in its column, with its model settings (the api base
redacted), its head and how its generating stands. Its steps say which branch they are on
(steps.py stores them so, and moves each branch's head)."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence

from bbm_tui.core.redact import redact_url
from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.errors import StoreError
from bbm_tui.core.store.records import ModelBranch


class ModelBranchQueries(StoreBase):
    def add_model_branches(
        self, session_id: int, models: Sequence[tuple[str, str | None, str]]
    ) -> list[ModelBranch]:
        """Give the session a model branch for each of `models` (model, api base, mode), in
        the next columns; returns every branch of the session, by column. A session of one
        model becomes one of several first: its own trace (its model, its head, every step
        it holds) is the first branch. One transaction: a kill leaves the session as it was
        or with all of them."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            count = connection.execute(
                "SELECT COUNT(*) FROM model_branches WHERE session_id = ?",
                (session_id,)).fetchone()[0]
            if count == 0:
                own = connection.execute(
                    "SELECT model, api_base, mode, head_step_id FROM sessions WHERE id = ?",
                    (session_id,)).fetchone()
                cursor = connection.execute(
                    """INSERT INTO model_branches (session_id, position, model, api_base, mode,
                           head_step_id, created_at, updated_at)
                       VALUES (?, 0, ?, ?, ?, ?, ?, ?)""",
                    (session_id, own[0], own[1], own[2], own[3], now, now))
                connection.execute(
                    "UPDATE steps SET model_branch_id = ? WHERE session_id = ? "
                    "AND model_branch_id IS NULL", (inserted_id(cursor), session_id))
                count = 1
            for position, (model, api_base, mode) in enumerate(models, start=count):
                connection.execute(
                    """INSERT INTO model_branches (session_id, position, model, api_base, mode,
                           created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                    (session_id, position, model, redact_url(api_base), mode, now, now))
            connection.execute("UPDATE sessions SET updated_at = ? WHERE id = ?",
                               (now, session_id))
        return self.model_branches(session_id)

    def model_branches(self, session_id: int) -> list[ModelBranch]:
        """The session's model branches by column (none: a session of one model)."""
        rows = self._read("SELECT * FROM model_branches WHERE session_id = ? ORDER BY position",
                          (session_id,))
        return [_model_branch(row) for row in rows]

    def model_branch(self, branch_id: int) -> ModelBranch:
        rows = self._read("SELECT * FROM model_branches WHERE id = ?", (branch_id,))
        if not rows:
            raise StoreError(f"{self.path}: there is no model branch {branch_id}")
        return _model_branch(rows[0])

    def set_model_branch_head(self, branch_id: int, step_id: int | None) -> ModelBranch:
        """Show another branch in the model branch's column (a version of a thought, a fork):
        the session's head moves with it where it was on that branch."""
        now = time.time()
        with self._write() as connection:
            branch = connection.execute(
                "SELECT session_id, head_step_id FROM model_branches WHERE id = ?",
                (branch_id,)).fetchone()
            if branch is None:
                raise StoreError(f"{self.path}: there is no model branch {branch_id}")
            self._require_session(connection, branch[0])
            connection.execute(
                "UPDATE model_branches SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (step_id, now, branch_id))
            connection.execute(
                """UPDATE sessions SET updated_at = ?,
                       head_step_id = CASE WHEN head_step_id IS ? THEN ? ELSE head_step_id END
                   WHERE id = ?""", (now, branch[1], step_id, branch[0]))
        return self.model_branch(branch_id)

    def set_model_branch_state(self, branch_id: int, state: str,
                               error: str | None = None) -> ModelBranch:
        """How the branch's generating stands now (a ModelBranchState), and why it failed."""
        with self._write() as connection:
            connection.execute(
                "UPDATE model_branches SET state = ?, error = ?, updated_at = ? WHERE id = ?",
                (state, error, time.time(), branch_id))
        return self.model_branch(branch_id)

    def update_model_branch_model(self, branch_id: int, *, model: str, api_base: str | None,
                                  mode: str) -> ModelBranch:
        """The model settings the branch is generated with now (the api base redacted)."""
        with self._write() as connection:
            connection.execute(
                "UPDATE model_branches SET model = ?, api_base = ?, mode = ?, updated_at = ? "
                "WHERE id = ?", (model, redact_url(api_base), mode, time.time(), branch_id))
        return self.model_branch(branch_id)


def _model_branch(row: sqlite3.Row) -> ModelBranch:
    return ModelBranch(**dict(zip(row.keys(), tuple(row), strict=True)))
