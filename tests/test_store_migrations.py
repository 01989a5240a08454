"""Stores written by schema versions 1 to 17 open as the current version with nothing
lost (issue 9, item 4; issue 11); v9's impossible log-probabilities are mended (version 10).
The old stores are frozen as SQL in tests/fixtures/, written by the code of their day, never
built from today's."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest

from bbm_tui.core.records import CallRecord, TokenLogprob
from bbm_tui.core.store import SCHEMA_VERSION, Store
from bbm_tui.core.trace.session import TraceSession

FIXTURES = Path(__file__).parent / "fixtures"


def old_store(tmp_path: Path, version: int) -> Path:
    path = tmp_path / f"v{version}.sqlite3"
    connection = sqlite3.connect(path)
    connection.executescript((FIXTURES / f"store_v{version}.sql").read_text(encoding="utf-8"))
    connection.commit()
    connection.close()
    return path


def table_rows(path: Path) -> dict[str, list[dict]]:
    connection = sqlite3.connect(path)
    connection.row_factory = sqlite3.Row
    tables = [row[0] for row in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    rows = {table: [dict(row) for row in connection.execute(
        f"SELECT * FROM {table} ORDER BY rowid")] for table in tables}
    connection.close()
    return rows


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13, 14, 15, 16, 17])
def test_an_old_store_opens_as_the_current_version_with_nothing_lost(
    tmp_path: Path, version: int
) -> None:
    path = old_store(tmp_path, version)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == version
    before = table_rows(path)
    with Store.open(path) as store:
        assert store.integrity_check() == "ok"
    after = table_rows(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    # Every row, every old column, every value: as it was.
    for table, rows in before.items():
        assert len(after[table]) == len(rows), table
        for old, new in zip(rows, after[table], strict=True):
            assert {key: new[key] for key in old} == old, (table, old["id"])


@pytest.mark.parametrize("version", [1, 2, 3])
def test_what_the_app_reads_from_a_migrated_store(tmp_path: Path, version: int) -> None:
    with Store.open(old_store(tmp_path, version)) as store:
        branch = store.branch(1)
        assert [step.number for step in branch] == [1, 2, 3]
        assert branch[2].answer == "-10"
        # Model steps now point at the call that made them (choice 0); a typed one at none.
        assert [(step.call_id, step.choice) for step in branch] == [(1, 0), (2, 0), (3, 0)]
        typed = store.step(4)
        assert (typed.call_id, typed.origin) == (None, "typed")
        assert typed.text == 'A typed alternative \u2028 with ✓ and "quotes"'
        # A step of v1-v3 keeps the sum its call recorded; it has no tokens.
        assert branch[0].logprob == pytest.approx(-0.75) and branch[0].tokens is None
        assert (branch[1].latency_s, branch[1].prompt_tokens) == (0.33, 131)
        # Labels are the app's own user's, unassisted; the undone one stays undone.
        label = store.current_label(1)
        assert (label.mistake_step_id, label.annotator, label.assisted) == (3, "me", False)
        assert store.current_label(2).mistake_step_id is None
        assert [lab.id for lab in store.labels(1)] == [2]
        summary = {s.session.id: s for s in store.sessions()}
        assert summary[1].mistake_number == 3 and summary[2].steps == 1
        assert store.step(5).truncated and store.session(2).mode == "completion"
        runs = store.finder_runs(1)
        if version == 1:
            assert runs == []
        else:
            assert [(run.method, run.mistake_number) for run in runs] == [
                ("direct-trace", 3), ("direct-step", None)]
            assert runs[0].verdicts[0].call.prompt_tokens == 500
            assert runs[1].ended == ("failed" if version == 3 else None)
        assert store.totals(1).calls == (3 if version == 1 else 4)


def test_version_4_keeps_tokens_candidates_and_annotators(tmp_path: Path) -> None:
    from bbm_tui.core.records import CallRecord

    with Store.open(old_store(tmp_path, 3)) as store:
        tokens = [TokenLogprob("4 ", -0.25), TokenLogprob("+ 4", -0.5)]
        call = CallRecord("openai/m", {"temperature": 0.0}, 0.1, tokens=tokens,
                          logprobs=[-0.25, -0.5])
        step = store.add_step(1, parent_id=3, number=4, text="4 + 4", call=call)
        again = store.step(step.id)
        assert again.tokens == tuple(tokens) and again.logprob == pytest.approx(-0.75)
        assert again.call_id is not None and again.choice == 0
        samples = [CallRecord("openai/m", {"temperature": 1.0, "n": 3}, 0.2)]
        stored = store.add_candidates(1, parent_id=1, number=2, calls=samples, candidates=[
            (0, 0, "A = -4.", [TokenLogprob("A = -4.", -1.0)], False),
            (0, 1, "Let's calculate A = (-9 + 5) = -4.", None, True),
            (0, 2, "A is -4.", [TokenLogprob("A is", -0.5), TokenLogprob(" -4.", -0.25)], False),
        ])
        assert [c.logprob for c in stored] == [-1.0, None, -0.75]
        assert [c.dropped for c in store.candidates(1, 1, 2)] == [False, True, False]
        chosen = store.add_step(1, parent_id=1, number=2, text="A is -4.", origin="backtrack",
                                call_id=stored[2].call_id, choice=2,
                                tokens=stored[2].tokens)
        store.choose_candidate(stored[2].id, chosen.id)
        assert store.candidates(1, 1, 2)[2].step_id == chosen.id
        assert store.step(chosen.id).logprob == pytest.approx(-0.75)
        store.set_label(1, chosen.id, chosen.id, annotator="ana", assisted=True)
        by = {label.annotator: label for label in store.labels(1)}
        assert set(by) == {"me", "ana"} and by["ana"].assisted
        assert store.current_label(1, "me").mistake_step_id == 3
        store.undo_label(1, "ana")
        assert store.current_label(1, "ana") is None and store.current_label(1).annotator == "me"


def test_version_5_keeps_each_steps_logprob_and_lists_sessions_in_one_query(
    tmp_path: Path,
) -> None:
    """v4 -> v5: each step's log-probability sum is moved into the step (from its tokens, or
    before v4 from its call's list), so steps load in bulk without their tokens."""
    path = old_store(tmp_path, 4)
    with Store.open(path) as store:
        assert [step.number for step in store.branch(1)] == [1, 2, 3, 4]
        sums = {step.id: step.logprob for step in store.steps_of(1)}
        assert sums[1] == pytest.approx(-0.75)  # a v1-v3 step: its call's list
        assert sums[6] == pytest.approx(-0.75) and sums[7] == pytest.approx(-0.75)
        assert sums[2] is None and sums[4] is None
        # Bulk loads leave the tokens out; one step has them.
        assert all(step.tokens is None for step in store.steps_of(1))
        assert store.step(6).tokens == (TokenLogprob("4 ", -0.25), TokenLogprob("+ 4", -0.5))
        # ana's verdict (on the backtracked branch, not the one on show) is the latest.
        summary = {s.session.id: s for s in store.sessions()}
        assert summary[1].steps == 4 and summary[1].label.annotator == "ana"
        assert summary[1].mistake_number is None  # step 7 is on another branch
        store.set_head(1, 7)
        assert store.sessions()[0].mistake_number == 2
    connection = sqlite3.connect(path)
    indexes = {row[0] for row in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"sessions_by_updated", "labels_in_force"} <= indexes


def test_a_version_5_store_keeps_its_sums_branches_samples_labels_and_runs(
    tmp_path: Path,
) -> None:
    """v5 -> today: the session v5's code wrote (tests/fixtures/store_v5.sql) reads as it was
    written: each step's log-probability sum (from its tokens, or from its call's list), both
    branches, the samples of the backtracked thought and the one chosen, two annotators'
    labels with the withdrawn one still withdrawn, and a finder run with its calls."""
    with Store.open(old_store(tmp_path, 5)) as store:
        branch = store.branch(3)
        assert [(step.id, step.number, step.origin) for step in branch] == [
            (8, 1, "model"), (11, 2, "backtrack"), (12, 3, "model")]
        assert [step.text for step in store.branch(3, 10)] == [
            "A = (7 - 2) = 5.", "B = (1 + 1) = 3.", "So the answer is 15."]
        assert store.branch(3, 4) == []  # a step of another session ends no branch of this
        bulk = {step.id: step for step in store.steps_of(3)}
        assert bulk[8].logprob == pytest.approx(-0.3) and bulk[8].ntokens == 2
        assert bulk[9].logprob == pytest.approx(-2.0) and bulk[9].ntokens == 2  # its call's
        assert (bulk[10].logprob, bulk[10].ntokens) == (None, None)
        # Chosen among the three samples of one call: its own tokens, no cost of its own.
        chosen = bulk[11]
        assert (chosen.call_choices, chosen.ntokens, chosen.completion_tokens, chosen.cost) == (
            3, 2, 2, None)
        assert store.step(11).tokens == (TokenLogprob("B = (1 + 1) = ", -0.2),
                                          TokenLogprob("2.", -0.05))
        samples = store.candidates(3, 8, 2)
        assert [(c.dropped, c.step_id) for c in samples] == [(True, None), (False, 11),
                                                              (False, None)]
        assert [c.logprob for c in samples] == [pytest.approx(-1.7), -0.25, None]
        by = {label.annotator: label for label in store.labels(3)}
        assert (by["me"].mistake_step_id, by["me"].assisted) == (9, False)
        assert (by["ana"].mistake_step_id, by["ana"].assisted) == (9, True)
        assert len(store.label_history(3, "ana")) == 1  # the withdrawn "no mistake" stays so
        summary = {s.session.id: s for s in store.sessions()}
        assert (summary[3].steps, summary[3].label.annotator) == (3, "ana")
        assert summary[3].mistake_number is None  # Thought 2 flagged on the other branch
        [run] = store.finder_runs(3)
        assert (run.method, run.mistake_number, run.parsed) == ("direct-step", 2, True)
        assert [(v.verdict, v.call.prompt_tokens) for v in run.verdicts] == [
            ("Yes", 300), ("No", 320)]
        assert store.totals(3).calls == 7
        store.set_head(3, 10)
        assert {s.session.id: s for s in store.sessions()}[3].mistake_number == 2


def test_version_7_counts_each_steps_tokens_and_a_samples_own(tmp_path: Path) -> None:
    """v6 -> v7: each step knows how many tokens its log-probability sum covers (from its
    tokens, or before v4 from its call's list), for its confidence; a step chosen among a
    call's samples counts its own tokens, not the call's for all of them, and no cost."""
    path = old_store(tmp_path, 6)
    with Store.open(path) as store:
        bulk = {step.id: step for step in store.steps_of(1)}
        for step_id, step in bulk.items():  # bulk and one by one agree, tokens aside
            one = store.step(step_id)
            assert (one.ntokens, one.call_choices, one.completion_tokens, one.cost) == (
                step.ntokens, step.call_choices, step.completion_tokens, step.cost)
        # Thought 1 streamed with 4 tokens; Thought 2's call sent a list of 3 (as before v4).
        assert (bulk[1].ntokens, bulk[1].completion_tokens, bulk[1].call_choices) == (4, 9, None)
        assert bulk[1].confidence == pytest.approx(math.exp(-0.75 / 4))
        assert (bulk[2].ntokens, bulk[2].confidence) == (3, pytest.approx(math.exp(-1.75 / 3)))
        assert (bulk[3].ntokens, bulk[3].confidence) == (None, None)  # typed
        # Chosen among the eight samples of one call (296 completion tokens for the eight):
        # its own 2 tokens, no cost of its own; the call's prompt and latency are its.
        sample = bulk[4]
        assert (sample.call_choices, sample.ntokens, sample.completion_tokens) == (8, 2, 2)
        assert (sample.cost, sample.prompt_tokens, sample.latency_s) == (None, 131, 0.9)
        assert bulk[5].completion_tokens == 6 and bulk[5].cost == pytest.approx(0.0001)
        # One of three samples from a provider without log-probabilities: no token count.
        assert (bulk[6].call_choices, bulk[6].completion_tokens, bulk[6].cost) == (3, None, None)
        # A provider without n: each sample had its call, whose figures are the sample's own.
        assert (bulk[7].call_choices, bulk[7].completion_tokens) == (1, 9)
        # The session's totals still count every call once.
        totals = store.totals(1)
        assert (totals.calls, totals.completion_tokens) == (7, 9 + 11 + 296 + 6 + 30 + 7 + 9)
    connection = sqlite3.connect(path)
    indexes = {row[0] for row in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "candidates_by_call" in indexes


def test_version_8_keeps_a_v7_store_and_adds_each_tokens_alternatives(tmp_path: Path) -> None:
    """v7 -> v8: every step, sample, label, finder run and queued trace as it was; the tokens
    stored before v8 have no alternatives (the top 1 only was asked for); new ones keep them."""
    path = old_store(tmp_path, 7)
    with Store.open(path) as store:
        branch = store.branch(1)
        assert [step.text for step in branch] == [
            "This equation is A - B.", "A = (-9 + 5) = -4.", "So the answer is -10."]
        assert branch[1].origin == "backtrack" and branch[2].answer == "-10"
        first = store.step(1)
        assert [t.text for t in first.tokens] == ["This", " equation", " is", " A - B."]
        assert all(token.alternatives == () for token in first.tokens)
        assert first.confidence == pytest.approx(math.exp(-0.75 / 4))
        samples = store.candidates(1, 1, 2)
        assert [(c.text, c.dropped, c.step_id) for c in samples] == [
            ("A = (-9 + 5) = -4.", False, 4), ("A = (-9 + 5) = -3.", True, None),
            ("A = (-9 + 5) = 4.", False, None)]
        assert samples[2].logprob == pytest.approx(-2.2)
        assert store.current_label(1).mistake_step_id == 2
        [run] = store.finder_runs(1)
        assert (run.method, run.mistake_number, len(run.verdicts)) == ("direct-step", None, 3)
        assert run.verdicts[1].raw == "Yes, it is right."
        assert store.queue_work("ana")[2].judged == "+-"
        assert store.totals(1).calls == 7
        tokens = [TokenLogprob("-4", -0.1, (("-4", -0.1), ("-3", -2.5)))]
        step = store.add_step(1, parent_id=4, number=3, text="-4", tokens=tokens)
        assert store.step(step.id).tokens == tuple(tokens)


def test_version_9_keeps_a_v8_store_and_says_which_counts_are_estimates(tmp_path: Path) -> None:
    """v8 -> v9: the calls stored before say nothing of estimates (read as the provider's
    counts, as they were shown); a call stored from now on keeps what it is."""
    path = old_store(tmp_path, 8)
    with Store.open(path) as store:
        latest = store.branch(1)[-1]
        assert (latest.text, latest.completion_tokens) == ("-4", 3)
        assert latest.usage_estimated is False
        assert store.step(latest.id).tokens[0].alternatives == (("-4", -0.1), ("-3", -2.5))
        before = store.totals(1)
        assert before.estimated_calls == 0
        call = CallRecord(model="openai/test", params={}, latency_s=0.1, prompt_tokens=970,
                          completion_tokens=5, usage_estimated=True)
        step = store.add_step(1, parent_id=latest.id, number=4, text="So the answer is -4.",
                              call=call)
        assert store.step(step.id).usage_estimated is True
        assert store.branch(1)[-1].usage_estimated is True
        assert store.totals(1).estimated_calls == 1


def test_version_10_clears_impossible_log_probabilities_and_redacts_api_bases(
    tmp_path: Path,
) -> None:
    """v9 -> v10: what v9 stored unchecked is made right in place. Log-probabilities no model
    could give (3999.94 a token, NaN, Infinity, 1e308) become none: such a step's or sample's
    tokens, sum and count, a call's list; an alternative that held one is left out of its
    token's; every good value stays. A key-shaped token in an api base's path is redacted as
    the messages did. Every other row and value is as it was."""
    path = old_store(tmp_path, 9)
    before = table_rows(path)
    with Store.open(path) as store:
        assert store.integrity_check() == "ok"
        assert store.session(3).api_base == "http://127.0.0.1:9/ok/[redacted]/v1"
        assert TraceSession.load(store, 3).needs_api_base
        first, second, third = store.branch(3)
        for step in (first, second):
            assert (step.logprob, step.ntokens, step.confidence) == (None, None, None)
            assert store.step(step.id).tokens is None
        assert third.confidence == pytest.approx(math.exp(-0.75 / 2))
        assert store.step(third.id).tokens == (
            TokenLogprob("So the answer is", -0.5, (("So the answer is", -0.5),)),
            TokenLogprob(" 4", -0.25, ((" 4", -0.25), (" four", -3.0))))
        bad, good = store.candidates(3, first.id, 2)
        assert (bad.logprob, bad.tokens) == (None, None)
        assert good.logprob == pytest.approx(-0.3) and len(good.tokens) == 2
    after = table_rows(path)
    changed = {
        ("sessions", 3): {"api_base"},
        ("steps", 9): {"tokens", "logprob", "ntokens"},
        ("steps", 10): {"tokens", "ntokens"},
        ("steps", 11): {"alternatives"},
        ("candidates", 4): {"tokens", "logprob"},
        ("calls", 9): {"logprobs"},
        ("calls", 10): {"logprobs"},
        ("calls", 13): {"logprobs"},
    }
    for table, rows in before.items():
        assert len(after[table]) == len(rows), table
        for old, new in zip(rows, after[table], strict=True):
            differ = {key for key in old if new[key] != old[key] and not (
                old[key] != old[key] and new[key] != new[key])}  # NaN is never equal
            assert differ == changed.get((table, old["id"]), set()), (table, old["id"])
    assert after["calls"][8]["logprobs"] is None and after["steps"][10]["alternatives"] == (
        '[[["So the answer is", -0.5]], [[" 4", -0.25], [" four", -3.0]]]')


def test_version_11_keeps_a_v10_store_and_keeps_a_tasks_definition_by_its_digest(
        tmp_path: Path) -> None:
    """v10 -> v11: every session before is one of the paper's five (no digest); a session of
    a task of one's own keeps its definition, once for every session made with it."""
    from bbm_tui.core.records import SessionSource
    from bbm_tui.core.store import TaskDefinition

    path = old_store(tmp_path, 10)
    with Store.open(path) as store:
        sessions = {summary.session.id: summary.session for summary in store.sessions()}
        assert set(sessions) == {1, 2, 3, 4}
        assert all(session.task_digest is None for session in sessions.values())
        assert [step.text for step in store.branch(4)] == [
            "We should process each input one by one."]
        definition = TaskDefinition("d" * 64, '{"name": "sums"}')
        first = store.create_session(task="sums", input="1 + 2", model="openai/m",
                                     task_definition=definition)
        second = store.create_session(task="sums", input="2 + 3", model="openai/m",
                                      task_definition=definition, source=SessionSource.RUN)
        assert first.task_digest == second.task_digest == "d" * 64
        assert store.task_definition("d" * 64) == '{"name": "sums"}'
        assert store.task_definition("e" * 64) is None
        assert store.find_session(task="sums", input="2 + 3", model="openai/m",
                                  source=SessionSource.RUN, task_digest="d" * 64) == second
        assert store.find_session(task="sums", input="2 + 3", model="openai/m",
                                  source=SessionSource.RUN) is None
    rows = sqlite3.connect(path).execute("SELECT digest, name FROM task_definitions").fetchall()
    assert rows == [("d" * 64, "sums")]


def test_version_12_keeps_a_v11_store_and_keeps_origins_ratings_and_notes(
        tmp_path: Path) -> None:
    """v11 -> v12: labels before are the paper's protocol's (no ratings, no finish reason, no
    note); a session may now keep the row it came from, and a label every step's rating."""
    path = old_store(tmp_path, 11)
    with Store.open(path) as store:
        before = store.current_label(2, "ana")
        assert (before.ratings, before.finish_reason, before.note) == (None, None, None)
        assert store.origin(1) is None and store.origins() == {}
        origin = {"format": "processbench", "fields": {"id": "gsm8k-0"}, "keys": ["id"]}
        store.set_origin(4, origin)
        store.set_origin(4, {**origin, "fields": {"id": "gsm8k-1"}})  # replaced, not added
        assert store.origins() == {4: {**origin, "fields": {"id": "gsm8k-1"}}}
        step = store.branch(4)[0]
        label = store.set_label(4, step.id, step.id, annotator="bo", ratings=[0, -1],
                                finish_reason="found_error", note="wrong bracket")
        assert (label.ratings, label.finish_reason, label.note) == (
            (0, -1), "found_error", "wrong bracket")
        assert store.current_label(4, "bo") == label
        mine = [found for found in store.annotator_labels() if found.annotator == "bo"]
        assert [(found.ratings, found.finish_reason, found.note) for found in mine] == [
            ((0, -1), "found_error", "wrong bracket")]
    rows = sqlite3.connect(path).execute(
        "SELECT session_id, origin FROM session_origins").fetchall()
    assert rows == [(4, '{"format": "processbench", "fields": {"id": "gsm8k-1"}, '
                        '"keys": ["id"]}')]


def test_version_13_keeps_a_v12_store_and_claims_sessions_being_generated(
    tmp_path: Path,
) -> None:
    """v12 -> v13: every row as it was (the test above), an empty `session_claims`; a
    session can be claimed, is busy for another owner, and is free once released; a step
    stored again at its place is the one there."""
    from bbm_tui.core.store import SessionBusy

    path = old_store(tmp_path, 12)
    with Store.open(path) as store:
        assert table_rows(path)["session_claims"] == []
        versions = [s for s in store.steps_of(3) if s.number == 3]
        assert [s.text for s in versions] == ["So the answer is 4", "So the answer is 4."]
        store.claim_session(3, "a")
        with pytest.raises(SessionBusy):
            store.claim_session(3, "b")
        store.release_claim(3, "a")
        store.claim_session(3, "b")
        again = store.add_step(3, parent_id=versions[1].parent_id, number=3,
                               text="So the answer is 4.")
        assert again.id == versions[1].id


def test_version_14_keeps_a_v13_store_and_stores_what_the_prompt_cache_did(
    tmp_path: Path,
) -> None:
    """v13 -> v14: the calls stored before say nothing of the prompt cache (unknown, not 0),
    their costs stay as stored, and a call whose price was never known stays unknown in the
    totals; a call stored from now on keeps the tokens read from and written to the cache."""
    path = old_store(tmp_path, 13)
    with Store.open(path) as store:
        latest = store.branch(1)[-1]
        assert (latest.text, latest.answer) == ("So the answer is -4.", "-4")
        assert (latest.prompt_tokens, latest.completion_tokens) == (None, 6)
        assert latest.usage_estimated is True and latest.cached_tokens is None
        assert latest.prompt_estimated is True  # one flag for both before v14
        [run] = [run for run in store.finder_runs(1) if run.model == "openai/gpt-4o-mini"]
        call = run.verdicts[0].call
        assert (call.prompt_tokens, call.cached_tokens, call.cache_write_tokens) == (
            1011, None, None)
        assert call.cost == pytest.approx(0.00018165)
        before = store.totals(1)
        assert (before.cached_tokens, before.cache_write_tokens) == (0, 0)
        # The calls whose cost was never known (the Anthropic step's, one of openai/test's).
        assert before.unpriced_models == ("anthropic/claude-haiku-4-5", "openai/test")
        assert (before.calls, before.unpriced_calls) == (10, 2)
        cached = CallRecord(model="anthropic/claude-haiku-4-5", params={}, latency_s=0.3,
                            prompt_tokens=1200, completion_tokens=9, cost=0.0002,
                            cached_tokens=1100, cache_write_tokens=60)
        step = store.add_step(1, parent_id=latest.id, number=5, text="Done.", call=cached)
        assert store.step(step.id).cached_tokens == 1100
        assert store.branch(1)[-1].cached_tokens == 1100
        after = store.totals(1)
        assert (after.calls, after.cached_tokens, after.cache_write_tokens) == (
            before.calls + 1, 1100, 60)
        assert after.cost == pytest.approx(before.cost + 0.0002)
        assert after.unpriced_calls == before.unpriced_calls


def test_version_15_keeps_a_v14_store_and_gives_a_session_several_models(
    tmp_path: Path,
) -> None:
    """v14 -> v15: every session before is one of one model (no model branch, its steps on
    none); given more models, its own trace becomes the first model branch (its model, its
    head, every step of it) and the new ones follow in their columns, each step stored on its
    own branch (two models writing the same first thought keep a step each), each head moving
    with its branch, the session's with the branch it was on."""
    from bbm_tui.core.records import ModelBranchState

    path = old_store(tmp_path, 14)
    with Store.open(path) as store:
        assert table_rows(path)["model_branches"] == []
        assert all(step.model_branch_id is None for step in store.steps_of(3))
        head = store.session(3).head_step_id
        assert head == 13
        first, second, third = store.add_model_branches(
            3, [("openai/other", "http://user:secret@127.0.0.1:9/v1", "chat"),
                ("solver/bbm", None, "chat")])
        assert [(b.position, b.model, b.head_step_id, b.state) for b in (first, second, third)] \
            == [(0, "openai/m", 13, ModelBranchState.IDLE), (1, "openai/other", None, "idle"),
                (2, "solver/bbm", None, "idle")]
        assert first.api_base == "http://127.0.0.1:9/ok/[redacted]/v1"
        assert second.api_base is not None and "secret" not in second.api_base
        assert {step.model_branch_id for step in store.steps_of(3)} == {first.id}
        # The same first thought by another model: a step of its own, on its branch.
        mine = store.add_step(3, parent_id=None, number=1, text="2 + 2",
                              model_branch_id=second.id)
        assert mine.id != 9 and mine.model_branch_id == second.id
        assert store.model_branch(second.id).head_step_id == mine.id
        assert store.session(3).head_step_id == head  # the branch on show stays
        again = store.add_step(3, parent_id=None, number=1, text="2 + 2",
                               model_branch_id=second.id)
        assert again.id == mine.id  # stored once on its branch
        # The session's head follows the branch it was on.
        on_first = store.add_step(3, parent_id=13, number=4, text="Done.",
                                  model_branch_id=first.id)
        assert store.session(3).head_step_id == on_first.id
        store.set_model_branch_head(first.id, 11)
        assert store.session(3).head_step_id == 11
        failed = store.set_model_branch_state(third.id, ModelBranchState.FAILED, "401: no key")
        assert (failed.state, failed.error) == ("failed", "401: no key")
        moved = store.update_model_branch_model(third.id, model="openai/x",
                                                api_base="http://k:v@h/v1", mode="completion")
        assert (moved.model, moved.mode) == ("openai/x", "completion")
        assert moved.api_base is not None and "v@" not in moved.api_base
        # More models later go on in the next columns.
        assert [b.position for b in store.add_model_branches(3, [("m4", None, "chat")])] == [
            0, 1, 2, 3]
        summary = next(s for s in store.sessions() if s.session.id == 3)
        assert summary.models == ("openai/m", "openai/other", "openai/x", "m4")
        assert summary.model_names == "openai/m + openai/other + openai/x + m4"
        assert next(s for s in store.sessions() if s.session.id == 1).models == ()
        from bbm_tui.core.records import SessionQuery

        assert [s.session.id for s in store.sessions(SessionQuery(model="other"))] == [3]
        store.delete_session(3)
        assert store.model_branches(3) == []
    assert table_rows(path)["model_branches"] == []


def test_version_16_keeps_a_v15_store_and_marks_steps_taken_from_one_call(
    tmp_path: Path,
) -> None:
    """v15 -> v16: every call stored before is a call of its own, served by no router; a
    call counts once in the totals whatever number of steps it gave; each step keeps its
    share's call id and the deployment that served it; v15's models side by side stay as
    they were."""
    path = old_store(tmp_path, 15)
    with Store.open(path) as store:
        steps = store.branch(1)
        assert all(step.one_call is None and step.deployment is None for step in steps)
        first, second = store.model_branches(4)
        assert first.model == "openai/m"
        assert (second.model, second.state, second.error) == (
            "openai/other", "failed", "timed out after 60 s")
        on_second = store.step(second.head_step_id or 0)
        assert (on_second.model_branch_id, on_second.one_call, on_second.deployment) == (
            second.id, None, None)
        assert store.totals(4).calls == 3
        before = store.totals(1)
        parent = steps[-1].id
        for share, text in enumerate(["One.", "Two.", "Three."]):
            call = CallRecord(model="openai/test", params={"one_call": True}, latency_s=0.1 * share,
                              completion_tokens=3, one_call="abc", one_call_share=share,
                              deployment="gpu-1")
            parent = store.add_step(1, parent_id=parent, number=len(steps) + share + 1,
                                    text=text, call=call).id
        after = store.totals(1)
        assert after.calls == before.calls + 1
        assert after.completion_tokens == before.completion_tokens + 9
        added = store.branch(1)[-3:]
        assert [(s.one_call, s.deployment) for s in added] == [("abc", "gpu-1")] * 3
        assert store.step(added[0].id).one_call == "abc"


def test_version_18_keeps_a_v17_store_and_stores_a_thinking_calls_reasoning(
    tmp_path: Path,
) -> None:
    """v17 -> v18: every step stored before is a step of its own kind (cut from no
    reasoning, by no rule), one-call steps keep their call; a thinking call's reasoning is
    stored whole as its steps are, and a re-cut view points at it without a call."""
    from bbm_tui.core.store import ReasoningSlice

    path = old_store(tmp_path, 17)
    with Store.open(path) as store:
        steps = store.branch(1)
        assert [step.text for step in steps[-2:]] == ["One of one call.", "Two of it."]
        assert {step.one_call for step in steps[-2:]} == {"c0ffee"}
        assert all(store.step_view(step.id) == (None, None) for step in steps)
        assert store.reasonings(1) == []
        totals = store.totals(1)
        reasoning = store.add_reasoning(1, "solver/thinking", "raw")
        parent = None
        for number, raw in enumerate(["Plan it.\n\n", "Work it out.\n\n"], start=1):
            call = CallRecord(model="solver/thinking", params={"mode": "thinking"},
                              latency_s=0.1, completion_tokens=3, one_call="think",
                              one_call_share=number - 1)
            parent = store.add_step(1, parent_id=parent, number=number, text=raw.strip(),
                                    origin="thinking", call=call,
                                    view=ReasoningSlice(reasoning.id, "paragraph", raw)).id
        assert store.reasoning(reasoning.id).text == "Plan it.\n\nWork it out.\n\n"
        assert not store.reasoning(reasoning.id).complete
        done = store.finish_reasoning(reasoning.id, text="Plan it.\n\nWork it out.\n\nEnd",
                                      kind="summary", answer_text="So the answer is 5",
                                      reasoning_tokens=9, opaque=[{"signature": "c2ln"}])
        assert done.complete and done.kind == "summary"
        assert done.opaque == b'[{"signature": "c2ln"}]'
        assert store.totals(1).calls == totals.calls + 1
        ids = store.add_view(1, reasoning.id, "sentence", [("Plan it.", None), ("End", "5")],
                             "thinking")
        assert [store.step_view(i) for i in ids] == [(reasoning.id, "sentence")] * 2
        assert store.totals(1).calls == totals.calls + 1
    assert table_rows(path)["reasonings"][0]["text"] == "Plan it.\n\nWork it out.\n\nEnd"
