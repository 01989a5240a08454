"""Messages that name the real cause, through litellm against the local server: an api base
with a user and password in it (the OpenAI client refuses them beside its own Authorization
header: it said "cannot reach ... Connection error"); a 200 whose choice is not an answer (a
null message, a string choice, a list or a number as content: "server error (500): Invalid
response object"); gzip data that is corrupt (sampling said "cannot reach ... Connection
error", a streamed step "broke off mid-answer"). Each is one message, the same on every path."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from tests.openai_server import FakeOpenAI, Reply

FAST = llm.RetryPolicy(attempts=2, base_delay_s=0.01, max_delay_s=0.02)
CALL = llm.CallSettings(timeout_s=10, idle_timeout_s=10, retry=FAST)
PROMPT = "Q: 1 + 1 =\nThought 1:"


def spec(base: str) -> llm.ModelSpec:
    return llm.ModelSpec("openai/test-model", base)


async def stream(base: str) -> llm.StepText:
    items = [item async for item in llm.stream_step(spec(base), PROMPT, CALL)]
    return items[-1]


async def sample(base: str) -> llm.Samples:
    return await llm.sample_steps(spec(base), PROMPT, 2, CALL)


async def complete(base: str) -> llm.Completion:
    return await llm.complete(spec(base), [{"role": "user", "content": "Is it right?"}], CALL)


PATHS = {"a streamed step": stream, "samples": sample, "a finder's answer": complete}


# ----------------------------------------------------------------- a password in the api base

@pytest.mark.parametrize("path", PATHS)
async def test_a_user_and_password_in_the_api_base_is_said_as_such(
    openai_server: FakeOpenAI, path: str
) -> None:
    openai_server.responder = lambda _path, _body: Reply("1 + 1 = 2\n")
    base = openai_server.base_url.replace("http://", "http://alice:hunter2-pw@")
    with pytest.raises(llm.LLMError) as raised:
        await PATHS[path](base)
    error = raised.value
    assert error.kind == "bad_request" and error.attempts == 1  # no retry will cure it
    assert error.message == (
        f"openai/test-model at http://[redacted]@127.0.0.1:{openai_server.port}/v1: the api "
        "base holds a user name and password, which the OpenAI client will not send beside "
        "its own Authorization header; leave them out of the api base (give the key in "
        "OPENAI_API_KEY)")
    assert "Connection error" not in error.message and "hunter2" not in error.message
    assert openai_server.requests == []


def test_run_says_it_once_and_stops(openai_server: FakeOpenAI, tmp_path: Path,
                                    capsys) -> None:
    source = tmp_path / "multistep_arithmetic.jsonl"
    source.write_text("".join(row.to_line() + "\n"
                              for row in bundled_rows("multistep_arithmetic")[:3]))
    base = openai_server.base_url.replace("http://", "http://alice:hunter2-pw@")
    code = main(["run", "--model", "openai/test-model", "--api-base", base, "--input",
                 str(source), "--out", str(tmp_path / "out.jsonl"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1 and "run stopped: " in err and "user name and password" in err, err
    assert "hunter2" not in err


# ----------------------------------------------------------------- a 200 that is not an answer

def whole(choices: list) -> Reply:
    body = {"id": "1", "object": "chat.completion", "created": 1, "model": "m",
            "choices": choices,
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    return Reply(raw_body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})


def message(content: object) -> list:
    return [{"index": 0, "message": {"role": "assistant", "content": content},
             "finish_reason": "stop"}]


NOT_ANSWERS = {
    "a null message": ([{"index": 0, "message": None, "finish_reason": "stop"}],
                       "choice 0's message is null, not an object"),
    "a string choice": (["1 + 1 = 2"], "choice 0 is a string, not an object"),
    "a null choice": ([None], "choice 0 is null, not an object"),
    "a list as content": (message([{"type": "text", "text": "2"}]),
                          "choice 0's content is a list, not text"),
    "a number as content": (message(42), "choice 0's content is a number, not text"),
}


@pytest.mark.parametrize("name", NOT_ANSWERS)
@pytest.mark.parametrize("path", ["samples", "a finder's answer"])
async def test_a_choice_that_is_not_an_answer_says_what_was_wrong(
    openai_server: FakeOpenAI, name: str, path: str
) -> None:
    choices, said = NOT_ANSWERS[name]
    openai_server.responder = lambda _path, _body: whole(choices)
    with pytest.raises(llm.LLMError) as raised:
        await PATHS[path](openai_server.base_url)
    error = raised.value
    assert error.message == (f"the reply from openai/test-model at {openai_server.base_url} "
                             f"was not a model's answer: {said} (after 2 attempts)")
    assert error.kind == "stream" and len(openai_server.requests) == 2  # retried like a 5xx


async def test_an_error_body_is_not_taken_for_an_answer(openai_server: FakeOpenAI) -> None:
    """Only a 200's choices are checked: a 400's body is the provider's error, as before."""
    openai_server.responder = lambda _path, _body: Reply(
        status=400, error_body={"error": {"message": "bad thing", "choices": [None]}})
    with pytest.raises(llm.LLMError) as raised:
        await complete(openai_server.base_url)
    assert raised.value.kind == "bad_request" and "bad thing" in raised.value.message


# ----------------------------------------------------------------- corrupt compressed data

def corrupt(data: bytes) -> bytes:
    packed = gzip.compress(data)
    return packed[:20] + b"\x00garbage" * 10 + packed[40:]


def corrupt_replies(_path: str, body: dict) -> Reply:
    if body.get("stream"):
        event = {"id": "1", "object": "chat.completion.chunk", "created": 1, "model": "m",
                 "choices": [{"index": 0, "delta": {"content": "2\n"}, "finish_reason": None}]}
        data = f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode()
        return Reply(raw_body=corrupt(data), headers={"Content-Type": "text/event-stream",
                                                       "Content-Encoding": "gzip"})
    reply = whole(message("2\n"))
    return Reply(raw_body=corrupt(reply.raw_body),
                 headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})


@pytest.mark.parametrize("path", PATHS)
async def test_corrupt_gzip_is_one_message_naming_it_on_every_path(
    openai_server: FakeOpenAI, path: str
) -> None:
    openai_server.responder = corrupt_replies
    with pytest.raises(llm.LLMError) as raised:
        await PATHS[path](openai_server.base_url)
    message_ = raised.value.message
    assert message_.startswith(f"the reply from openai/test-model at {openai_server.base_url} "
                               "was not a model's answer: its compressed (gzip) data is "
                               "corrupt (zlib: "), message_
    assert message_.endswith(") (after 2 attempts)")
    assert "Connection error" not in message_ and "broke off" not in message_
