"""A reply far larger than asked for: a server that sends every alternative it has for each
token (56,000 a choice, a 30 MB reply under the 32 MiB cap) where 5 were asked for
(`top_logprobs`). Before, litellm parsed all of it: 34 s and 1.48 GB for two traces. The reply
guard keeps at most the alternatives asked for before anything parses the reply, so what
litellm builds is as small as an honest server's answer. Time and memory are measured in
bench/big_reply.py, not here."""

from __future__ import annotations

import json
import tracemalloc

import pytest

from bbm_tui.core import llm
from bbm_tui.core.llm.capabilities import TOP_ALTERNATIVES
from bbm_tui.core.llm.http_guard import EventTrimmer, trimmed_alternatives
from tests.openai_server import FakeOpenAI, Reply

WORDS = ["2 ", "+ ", "2 ", "= ", "4\n"]


def many(count: int):
    """`count` alternatives for every token, the most likely first, the token itself among
    them."""
    def alternatives(piece: str, value: float) -> list[tuple[str, float]]:
        return [(piece, value)] + [(f"w{index}", round(value - 1 - index / count, 4))
                                   for index in range(count - 1)]
    return alternatives


def chat_body(count: int) -> dict:
    return {"id": "1", "object": "chat.completion", "choices": [
        {"index": choice, "message": {"role": "assistant", "content": "".join(WORDS)},
         "finish_reason": "stop",
         "logprobs": {"content": [
             {"token": word, "logprob": -0.5, "bytes": list(word.encode()),
              "top_logprobs": [{"token": text, "logprob": value, "bytes": None}
                               for text, value in many(count)(word, -0.5)]}
             for word in WORDS]}}
        for choice in range(2)], "usage": {"prompt_tokens": 1, "completion_tokens": 5,
                                           "total_tokens": 6}}


def test_the_guard_keeps_at_most_the_alternatives_asked_for() -> None:
    body = json.dumps(chat_body(1000)).encode()
    kept = json.loads(trimmed_alternatives(body, 5))
    for choice in kept["choices"]:
        for token in choice["logprobs"]["content"]:
            assert [t["token"] for t in token["top_logprobs"]] == [
                token["token"], "w0", "w1", "w2", "w3"]
    original = chat_body(1000)
    for choice in original["choices"]:
        for token in choice["logprobs"]["content"]:
            token["top_logprobs"] = token["top_logprobs"][:5]
    assert kept == original  # everything else as it was
    assert len(trimmed_alternatives(body, 5)) < len(body) / 100


def test_the_guard_cuts_a_big_reply_without_a_second_copy_of_it() -> None:
    """The body is read as text a list at a time: decoding it whole held a second copy of a
    30 MB reply beside the first (bench/big_reply.py's peak RSS went past its 300 MB)."""
    body = json.dumps(chat_body(20_000)).encode()
    tracemalloc.start()
    try:
        kept = trimmed_alternatives(body, 5)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(kept) < len(body) / 100
    assert peak < len(body) / 3, (peak, len(body))


def test_a_list_holding_the_key_again_is_cut_whole() -> None:
    """An alternative that carries a `top_logprobs` of its own (a hostile server's): the list
    read so far ends at that key, so it is read further until it ends."""
    body = chat_body(50)
    for choice in body["choices"]:
        for token in choice["logprobs"]["content"]:
            for alternative in token["top_logprobs"]:
                alternative["top_logprobs"] = [{"token": "x", "logprob": -9.0}]
    kept = json.loads(trimmed_alternatives(json.dumps(body).encode(), 5))
    for choice in body["choices"]:
        for token in choice["logprobs"]["content"]:
            token["top_logprobs"] = token["top_logprobs"][:5]
    assert kept == body


def test_the_legacy_form_keeps_the_most_likely_of_each_place() -> None:
    """A text completion's `top_logprobs`: one {token: log-probability} per place, in no
    order to trust: each place keeps its most likely `keep`, every place is kept."""
    places = [{f"w{index}": -index / 10 for index in range(1000, 0, -1)} for _ in WORDS]
    body = json.dumps({"choices": [{"index": 0, "text": "".join(WORDS), "logprobs": {
        "tokens": WORDS, "token_logprobs": [-0.1] * 5, "top_logprobs": places}}]}).encode()
    kept = json.loads(trimmed_alternatives(body, 3))
    tops = kept["choices"][0]["logprobs"]["top_logprobs"]
    assert len(tops) == len(WORDS)
    assert all(sorted(place) == ["w1", "w2", "w3"] for place in tops)


def test_nothing_to_trim_is_the_same_bytes() -> None:
    body = json.dumps(chat_body(3)).encode()
    assert trimmed_alternatives(body, 5) == body
    assert trimmed_alternatives(b'{"choices": [], "note": "\\"top_logprobs\\": [1, 2]"}', 0) == (
        b'{"choices": [], "note": "\\"top_logprobs\\": [1, 2]"}')
    assert trimmed_alternatives(b"<html>not json", 5) == b"<html>not json"


@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_litellm_never_sees_more_than_was_asked(openai_server: FakeOpenAI,
                                                      mode: llm.Mode) -> None:
    """Through litellm for real: 8 choices of 5 tokens, 2,000 alternatives a token (10,000 a
    choice, a 5 MB reply; bench/big_reply.py sends 56,000 a choice); what litellm hands back
    holds TOP_ALTERNATIVES a token."""
    openai_server.responder = lambda path, body: Reply(
        choices=["".join(WORDS)] * 8, choice_logprobs=[-0.5], honor_stop=False,
        alternatives=many(2_000), every_alternative=True, logprob_form="chat")
    litellm = llm.litellm_module()
    kwargs = {"model": "openai/test-model", "api_base": openai_server.base_url,
              "api_key": "test", "max_retries": 0, "n": 8, "logprobs": True}
    if mode == "chat":
        response = await litellm.acompletion(messages=[{"role": "user", "content": "Q"}],
                                             top_logprobs=TOP_ALTERNATIVES, **kwargs)
    else:
        kwargs["logprobs"] = TOP_ALTERNATIVES
        response = await litellm.atext_completion(prompt="Q", **kwargs)
    assert len(response.choices) == 8
    for choice in response.choices:
        content = choice.logprobs["content"] if isinstance(choice.logprobs, dict) else (
            choice.logprobs.content)
        for token in content:
            tops = token["top_logprobs"] if isinstance(token, dict) else token.top_logprobs
            assert len(tops) == TOP_ALTERNATIVES
    assert len(openai_server.requests) == 1


async def test_samples_from_such_a_reply_are_whole(openai_server: FakeOpenAI) -> None:
    openai_server.responder = lambda path, body: Reply(
        choices=["".join(WORDS)] * 8, choice_logprobs=[-0.5], honor_stop=False,
        alternatives=many(2_000), every_alternative=True)
    samples = await llm.sample_steps(
        llm.ModelSpec("openai/test-model", openai_server.base_url), "Q: 2 + 2\nThought 1:", 8,
        llm.CallSettings(temperature=1.0, logprobs=True, retry=llm.RetryPolicy(attempts=1)))
    assert [c.text for c in samples.candidates] == ["2 + 2 = 4"] * 8
    for candidate in samples.candidates:
        assert candidate.logprob == pytest.approx(-2.5)
        assert candidate.tokens is not None
        assert all(len(token.alternatives) == TOP_ALTERNATIVES for token in candidate.tokens)


def event(count: int, word: str = "2 ") -> bytes:
    chunk = {"id": "1", "object": "chat.completion.chunk", "choices": [{
        "index": 0, "delta": {"content": word}, "finish_reason": None,
        "logprobs": {"content": [{"token": word, "logprob": -0.5, "bytes": None,
                                  "top_logprobs": [{"token": text, "logprob": value}
                                                   for text, value in many(count)(word, -0.5)]}]}}]}
    return f"data: {json.dumps(chunk)}".encode()


@pytest.mark.parametrize("blank", [b"\n\n", b"\r\n\r\n"])
@pytest.mark.parametrize("piece", [1, 7, 4096, 10**7])
def test_an_event_stream_is_cut_event_by_event_whatever_its_pieces(blank: bytes,
                                                                   piece: int) -> None:
    stream = blank.join([event(300), event(2), event(300, "4")]) + blank + b"data: [DONE]" + blank
    trimmer = EventTrimmer(5)
    handed_on = b"".join(trimmer.take(stream[i:i + piece]) for i in range(0, len(stream), piece))
    handed_on += trimmer.rest()
    expected = blank.join([trimmed_alternatives(event(300), 5), event(2),
                           trimmed_alternatives(event(300, "4"), 5)]) + blank + (
        b"data: [DONE]" + blank)
    assert handed_on == expected
    for part in handed_on.split(blank)[:3]:
        tops = json.loads(part[len(b"data: "):])["choices"][0]["logprobs"]["content"][0]
        assert len(tops["top_logprobs"]) <= 5


def test_what_follows_the_last_whole_event_is_handed_on_as_it_came() -> None:
    trimmer = EventTrimmer(5)
    assert trimmer.take(event(300)) == b""  # not whole yet: nothing a reader could parse
    assert trimmer.rest() == event(300)


async def test_a_streamed_step_reaches_litellm_cut(openai_server: FakeOpenAI) -> None:
    """Streamed (a step with log-probabilities): every chunk litellm parses holds the
    alternatives asked for, though the server sent 2,000 a token."""
    openai_server.responder = lambda path, body: Reply(
        "".join(WORDS), logprob_per_token=-0.5, alternatives=many(2_000),
        every_alternative=True)
    litellm = llm.litellm_module()
    stream = await litellm.acompletion(
        model="openai/test-model", api_base=openai_server.base_url, api_key="test",
        max_retries=0, messages=[{"role": "user", "content": "Q"}], stream=True,
        logprobs=True, top_logprobs=TOP_ALTERNATIVES)
    seen = 0
    async for chunk in stream:
        logprobs = chunk.choices[0].logprobs if chunk.choices else None
        for token in (logprobs.content if logprobs is not None else None) or []:
            assert len(token.top_logprobs) == TOP_ALTERNATIVES
            seen += 1
    assert seen == len(WORDS)
