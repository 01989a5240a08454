"""Migrations that need Python rather than SQL (schema.py runs them in their turn): what an
earlier bbm-tui stored unchecked, made right in place.

- Log-probabilities no model could give (positive, NaN, infinite, 1e308), which earlier
  versions stored as sent: a step's or sample's tokens holding one become "no
  log-probabilities" (tokens, alternatives, sum and count cleared), an alternative holding one
  is left out of its token's, and a call's list holding one is cleared. Such values overflowed
  a thought's confidence and stopped the token view.
- Secrets in a stored api base: the same redaction as every message (core/redact.py), now
  also of a key-shaped token in its path (`.../sk-proj-.../v1`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from bbm_tui.core.redact import redact_url
from bbm_tui.core.types import sane_logprob, sane_logprob_sum

if TYPE_CHECKING:
    import sqlite3

def clean_and_redact(connection: sqlite3.Connection) -> None:
    """Store version 10."""
    _clean_tokens(connection, "steps", has_count=True)
    _clean_tokens(connection, "candidates", has_count=False)
    _clean_sums(connection, "steps", "ntokens")
    _clean_sums(connection, "candidates", None)
    _clean_call_lists(connection)
    redact_api_bases(connection)


def redact_api_bases(connection: sqlite3.Connection) -> None:
    rows = connection.execute(
        "SELECT id, api_base FROM sessions WHERE api_base IS NOT NULL").fetchall()
    for session_id, api_base in rows:
        redacted = redact_url(api_base)
        if redacted != api_base:
            connection.execute("UPDATE sessions SET api_base = ? WHERE id = ?",
                               (redacted, session_id))


def _clean_tokens(connection: sqlite3.Connection, table: str, *, has_count: bool) -> None:
    rows = connection.execute(
        f"SELECT id, tokens, alternatives FROM {table} WHERE tokens IS NOT NULL").fetchall()
    cleared = ", ntokens = NULL" if has_count else ""
    for row_id, tokens, alternatives in rows:
        if not _all_sane(_values(tokens, depth=1)):
            connection.execute(
                f"UPDATE {table} SET tokens = NULL, alternatives = NULL, logprob = NULL"
                f"{cleared} WHERE id = ?", (row_id,))
        elif alternatives and not _all_sane(_alternative_values(alternatives)):
            connection.execute(f"UPDATE {table} SET alternatives = ? WHERE id = ?",
                               (_sane_alternatives(alternatives), row_id))


def _clean_sums(connection: sqlite3.Connection, table: str, count: str | None) -> None:
    counted = count or "NULL"
    rows = connection.execute(
        f"SELECT id, logprob, {counted} FROM {table} WHERE logprob IS NOT NULL").fetchall()
    cleared = f", {count} = NULL" if count else ""
    for row_id, logprob, tokens in rows:
        if sane_logprob_sum(logprob, tokens) is None:
            connection.execute(f"UPDATE {table} SET logprob = NULL{cleared} WHERE id = ?",
                               (row_id,))


def _clean_call_lists(connection: sqlite3.Connection) -> None:
    rows = connection.execute("SELECT id, logprobs FROM calls WHERE logprobs IS NOT NULL")
    for call_id, logprobs in rows.fetchall():
        if not _all_sane(_values(logprobs, depth=0)):
            connection.execute("UPDATE calls SET logprobs = NULL WHERE id = ?", (call_id,))


def _values(text: str, depth: int) -> list[Any]:
    """The numbers of a stored list: `[v, ...]` (depth 0) or `[[text, v], ...]` (depth 1)."""
    try:
        parsed = json.loads(text)
    except ValueError:
        return [None]
    if not isinstance(parsed, list):
        return [None]
    if depth == 0:
        return parsed
    return [item[1] if isinstance(item, list) and len(item) == 2 else None for item in parsed]


def _alternative_values(text: str) -> list[Any]:
    try:
        places = json.loads(text)
    except ValueError:
        return [None]
    return [value for place in places if isinstance(place, list)
            for value in (pair[1] for pair in place if isinstance(pair, list) and len(pair) == 2)]


def _all_sane(values: list[Any]) -> bool:
    return all(sane_logprob(value) is not None for value in values)


def _sane_alternatives(text: str) -> str | None:
    try:
        places = json.loads(text)
    except ValueError:
        return None
    if not isinstance(places, list):
        return None
    kept = [[[alternative, value] for alternative, value in place
             if sane_logprob(value) is not None]
            if isinstance(place, list) else [] for place in places]
    return json.dumps(kept, allow_nan=False)
