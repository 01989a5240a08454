"""The store's schema: forward migrations, one per version (`PRAGMA user_version`). A migration
is a SQL script, or a function given the connection inside the migration's transaction for
what SQL cannot do (repairs.py)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # sqlite3 itself is not needed by the check before the first frame
    import sqlite3


def _clean_and_redact(connection: sqlite3.Connection) -> None:
    from bbm_tui.core.store.repairs import clean_and_redact

    clean_and_redact(connection)


Migration = str | Callable[["sqlite3.Connection"], None]

MIGRATIONS: list[Migration] = [
    # 1: sessions, the step tree, model calls, the person's labels.
    """
    CREATE TABLE sessions (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        task TEXT NOT NULL,
        input TEXT NOT NULL,
        target TEXT,
        dataset_index INTEGER,
        gold_mistake_index INTEGER,
        model TEXT NOT NULL,
        api_base TEXT,
        mode TEXT NOT NULL,
        source TEXT NOT NULL DEFAULT 'app',
        head_step_id INTEGER REFERENCES steps(id) ON DELETE SET NULL,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX sessions_by_question ON sessions(task, input, model, source);
    CREATE TABLE steps (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        parent_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        text TEXT NOT NULL,
        origin TEXT NOT NULL,
        answer TEXT,
        truncated INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX steps_by_session ON steps(session_id, parent_id);
    CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        purpose TEXT NOT NULL,
        model TEXT NOT NULL,
        params TEXT NOT NULL,
        latency_s REAL,
        prompt_tokens INTEGER,
        completion_tokens INTEGER,
        cost REAL,
        logprobs TEXT,
        finish_reason TEXT,
        attempts INTEGER NOT NULL DEFAULT 1,
        created_at REAL NOT NULL
    );
    CREATE INDEX calls_by_session ON calls(session_id);
    CREATE INDEX calls_by_step ON calls(step_id);
    CREATE TABLE labels (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        leaf_step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        mistake_step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        undone INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL
    );
    CREATE INDEX labels_by_session ON labels(session_id);
    """,
    # 2: mistake-finder runs and their verdicts, each raw answer verbatim. A verdict's call
    # stats live in `calls` (purpose 'find'), so the session's totals include them.
    """
    CREATE TABLE finder_runs (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        leaf_step_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        method TEXT NOT NULL,
        model TEXT NOT NULL,
        params TEXT NOT NULL,
        mistake_number INTEGER,
        parsed INTEGER,
        finished_at REAL,
        created_at REAL NOT NULL
    );
    CREATE INDEX finder_runs_by_session ON finder_runs(session_id);
    CREATE TABLE finder_verdicts (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES finder_runs(id) ON DELETE CASCADE,
        step_number INTEGER,
        raw TEXT NOT NULL,
        verdict TEXT,
        parsed INTEGER NOT NULL,
        call_id INTEGER REFERENCES calls(id) ON DELETE SET NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX finder_verdicts_by_run ON finder_verdicts(run_id);
    """,
    # 3: how a finder run without a result ended: 'failed' (with the error's message) or
    # 'stopped' by the person. NULL with no result: the process died mid-run.
    """
    ALTER TABLE finder_runs ADD COLUMN ended TEXT;
    ALTER TABLE finder_runs ADD COLUMN error TEXT;
    """,
    # 4: a step points at the call that made it and its choice (one call may return several
    # candidate steps) and keeps its tokens with their log-probabilities; the candidates a
    # call returned are kept whether chosen or not (backtracking); a label says who made it
    # and whether they had seen a suggestion first.
    """
    ALTER TABLE steps ADD COLUMN call_id INTEGER REFERENCES calls(id) ON DELETE SET NULL;
    ALTER TABLE steps ADD COLUMN choice INTEGER;
    ALTER TABLE steps ADD COLUMN tokens TEXT;
    UPDATE steps SET
        call_id = (SELECT id FROM calls WHERE calls.step_id = steps.id AND purpose = 'step'
                   ORDER BY id DESC LIMIT 1),
        choice = 0
        WHERE EXISTS (SELECT 1 FROM calls WHERE calls.step_id = steps.id AND purpose = 'step');
    CREATE INDEX steps_by_call ON steps(call_id);
    CREATE TABLE candidates (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        call_id INTEGER REFERENCES calls(id) ON DELETE CASCADE,
        choice INTEGER NOT NULL,
        parent_id INTEGER REFERENCES steps(id) ON DELETE CASCADE,
        number INTEGER NOT NULL,
        text TEXT NOT NULL,
        tokens TEXT,
        logprob REAL,
        dropped INTEGER NOT NULL DEFAULT 0,
        step_id INTEGER REFERENCES steps(id) ON DELETE SET NULL,
        created_at REAL NOT NULL
    );
    CREATE INDEX candidates_by_session ON candidates(session_id, parent_id);
    ALTER TABLE labels ADD COLUMN annotator TEXT NOT NULL DEFAULT 'me';
    ALTER TABLE labels ADD COLUMN assisted INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX labels_by_annotator ON labels(session_id, annotator);
    """,
    # 5: big stores (bench/big_store.py). A step keeps the sum of its log-probabilities, so a
    # trace of 10^5 steps loads without parsing each step's tokens (before v4 the sum came
    # from its call's list); the sessions list is one paged query ordered by the last change.
    """
    ALTER TABLE steps ADD COLUMN logprob REAL;
    UPDATE steps SET logprob = (SELECT SUM(json_extract(t.value, '$[1]'))
                                FROM json_each(steps.tokens) AS t)
        WHERE tokens IS NOT NULL;
    UPDATE steps SET logprob = (SELECT SUM(l.value) FROM calls AS c, json_each(c.logprobs) AS l
                                WHERE c.id = steps.call_id)
        WHERE logprob IS NULL AND call_id IS NOT NULL;
    CREATE INDEX sessions_by_updated ON sessions(updated_at, id);
    CREATE INDEX labels_in_force ON labels(session_id, undone, id);
    """,
    # 6: annotation queues (docs/DESIGN.md §11). A trace of a queued file is a session made
    # the first time someone works on it, found again by the trace's content (`trace_key`), so
    # every annotator of a file, and a file renamed or reordered, reach the same session; whether
    # the file carried a gold label (a row without `mistake_index` has none). Each annotator's
    # work on it: the thoughts judged so far in order ('+' correct, '-' incorrect), whether it
    # was submitted, skipped or flagged (with a reason and a note), the seconds spent, and
    # whether a suggestion was seen.
    """
    CREATE TABLE queue_items (
        id INTEGER PRIMARY KEY,
        trace_key TEXT NOT NULL UNIQUE,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        has_gold INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX queue_items_by_session ON queue_items(session_id);
    CREATE TABLE annotation_work (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        annotator TEXT NOT NULL,
        judged TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'open',
        flag_reason TEXT,
        note TEXT,
        time_spent_s REAL NOT NULL DEFAULT 0,
        assisted INTEGER NOT NULL DEFAULT 0,
        updated_at REAL NOT NULL,
        UNIQUE (session_id, annotator)
    );
    """,
    # 7: what a step's figures are (backtracking's samples). `ntokens`: how many tokens its
    # log-probability sum covers, so that a trace loads its per-thought confidence, exp(logprob /
    # ntokens), without its tokens (from its tokens, or before v4 from its call's list).
    # `call_choices`: how many choices the call that made it returned (NULL: a call of its own). A
    # step chosen among a call's eight samples is one of them: it counts its own tokens, not the
    # call's completion tokens for all eight (which llama-server counts for one choice only).
    # Candidates by call: that count, and deleting a session's calls, without a scan.
    """
    CREATE INDEX candidates_by_call ON candidates(call_id);
    ALTER TABLE steps ADD COLUMN ntokens INTEGER;
    ALTER TABLE steps ADD COLUMN call_choices INTEGER;
    UPDATE steps SET ntokens = json_array_length(tokens) WHERE tokens IS NOT NULL;
    UPDATE steps SET ntokens = (SELECT json_array_length(c.logprobs) FROM calls AS c
                                WHERE c.id = steps.call_id)
        WHERE ntokens IS NULL AND logprob IS NOT NULL AND call_id IS NOT NULL;
    UPDATE steps SET call_choices = (SELECT NULLIF(COUNT(*), 0) FROM candidates AS k
                                     WHERE k.call_id = steps.call_id)
        WHERE call_id IS NOT NULL;
    """,
    # 8: each token's top alternatives as the provider ranked them (`top_logprobs`), for the
    # token view: [[[text, log-probability], ...], ...], one list per token of `tokens`, in
    # its order. NULL: none were sent or asked for (before v8, the top 1 only was asked).
    """
    ALTER TABLE steps ADD COLUMN alternatives TEXT;
    ALTER TABLE candidates ADD COLUMN alternatives TEXT;
    """,
    # 9: whether a call's token counts are an estimate rather than the provider's own:
    # litellm's tiktoken count standing in for a server that sent none, or one token a chunk
    # for a stream closed at its newline (core/llm/transport.py). Calls before v9: unknown,
    # stored as not estimated, as they were shown.
    """
    ALTER TABLE calls ADD COLUMN usage_estimated INTEGER NOT NULL DEFAULT 0;
    """,
    # 10: what earlier versions stored unchecked: log-probabilities no model could give
    # (positive, NaN, infinite: a thought's confidence overflowed, the token view stopped)
    # become none, and a key-shaped token in an api base's path is redacted like the rest of
    # it (repairs.py). No table changes.
    _clean_and_redact,
    # 11: tasks of one's own (docs/DESIGN.md §13). A session of one says which by the digest of
    # its whole definition (prompt texts included), and the definition is kept by that digest,
    # once for every session made with it: the session reopens with the prompt it was made
    # with after its task file changes or goes. NULL: one of the paper's five, as before v11.
    """
    ALTER TABLE sessions ADD COLUMN task_digest TEXT;
    CREATE TABLE task_definitions (
        id INTEGER PRIMARY KEY,
        digest TEXT NOT NULL UNIQUE,
        name TEXT NOT NULL,
        definition TEXT NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    # 12: the field's step-level formats and PRM800K's per-step labelling (docs/DESIGN.md §11,
    # §14). A session made from a row of one of the field's formats keeps what the row carried
    # beyond the trace (`origin`, JSON: its format, its other fields, its steps' ratings), so
    # it is written back in that format losing nothing. A label made with the per-step
    # protocol keeps every step's rating (JSON: -1, 0, +1 for each thought of the branch as
    # far as rated) and PRM800K's finish reason; any label may keep the annotator's note (why
    # the step is the first mistake: MR-BEN's error reason).
    """
    CREATE TABLE session_origins (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL UNIQUE REFERENCES sessions(id) ON DELETE CASCADE,
        origin TEXT NOT NULL
    );
    ALTER TABLE labels ADD COLUMN ratings TEXT;
    ALTER TABLE labels ADD COLUMN finish_reason TEXT;
    ALTER TABLE labels ADD COLUMN note TEXT;
    """,
    # 13: who is generating a session now (store.claim_session): two windows on one session
    # stored the same step twice. One row a session while it is generated, its holder's
    # heartbeat renewed every few seconds; a holder that died (its pid gone, on this
    # machine) or went silent (no heartbeat for CLAIM_STALE_S) holds nothing.
    """
    CREATE TABLE session_claims (
        session_id INTEGER PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
        owner TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        heartbeat_at REAL NOT NULL
    );
    """,
    # 14: the part of a call's prompt tokens the provider read from its prompt cache, and the
    # part it wrote to it, as it reported them (`prompt_tokens` counts both); priced as such.
    # NULL: the provider said nothing of caching, or the call was made before v14. Which
    # estimate a call's is: `usage_estimated` (v9) says its output was counted by us; now
    # `prompt_estimated` says whether its prompt was too (litellm's count for a server that
    # sent none), where a stream closed before the provider counted its output keeps the
    # provider's count of its prompt (Anthropic's, Gemini's). Before v14 both were one.
    """
    ALTER TABLE calls ADD COLUMN cached_tokens INTEGER;
    ALTER TABLE calls ADD COLUMN cache_write_tokens INTEGER;
    ALTER TABLE calls ADD COLUMN prompt_estimated INTEGER NOT NULL DEFAULT 0;
    UPDATE calls SET prompt_estimated = usage_estimated;
    """,
    # 15: several models on one question, side by side (docs/DESIGN.md §15). Each model's
    # trace is a branch of the session that records its model: its column (`position`), the
    # model settings it generates with (the api base redacted), where its branch on show ends
    # (`head_step_id`, as the session's own for a trace of one model) and how its generating
    # stands (`state`, a ModelBranchState; `error` says why one failed), so that a session
    # reopens with each column as it was and a column that was streaming goes on. A step
    # says which model branch it is on: two models that write the same thought keep a step
    # each. NULL: a session of one model, as before v15.
    """
    CREATE TABLE model_branches (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        model TEXT NOT NULL,
        api_base TEXT,
        mode TEXT NOT NULL,
        head_step_id INTEGER REFERENCES steps(id) ON DELETE SET NULL,
        state TEXT NOT NULL DEFAULT 'idle',
        error TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        UNIQUE (session_id, position)
    );
    ALTER TABLE steps ADD COLUMN model_branch_id INTEGER
        REFERENCES model_branches(id) ON DELETE SET NULL;
    CREATE INDEX steps_by_model_branch ON steps(model_branch_id);
    """,
    # 16: one call for many steps, and many servers (core/llm/one_call.py, router.py). A step
    # taken from one streamed call with others has its own row here, its share of the call
    # (its tokens, its latency from the call's start), all of them marked with the call's id
    # (`one_call`, NULL: a call of its own; the session's calls are its distinct ids). The
    # deployment of a router file that served a call (NULL: no router).
    """
    ALTER TABLE calls ADD COLUMN one_call TEXT;
    ALTER TABLE calls ADD COLUMN deployment TEXT;
    CREATE INDEX calls_by_one_call ON calls(one_call) WHERE one_call IS NOT NULL;
    """,
    # 17: a `run` resumes only its own work (issue 34): a session `run` starts says which
    # batch it is for, as a digest of its OUT file and the settings its trace depends on (the
    # model, mode, temperature, step limit, one call, log-probabilities, the task's digest;
    # core/batch/run.py). A later run into another OUT, or with other settings, makes its
    # own trace. NULL: not a run's session, or one made before v17 (reused only when asked).
    """
    ALTER TABLE sessions ADD COLUMN run_key TEXT;
    """,
    # 18: thinking models (docs/DESIGN.md §16). A thinking call's reasoning is the record:
    # stored whole with the call (`text`, the raw reasoning, grown by each step's raw slice as
    # it is stored, so that a kill loses at most the open step), with what kind it is
    # (`kind`: raw, summary or none), the answer written after it (`answer_text`), the
    # reasoning tokens the provider counted, and its opaque blocks (`opaque`: signatures and
    # redacted data as JSON bytes, never shown); `complete` once the call ended well. Its
    # steps are a view: each says which reasoning it was cut from and by which rule
    # (`split`); re-cutting makes a new branch of the same reasoning, with no new call.
    """
    CREATE TABLE reasonings (
        id INTEGER PRIMARY KEY,
        session_id INTEGER NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        model_branch_id INTEGER REFERENCES model_branches(id) ON DELETE SET NULL,
        model TEXT NOT NULL,
        text TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL,
        answer_text TEXT,
        reasoning_tokens INTEGER,
        opaque BLOB,
        complete INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    );
    CREATE INDEX reasonings_by_session ON reasonings(session_id);
    ALTER TABLE steps ADD COLUMN reasoning_id INTEGER
        REFERENCES reasonings(id) ON DELETE SET NULL;
    ALTER TABLE steps ADD COLUMN split TEXT;
    """,
]


SCHEMA_VERSION = len(MIGRATIONS)


@functools.cache
def expected_columns() -> dict[str, frozenset[str]]:
    """Each table's columns at SCHEMA_VERSION, read off the migrations run in memory."""
    import sqlite3  # here: the check before the app's first frame reads SCHEMA_VERSION only

    connection = sqlite3.connect(":memory:")
    try:
        for migration in MIGRATIONS:
            run_migration(connection, migration)
        tables = [name for (name,) in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {table: frozenset(name for _number, name, *_ in connection.execute(
            f"PRAGMA table_info({table})")) for table in tables}
    finally:
        connection.close()


def run_migration(connection: sqlite3.Connection, migration: Migration) -> None:
    if callable(migration):
        migration(connection)
        return
    for statement in statements(migration):
        connection.execute(statement)


def statements(script: str) -> list[str]:
    return [part.strip() for part in script.split(";") if part.strip()]
