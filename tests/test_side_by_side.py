"""Several models on one question, side by side (docs/DESIGN.md §15), over real HTTP: two
local OpenAI-compatible servers at different speeds, one writing the dataset's recorded
trace (wrong) and one the solver's (right); each model's trace a branch of one session that
records its model, streamed at once, stored as it goes, reopened as it was."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.generation.stepper import (
    StepDelta,
    StepFailed,
    StepFinished,
    StepperSettings,
    TraceFinished,
)
from bbm_tui.core.records import ModelBranchState
from bbm_tui.core.store import SessionBusy, Store
from bbm_tui.core.trace.session import NewTrace, TraceSession, on_the_loop
from bbm_tui.core.trace.side_by_side import (
    BranchFigures,
    SideBySide,
    TooManyModels,
    first_difference,
)
from tests.fake_server import solver_responder
from tests.openai_server import FakeOpenAI, Reply, dataset_responder

TASK = "tracking_shuffled_objects"
QUESTION = 3  # recorded: wrong from Thought 5 on, answer (E); the solver: (B), right


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store.open(tmp_path / "store.sqlite3") as opened:
        yield opened


def question() -> NewTrace:
    row = bundled_rows(TASK)[QUESTION]
    return NewTrace(TASK, row.input, row.target, QUESTION, row.mistake_index)


def paced(responder, chunk_delay_s: float):
    """A responder whose replies stream word by word, `chunk_delay_s` apart: a slower or a
    faster model."""
    def respond(path: str, body: dict) -> Reply:
        reply = responder(path, body)
        reply.chunk_delay_s = chunk_delay_s
        return reply
    return respond


def two_models(recorded: FakeOpenAI, solver: FakeOpenAI) -> list[llm.ModelSpec]:
    return [llm.ModelSpec("openai/recorded", recorded.base_url),
            llm.ModelSpec("openai/solver", solver.base_url)]


async def race_all(race: SideBySide, **options) -> dict[int, list]:
    events: dict[int, list] = {index: [] for index in range(len(race.columns))}
    async for position, event in race.race(**options):
        events[position].append(event)
    return events


def test_two_models_race_on_one_question_and_each_branch_records_its_model(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    """Both stream at once (the fast one finishes first while the slow one is still going),
    each step stored on its own model branch as it comes; one answers right, one wrong; the
    traces part at Thought 5, where the recording's first mistake is."""
    openai_server.responder = paced(dataset_responder, 0.01)  # slow and wrong
    second_openai_server.responder = paced(solver_responder, 0.0)  # fast and right
    race = SideBySide.create(store, question(), two_models(openai_server, second_openai_server),
                             store_work=on_the_loop)
    assert [column.spec.model for column in race.columns] == ["openai/recorded", "openai/solver"]
    order: list[int] = []

    async def go() -> dict[int, list]:
        events: dict[int, list] = {0: [], 1: []}
        async for position, event in race.race():
            events[position].append(event)
            if isinstance(event, TraceFinished):
                order.append(position)
        return events

    events = asyncio.run(go())
    assert order == [1, 0]  # the fast model finished first
    # Both streamed: text deltas from each, interleaved in time.
    assert any(isinstance(e, StepDelta) for e in events[0])
    assert any(isinstance(e, StepDelta) for e in events[1])
    recorded, solver = race.columns
    row = bundled_rows(TASK)[QUESTION]
    assert recorded.texts == row.steps
    assert (recorded.answer, recorded.correct) == ("(E)", False)
    assert (solver.answer, solver.correct) == ("(B)", True)
    assert race.parting() == 5 == row.mistake_index + 1
    assert [column.state for column in race.columns] == [ModelBranchState.ANSWERED] * 2
    # Stored: two model branches, each step on its own, each head its branch's end.
    branches = store.model_branches(race.id)
    assert [(b.model, b.api_base, b.state) for b in branches] == [
        ("openai/recorded", openai_server.base_url, "answered"),
        ("openai/solver", second_openai_server.base_url, "answered")]
    for branch, column in zip(branches, race.columns, strict=True):
        assert branch.head_step_id == column.steps[-1].id
        assert {step.model_branch_id for step in column.steps} == {branch.id}
        assert store.call_models([s.call_id for s in column.steps if s.call_id]) == {
            s.call_id: branch.model for s in column.steps if s.call_id}
    # The same first four thoughts are a step each, one per model.
    assert len(store.steps_of(race.id)) == len(row.steps) + 7
    # Each server saw its own model's calls only.
    assert {r.body["model"] for r in openai_server.requests} == {"recorded"}
    assert {r.body["model"] for r in second_openai_server.requests} == {"solver"}
    figures = race.figures()
    assert [f.thoughts for f in figures] == [7, 7]
    assert all(f.tokens > 0 and f.latency_s > 0 for f in figures)
    # The claim on the session is gone with the last column.
    store.claim_session(race.id, "another window")


def test_a_column_that_fails_mid_trace_says_why_and_the_other_goes_on(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    """A stream dropped at the third step (retried, then given up) and a 401 end their own
    column, with the reason kept on its branch; the other column answers."""
    calls = {"n": 0}

    def drops_at_the_third(path: str, body: dict) -> Reply:
        calls["n"] += 1
        reply = dataset_responder(path, body)
        if calls["n"] >= 3:
            reply.drop_after_chunks = 1
        return reply

    openai_server.responder = drops_at_the_third
    second_openai_server.responder = paced(solver_responder, 0.005)
    race = SideBySide.create(store, question(), two_models(openai_server, second_openai_server),
                             store_work=on_the_loop)
    events = asyncio.run(race_all(race))
    failed = [e for e in events[0] if isinstance(e, StepFailed)]
    assert len(failed) == 1 and failed[0].number == 3
    assert not any(isinstance(e, TraceFinished) for e in events[0])
    assert isinstance(events[1][-1], TraceFinished) and race.columns[1].correct is True
    broken = store.model_branches(race.id)[0]
    assert broken.state == ModelBranchState.FAILED and broken.error == failed[0].error.message
    assert len(race.columns[0].steps) == 2  # the finished steps stay

    # A column whose key is refused fails at once; the others are not held up.
    openai_server.reset()
    openai_server.enqueue(Reply(status=401, error_message="Incorrect API key provided"))
    third = race.add_model(llm.ModelSpec("openai/refused", openai_server.base_url))
    events = asyncio.run(race_all(race, columns=[2]))
    assert isinstance(events[2][-1], StepFailed)
    assert third.state == ModelBranchState.FAILED
    assert "401" in (store.model_branches(race.id)[2].error or "") or "key" in (
        store.model_branches(race.id)[2].error or "").lower()


def test_a_session_of_three_models_reopens_as_it_was_and_the_streaming_column_goes_on(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    """Three columns: one answered, one stopped by the person, one cut off mid-trace by a
    kill (its state still says streaming). Reopened: the same models in the same columns,
    the same thoughts and labels; the streaming one resumes from its next thought without
    repeating one, the others stay as they were."""
    openai_server.responder = dataset_responder
    second_openai_server.responder = solver_responder
    specs = [*two_models(openai_server, second_openai_server),
             llm.ModelSpec("openai/third", second_openai_server.base_url)]
    race = SideBySide.create(store, question(), specs, store_work=on_the_loop)
    asyncio.run(race_all(race, columns=[0]))
    asyncio.run(race_all(race, columns=[1], max_new_steps=2))
    race.columns[1].mark_stopped()
    race.columns[0].flag_mistake(5)

    async def killed_after_three_steps() -> None:
        seen = 0
        async for event in race.columns[2].generate():
            if isinstance(event, StepFinished):
                seen += 1
                if seen == 3:
                    return  # the process dies here: nothing more is written
    asyncio.run(killed_after_three_steps())
    assert race.columns[2].state == ModelBranchState.STREAMING
    store.release_claim(race.id, race.claim.owner)  # a dead process's claim lapses

    again = SideBySide.load(store, race.id, specs)
    assert again.models == ["openai/recorded", "openai/solver", "openai/third"]
    assert [c.texts for c in again.columns] == [c.texts for c in race.columns]
    assert [c.state for c in again.columns] == [
        ModelBranchState.ANSWERED, ModelBranchState.STOPPED, ModelBranchState.STREAMING]
    assert again.columns[0].mistake_number == 5
    assert again.columns[1].mistake_number is None and again.columns[2].label is None
    assert again.resuming() == [again.columns[2]]
    before = len(second_openai_server.requests)
    asyncio.run(race_all(again, columns=[2]))
    assert again.columns[2].correct is True and len(again.columns[2].steps) == 7
    # Four more calls for Thoughts 4 to 7: none of the three kept was asked again.
    assert len(second_openai_server.requests) - before == 4
    assert again.resuming() == []


def test_a_trace_of_one_model_is_given_a_second_and_keeps_its_steps_and_label(
    store: Store, openai_server: FakeOpenAI
) -> None:
    openai_server.responder = solver_responder
    trace = TraceSession.create(store, question(), llm.ModelSpec("replay/bbm"),
                                store_work=on_the_loop)

    async def run_one(events) -> None:
        async for _ in events:
            pass
    asyncio.run(run_one(trace.generate()))
    trace.flag_mistake(5)
    race = SideBySide.from_trace(trace, llm.ModelSpec("openai/solver", openai_server.base_url))
    assert race.models == ["replay/bbm", "openai/solver"]
    first = race.columns[0]
    assert first.texts == trace.texts and first.mistake_number == 5
    asyncio.run(race_all(race, columns=[1]))
    assert race.columns[1].answer == "(B)" and race.parting() == 5
    # The session's branch on show stays the first model's.
    assert store.session(race.id).head_step_id == first.steps[-1].id
    # A label in one column is not the other's.
    race.columns[1].flag_mistake(2)
    assert (race.columns[0].mistake_number, race.columns[1].mistake_number) == (5, 2)
    # Versions of a thought are the column's own, not another model's first thought.
    assert [s.id for s in race.columns[1].alternatives(1)] == [race.columns[1].steps[0].id]


def test_columns_share_one_claim_and_another_window_is_told_the_session_is_busy(
    store: Store, openai_server: FakeOpenAI, second_openai_server: FakeOpenAI
) -> None:
    openai_server.responder = paced(dataset_responder, 0.01)
    second_openai_server.responder = paced(solver_responder, 0.01)
    race = SideBySide.create(store, question(), two_models(openai_server, second_openai_server),
                             store_work=on_the_loop)
    busy: list[bool] = []

    async def go() -> None:
        async for position, event in race.race():
            if position == 1 and isinstance(event, StepFinished) and event.number == 2:
                try:
                    store.claim_session(race.id, "another window")
                except SessionBusy:
                    busy.append(True)
    asyncio.run(go())
    assert busy == [True]
    store.claim_session(race.id, "another window")  # free once both are over


def test_how_many_models_and_where_traces_part() -> None:
    store_less = [["a", "b", "c"], ["a", "b", "x"], ["a", "b", "c", "d"]]
    assert first_difference(store_less) == 3
    assert first_difference([["a", "b"], ["a", "b", "c"]]) == 3  # one goes on: a gap
    assert first_difference([["a"], ["a"]]) is None
    assert first_difference([["a"]]) is None
    assert first_difference([[], ["a"]]) == 1
    empty = BranchFigures.of([])
    assert (empty.thoughts, empty.tokens, empty.cost) == (0, 0, 0.0)


def test_at_most_four_models_and_at_least_two(store: Store) -> None:
    specs = [llm.ModelSpec("replay/bbm")] * 5
    with pytest.raises(TooManyModels):
        SideBySide.create(store, question(), specs)
    with pytest.raises(TooManyModels):
        SideBySide.create(store, question(), specs[:1])
    race = SideBySide.create(store, question(), specs[:4])
    with pytest.raises(TooManyModels):
        race.add_model(llm.ModelSpec("solver/bbm"))
    assert len(store.model_branches(race.id)) == 4


def test_the_offline_pair_replay_beside_solver_parts_where_the_recording_goes_wrong(
    store: Store,
) -> None:
    """The offline demo: replay/bbm and solver/bbm, no key, no server."""
    race = SideBySide.create(store, question(),
                             [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm")],
                             store_work=on_the_loop)
    asyncio.run(race_all(race, settings=StepperSettings()))
    replay, solver = race.columns
    assert (replay.answer, replay.correct, solver.answer, solver.correct) == (
        "(E)", False, "(B)", True)
    assert race.parting() == 5


def test_export_writes_one_row_per_model_with_its_model_and_sessions_name_the_models(
    tmp_path: Path, capsys: pytest.CaptureFixture,
) -> None:
    """The store's default file, as the commands read it: `export` writes each model's
    branch as a row of its own with `model` and its own label; `sessions` names the models,
    the tree of branches says each is a model's own trace."""
    import json

    from bbm_tui.cli import main
    from bbm_tui.core.store import default_path
    from bbm_tui.core.trace.branches import BranchHow
    from bbm_tui.ui.viewmodels.branches import origin_words

    with Store.open(default_path()) as opened:
        race = SideBySide.create(opened, question(),
                                 [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm")],
                                 store_work=on_the_loop)
        asyncio.run(race_all(race))
        race.columns[0].flag_mistake(5)
        race.columns[1].mark_no_mistake()
        replay, solver = race.columns
        diff = race.tree.diff(replay.steps[-1].id, solver.steps[-1].id)
        assert diff.shared == ()  # each model's trace from its first thought
        origin = solver.branch_origin(list(diff.right))
        assert origin is not None and origin.how == BranchHow.MODEL
        assert origin_words(origin) == "a model's own trace · solver/bbm"
    out = tmp_path / "out.jsonl"
    assert main(["export", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    row = bundled_rows(TASK)[QUESTION]
    assert [(r["model"], r["answer"], r["mistake_index"]) for r in rows] == [
        ("replay/bbm", "(E)", 4), ("solver/bbm", "(B)", None)]
    assert rows[0]["steps"] == row.steps and rows[0]["input"] == row.input
    capsys.readouterr()
    assert main(["sessions", "--json"]) == 0
    [listed] = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert listed["models"] == ["replay/bbm", "solver/bbm"]
    assert main(["sessions"]) == 0
    assert "replay/bbm + solver/bbm" in capsys.readouterr().out


def test_the_csv_export_names_each_labelled_traces_model(tmp_path: Path) -> None:
    """Issue 34, item 3: `export --format csv` wrote a row per labelled model branch with
    nothing to say whose trace it was; a `model` column says it."""
    import csv

    from bbm_tui.cli import main
    from bbm_tui.core.store import default_path

    with Store.open(default_path()) as opened:
        race = SideBySide.create(opened, question(),
                                 [llm.ModelSpec("replay/bbm"), llm.ModelSpec("solver/bbm")],
                                 store_work=on_the_loop)
        asyncio.run(race_all(race))
        race.columns[0].flag_mistake(5)
        race.columns[1].mark_no_mistake()
    out = tmp_path / "labels.csv"
    assert main(["export", "--format", "csv", "--out", str(out)]) == 0
    with out.open(newline="") as opened_csv:
        rows = list(csv.DictReader(opened_csv))
    assert sorted((row["model"], row["mistake_index"]) for row in rows) == [
        ("replay/bbm", "4"), ("solver/bbm", "")]
