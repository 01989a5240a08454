"""Model calls and what they cost: each call recorded with what it was for, the models of
calls, a session's totals. `insert_call` is the one INSERT of a call (the steps, samples and
finder verdicts a call makes are written with it, in their own transactions)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bbm_tui.core.records import CallPurpose, CallRecord
from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.records import Totals
from bbm_tui.core.types import sane_cost, sane_logprob, sane_tokens


class CallQueries(StoreBase):
    def record_call(
        self, session_id: int, purpose: CallPurpose, call: CallRecord,
        step_id: int | None = None
    ) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            insert_call(connection, session_id, step_id, purpose, call, time.time())

    def stepless_calls(self, session_id: int) -> list[CallRecord]:
        """The session's generation calls that gave no step of their own: what one call
        cost beyond the steps it gave (core/llm/one_call.py), each with its call's id."""
        rows = self._read(
            "SELECT * FROM calls WHERE session_id = ? AND step_id IS NULL AND purpose = ? "
            "ORDER BY id", (session_id, CallPurpose.STEP))
        found = []
        for row in rows:
            record = call_from_row(dict(row))
            record.one_call = row["one_call"]
            found.append(record)
        return found

    def call_models(self, call_ids: Sequence[int]) -> dict[int, str]:
        """The model each of these calls asked, by call id."""
        found: dict[int, str] = {}
        unique = list(dict.fromkeys(call_ids))
        for start in range(0, len(unique), 500):  # under SQLite's limit on parameters
            chunk = unique[start:start + 500]
            marks = ",".join("?" * len(chunk))
            found.update((row["id"], row["model"]) for row in self._read(
                f"SELECT id, model FROM calls WHERE id IN ({marks})", tuple(chunk)))
        return found

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

    def spend(self, session_ids: Sequence[int]) -> dict[int, tuple[int, float, int]]:
        """Each session's calls, their known cost and how many have none, by session id (a
        session without calls is left out)."""
        found: dict[int, tuple[int, float, int]] = {}
        for start in range(0, len(session_ids), 500):  # SQLite's limit on parameters
            chunk = tuple(session_ids[start:start + 500])
            marks = ", ".join("?" * len(chunk))
            for row in self._read(
                f"""SELECT session_id, {_CALLS_COUNTED} AS calls, COALESCE(SUM(cost), 0) AS cost,
                           {_UNPRICED_COUNTED} AS unpriced
                    FROM calls WHERE session_id IN ({marks}) GROUP BY session_id""", chunk):
                found[row["session_id"]] = (row["calls"], row["cost"], row["unpriced"])
        return found


# A set of calls counted: the steps one streamed call gave have a row each (their shares of
# it, schema.py v16), all with its id in `one_call`, and are one call.
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


def insert_call(
    connection: sqlite3.Connection,
    session_id: int,
    step_id: int | None,
    purpose: CallPurpose,
    call: CallRecord,
    now: float,
) -> int:
    """Inside a write: the call's row; its id."""
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
    return inserted_id(cursor)


def call_from_row(row: Mapping[str, Any]) -> CallRecord:
    """A call's row (or a row joined with a call's columns, as a finder verdict's is)."""
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


def _logprobs_json(logprobs: Sequence[float] | None) -> str | None:
    if logprobs is None or not all(sane_logprob(value) is not None for value in logprobs):
        return None
    return json.dumps(list(logprobs), allow_nan=False)
