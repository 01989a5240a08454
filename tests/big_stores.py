"""Big stores written fast, for the tests and bench/big_store.py (issue 8, item 13): one
session with many steps, or many sessions. The schema is made by `Store.open`; the rows go
in with `executemany` on a second connection to the same real SQLite file."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.store import Store

TASK = "word_sorting"


def big_session(path: Path, steps: int, *, name: str = "big") -> int:
    """A session on word sorting question 0 with `steps` model steps, each with a call
    (latency, tokens) and a few tokens with log-probabilities; returns its id."""
    Store.open(path).close()
    row = bundled_rows(TASK)[0]
    now = time.time()
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        session_id = connection.execute(
            """INSERT INTO sessions (name, task, input, target, dataset_index,
                   gold_mistake_index, model, api_base, mode, source, created_at, updated_at)
               VALUES (?, ?, ?, ?, 0, ?, 'replay/bbm', NULL, 'chat', 'app', ?, ?)""",
            (name, TASK, row.input, row.target, row.mistake_index, now, now),
        ).lastrowid
        first = _next_id(connection, "steps")
        first_call = _next_id(connection, "calls")
        texts = [row.steps[(number - 1) % len(row.steps)] for number in range(1, steps + 1)]
        connection.executemany(
            """INSERT INTO calls (id, session_id, step_id, purpose, model, params, latency_s,
                   prompt_tokens, completion_tokens, cost, finish_reason, created_at)
               VALUES (?, ?, ?, 'step', 'replay/bbm', '{}', 0.05, 900, 30, 0.0, 'newline', ?)""",
            ((first_call + i, session_id, first + i, now) for i in range(steps)),
        )
        connection.executemany(
            """INSERT INTO steps (id, session_id, parent_id, number, text, origin, answer,
                   truncated, created_at, call_id, choice, tokens, logprob)
               VALUES (?, ?, ?, ?, ?, 'model', NULL, 0, ?, ?, 0, ?, -1.5)""",
            ((first + i, session_id, first + i - 1 if i else None, i + 1, texts[i], now,
              first_call + i, '[["a", -0.5], ["b", -1.0]]') for i in range(steps)),
        )
        connection.execute("UPDATE sessions SET head_step_id = ? WHERE id = ?",
                           (first + steps - 1, session_id))
        connection.execute("COMMIT")
    finally:
        connection.close()
    return session_id


def many_sessions(path: Path, count: int, *, steps: int = 3) -> None:
    """`count` sessions over the five tasks and two models, each with `steps` steps; every
    third is labelled (a mistake at Thought 2, or no mistake)."""
    Store.open(path).close()
    tasks = ["word_sorting", "tracking_shuffled_objects", "logical_deduction",
             "multistep_arithmetic", "dyck_languages"]
    now = time.time()
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN")
        first_session = _next_id(connection, "sessions")
        first_step = _next_id(connection, "steps")
        connection.executemany(
            """INSERT INTO sessions (id, name, task, input, model, mode, source, head_step_id,
                   created_at, updated_at)
               VALUES (?, ?, ?, ?, ?, 'chat', 'run', NULL, ?, ?)""",
            ((first_session + i, f"{tasks[i % 5]} #{i}", tasks[i % 5], f"question {i}",
              "replay/bbm" if i % 2 else "openai/gpt-4o-mini", now - count + i, now - count + i)
             for i in range(count)),
        )
        connection.executemany(
            """INSERT INTO steps (id, session_id, parent_id, number, text, origin, answer,
                   truncated, created_at)
               VALUES (?, ?, ?, ?, ?, 'model', ?, 0, ?)""",
            ((first_step + i * steps + k, first_session + i,
              first_step + i * steps + k - 1 if k else None, k + 1, f"step {k + 1}",
              "(A)" if k == steps - 1 else None, now)
             for i in range(count) for k in range(steps)),
        )
        connection.execute(
            "UPDATE sessions SET head_step_id = ? + (id - ?) * ? + ? - 1 WHERE id >= ?",
            (first_step, first_session, steps, steps, first_session))
        connection.executemany(
            """INSERT INTO labels (session_id, leaf_step_id, mistake_step_id, created_at)
               VALUES (?, ?, ?, ?)""",
            ((first_session + i, first_step + i * steps + steps - 1,
              first_step + i * steps + 1 if i % 2 else None, now)
             for i in range(0, count, 3)),
        )
        connection.execute("COMMIT")
    finally:
        connection.close()


def _next_id(connection: sqlite3.Connection, table: str) -> int:
    return connection.execute(f"SELECT COALESCE(MAX(id), 0) + 1 FROM {table}").fetchone()[0]
