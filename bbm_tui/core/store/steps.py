"""Steps and branches: a trace is a tree of steps (`parent_id`), the branch on show the path
from the root to the session's head, walked up by a recursive query (never by loading the
tree); and the candidates a backtrack sampled for a step, one of which becomes it."""

from __future__ import annotations

import gc
import json
import sqlite3
import time
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from bbm_tui.core.records import CallPurpose, CallRecord, TokenLogprob
from bbm_tui.core.store.base import StoreBase, inserted_id
from bbm_tui.core.store.calls import insert_call
from bbm_tui.core.store.errors import SessionDeleted, StoreError
from bbm_tui.core.store.files import system_error
from bbm_tui.core.store.records import Step, StoredCandidate
from bbm_tui.core.types import sane_logprob

# A step's completion tokens and cost are its call's, except for a step chosen among a call's
# several samples (`call_choices` > 1): the call's figures are for all of them, so it counts
# its own tokens (None without log-probabilities) and no cost of its own (schema.py, v7).
_COMPLETION_TOKENS = "CASE WHEN s.call_choices > 1 THEN s.ntokens ELSE c.completion_tokens END"
_COST = "CASE WHEN s.call_choices > 1 THEN NULL ELSE c.cost END"


def _step_select(tokens: bool) -> str:
    """A step's columns in the order `step_from_row` reads them (Step's fields, its tokens in
    two: the tokens and their alternatives), read as plain tuples: 10^5 steps load in about
    half the time sqlite3.Row takes. In bulk (`tokens` False) the tokens are left out: a trace
    of 10^5 steps would spend seconds and gigabytes on them."""
    token_columns = "s.tokens, s.alternatives" if tokens else "NULL, NULL"
    return f"""
    SELECT s.id, s.session_id, s.parent_id, s.number, s.text, s.origin, s.answer, s.truncated,
           s.created_at, c.latency_s, c.prompt_tokens, {_COMPLETION_TOKENS}, {_COST}, s.logprob,
           s.call_id, s.choice, {token_columns}, s.ntokens, s.call_choices,
           COALESCE(c.usage_estimated, 0), c.cached_tokens, COALESCE(c.prompt_estimated, 0),
           s.model_branch_id, c.one_call, c.deployment
    FROM steps AS s
    LEFT JOIN calls AS c ON c.id = s.call_id
    """


_STEP_SELECT = _step_select(tokens=True)
_STEPS_SELECT = _step_select(tokens=False)

# The branch ending at a step: one walk up the parents, an index lookup each, within the
# session; the rest of the tree is never read. A parent is always older than its child (it
# was there when the child was inserted, so its id is smaller): going up, the ids fall, so a
# walk that a damaged store's parents would send round in a loop ends.
_BRANCH_SELECT = f"""
    WITH RECURSIVE branch(id, parent_id, depth) AS (
        SELECT id, parent_id, 0 FROM steps WHERE id = :leaf AND session_id = :session
        UNION ALL
        SELECT p.id, p.parent_id, b.depth + 1
        FROM branch AS b JOIN steps AS p ON p.id = b.parent_id
        WHERE p.session_id = :session AND p.id < b.id
    )
    {_STEPS_SELECT.replace("FROM steps AS s", "FROM branch AS b JOIN steps AS s ON s.id = b.id")}
    ORDER BY b.depth DESC
"""

_CALL_LOGPROB_UPDATE = """
    UPDATE steps SET
        logprob = (SELECT SUM(l.value) FROM calls AS c, json_each(c.logprobs) AS l
                   WHERE c.id = steps.call_id),
        ntokens = (SELECT json_array_length(c.logprobs) FROM calls AS c
                   WHERE c.id = steps.call_id AND c.logprobs IS NOT NULL)
    WHERE id = ?
"""


class StepQueries(StoreBase):
    def add_step(
        self,
        session_id: int,
        *,
        parent_id: int | None,
        number: int,
        text: str,
        origin: str = "model",
        answer: str | None = None,
        truncated: bool = False,
        call: CallRecord | None = None,
        call_id: int | None = None,
        choice: int | None = None,
        tokens: Sequence[TokenLogprob] | None = None,
        candidate_id: int | None = None,
        model_branch_id: int | None = None,
        view: ReasoningSlice | None = None,
    ) -> Step:
        """Append a finished step below `parent_id`, make it the head, and commit. It was made
        by `call` (recorded with it), or by the call `call_id` already recorded (a chosen
        candidate, `candidate_id`, marked chosen in the same transaction, so that a kill
        leaves no step its candidate does not point at), as its `choice`. Its tokens default
        to the call's. On a model branch (`model_branch_id`) it is that branch's head, and
        the session's where the session's was on that branch (_move_heads). A thinking
        step (`view`) says which reasoning it was cut from and by which rule, and its raw
        slice is added to that reasoning's text in the same transaction."""
        now = time.time()
        with self._write() as connection:
            self._require_session(connection, session_id)
            same = _same_step(connection, session_id, parent_id, number, text, origin,
                              model_branch_id)
            if same is not None:  # another window stored it first: it is that step
                _take_same_step(connection, session_id, same, call, candidate_id, now,
                                model_branch_id)
                step_id = same
            else:
                step_id = _insert_step(
                    connection, session_id, parent_id=parent_id, number=number, text=text,
                    origin=origin, answer=answer, truncated=truncated, call=call,
                    call_id=call_id, choice=choice, tokens=tokens, candidate_id=candidate_id,
                    now=now, model_branch_id=model_branch_id)
                if view is not None:
                    store_view(connection, step_id, view, now)
        return self.step(step_id)

    def add_steps(
        self, session_id: int, steps: list[tuple[str, str | None]], origin: str
    ) -> list[Step]:
        """Append several steps, each (text, the answer it states), in one transaction (e.g.
        a recorded trace loaded to label)."""
        now = time.time()
        parent = self._head(session_id)
        number = len(self.branch(session_id, parent))
        with self._write() as connection:
            self._require_session(connection, session_id)
            for text, answer in steps:
                number += 1
                cursor = connection.execute(
                    """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
                           truncated, created_at) VALUES (?, ?, ?, ?, ?, ?, 0, ?)""",
                    (session_id, parent, number, text, origin, answer, now),
                )
                parent = inserted_id(cursor)
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (parent, now, session_id),
            )
        return self.branch(session_id)

    def step(self, step_id: int) -> Step:
        rows = self._read_tuples(_STEP_SELECT + " WHERE s.id = ?", (step_id,))
        if not rows:
            raise StoreError(f"{self.path}: there is no step {step_id}")
        return step_from_row(rows[0])

    def steps_of(self, session_id: int) -> list[Step]:
        """Every step of the session, on every branch, oldest first. Without their tokens
        (`step()` has them): a trace of 10^5 steps would spend seconds and gigabytes on them."""
        with _collector_paused():
            rows = self._read_tuples(_STEPS_SELECT + " WHERE s.session_id = ?", (session_id,))
            rows.sort()  # by id: cheaper here than SQLite's sort of the join (a third of it)
            return [step_from_row(row) for row in rows]

    def branch(self, session_id: int, leaf_id: int | None = None) -> list[Step]:
        """The steps from the root to `leaf_id` (default: the session's head), in order,
        without their tokens."""
        if leaf_id is None:
            leaf_id = self._head(session_id)
        if leaf_id is None:
            return []
        with _collector_paused():
            rows = self._read_tuples(_BRANCH_SELECT, {"leaf": leaf_id, "session": session_id})
            return [step_from_row(row) for row in rows]

    def branch_ids(self, session_id: int, leaf_id: int | None) -> array[int]:
        """The ids of the steps from the root to `leaf_id`, in order (empty for None, or a
        step not in the session): the branch as 8 bytes a step, for a session of 10^5 steps
        read a window at a time (`steps_by_ids`).

        A branch is runs of consecutive ids: a step written right after its parent has the
        next id. SQLite finds the few steps that start a run (the root, a fork's first step,
        a step written after another branch's) in the index on (session_id, parent_id)
        alone, and each run is a range of ids, from its start to the step whose parent is
        the next run's end. A walk of every step in Python took 53 ms on 10^5 steps, on
        the way to the first frame (bench/big_store.py); this takes 10. A parent is older
        than its child (its id is smaller), so only the runs up to the leaf are read."""
        ids: array[int] = array("q")
        if leaf_id is None:
            return ids
        starts: array[int] = array("q")  # each run's first step, by id
        parents: array[int] = array("q")  # its parent (0: none, the root; ids start at 1)
        with self._lock:
            try:
                if self._connection.execute("SELECT 1 FROM steps WHERE id = ? AND session_id = ?",
                                            (leaf_id, session_id)).fetchone() is None:
                    return ids
                rows = self._connection.execute(
                    "SELECT id, parent_id FROM steps WHERE session_id = ? AND id <= ? "
                    "AND (parent_id IS NULL OR parent_id <> id - 1) ORDER BY id",
                    (session_id, leaf_id))
                try:
                    for step_id, parent_id in rows:
                        starts.append(step_id)
                        parents.append(parent_id or 0)
                finally:
                    rows.close()  # no statement left open on the connection
            except sqlite3.OperationalError as error:
                raise system_error(self.path, error) from None
        runs: list[tuple[int, int]] = []
        end = leaf_id
        while end > 0:
            # Every step after the run's start and up to `end` has the one before as its
            # parent (none of them starts a run), so the run is the ids start..end.
            place = bisect_right(starts, end) - 1
            if place < 0:
                break  # no root under it: a broken chain ends the branch, as a walk would
            runs.append((starts[place], end))
            # Strictly down (a parent is older): a parent written wrong cannot loop.
            end = min(parents[place], starts[place] - 1)
        for start, end in reversed(runs):
            ids.extend(range(start, end + 1))
        return ids

    def steps_by_ids(self, ids: Sequence[int]) -> list[Step]:
        """The steps `ids` (of one session), in that order, without their tokens; a missing
        one is a StoreError."""
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = self._read_tuples(_STEPS_SELECT + f" WHERE s.id IN ({marks})", tuple(ids))
        by_id = {row[0]: row for row in rows}
        missing = [step_id for step_id in ids if step_id not in by_id]
        if missing:
            raise StoreError(f"{self.path}: there is no step {missing[0]}")
        return [step_from_row(by_id[step_id]) for step_id in ids]

    def step_children(self, session_id: int, parent_id: int | None) -> list[Step]:
        """The steps under `parent_id` (None: the first thoughts), oldest first, without
        their tokens."""
        rows = self._read_tuples(
            _STEPS_SELECT + " WHERE s.session_id = ? AND s.parent_id IS ? ORDER BY s.id",
            (session_id, parent_id))
        return [step_from_row(row) for row in rows]

    def step_count(self, session_id: int) -> int:
        """How many steps the session has, on every branch."""
        return self._read_tuples("SELECT COUNT(*) FROM steps WHERE session_id = ?",
                                 (session_id,))[0][0]

    def has_step(self, session_id: int, step_id: int) -> bool:
        return bool(self._read_tuples("SELECT 1 FROM steps WHERE id = ? AND session_id = ?",
                                      (step_id, session_id)))

    def leaf_steps(self, session_id: int) -> list[Step]:
        """The ends of every branch of the session (steps with no child), oldest first."""
        rows = self._read_tuples(
            _STEPS_SELECT + " WHERE s.session_id = ? AND NOT EXISTS (SELECT 1 FROM steps "
            "AS child WHERE child.session_id = s.session_id AND child.parent_id = s.id) "
            "ORDER BY s.id", (session_id,))
        return [step_from_row(row) for row in rows]

    def newest_leaf_under(self, session_id: int, step_id: int) -> int:
        """The newest end of a branch through `step_id` (itself if a leaf): its id."""
        rows = self._read_tuples(
            """WITH RECURSIVE under(id) AS (
                   SELECT id FROM steps WHERE id = :step AND session_id = :session
                   UNION ALL
                   SELECT child.id FROM under JOIN steps AS child
                   ON child.session_id = :session AND child.parent_id = under.id
               )
               SELECT MAX(under.id) FROM under WHERE NOT EXISTS (SELECT 1 FROM steps AS child
                   WHERE child.session_id = :session AND child.parent_id = under.id)""",
            {"step": step_id, "session": session_id})
        if not rows or rows[0][0] is None:
            raise StoreError(f"{self.path}: there is no step {step_id}")
        return rows[0][0]

    def branch_point_steps(self, session_id: int) -> list[Step]:
        """The steps with more than one child, oldest first."""
        rows = self._read_tuples(
            _STEPS_SELECT + " WHERE s.id IN (SELECT parent_id FROM steps WHERE session_id = ? "
            "AND parent_id IS NOT NULL GROUP BY parent_id HAVING COUNT(*) > 1) ORDER BY s.id",
            (session_id,))
        return [step_from_row(row) for row in rows]

    def step_ids(self, session_id: int) -> list[int]:
        """The ids of the branch on show, Thought 1 first (a queued trace has one branch)."""
        return [step.id for step in self.branch(session_id)]

    def set_head(self, session_id: int, step_id: int | None) -> None:
        with self._write() as connection:
            self._require_session(connection, session_id)
            connection.execute(
                "UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                (step_id, time.time(), session_id),
            )

    def _head(self, session_id: int) -> int | None:
        rows = self._read("SELECT head_step_id FROM sessions WHERE id = ?", (session_id,))
        if not rows:
            raise SessionDeleted(f"{self.path}: there is no session {session_id}", session_id)
        return rows[0]["head_step_id"]

    # -- candidates (backtracking)

    def add_candidates(
        self,
        session_id: int,
        *,
        parent_id: int | None,
        number: int,
        calls: Sequence[CallRecord],
        candidates: Sequence[tuple[int, int, str, Sequence[TokenLogprob] | None, bool]],
    ) -> list[StoredCandidate]:
        """Commit the calls that sampled Thought `number` after `parent_id`, and each
        candidate as (index of its call in `calls`, choice, text, tokens, dropped)."""
        now = time.time()
        # Encoded before the write: the write lock, which other processes queue for, is
        # held for the inserts alone.
        rows = []
        for call_index, choice, text, tokens, dropped in candidates:
            tokens = _sane_tokens(tokens)
            rows.append((call_index, choice, text, tokens, tokens_json(tokens),
                         alternatives_json(tokens),
                         float(sum(t.logprob for t in tokens)) if tokens else None,
                         bool(dropped)))
        with self._write() as connection:
            self._require_session(connection, session_id)
            call_ids = [insert_call(connection, session_id, None, CallPurpose.SAMPLE, call, now)
                        for call in calls]
            ids = []
            for call_index, choice, text, _tokens, encoded, alternatives, logprob, dropped in rows:
                cursor = connection.execute(
                    """INSERT INTO candidates (session_id, call_id, choice, parent_id, number,
                           text, tokens, alternatives, logprob, dropped, created_at)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (session_id, call_ids[call_index], choice, parent_id, number, text,
                     encoded, alternatives, logprob, int(dropped), now),
                )
                ids.append(inserted_id(cursor))
        # As a read of them would give them back (not read: a read a sampling, on the
        # batch's busy loop).
        return [
            StoredCandidate(id=candidate_id, session_id=session_id,
                            call_id=call_ids[call_index], choice=choice, parent_id=parent_id,
                            number=number, text=text, tokens=_as_read(tokens),
                            logprob=logprob, dropped=dropped, step_id=None, created_at=now)
            for candidate_id, (call_index, choice, text, tokens, *_stored, logprob, dropped)
            in zip(ids, rows, strict=True)
        ]

    def candidates(self, session_id: int, parent_id: int | None, number: int
                   ) -> list[StoredCandidate]:
        """The candidates sampled for Thought `number` after `parent_id`, oldest first."""
        return self._candidates(
            "c.session_id = ? AND c.parent_id IS ? AND c.number = ?",
            (session_id, parent_id, number),
        )

    def choose_candidate(self, candidate_id: int, step_id: int) -> None:
        """The candidate became step `step_id`."""
        with self._write() as connection:
            connection.execute("UPDATE candidates SET step_id = ? WHERE id = ?",
                               (step_id, candidate_id))

    def _candidates(self, where: str, parameters: tuple) -> list[StoredCandidate]:
        rows = self._read(f"SELECT * FROM candidates AS c WHERE {where} ORDER BY c.id",
                          parameters)
        return [candidate_from_row(row) for row in rows]


def step_from_row(row: tuple) -> Step:
    """A row of `_step_select`'s columns."""
    (step_id, session_id, parent_id, number, text, origin, answer, truncated, created_at,
     latency_s, prompt_tokens, completion_tokens, cost, logprob, call_id, choice, tokens,
     alternatives, ntokens, call_choices, usage_estimated, cached_tokens,
     prompt_estimated, model_branch_id, one_call, deployment) = row
    return Step(step_id, session_id, parent_id, number, text, origin, answer, bool(truncated),
                created_at, latency_s, prompt_tokens, completion_tokens, cost, logprob, call_id,
                choice, None if tokens is None else tokens_from_json(tokens, alternatives),
                ntokens, call_choices, bool(usage_estimated), cached_tokens,
                bool(prompt_estimated), model_branch_id, one_call, deployment)


def candidate_from_row(row: sqlite3.Row) -> StoredCandidate:
    return StoredCandidate(
        id=row["id"], session_id=row["session_id"], call_id=row["call_id"],
        choice=row["choice"], parent_id=row["parent_id"], number=row["number"],
        text=row["text"], tokens=tokens_from_json(row["tokens"], row["alternatives"]),
        logprob=row["logprob"], dropped=bool(row["dropped"]), step_id=row["step_id"],
        created_at=row["created_at"],
    )


def _same_step(connection: sqlite3.Connection, session_id: int, parent_id: int | None,
               number: int, text: str, origin: str, model_branch_id: int | None) -> int | None:
    """A step already at this place with this text and origin (inside the write, so that two
    processes cannot both miss it): one step is never stored twice. On its model branch:
    two models that write the same first thought each keep their own."""
    found = connection.execute(
        "SELECT id FROM steps WHERE session_id = ? AND parent_id IS ? AND number = ? "
        "AND text = ? AND origin = ? AND model_branch_id IS ? ORDER BY id LIMIT 1",
        (session_id, parent_id, number, text, origin, model_branch_id)).fetchone()
    if found is None:
        return None
    (step_id,) = found
    return step_id


def _take_same_step(connection: sqlite3.Connection, session_id: int, step_id: int,
                    call: CallRecord | None, candidate_id: int | None, now: float,
                    model_branch_id: int | None) -> None:
    """The step is there already: the call that made it again was paid for all the same
    (kept, in the session's totals), the candidate points at it, and it is the head."""
    if call is not None:
        insert_call(connection, session_id, step_id, CallPurpose.STEP, call, now)
    if candidate_id is not None:
        connection.execute("UPDATE candidates SET step_id = ? WHERE id = ?",
                           (step_id, candidate_id))
    move_heads(connection, session_id, step_id, model_branch_id, now)


def _insert_step(connection: sqlite3.Connection, session_id: int, *,
                 parent_id: int | None, number: int, text: str, origin: str,
                 answer: str | None, truncated: bool, call: CallRecord | None,
                 call_id: int | None, choice: int | None,
                 tokens: Sequence[TokenLogprob] | None, candidate_id: int | None,
                 now: float, model_branch_id: int | None) -> int:
    """A new step (add_step's, inside its transaction); its id."""
    if call is not None:
        call_id = insert_call(connection, session_id, None, CallPurpose.STEP, call, now)
        choice = call.choice if choice is None else choice
        tokens = call.tokens if tokens is None else tokens
    tokens = _sane_tokens(tokens)
    cursor = connection.execute(
        """INSERT INTO steps (session_id, parent_id, number, text, origin, answer,
               truncated, created_at, call_id, choice, tokens, alternatives, logprob,
               ntokens, call_choices, model_branch_id)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?,
                   (SELECT NULLIF(COUNT(*), 0) FROM candidates WHERE call_id = ?), ?)""",
        (session_id, parent_id, number, text, origin, answer, int(truncated), now,
         call_id, choice, tokens_json(tokens), alternatives_json(tokens),
         sum(token.logprob for token in tokens) if tokens else None,
         len(tokens) if tokens else None,
         # A call of the step's own made no candidates.
         None if call is not None else call_id, model_branch_id),
    )
    step_id = inserted_id(cursor)
    if not tokens and call_id is not None:  # the call's own list, as before v4
        connection.execute(_CALL_LOGPROB_UPDATE, (step_id,))
    if call is not None:  # the call's own link to its step (a v3 reader follows it)
        connection.execute("UPDATE calls SET step_id = ? WHERE id = ?", (step_id, call_id))
    if candidate_id is not None:
        connection.execute("UPDATE candidates SET step_id = ? WHERE id = ?",
                           (step_id, candidate_id))
    move_heads(connection, session_id, step_id, model_branch_id, now)
    return step_id


@dataclass(frozen=True)
class ReasoningSlice:
    """Where a thinking step comes from (store v17): its reasoning, the rule that cut it, and
    its raw slice (None: the reasoning's text holds it already, as for a re-cut view)."""

    reasoning_id: int
    split: str
    raw: str | None = None


def store_view(connection: sqlite3.Connection, step_id: int, view: ReasoningSlice,
               now: float) -> None:
    connection.execute("UPDATE steps SET reasoning_id = ?, split = ? WHERE id = ?",
                       (view.reasoning_id, view.split, step_id))
    if view.raw:
        connection.execute(
            "UPDATE reasonings SET text = text || ?, updated_at = ? WHERE id = ?",
            (view.raw, now, view.reasoning_id))


def move_heads(connection: sqlite3.Connection, session_id: int, step_id: int,
               model_branch_id: int | None, now: float) -> None:
    """Step `step_id`, just stored or taken, is the head: of the session, or of its model
    branch, and then of the session too where the session's head was on that branch (or
    nowhere yet): a column's steps never move the branch on show away from another's."""
    if model_branch_id is None:
        connection.execute("UPDATE sessions SET head_step_id = ?, updated_at = ? WHERE id = ?",
                           (step_id, now, session_id))
        return
    connection.execute("UPDATE model_branches SET head_step_id = ?, updated_at = ? WHERE id = ?",
                       (step_id, now, model_branch_id))
    connection.execute(
        """UPDATE sessions SET updated_at = ?,
               head_step_id = CASE WHEN head_step_id IS NULL OR (
                   SELECT model_branch_id FROM steps WHERE id = sessions.head_step_id) = ?
                   THEN ? ELSE head_step_id END
           WHERE id = ?""",
        (now, model_branch_id, step_id, session_id))


@contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while many records are built: none of them holds
    a cycle, yet the collector would walk them all again and again (10^5 steps load in about
    half the time without it)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _sane_tokens(tokens: Sequence[TokenLogprob] | None) -> Sequence[TokenLogprob] | None:
    """The last line of defence, as for usage (the model-call boundary refuses them first):
    tokens holding a log-probability no model could give are stored as none."""
    if tokens and all(sane_logprob(token.logprob) is not None for token in tokens):
        return tokens
    return None


def _as_read(tokens: Sequence[TokenLogprob] | None) -> tuple[TokenLogprob, ...] | None:
    """`tokens` as `tokens_from_json` reads them back from `tokens_json` and
    `alternatives_json` (without encoding them and decoding them again)."""
    if not tokens:
        return None
    return tuple(
        TokenLogprob(token.text, float(token.logprob),
                     tuple((str(alternative), float(logprob))
                           for alternative, logprob in token.alternatives))
        for token in tokens
    )


def tokens_json(tokens: Sequence[TokenLogprob] | None) -> str | None:
    """[[text, log-probability], ...], or None."""
    if not tokens:
        return None
    return json.dumps([[token.text, token.logprob] for token in tokens], allow_nan=False)


def alternatives_json(tokens: Sequence[TokenLogprob] | None) -> str | None:
    """[[[text, log-probability], ...] for each token], or None when no token has any."""
    if not tokens or not any(token.alternatives for token in tokens):
        return None
    return json.dumps([[list(pair) for pair in token.alternatives] for token in tokens],
                      allow_nan=False)


def tokens_from_json(text: str | None, alternatives: str | None = None
                     ) -> tuple[TokenLogprob, ...] | None:
    if not text:
        return None
    pairs = json.loads(text)
    tops = json.loads(alternatives) if alternatives else None
    if not isinstance(tops, list) or len(tops) != len(pairs):
        tops = [[]] * len(pairs)
    return tuple(
        TokenLogprob(token, float(value), tuple((str(alt), float(lp)) for alt, lp in top))
        for (token, value), top in zip(pairs, tops, strict=True)
    )
