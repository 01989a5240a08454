"""The litellm boundary over real HTTP: litellm talks to the local OpenAI-compatible server
(tests/openai_server.py) on 127.0.0.1. Nothing of litellm is mocked."""

from __future__ import annotations

import asyncio
import socket
import string
import time
from collections.abc import Callable

import pytest

from bbm_tui.core import llm
from tests.openai_server import FakeOpenAI, RecordedRequest, Reply

FAST = llm.RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.05)
PROMPT = "Q: the question\nThought 1: the first step\nThought 2:"


def chat(server: FakeOpenAI, model: str = "openai/test") -> llm.ModelSpec:
    return llm.ModelSpec(model, server.base_url, "chat")


def completion(server: FakeOpenAI) -> llm.ModelSpec:
    return llm.ModelSpec("text-completion-openai/test", server.base_url, "completion")


def settings(**overrides: object) -> llm.CallSettings:
    values: dict[str, object] = {"retry": FAST}
    values.update(overrides)
    return llm.CallSettings(**values)  # type: ignore[arg-type]


async def collect(
    spec: llm.ModelSpec, call: llm.CallSettings | None = None, prompt: str = PROMPT
) -> tuple[list[object], llm.LLMError | None]:
    """Every event of one streamed step, and the error that ended it (if one did)."""
    events: list[object] = []
    try:
        async for event in llm.stream_step(spec, prompt, call or settings()):
            events.append(event)
    except llm.LLMError as error:
        return events, error
    return events, None


def deltas(events: list[object]) -> list[str]:
    return [event.text for event in events if isinstance(event, llm.TextDelta)]


def step_of(events: list[object]) -> llm.StepText:
    assert events, "no events"
    last = events[-1]
    assert isinstance(last, llm.StepText), f"the last event is {last!r}"
    assert sum(isinstance(event, llm.StepText) for event in events) == 1
    return last


async def eventually(predicate: Callable[[], bool], timeout_s: float = 5.0) -> None:
    """Wait (polling) until the server has seen what the test expects: the server runs on its
    own thread and notices a client hang-up only at its next write."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("the server never saw it happen")
        await asyncio.sleep(0.01)


def only_request(server: FakeOpenAI) -> RecordedRequest:
    assert len(server.requests) == 1, [r.body for r in server.requests]
    return server.requests[0]


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def varied_text(length: int) -> str:
    """Text with no newline and no repeated consecutive chunks (litellm aborts a stream that
    repeats one chunk a hundred times)."""
    letters = string.ascii_lowercase
    return "".join(letters[(i * 7 + i // 26) % 26] for i in range(length))


# ------------------------------------------------------------------------ streaming and cut


async def test_streamed_step_arrives_as_deltas_then_one_step(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="We now have: (3) apple banana cherry.\nThought 3: more"))
    events, error = await collect(chat(openai_server), settings(max_tokens=321))
    assert error is None
    step = step_of(events)
    assert step.text == "We now have: (3) apple banana cherry."
    assert len(deltas(events)) >= 5
    assert "".join(deltas(events)) == step.text
    assert step.truncated is False
    body = only_request(openai_server).body
    assert openai_server.requests[0].path == "/v1/chat/completions"
    assert body["messages"] == [{"role": "user", "content": PROMPT}]
    assert body["stream"] is True
    assert body["stop"] == ["\n"]
    assert body["temperature"] == 0
    assert body["max_tokens"] == 321
    assert body["stream_options"] == {"include_usage": True}
    assert step.call.native_stop is True
    assert step.call.attempts == 1
    assert step.call.params == {"temperature": 0.0, "max_tokens": 321, "mode": "chat"}


async def test_server_ignoring_stop_first_line_only_and_stream_closed_early(
    openai_server: FakeOpenAI,
) -> None:
    # 2,000 chunks at 5 ms: 10 s if the client never hung up.
    lines = "".join(f"Line number {n} of a model that runs on.\n" for n in range(1, 201))
    openai_server.enqueue(Reply(text=lines, honor_stop=False, chunk_delay_s=0.005))
    all_chunks = len(lines.split(" "))  # word pieces, as the server cuts
    events, error = await collect(chat(openai_server))
    assert error is None
    step = step_of(events)
    assert step.text == "Line number 1 of a model that runs on."
    assert "Line number 2" not in "".join(deltas(events))
    assert step.call.finish_reason == "newline"
    request = only_request(openai_server)
    assert request.body["stop"] == ["\n"]  # sent, and ignored by this server
    await eventually(lambda: request.client_closed_early)
    assert request.chunks_sent < all_chunks / 2


async def test_echoed_thought_prefix_is_stripped_and_never_streamed(
    openai_server: FakeOpenAI,
) -> None:
    # Three-character chunks split the echo across chunks: "Tho", "ugh", "t 4", ": T", ...
    openai_server.enqueue(
        Reply(text="Thought 4: The answer is 42.\nThought 5: x", honor_stop=False, chunk_chars=3)
    )
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == "The answer is 42."
    shown = deltas(events)
    assert len(shown) >= 3
    assert all("Thought" not in piece and "ght" not in piece for piece in shown)
    assert "".join(shown) == "The answer is 42."


async def test_leading_whitespace_and_newlines_are_skipped(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(
        Reply(text=" \n\n  \n Thought 2: Now sort: apple\nbanana", honor_stop=False, chunk_chars=2)
    )
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == "Now sort: apple"
    assert "".join(deltas(events)) == "Now sort: apple"
    assert not any(piece.isspace() for piece in deltas(events))


async def test_a_step_that_only_echoes_the_label_is_empty(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="Thought 7:\nThought 8: more", honor_stop=False))
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == ""
    assert deltas(events) == []


async def test_empty_answer_is_an_empty_step(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text=""))
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == ""


async def test_an_empty_line_then_the_next_label_is_an_empty_step(
    openai_server: FakeOpenAI,
) -> None:
    """Without native stop, an empty thought arrives as "\\nThought 3: ...": the step is empty,
    and the next thought's text must not be taken for this one."""
    openai_server.enqueue(
        Reply(text="\nThought 3: The next thought.\nThought 4: x", honor_stop=False)
    )
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == ""
    assert deltas(events) == []
    assert step_of(events).call.finish_reason == "newline"


async def test_an_empty_line_then_this_steps_own_label_is_an_echo(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(
        Reply(text="\n\nThought 2: This thought.\nThought 3: x", honor_stop=False)
    )
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == "This thought."
    assert "".join(deltas(events)) == "This thought."


async def test_a_wrong_label_without_an_empty_line_is_still_stripped(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(Reply(text="Thought 3: Numbered wrongly.", honor_stop=False))
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == "Numbered wrongly."


# ------------------------------------------------------------------------ native stop


@pytest.mark.parametrize(
    ("model", "mode", "expected"),
    [
        ("openai/gpt-4o-mini", "chat", True),
        ("gpt-4.1", "chat", True),
        ("hosted_vllm/meta-llama/Llama-3.1-8B", "chat", True),
        ("ollama/llama3", "chat", True),
        ("gemini/gemini-2.0-flash", "chat", True),
        ("anthropic/claude-3-5-sonnet-latest", "chat", False),
        ("claude-sonnet-4-5", "chat", False),
        ("bedrock/anthropic.claude-3-haiku", "chat", False),
        ("openai/o3-mini", "chat", False),
        ("o3", "chat", False),
        ("o4-mini", "chat", False),
        ("openai/o1", "chat", False),
        ("gpt-5", "chat", False),
        ("openai/gpt-5-mini", "chat", False),
        ("azure/o3-mini", "chat", False),
        ("text-completion-openai/gpt-3.5-turbo-instruct", "completion", True),
        ("hosted_vllm/some-base-model", "completion", True),
    ],
)
def test_accepts_native_stop(model: str, mode: llm.Mode, expected: bool) -> None:
    assert llm.accepts_native_stop(llm.ModelSpec(model, None, mode)) is expected


async def test_reasoning_model_gets_no_stop_and_the_client_still_cuts(
    openai_server: FakeOpenAI,
) -> None:
    text = "".join(f"Reasoning line {n}.\n" for n in range(1, 301))
    openai_server.enqueue(Reply(text=text, chunk_delay_s=0.005))
    events, error = await collect(chat(openai_server, "openai/o3-mini"))
    assert error is None, error
    step = step_of(events)
    assert step.text == "Reasoning line 1."
    assert step.call.native_stop is False
    request = only_request(openai_server)
    assert "stop" not in request.body
    # o-series models take only their default temperature: sending 0 is refused.
    assert request.body.get("temperature", 1) == 1
    assert "temperature" not in step.call.params
    await eventually(lambda: request.client_closed_early)
    assert request.chunks_sent < 900 / 2


# ------------------------------------------------------------------------ retries and errors


async def test_429_with_retry_after_waits_then_succeeds(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(
        Reply(status=429, headers={"Retry-After": "1"},
              error_body={"error": {"message": "slow down", "type": "rate_limit"}}),
        Reply(text="After the wait."),
    )
    # The default policy's backoff would be ~0.5 s: only Retry-After explains a 1 s wait.
    started = time.monotonic()
    events, error = await collect(chat(openai_server), llm.CallSettings())
    elapsed = time.monotonic() - started
    assert error is None
    assert step_of(events).text == "After the wait."
    assert step_of(events).call.attempts == 2
    assert len(openai_server.requests) == 2
    assert elapsed >= 0.95
    restarts = [event for event in events if isinstance(event, llm.Restart)]
    assert len(restarts) == 1
    assert restarts[0].delay_s == pytest.approx(1.0)
    assert restarts[0].attempt == 2
    assert "rate-limiting" in restarts[0].reason


async def test_a_huge_retry_after_is_capped_by_the_policy(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(status=429, headers={"Retry-After": "3600"}), Reply(text="Ok."))
    policy = llm.RetryPolicy(attempts=2, base_delay_s=0.01, max_retry_after_s=0.2)
    started = time.monotonic()
    events, error = await collect(chat(openai_server), settings(retry=policy))
    assert error is None and step_of(events).text == "Ok."
    assert 0.2 <= time.monotonic() - started < 2
    assert [e.delay_s for e in events if isinstance(e, llm.Restart)] == [0.2]


async def test_429_every_time_ends_with_one_rate_limit_error(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(*[Reply(status=429, headers={"Retry-After": "0"})] * 3)
    events, error = await collect(chat(openai_server))
    assert error is not None
    assert error.kind == "rate_limit"
    assert error.attempts == 3
    assert len(openai_server.requests) == 3
    assert not any(isinstance(event, llm.StepText) for event in events)


async def test_500_retried_up_to_the_policy_then_one_server_error(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(
        *[Reply(status=500, error_body={"error": {"message": "boom inside", "type": "server"}})]
        * 5
    )
    events, error = await collect(chat(openai_server))
    assert error is not None
    assert error.kind == "server"
    assert error.attempts == FAST.attempts
    assert len(openai_server.requests) == FAST.attempts
    assert "(500)" in error.message and "boom inside" in error.message
    assert f"after {FAST.attempts} attempts" in error.message
    assert "\n" not in error.message and "Traceback" not in error.message
    assert str(error) == error.message
    assert sum(isinstance(event, llm.Restart) for event in events) == FAST.attempts - 1
    assert not any(isinstance(event, llm.StepText) for event in events)


async def test_500_then_success(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(status=503), Reply(text="Fine now."))
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == "Fine now."
    assert step_of(events).call.attempts == 2


async def test_dropped_connection_mid_stream_restarts_then_succeeds(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(
        Reply(text="Half of a step that never ends", drop_after_chunks=3),
        Reply(text="A whole step."),
    )
    events, error = await collect(chat(openai_server))
    assert error is None
    kinds = [type(event).__name__ for event in events]
    restart_at = kinds.index("Restart")
    # Text streamed before the drop, the Restart voids it, then the whole second answer.
    assert "".join(deltas(events[:restart_at])) == "Half of a "
    assert "".join(deltas(events[restart_at:])) == "A whole step."
    assert step_of(events).text == "A whole step."
    assert step_of(events).call.attempts == 2
    assert len(openai_server.requests) == 2


async def test_dropped_connection_every_time_is_one_stream_error(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(*[Reply(text="never finished at all", drop_after_chunks=2)] * 3)
    events, error = await collect(chat(openai_server))
    assert error is not None
    assert error.kind == "stream"
    assert "broke off" in error.message
    assert error.attempts == FAST.attempts
    assert len(openai_server.requests) == FAST.attempts
    assert not any(isinstance(event, llm.StepText) for event in events)


async def test_401_is_not_retried_and_names_the_key_variable(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(
        Reply(status=401, error_body={"error": {"message": "Incorrect API key provided"}}),
        Reply(text="must not be reached"),
    )
    events, error = await collect(chat(openai_server))
    assert error is not None
    assert error.kind == "auth"
    assert "OPENAI_API_KEY" in error.message
    assert error.attempts == 1
    assert len(openai_server.requests) == 1
    assert not any(isinstance(event, (llm.StepText, llm.Restart)) for event in events)


async def test_401_with_a_key_set_says_the_key_was_rejected_without_showing_it(
    openai_server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-value-1234")
    openai_server.enqueue(Reply(status=401))
    _, error = await collect(chat(openai_server))
    assert error is not None and error.kind == "auth"
    assert "rejected the API key in OPENAI_API_KEY" in error.message
    assert "sk-test" not in error.message
    request = only_request(openai_server)
    assert request.headers.get("Authorization") == "Bearer sk-test-secret-value-1234"


async def test_400_is_a_bad_request_and_not_retried(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(
        Reply(status=400, error_body={"error": {"message": "max_tokens is too large"}})
    )
    _, error = await collect(chat(openai_server))
    assert error is not None
    assert error.kind == "bad_request"
    assert "max_tokens is too large" in error.message
    assert len(openai_server.requests) == 1


async def test_connection_refused_is_a_connection_error() -> None:
    spec = llm.ModelSpec("openai/test", f"http://127.0.0.1:{closed_port()}/v1")
    events, error = await collect(spec)
    assert error is not None
    assert error.kind == "connection"
    assert error.message.startswith("cannot reach openai/test at http://127.0.0.1:")
    assert error.attempts == FAST.attempts
    assert not any(isinstance(event, llm.StepText) for event in events)


async def test_malformed_chunk_is_a_stream_error(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(*[Reply(text="a b c d e f", malformed_after_chunks=2)] * 3)
    events, error = await collect(chat(openai_server))
    assert error is not None
    assert error.kind == "stream"
    assert "malformed" in error.message
    assert len(openai_server.requests) == FAST.attempts
    assert not any(isinstance(event, llm.StepText) for event in events)


async def test_malformed_chunk_then_a_good_answer(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="a b c d", malformed_after_chunks=1), Reply(text="Good."))
    events, error = await collect(chat(openai_server))
    assert error is None
    assert step_of(events).text == "Good."
    assert any(isinstance(event, llm.Restart) for event in events)


async def test_a_stalled_stream_times_out(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="one two three four", chunk_delay_s=2.0))
    call = settings(idle_timeout_s=0.2, retry=llm.RetryPolicy(attempts=1))
    llm.warm_up()  # the clock is for the stream, not litellm's import (the first test to run)
    started = time.monotonic()
    events, error = await collect(chat(openai_server), call)
    assert error is not None
    assert error.kind == "timeout"
    assert time.monotonic() - started < 1.5
    assert deltas(events) == ["one "]


async def test_a_model_that_thinks_before_it_writes_is_waited_for(
    openai_server: FakeOpenAI,
) -> None:
    """The idle timeout is for a stream gone silent mid-answer; before the first text the
    call's own timeout applies (a reasoning model streams nothing while it thinks)."""
    openai_server.enqueue(Reply(text="Thought out.", first_chunk_delay_s=0.6))
    call = settings(idle_timeout_s=0.2, timeout_s=3.0, retry=llm.RetryPolicy(attempts=1))
    events, error = await collect(chat(openai_server), call)
    assert error is None
    assert step_of(events).text == "Thought out."
    assert len(openai_server.requests) == 1


async def test_a_model_that_never_starts_writing_times_out(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="Too late.", first_chunk_delay_s=5.0))
    call = settings(idle_timeout_s=0.2, timeout_s=0.6, retry=llm.RetryPolicy(attempts=1))
    llm.warm_up()
    started = time.monotonic()
    events, error = await collect(chat(openai_server), call)
    assert error is not None and error.kind == "timeout"
    assert 0.5 < time.monotonic() - started < 3.0
    assert deltas(events) == []


# ------------------------------------------------------------------------ limits


async def test_endless_line_is_cut_at_the_token_limit(openai_server: FakeOpenAI) -> None:
    text = varied_text(20_000)
    openai_server.enqueue(
        Reply(text=text, honor_max_tokens=False, chunk_chars=7, chunk_delay_s=0.002)
    )
    events, error = await collect(chat(openai_server), settings(max_tokens=100))
    assert error is None
    step = step_of(events)
    assert step.truncated is True
    assert step.text == text[: 100 * 7]
    request = only_request(openai_server)
    assert request.body["max_tokens"] == 100
    await eventually(lambda: request.client_closed_early)
    assert request.chunks_sent < 20_000 // 7 / 2


async def test_endless_line_in_one_chunk_is_cut_at_the_character_cap(
    openai_server: FakeOpenAI,
) -> None:
    text = varied_text(20_000)
    openai_server.enqueue(Reply(text=text, honor_max_tokens=False, chunk_chars=20_000))
    events, error = await collect(chat(openai_server), settings(max_tokens=100))
    assert error is None
    step = step_of(events)
    assert step.truncated is True
    cap = 100 * llm.CHARS_PER_TOKEN_CAP
    assert step.text == text[:cap]
    assert "".join(deltas(events)) == step.text


async def test_length_finish_marks_the_step_truncated(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="one two three four five six", finish_reason="length"))
    events, error = await collect(chat(openai_server), settings(max_tokens=3))
    assert error is None
    step = step_of(events)
    assert step.text == "one two three"
    assert step.truncated is True


# ------------------------------------------------------------------------ what is recorded


async def test_logprobs_recorded_when_asked(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="alpha beta gamma", logprob_per_token=-0.25))
    events, error = await collect(chat(openai_server), settings(logprobs=True))
    assert error is None
    call = step_of(events).call
    assert call.logprobs == [-0.25, -0.25, -0.25]
    assert call.total_logprob == pytest.approx(-0.75)
    assert call.params["logprobs"] is True
    assert only_request(openai_server).body["logprobs"] is True


async def test_logprobs_are_not_asked_of_text_completions(openai_server: FakeOpenAI) -> None:
    """litellm drops them from streamed text completions, and that API wants a count, not
    `true`: the step goes on without them rather than sending a wrong parameter."""
    openai_server.enqueue(Reply(text="alpha beta gamma"))
    events, error = await collect(completion(openai_server), settings(logprobs=True))
    assert error is None
    assert step_of(events).text == "alpha beta gamma"
    assert step_of(events).call.logprobs is None
    assert "logprobs" not in only_request(openai_server).body
    assert "logprobs" not in step_of(events).call.params


async def test_logprobs_not_asked_not_sent(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="alpha beta gamma"))
    events, _ = await collect(chat(openai_server))
    assert step_of(events).call.logprobs is None
    assert step_of(events).call.total_logprob is None
    assert "logprobs" not in only_request(openai_server).body
    assert "logprobs" not in step_of(events).call.params


async def test_usage_latency_and_cost_recorded(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="one two three four", delay_s=0.1))
    events, error = await collect(chat(openai_server, "openai/gpt-4o-mini"))
    assert error is None
    call = step_of(events).call
    assert call.model == "openai/gpt-4o-mini"
    assert call.prompt_tokens == len(PROMPT.split())
    assert call.completion_tokens == 4
    assert call.latency_s >= 0.1
    assert call.cost is not None and call.cost > 0
    assert call.finish_reason == "stop"


async def test_early_closed_stream_counts_tokens_from_chunks(openai_server: FakeOpenAI) -> None:
    """Closed before the usage chunk came (the model writes on, slowly): one chunk, one
    token, an estimate. (A usage chunk that had already arrived is the provider's count.)"""
    openai_server.enqueue(Reply(text="one two three\nfour five six seven" + " word" * 200,
                                honor_stop=False, chunk_delay_s=0.005))
    events, _ = await collect(chat(openai_server))
    call = step_of(events).call
    assert (call.completion_tokens, call.usage_estimated) == (3, True)


# ------------------------------------------------------------------------ completion mode


async def test_completion_mode_posts_the_raw_prompt(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="Completed step here.\nThought 3: next"))
    events, error = await collect(completion(openai_server), settings(max_tokens=64))
    assert error is None
    step = step_of(events)
    assert step.text == "Completed step here."
    assert len(deltas(events)) >= 2
    request = only_request(openai_server)
    assert request.path == "/v1/completions"
    assert request.body["prompt"] == PROMPT
    assert "messages" not in request.body
    assert request.body["stop"] == ["\n"]
    assert request.body["temperature"] == 0
    assert request.body["max_tokens"] == 64
    assert step.call.params["mode"] == "completion"


async def test_completion_mode_cuts_and_closes_when_stop_is_ignored(
    openai_server: FakeOpenAI,
) -> None:
    lines = "".join(f"Completion line {n}.\n" for n in range(1, 301))
    openai_server.enqueue(Reply(text=lines, honor_stop=False, chunk_delay_s=0.005))
    events, error = await collect(completion(openai_server))
    assert error is None
    assert step_of(events).text == "Completion line 1."
    request = only_request(openai_server)
    await eventually(lambda: request.client_closed_early)
    assert request.chunks_sent < 900 / 2


async def test_completion_mode_strips_an_echo(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text=" Thought 3: So the answer is (B).", chunk_chars=4))
    events, error = await collect(completion(openai_server))
    assert error is None
    assert step_of(events).text == "So the answer is (B)."
    assert "".join(deltas(events)) == "So the answer is (B)."


async def test_completion_mode_401_names_the_key(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(status=401))
    _, error = await collect(completion(openai_server))
    assert error is not None and error.kind == "auth"
    assert "OPENAI_API_KEY" in error.message
    assert len(openai_server.requests) == 1


# ------------------------------------------------------------------------ whole answers


async def test_complete_returns_the_whole_answer(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(text="Thought 1 looks fine.\nSo the answer is No."))
    result = await llm.complete(
        chat(openai_server), [{"role": "user", "content": "find the mistake"}],
        llm.CallSettings(max_tokens=None, retry=FAST),
    )
    assert result.text == "Thought 1 looks fine.\nSo the answer is No."
    body = only_request(openai_server).body
    # Streamed, read to its end (a slow model writes a long answer over minutes), with the
    # provider's usage asked for as a step's is; no stop.
    assert "stop" not in body and body.get("stream") is True
    assert body["stream_options"] == {"include_usage": True}
    assert result.call.prompt_tokens == 3


def test_litellm_once_loaded_is_out_of_the_cycle_collectors_sight() -> None:
    """litellm's objects live as long as the process: a full collection after it is loaded
    walks only what was made since, not its ~300,000 objects (a pause of 100-350 ms here,
    in the middle of a stream). In a fresh process: this one may have litellm already."""
    import subprocess
    import sys

    code = ("import gc; from bbm_tui.core.llm.loader import litellm_module; "
            "litellm_module(); print(gc.get_freeze_count(), len(gc.get_objects()))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    frozen, tracked = map(int, done.stdout.split())
    assert frozen > 100_000
    assert tracked < frozen / 20
