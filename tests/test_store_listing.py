"""The sessions list on a real SQLite file: one paged query with filters, sort and search
(issue 8 item 13, issue 10 item 10), and big traces loaded without their tokens."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bbm_tui.core.records import CallRecord, LabelFilter, SessionQuery, SessionSort, TokenLogprob
from bbm_tui.core.store import Store


@pytest.fixture
def store(tmp_path: Path):
    opened = Store.open(tmp_path / "bbm-tui.sqlite3")
    yield opened
    opened.close()


def make(store: Store, name: str, task: str, model: str, steps: int, question: str = "q"):
    session = store.create_session(task=task, input=question, model=model, name=name)
    parent = None
    made = []
    for number in range(1, steps + 1):
        answer = "(A)" if number == steps else None
        step = store.add_step(session.id, parent_id=parent, number=number,
                              text=f"{name} {number}", answer=answer)
        parent = step.id
        made.append(step)
    return session, made


@pytest.fixture
def listed(store: Store):
    """Four sessions, the last made last: a (unlabelled), b (mistake at 2), c (no mistake),
    d (a mistake on a branch not on show)."""
    a, _ = make(store, "alpha", "word_sorting", "replay/bbm", 3, "Sort: oven costume")
    b, b_steps = make(store, "beta", "dyck_languages", "openai/gpt-4o-mini", 5, "[ { <")
    store.set_label(b.id, b_steps[1].id, b_steps[-1].id)
    c, c_steps = make(store, "gamma", "word_sorting", "openai/gpt-4o-mini", 2, "Sort: zebra")
    store.set_label(c.id, None, c_steps[-1].id)
    d, d_steps = make(store, "delta", "multistep_arithmetic", "replay/bbm", 4, "((1 + 2))")
    store.set_label(d.id, d_steps[2].id, d_steps[-1].id)
    store.set_head(d.id, d_steps[1].id)  # back to Thought 2: the flag is on a longer branch
    return {"a": a.id, "b": b.id, "c": c.id, "d": d.id}


def names(store: Store, query: SessionQuery, offset: int = 0, limit: int | None = None):
    return [s.session.name for s in store.session_page(query, offset, limit)]


def test_each_row_has_its_steps_answer_and_label(store: Store, listed: dict) -> None:
    rows = {s.session.name: s for s in store.sessions()}
    assert [s.session.name for s in store.sessions()] == ["delta", "gamma", "beta", "alpha"]
    assert (rows["alpha"].steps, rows["alpha"].answer, rows["alpha"].label) == (3, "(A)", None)
    assert rows["beta"].mistake_number == 2 and rows["beta"].label is not None
    assert rows["gamma"].label.mistake_step_id is None and rows["gamma"].mistake_number is None
    # delta's flag is on Thought 3 of a branch it no longer shows: flagged, but not here.
    assert rows["delta"].steps == 2 and rows["delta"].answer is None
    assert rows["delta"].label.mistake_step_id is not None
    assert rows["delta"].mistake_number is None


def test_pages_and_positions(store: Store, listed: dict) -> None:
    query = SessionQuery()
    assert store.count_sessions(query) == 4
    assert names(store, query, 0, 2) == ["delta", "gamma"]
    assert names(store, query, 2, 2) == ["beta", "alpha"]
    assert names(store, query, 4, 2) == []
    assert store.session_position(query, listed["b"]) == 2
    assert store.session_position(SessionQuery(task="dyck"), listed["a"]) is None


def test_filters_by_task_model_label_date_and_text(store: Store, listed: dict) -> None:
    assert names(store, SessionQuery(task="word")) == ["gamma", "alpha"]
    assert names(store, SessionQuery(model="GPT-4O")) == ["gamma", "beta"]
    assert names(store, SessionQuery(label=LabelFilter.UNLABELLED)) == ["alpha"]
    assert names(store, SessionQuery(label=LabelFilter.MISTAKE)) == ["delta", "beta"]
    assert names(store, SessionQuery(label=LabelFilter.NO_MISTAKE)) == ["gamma"]
    # Text: in the name or the question, case-insensitively; % and _ are plain characters.
    assert names(store, SessionQuery(text="ZEBRA")) == ["gamma"]
    assert names(store, SessionQuery(text="alp")) == ["alpha"]
    assert names(store, SessionQuery(text="{ <")) == ["beta"]
    assert names(store, SessionQuery(text="%")) == []
    assert names(store, SessionQuery(text="sort", model="replay")) == ["alpha"]
    now = time.time()
    assert len(names(store, SessionQuery(since=now - 3600))) == 4
    assert names(store, SessionQuery(before=now - 3600)) == []
    assert store.count_sessions(SessionQuery(task="word", label=LabelFilter.NO_MISTAKE)) == 1


def test_sorts(store: Store, listed: dict) -> None:
    def by(sort: SessionSort, descending: bool = False) -> list[str]:
        return names(store, SessionQuery(sort=sort, descending=descending))

    assert by(SessionSort.NAME) == ["alpha", "beta", "delta", "gamma"]
    assert by(SessionSort.NAME, True) == ["gamma", "delta", "beta", "alpha"]
    assert by(SessionSort.TASK) == ["beta", "delta", "gamma", "alpha"]
    assert by(SessionSort.STEPS) == ["delta", "gamma", "alpha", "beta"]
    assert by(SessionSort.LABEL) == ["alpha", "gamma", "beta", "delta"]
    assert by(SessionSort.MODEL)[:2] == ["gamma", "beta"]
    assert by(SessionSort.UPDATED, False) == ["alpha", "beta", "gamma", "delta"]
    # Positions follow the same order.
    query = SessionQuery(sort=SessionSort.NAME, descending=False)
    assert store.session_position(query, listed["c"]) == 3


def test_a_long_trace_loads_in_bulk_without_its_tokens(store: Store) -> None:
    session = store.create_session(task="word_sorting", input="q", model="openai/m")
    parent = None
    for number in range(1, 201):
        tokens = [TokenLogprob(f"t{number} ", -0.5), TokenLogprob("end", -0.25)]
        call = CallRecord("openai/m", {}, 0.01, tokens=tokens)
        parent = store.add_step(session.id, parent_id=parent, number=number,
                                text=f"t{number} end", call=call).id
    branch = store.branch(session.id)
    assert len(branch) == 200 and all(step.tokens is None for step in branch)
    assert all(step.logprob == pytest.approx(-0.75) for step in branch)
    assert store.step(parent).tokens[0] == TokenLogprob("t200 ", -0.5)
    assert store.sessions()[0].steps == 200
