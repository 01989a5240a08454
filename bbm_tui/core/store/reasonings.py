"""Thinking calls' reasonings (store v17, docs/DESIGN.md §16): the raw text is the record,
stored whole with its kind and opaque blocks; steps are views of it (steps.reasoning_id and
steps.split), re-cut into a new branch without a new call."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from typing import Any

from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.errors import StoreError
from bbm_tui.core.store.records import Reasoning

_COLUMNS = ("id, session_id, model_branch_id, model, text, kind, answer_text, "
            "reasoning_tokens, opaque, complete, created_at, updated_at")


def _reasoning(row: Any) -> Reasoning:
    (reasoning_id, session_id, model_branch_id, model, text, kind, answer_text, tokens,
     opaque, complete, created_at, updated_at) = tuple(row)
    return Reasoning(reasoning_id, session_id, model_branch_id, model, text, kind, answer_text,
                     tokens, opaque, bool(complete), created_at, updated_at)


class ReasoningQueries(StoreBase):
    def add_reasoning(self, session_id: int, model: str, kind: str,
                      model_branch_id: int | None = None, text: str = "") -> Reasoning:
        """A thinking call's reasoning, begun (its text grows with each stored step); `text`:
        what it begins with (a branch backtracked from Thought k: steps 1..k-1, raw)."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            cursor = connection.execute(
                """INSERT INTO reasonings (session_id, model_branch_id, model, kind, text,
                       created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (session_id, model_branch_id, model, kind, text, now, now))
            reasoning_id = inserted_id(cursor)
        return self.reasoning(reasoning_id)

    def finish_reasoning(self, reasoning_id: int, *, text: str, kind: str,
                         answer_text: str | None, reasoning_tokens: int | None,
                         opaque: Sequence[dict[str, Any]] = ()) -> Reasoning:
        """The call ended well: its whole reasoning (the text after the last step too), kind,
        answer, token count and opaque blocks, in one transaction."""
        blob = _opaque_json(opaque) if opaque else None
        with self._write() as connection:
            connection.execute(
                """UPDATE reasonings SET text = ?, kind = ?, answer_text = ?,
                       reasoning_tokens = ?, opaque = ?, complete = 1, updated_at = ?
                   WHERE id = ?""",
                (text, kind, answer_text, reasoning_tokens, blob, time.time(), reasoning_id))
        return self.reasoning(reasoning_id)

    def reasoning(self, reasoning_id: int) -> Reasoning:
        rows = self._read_tuples(f"SELECT {_COLUMNS} FROM reasonings WHERE id = ?",
                                 (reasoning_id,))
        if not rows:
            raise StoreError(f"no reasoning {reasoning_id}")
        return _reasoning(rows[0])

    def reasonings(self, session_id: int) -> list[Reasoning]:
        return [_reasoning(row) for row in self._read_tuples(
            f"SELECT {_COLUMNS} FROM reasonings WHERE session_id = ? ORDER BY id",
            (session_id,))]

    def step_view(self, step_id: int) -> tuple[int | None, str | None]:
        """The reasoning a step was cut from and the rule it was cut by (None, None: a step
        of the step-at-a-time kind)."""
        rows = self._read_tuples("SELECT reasoning_id, split FROM steps WHERE id = ?",
                                 (step_id,))
        return (rows[0][0], rows[0][1]) if rows else (None, None)

    def add_view(self, session_id: int, reasoning_id: int, split: str,
                 steps: Sequence[tuple[str, str | None]], origin: str,
                 model_branch_id: int | None = None) -> list[int]:
        """A new view of a stored reasoning: its steps (text, the answer the last states), cut
        by `split`, as a new branch from the question, made the one on show. No call: the
        steps point at none (their reasoning's call is the first view's). One transaction."""
        from bbm_tui.core.store.steps import ReasoningSlice, _insert_step, store_view

        now = time.time()
        ids: list[int] = []
        parent: int | None = None
        with self._write() as connection:
            self._require_session(connection, session_id)
            for number, (text, answer) in enumerate(steps, start=1):
                parent = _insert_step(
                    connection, session_id, parent_id=parent, number=number, text=text,
                    origin=origin, answer=answer, truncated=False, call=None, call_id=None,
                    choice=None, tokens=None, candidate_id=None, now=now,
                    model_branch_id=model_branch_id)
                store_view(connection, parent, ReasoningSlice(reasoning_id, split), now)
                ids.append(parent)
        return ids


def _opaque_json(opaque: Sequence[dict[str, Any]]) -> bytes:
    """The provider's opaque blocks as standard JSON (no NaN or Infinity, which no other
    reader takes): a non-finite number, which no provider's signature or redacted data
    holds, is kept as null rather than lose the blocks."""
    return json.dumps(_finite(list(opaque)), ensure_ascii=False,
                      allow_nan=False).encode("utf-8")


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value
