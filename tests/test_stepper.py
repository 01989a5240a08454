"""The stepper through litellm: against the local HTTP server answering like the dataset's
model (`dataset_responder`), and against the bundled replay model `replay/bbm`."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import TraceRow, bundled_rows
from bbm_tui.core.generation.stepper import (
    AnswerFound,
    StepDelta,
    StepFailed,
    StepFinished,
    StepperSettings,
    StepRestarted,
    StepStarted,
    TraceFinished,
    run_steps,
)
from bbm_tui.core.prompts.generation import next_step_prompt
from bbm_tui.core.tasks import TASK_NAMES, is_correct
from tests.openai_server import FakeOpenAI, Reply, dataset_responder
from tests.test_llm_http import eventually

FAST = StepperSettings(call=llm.CallSettings(retry=llm.RetryPolicy(attempts=2, base_delay_s=0.01)))
REPLAY = llm.ModelSpec("replay/bbm")


def http_spec(server: FakeOpenAI) -> llm.ModelSpec:
    return llm.ModelSpec("openai/test", server.base_url)


def ignoring_stop(path: str, body: dict[str, Any]) -> Reply:
    """The dataset's model, on a server that ignores `stop`: every answer runs on into the
    next thought, and only the client's cut keeps the step to one line."""
    return dataclasses.replace(dataset_responder(path, body), honor_stop=False)


def first_rows(task: str) -> tuple[int, int]:
    """The first row whose answer is right and the first whose answer is wrong."""
    rows = bundled_rows(task)
    right = next(i for i, r in enumerate(rows) if r.answer and is_correct(r.answer, r.target))
    wrong = next(
        i for i, r in enumerate(rows) if r.answer and not is_correct(r.answer, r.target)
    )
    return right, wrong


async def run(
    row: TraceRow,
    task: str,
    spec: llm.ModelSpec,
    steps: list[str] | None = None,
    *,
    target: str | None = "row",
    **kwargs: Any,
) -> list[object]:
    kwargs.setdefault("settings", FAST)
    return [
        event
        async for event in run_steps(
            task, row.input, spec, steps or [],
            target=row.target if target == "row" else target, **kwargs,
        )
    ]


def finished_texts(events: list[object]) -> list[str]:
    return [event.text for event in events if isinstance(event, StepFinished)]


def the_end(events: list[object]) -> TraceFinished:
    assert isinstance(events[-1], TraceFinished), events[-1]
    return events[-1]


def check_event_order(events: list[object]) -> None:
    """Every StepFinished follows its own StepStarted; deltas only for the step under way;
    numbers of finished steps count up from where the run began."""
    started: set[int] = set()
    current = None
    numbers = []
    for event in events:
        if isinstance(event, StepStarted):
            started.add(event.number)
            current = event.number
        elif isinstance(event, StepDelta | StepRestarted):
            assert event.number == current
        elif isinstance(event, StepFinished):
            assert event.number in started
            numbers.append(event.number)
    assert numbers == list(range(numbers[0], numbers[0] + len(numbers))) if numbers else True


# ------------------------------------------------------------------------ whole traces


@pytest.mark.parametrize("task", TASK_NAMES)
async def test_whole_traces_over_http_reproduce_the_dataset(
    openai_server: FakeOpenAI, task: str
) -> None:
    openai_server.responder = ignoring_stop
    rows = bundled_rows(task)
    for index, expect_correct in zip(first_rows(task), (True, False), strict=True):
        openai_server.requests.clear()
        row = rows[index]
        events = await run(row, task, http_spec(openai_server))
        check_event_order(events)
        end = the_end(events)
        assert end.reason == "answer"
        assert end.steps == row.steps
        assert end.answer == row.answer
        assert finished_texts(events) == row.steps
        found = [event for event in events if isinstance(event, AnswerFound)]
        assert len(found) == 1
        assert found[0].answer == row.answer
        assert found[0].correct is expect_correct
        # One call per step, each with the DESIGN §3 prompt of the steps before it.
        prompts = [request.body["messages"][0]["content"] for request in openai_server.requests]
        assert prompts == [
            next_step_prompt(task, row.input, row.steps[:k]) for k in range(len(row.steps))
        ]
        assert all(request.body["temperature"] == 0 for request in openai_server.requests)
        # The streamed deltas of each step add up to the step.
        for number, text in enumerate(row.steps, start=1):
            shown = "".join(
                event.text for event in events
                if isinstance(event, StepDelta) and event.number == number
            )
            assert shown == text


@pytest.mark.parametrize("task", TASK_NAMES)
async def test_whole_traces_through_the_replay_model(task: str) -> None:
    rows = bundled_rows(task)
    for index, expect_correct in zip(first_rows(task), (True, False), strict=True):
        row = rows[index]
        events = await run(row, task, REPLAY)
        check_event_order(events)
        end = the_end(events)
        assert (end.reason, end.steps, end.answer) == ("answer", row.steps, row.answer)
        assert [e.correct for e in events if isinstance(e, AnswerFound)] == [expect_correct]
        calls = [e.call for e in events if isinstance(e, StepFinished)]
        assert all(call.model == "replay/bbm" and call.cost == 0.0 for call in calls)
        assert all(call.completion_tokens for call in calls)


async def test_unknown_target_means_correct_is_none(openai_server: FakeOpenAI) -> None:
    openai_server.responder = dataset_responder
    row = bundled_rows("multistep_arithmetic")[first_rows("multistep_arithmetic")[0]]
    events = await run(row, "multistep_arithmetic", http_spec(openai_server), target=None)
    assert [e.correct for e in events if isinstance(e, AnswerFound)] == [None]


async def test_resuming_from_written_steps_asks_only_for_the_rest(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.responder = dataset_responder
    row = bundled_rows("word_sorting")[0]
    events = await run(row, "word_sorting", http_spec(openai_server), row.steps[:3])
    assert finished_texts(events) == row.steps[3:]
    assert next(e.number for e in events if isinstance(e, StepFinished)) == 4
    assert the_end(events).steps == row.steps
    assert len(openai_server.requests) == len(row.steps) - 3


async def test_a_finished_trace_makes_no_call(openai_server: FakeOpenAI) -> None:
    row = bundled_rows("word_sorting")[0]
    events = await run(row, "word_sorting", http_spec(openai_server), list(row.steps))
    assert events == [TraceFinished("answer", row.steps, row.answer)]
    assert openai_server.requests == []


# ------------------------------------------------------------------------ stop rules


async def test_step_limit(openai_server: FakeOpenAI) -> None:
    openai_server.responder = dataset_responder
    row = bundled_rows("dyck_languages")[0]
    settings = dataclasses.replace(FAST, step_limit=4)
    events = await run(row, "dyck_languages", http_spec(openai_server), settings=settings)
    end = the_end(events)
    assert end.reason == "step_limit"
    assert end.steps == row.steps[:4]
    assert end.answer is None
    assert not any(isinstance(event, AnswerFound) for event in events)
    assert len(openai_server.requests) == 4


async def test_max_new_steps_pauses(openai_server: FakeOpenAI) -> None:
    openai_server.responder = dataset_responder
    row = bundled_rows("dyck_languages")[0]
    events = await run(row, "dyck_languages", http_spec(openai_server), max_new_steps=2)
    assert the_end(events).reason == "paused"
    assert finished_texts(events) == row.steps[:2]
    events = await run(
        row, "dyck_languages", http_spec(openai_server), row.steps[:2], max_new_steps=1
    )
    assert finished_texts(events) == row.steps[2:3]


def empty_step_row() -> tuple[int, TraceRow]:
    index = 538
    row = bundled_rows("dyck_languages")[index]
    assert row.steps[54] == "" and row.answer is not None  # the dataset's one empty thought
    return index, row


def unanswered_row() -> TraceRow:
    row = bundled_rows("logical_deduction")[15]
    assert len(row.steps) == 50 and row.answer is None
    return row


@pytest.mark.parametrize("model", ["http", "replay"])
async def test_a_single_empty_step_mid_trace_is_kept(
    openai_server: FakeOpenAI, model: str
) -> None:
    openai_server.responder = ignoring_stop
    _, row = empty_step_row()
    spec = http_spec(openai_server) if model == "http" else REPLAY
    events = await run(row, "dyck_languages", spec)
    end = the_end(events)
    assert end.reason == "answer"
    assert end.steps == row.steps
    assert finished_texts(events) == row.steps
    assert [e.number for e in events if isinstance(e, StepFinished)] == list(range(1, 58))
    assert end.answer == row.answer


@pytest.mark.parametrize("model", ["http", "replay"])
async def test_two_empty_steps_end_the_trace_and_neither_is_kept(
    openai_server: FakeOpenAI, model: str
) -> None:
    openai_server.responder = ignoring_stop
    row = unanswered_row()
    spec = http_spec(openai_server) if model == "http" else REPLAY
    events = await run(row, "logical_deduction", spec)
    end = the_end(events)
    assert end.reason == "empty"
    assert end.steps == row.steps
    assert end.answer is None
    assert finished_texts(events) == row.steps
    assert not any(isinstance(event, AnswerFound) for event in events)
    # Steps 51 and 52 were asked for, said nothing, and are not kept.
    assert [e.number for e in events if isinstance(e, StepStarted)][-2:] == [51, 52]
    if model == "http":
        assert len(openai_server.requests) == 52


async def test_scripted_empty_steps(openai_server: FakeOpenAI) -> None:
    """One empty step then a step: both kept; two empty steps: the trace ends, none kept."""
    row = bundled_rows("word_sorting")[0]
    openai_server.enqueue(
        Reply(text="First."), Reply(text=""), Reply(text="Third."),
        Reply(text="   "), Reply(text="\n\n"),
    )
    events = await run(row, "word_sorting", http_spec(openai_server))
    assert finished_texts(events) == ["First.", "", "Third."]
    end = the_end(events)
    assert (end.reason, end.steps) == ("empty", ["First.", "", "Third."])
    # The second prompt of the pair carries the held empty thought.
    assert openai_server.requests[4].body["messages"][0]["content"].endswith(
        "Thought 3: Third.\nThought 4: \nThought 5:"
    )


async def test_a_truncated_step_is_kept_and_ends_the_run(openai_server: FakeOpenAI) -> None:
    row = bundled_rows("word_sorting")[0]
    openai_server.enqueue(
        Reply(text="First."),
        Reply(text="word " * 500, honor_max_tokens=False),
        Reply(text="never asked for"),
    )
    settings = dataclasses.replace(FAST, call=dataclasses.replace(FAST.call, max_tokens=20))
    events = await run(row, "word_sorting", http_spec(openai_server), settings=settings)
    finished = [e for e in events if isinstance(e, StepFinished)]
    assert [f.truncated for f in finished] == [False, True]
    assert finished[1].text == ("word " * 20).strip()
    assert the_end(events).reason == "truncated"
    assert len(openai_server.requests) == 2


# ------------------------------------------------------------------------ failures


async def test_401_mid_trace_fails_that_step_only(openai_server: FakeOpenAI) -> None:
    row = bundled_rows("word_sorting")[0]
    calls = 0

    def responder(path: str, body: dict[str, Any]) -> Reply:
        nonlocal calls
        calls += 1
        if calls == 3:
            return Reply(status=401)
        return dataset_responder(path, body)

    openai_server.responder = responder
    events = await run(row, "word_sorting", http_spec(openai_server))
    assert finished_texts(events) == row.steps[:2]
    assert isinstance(events[-1], StepFailed)
    assert events[-1].number == 3
    assert events[-1].error.kind == "auth"
    assert "OPENAI_API_KEY" in events[-1].error.message
    assert not any(isinstance(e, StepFinished) and e.number == 3 for e in events)
    assert not any(isinstance(e, TraceFinished) for e in events)
    assert len(openai_server.requests) == 3


async def test_server_errors_mid_trace_fail_the_step_after_the_retries(
    openai_server: FakeOpenAI,
) -> None:
    row = bundled_rows("word_sorting")[0]
    openai_server.enqueue(Reply(text="One."), Reply(text="Two and a half", drop_after_chunks=2),
                          Reply(status=500), Reply(text="never"))
    events = await run(row, "word_sorting", http_spec(openai_server))
    assert finished_texts(events) == ["One."]
    restarts = [e for e in events if isinstance(e, StepRestarted)]
    assert [r.number for r in restarts] == [2]
    # The half step streamed before the drop was shown, voided, and never finished.
    assert [e.text for e in events if isinstance(e, StepDelta) and e.number == 2] == [
        "Two ", "and "
    ]
    assert isinstance(events[-1], StepFailed)
    assert events[-1].number == 2 and events[-1].error.kind == "server"
    assert len(openai_server.requests) == 3


async def test_a_restarted_step_keeps_only_the_retry(openai_server: FakeOpenAI) -> None:
    row = bundled_rows("word_sorting")[0]
    openai_server.enqueue(Reply(text="Lost half", drop_after_chunks=1), Reply(text="Whole."),
                          Reply(text="So the answer is x."))
    events = await run(row, "word_sorting", http_spec(openai_server))
    assert finished_texts(events) == ["Whole.", "So the answer is x."]
    assert the_end(events).answer == "x."


async def test_replay_model_on_an_unknown_question_fails_clearly() -> None:
    row = TraceRow("zebra apple mango", [], None, "apple mango zebra", None)
    events = await run(row, "word_sorting", REPLAY)
    assert isinstance(events[-1], StepFailed)
    assert events[-1].error.kind == "replay"
    assert events[-1].error.message.startswith("replay/bbm does not know this")


# ------------------------------------------------------------------------ cancellation


async def test_cancel_mid_stream_leaves_no_half_step_and_the_server_sees_the_client_go(
    openai_server: FakeOpenAI,
) -> None:
    row = bundled_rows("dyck_languages")[0]

    def responder(path: str, body: dict[str, Any]) -> Reply:
        reply = dataset_responder(path, body)
        if len(openai_server.requests) == 3:
            return dataclasses.replace(reply, chunk_chars=1, chunk_delay_s=0.02)
        return reply

    openai_server.responder = responder
    events: list[object] = []
    streaming = asyncio.Event()

    async def consume() -> None:
        async for event in run_steps(
            "dyck_languages", row.input, http_spec(openai_server), settings=FAST
        ):
            events.append(event)
            if isinstance(event, StepDelta) and event.number == 3:
                streaming.set()

    task = asyncio.create_task(consume())
    await asyncio.wait_for(streaming.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert finished_texts(events) == row.steps[:2]
    shown = "".join(e.text for e in events if isinstance(e, StepDelta) and e.number == 3)
    assert shown and len(shown) < len(row.steps[2])
    request = openai_server.requests[2]
    await eventually(lambda: request.client_closed_early)
    assert request.chunks_sent < len(row.steps[2])
    assert len(openai_server.requests) == 3
