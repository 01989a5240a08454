"""Every method over real HTTP against the local OpenAI-compatible server: what is sent (the
paper's messages, temperature 0, no stop), what comes back (scripted answers, messy ones
included), errors (429 then success, 500s, 401), and what is recorded."""

from __future__ import annotations

import pytest

from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.judging.finders import FINDER_MAX_TOKENS, run_method
from bbm_tui.core.prompts.finding import build_messages
from bbm_tui.core.store import Store
from bbm_tui.core.trace.recording import record_find
from tests.openai_server import FakeOpenAI, Reply

FAST_RETRY = llm.RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02)
SETTINGS = llm.CallSettings(temperature=0.0, max_tokens=FINDER_MAX_TOKENS, retry=FAST_RETRY)
ROW = bundled_rows("word_sorting")[0]  # 10+ thoughts, first mistake at index 1


def spec(server: FakeOpenAI, mode: str = "chat") -> llm.ModelSpec:
    return llm.ModelSpec("openai/test", api_base=server.base_url, mode=mode)  # type: ignore[arg-type]


async def run(server: FakeOpenAI, method: str, **kwargs):
    return await run_method("word_sorting", method, ROW.input, ROW.steps, spec(server),
                            settings=SETTINGS, **kwargs)


def assert_sent(server: FakeOpenAI, method: str, steps: list[int | None]) -> None:
    assert len(server.requests) == len(steps)
    for request, k in zip(server.requests, steps, strict=True):
        body = request.body
        assert request.path.endswith("/chat/completions")
        assert body["model"] == "test"
        assert body["messages"] == build_messages("word_sorting", method, ROW.input, ROW.steps,
                                                  k)
        assert body["temperature"] == 0
        assert "stop" not in body
        # Streamed and read to its end, so a slow model's long answer is no timeout.
        assert body.get("stream") is True
        assert "authorization" not in {key.lower() for key in request.headers} or (
            request.headers.get("Authorization", "") == "Bearer no-key-set")


async def test_direct_trace(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("**2**"))
    result = await run(openai_server, "direct-trace")
    assert (result.mistake_index, result.parsed, result.raw) == (1, True, ["**2**"])
    assert_sent(openai_server, "direct-trace", [None])
    call = result.calls[0]
    assert call.model == "openai/test" and call.attempts == 1
    assert call.prompt_tokens and call.completion_tokens == 1


async def test_direct_step_stops_at_the_first_no(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("Yes"), Reply("Yes."), Reply("No"))
    result = await run(openai_server, "direct-step")
    assert (result.mistake_index, result.parsed) == (2, True)
    assert result.raw == ["Yes", "Yes.", "No"]
    assert_sent(openai_server, "direct-step", [1, 2, 3])


async def test_cot_step_judges_every_step_when_asked(openai_server: FakeOpenAI) -> None:
    answers = {1: "Comment 1: fine. So Thought 1 is correct. Yes",
               2: "Comment 1: the order is wrong, so Thought 2 is incorrect. No"}
    openai_server.responder = lambda path, body: Reply(answers.get(
        int(body["messages"][-1]["content"].split("Is Thought ")[1].split()[0]),
        "Comment 1: ok. Yes"))
    result = await run(openai_server, "cot-step", judge_all=True)
    assert (result.mistake_index, result.parsed) == (1, True)
    assert len(result.raw) == len(ROW.steps)
    assert result.raw[1] == answers[2]
    assert_sent(openai_server, "cot-step", list(range(1, len(ROW.steps) + 1)))


async def test_cot_trace(openai_server: FakeOpenAI) -> None:
    reasoning = "Comment 1: Thought 1 is correct.\nComment 2: all good. So the answer is No"
    openai_server.enqueue(Reply(reasoning))
    result = await run(openai_server, "cot-trace")
    assert (result.mistake_index, result.parsed, result.raw) == (None, True, [reasoning])
    assert_sent(openai_server, "cot-trace", [None])


async def test_an_unparseable_step_answer_ends_the_run_unparsed(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("Yes"), Reply("I would need more context to say."))
    result = await run(openai_server, "direct-step")
    assert result.parsed is False
    assert result.mistake_index is None
    assert result.raw == ["Yes", "I would need more context to say."]
    assert len(openai_server.requests) == 2


async def test_an_out_of_range_number_is_unparseable(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("99"))
    result = await run(openai_server, "direct-trace")
    assert (result.parsed, result.raw) == (False, ["99"])


async def test_429_then_success(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(
        Reply(status=429, headers={"Retry-After": "0"},
              error_body={"error": {"message": "slow down", "type": "rate_limit"}}),
        Reply("No"),
    )
    result = await run(openai_server, "direct-trace")
    assert (result.mistake_index, result.parsed) == (None, True)
    assert result.calls[0].attempts == 2
    assert len(openai_server.requests) == 2


async def test_500s_give_up_with_a_server_error(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(*[Reply(status=500) for _ in range(3)])
    with pytest.raises(llm.LLMError) as caught:
        await run(openai_server, "direct-step")
    assert caught.value.kind == "server"
    assert "after 3 attempts" in caught.value.message
    assert len(openai_server.requests) == 3


async def test_401_is_not_retried(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply(status=401, error_body={"error": {"message": "bad key"}}))
    with pytest.raises(llm.LLMError) as caught:
        await run(openai_server, "cot-step")
    assert caught.value.kind == "auth"
    assert len(openai_server.requests) == 1


async def test_recorded_with_raw_answers_and_call_stats(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(
        Reply("Yes"),
        Reply(status=429, headers={"Retry-After": "0"}),
        Reply('  "No" — Thought 2 drops a word.\n'),
    )
    store = Store.open()
    session = store.create_session(task="word_sorting", input=ROW.input, model="openai/test")
    async for _ in record_find(store, session.id, "word_sorting", "direct-step", ROW.input,
                               ROW.steps, spec(openai_server), settings=SETTINGS):
        pass
    run_ = store.finder_runs(session.id)[0]
    assert (run_.mistake_number, run_.parsed, run_.model) == (2, True, "openai/test")
    assert [v.raw for v in run_.verdicts] == ["Yes", '  "No" — Thought 2 drops a word.\n']
    assert [v.verdict for v in run_.verdicts] == ["Yes", "No"]
    assert [v.call.attempts for v in run_.verdicts] == [1, 2]
    assert all(v.call.latency_s > 0 and v.call.prompt_tokens for v in run_.verdicts)
    assert store.totals(session.id).calls == 2
    store.close()


async def test_a_failed_run_keeps_its_verdicts_and_has_no_result(
    openai_server: FakeOpenAI,
) -> None:
    openai_server.enqueue(Reply("Yes"), Reply(status=401))
    store = Store.open()
    session = store.create_session(task="word_sorting", input=ROW.input, model="openai/test")
    with pytest.raises(llm.LLMError):
        async for _ in record_find(store, session.id, "word_sorting", "direct-step", ROW.input,
                                   ROW.steps, spec(openai_server), settings=SETTINGS):
            pass
    run_ = store.finder_runs(session.id)[0]
    assert not run_.finished and run_.parsed is None
    assert [v.raw for v in run_.verdicts] == ["Yes"]
    store.close()


async def test_text_completion_mode(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("3"))
    result = await run_method("word_sorting", "direct-trace", ROW.input, ROW.steps,
                              spec(openai_server, "completion"), settings=SETTINGS)
    assert (result.mistake_index, result.parsed) == (2, True)
    body = openai_server.requests[0].body
    assert openai_server.requests[0].path.endswith("/completions")
    messages = build_messages("word_sorting", "direct-trace", ROW.input, ROW.steps)
    assert body["prompt"] == "\n\n".join(m["content"] for m in messages)
    assert body["temperature"] == 0 and "stop" not in body
