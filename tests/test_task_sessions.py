"""A session of a task of one's own keeps the task it was made with: reopened after its file
is edited or deleted, it generates with its original prompt and says what changed; the
prompts sent are exactly the documented template, written out here."""

from __future__ import annotations

from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.generation.stepper import StepFailed, StepFinished, TraceFinished
from bbm_tui.core.store import Store
from bbm_tui.core.tasks import use_tasks
from bbm_tui.core.tasks.files import load_task_file
from bbm_tui.core.trace.session import NewTrace, TraceSession
from tests.openai_server import FakeOpenAI, Reply

FIRST_PROMPT = "Add numbers.\n\nQ: 1 + 1\nThought 1: 1 + 1 = 2.\nThought 2: So the answer is 2."


@pytest.fixture
def task_file(tmp_path: Path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "sums_prompt.txt").write_text(FIRST_PROMPT + "\n", encoding="utf-8")
    path = folder / "sums.toml"
    path.write_text('name = "sums"\ntitle = "Sums"\nprompt = "sums_prompt.txt"\n'
                    'question = "Q: {input}"\ncompare = "number"\n', encoding="utf-8")
    use_tasks([load_task_file(path)])
    yield path
    use_tasks([])


@pytest.fixture
def store(tmp_path: Path):
    with Store.open(tmp_path / "sessions.sqlite3") as opened:
        yield opened


def sent_prompts(server: FakeOpenAI) -> list[str]:
    return [request.body["messages"][-1]["content"] for request in server.requests]


async def generate(trace: TraceSession) -> list[object]:
    return [event async for event in trace.generate()]


async def test_a_sessions_prompts_and_correctness_are_its_tasks(
        task_file: Path, store: Store, openai_server: FakeOpenAI) -> None:
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    trace = TraceSession.create(store, NewTrace("sums", "2 + 3", "5.0"), spec)
    assert trace.task.name == "sums" and trace.task_change is None
    assert trace.session.task_digest is not None
    openai_server.enqueue(Reply(" 2 + 3 = 5.\n"), Reply(" So the answer is $5.\n"))
    events = await generate(trace)
    assert [e.text for e in events if isinstance(e, StepFinished)] == [
        "2 + 3 = 5.", "So the answer is $5."]
    assert sent_prompts(openai_server) == [
        FIRST_PROMPT + "\n\nQ: 2 + 3\nThought 1:",
        FIRST_PROMPT + "\n\nQ: 2 + 3\nThought 1: 2 + 3 = 5.\nThought 2:",
    ]
    # compare = "number": "$5" is the target "5.0".
    assert trace.answer == "$5." and trace.correct is True


async def test_an_edited_or_deleted_file_leaves_the_session_its_prompt(
        task_file: Path, store: Store, openai_server: FakeOpenAI) -> None:
    spec = llm.ModelSpec("openai/test", openai_server.base_url)
    made = TraceSession.create(store, NewTrace("sums", "2 + 3", "5"), spec)
    openai_server.enqueue(Reply(" 2 + 3 = 5.\n"))
    [event async for event in made.generate(max_new_steps=1)]
    # The prompt file is edited: a new session takes the new prompt, the old one keeps its own.
    (task_file.parent / "sums_prompt.txt").write_text("Changed.", encoding="utf-8")
    use_tasks([load_task_file(task_file)])
    reopened = TraceSession.load(store, made.id)
    assert reopened.task.prompt == FIRST_PROMPT
    assert reopened.task_change is not None
    assert "has changed since this session was made" in reopened.task_change
    assert str(task_file) in reopened.task_change
    openai_server.requests.clear()
    openai_server.enqueue(Reply(" So the answer is 5.\n"))
    events = await generate(reopened)
    assert isinstance(events[-1], TraceFinished) and reopened.correct
    assert sent_prompts(openai_server) == [
        FIRST_PROMPT + "\n\nQ: 2 + 3\nThought 1: 2 + 3 = 5.\nThought 2:"]
    fresh = TraceSession.create(store, NewTrace("sums", "1 + 4", "5"), spec)
    assert fresh.task.prompt == "Changed." and fresh.task_change is None
    assert fresh.session.task_digest != made.session.task_digest
    # The file is deleted (not loaded at all): the session still opens, with its prompt.
    task_file.unlink()
    use_tasks([])
    gone = TraceSession.load(store, made.id)
    assert gone.task.prompt == FIRST_PROMPT and gone.task.title == "Sums"
    assert gone.task_change is not None and "is not loaded now" in gone.task_change
    assert [step.text for step in gone.steps] == ["2 + 3 = 5.", "So the answer is 5."]


async def test_offline_models_refuse_before_any_call(task_file: Path, store: Store) -> None:
    for model in ("replay/bbm", "solver/bbm"):
        trace = TraceSession.create(store, NewTrace("sums", "2 + 3", "5"),
                                    llm.ModelSpec(model))
        [failed] = await generate(trace)
        assert isinstance(failed, StepFailed)
        assert failed.error.message.startswith(f"{model} ")
        assert "'sums' is a task of your own" in failed.error.message
        assert trace.steps == []


def test_the_papers_sessions_keep_no_definition(store: Store) -> None:
    trace = TraceSession.create(store, NewTrace("word_sorting", "b a", "a b"),
                                llm.ModelSpec("replay/bbm"))
    assert trace.session.task_digest is None and trace.task_change is None
    assert trace.task.is_paper


def test_an_annotation_queue_of_a_task_files_rows(task_file: Path, store: Store,
                                                  tmp_path: Path) -> None:
    """`annotate --task-file`: the queued traces' sessions keep the task (and its digest),
    their steps' answers are read by its regex, and the last keeps the row's own answer as the
    file gives it (recorded_steps)."""
    from bbm_tui.core.annotation.queue import AnnotationQueue

    rows = tmp_path / "to_label.jsonl"
    rows.write_text('{"input": "2 + 3", "steps": ["2 + 3 = 5.", "So the answer is $5."], '
                    '"answer": "$5", "target": "5"}\n', encoding="utf-8")
    queue = AnnotationQueue.open(store, [rows], "ana", task="sums")
    queue.judge(True)
    queue.judge(True)
    queue.submit()
    trace = TraceSession.load(store, queue.session_id(0))
    assert trace.task.name == "sums" and trace.session.task_digest is not None
    assert [step.answer for step in trace.steps] == [None, "$5"]
    assert trace.correct is True  # "$5" is 5 by the task's number comparison
