"""Candidates for one step (issue 9, item 3), through litellm against the local server: `n` in
one call where the provider takes it, parallel calls where it does not, the same result
shape; each candidate keeps the tokens of exactly its stored text, their log-probabilities
summing to its figure; servers that ignore or cap `n` are made up for."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

import pytest

from bbm_tui.core import llm
from bbm_tui.core.llm.capabilities import TOP_ALTERNATIVES
from bbm_tui.core.llm.sampling import sample_steps
from bbm_tui.core.llm.transport import aligned_tokens
from bbm_tui.core.prompts.thoughts import cut_step
from bbm_tui.core.records import TokenLogprob
from tests.openai_server import FakeOpenAI, Reply

PROMPT = "Q: 2 + 2 = ?\nThought 1: Let me add.\nThought 2: Now\nThought 3:"
# What a model at temperature 1 might write for Thought 3: echoes, leading space, the next
# thought after the newline, one the same as another.
CHOICES = [
    " 2 + 2 = 4\nThought 4: So the answer is 4",
    "Thought 3: 2 + 2 = 5\nThought 4: more",
    " 2 plus 2 is 4\n",
    "  4 = 2 + 2\nThought 4: x",
    " 2 + 2 = 4\nThought 4: So the answer is 4",
    " thought 3:   two and two make four\n",
    " 2 + 2 = 22\nThought 4: y",
    " 4\n",
]
LOGPROBS = [-0.5, -1.5, -0.25, -2.0, -0.5, -0.125, -3.0, -1.0]
SETTINGS = llm.CallSettings(temperature=1.0, max_tokens=64, logprobs=True,
                            retry=llm.RetryPolicy(attempts=1))


def reply(**extra) -> Reply:
    return Reply(choices=CHOICES, choice_logprobs=LOGPROBS, honor_stop=False, **extra)


def check_own_tokens(candidates) -> None:
    """Each candidate's tokens spell exactly its stored text, and their log-probabilities
    sum to its figure."""
    for candidate in candidates:
        assert candidate.tokens is not None
        assert "".join(token.text for token in candidate.tokens) == candidate.text
        assert candidate.logprob == pytest.approx(sum(t.logprob for t in candidate.tokens))


def check(samples, n: int = 8) -> None:
    assert len(samples.candidates) == n
    check_own_tokens(samples.candidates)
    for index, candidate in enumerate(samples.candidates):
        raw = CHOICES[index % len(CHOICES)]
        assert candidate.text == cut_step(raw, 3)
        value = LOGPROBS[index % len(LOGPROBS)]
        assert candidate.logprob == pytest.approx(value * len(candidate.tokens))
    texts = [candidate.text for candidate in samples.candidates]
    assert texts[:3] == ["2 + 2 = 4", "2 + 2 = 5", "2 plus 2 is 4"]
    assert texts[5] == "two and two make four"


async def test_n_in_one_call_with_aligned_log_probabilities(openai_server: FakeOpenAI) -> None:
    openai_server.responder = lambda path, body: reply()
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    check(samples)
    assert samples.how == "n" and len(openai_server.requests) == 1
    body = openai_server.requests[0].body
    assert (body["n"], body["temperature"], body["logprobs"], body["top_logprobs"]) == (
        8, 1.0, True, TOP_ALTERNATIVES)
    assert "stream" not in body or not body["stream"]
    assert [c.choice for c in samples.candidates] == list(range(8))


async def test_the_parallel_path_gives_the_same_result(openai_server: FakeOpenAI) -> None:
    """lm_studio/ is one litellm sends to an OpenAI-compatible server but that does not take
    `n`: eight calls of one choice each."""
    served: list[int] = []

    def one_at_a_time(path: str, body: dict) -> Reply:
        assert body.get("n", 1) == 1
        served.append(1)
        index = len(served) - 1
        return Reply(text=CHOICES[index], logprob_per_token=LOGPROBS[index], honor_stop=False)

    openai_server.responder = one_at_a_time
    spec = llm.ModelSpec("lm_studio/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    assert samples.how == "parallel" and len(samples.calls) == 8
    assert len(samples.candidates) == 8
    check_own_tokens(samples.candidates)
    # Parallel calls finish in any order: compare as sets of (text, log-prob).
    by_text = {(c.text, round(c.logprob, 6)) for c in samples.candidates}
    expected = {(cut_step(raw, 3), round(value * len(aligned_len(raw)), 6))
                for raw, value in zip(CHOICES, LOGPROBS, strict=True)}
    assert by_text == expected


def aligned_len(raw: str) -> list[TokenLogprob]:
    from tests.openai_server import _pieces

    pieces = _pieces(raw, None)
    start = raw.index(cut_step(raw, 3))
    tokens = aligned_tokens(raw, [TokenLogprob(p, 0.0) for p in pieces], start,
                            start + len(cut_step(raw, 3)))
    assert tokens is not None
    return tokens


@pytest.mark.parametrize(("server", "how", "calls"), [
    ({"ignore_n": True}, "n+parallel", 8),  # llama-cpp-python: one choice, whatever n says
    ({"max_n": 4}, "n+parallel", 5),  # llama-server with 4 slots
])
async def test_a_server_that_ignores_or_caps_n_is_made_up_for(
    openai_server: FakeOpenAI, server: dict, how: str, calls: int
) -> None:
    openai_server.responder = lambda path, body: reply(**server)
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    assert samples.how == how and len(samples.candidates) == 8
    assert len(openai_server.requests) == calls
    assert all(c.tokens and "".join(t.text for t in c.tokens) == c.text
               for c in samples.candidates)


@pytest.mark.parametrize("form", ["chat", "legacy"])
async def test_text_completion_candidates_are_not_streamed(openai_server: FakeOpenAI,
                                                           form: str) -> None:
    """litellm merges a streamed text completion's choices into one: never stream them.
    Both log-probability forms are read (llama-server's `content`, OpenAI's legacy one)."""
    openai_server.responder = lambda path, body: reply(logprob_form=form)
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url, "completion")
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    check(samples)
    request = openai_server.requests[0]
    assert request.path.endswith("/completions") and "chat" not in request.path
    assert not request.body.get("stream") and request.body["logprobs"] == TOP_ALTERNATIVES


async def test_usage_of_one_choice_is_recorded_as_sent(openai_server: FakeOpenAI) -> None:
    openai_server.responder = lambda path, body: reply(usage_one_choice=True)
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    from tests.openai_server import _pieces

    # llama-server counts the first choice only; so is it stored.
    assert samples.calls[0].completion_tokens == len(_pieces(CHOICES[0], None))


async def test_without_log_probabilities_tokens_are_unknown(openai_server: FakeOpenAI) -> None:
    openai_server.responder = lambda path, body: Reply(choices=CHOICES, honor_stop=False)
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    settings = llm.CallSettings(temperature=1.0, max_tokens=64, retry=SETTINGS.retry)
    samples = await sample_steps(spec, PROMPT, 8, settings)
    assert [c.tokens for c in samples.candidates] == [None] * 8
    assert "logprobs" not in openai_server.requests[0].body


async def test_the_replay_model_answers_n_with_its_one_recorded_step() -> None:
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.prompts.generation import next_step_prompt

    row = bundled_rows("multistep_arithmetic")[0]
    prompt = next_step_prompt("multistep_arithmetic", row.input, row.steps[:2])
    samples = await sample_steps(llm.ModelSpec("replay/bbm"), prompt, 8, SETTINGS)
    assert samples.how == "n" and [c.text for c in samples.candidates] == [row.steps[2]] * 8


async def test_a_streamed_step_keeps_exactly_its_tokens(openai_server: FakeOpenAI) -> None:
    """The streamed path aligns its tokens the same way: an echoed label and what follows the
    newline are not counted (they were before: the sum covered them)."""
    openai_server.enqueue(Reply("Thought 3: 2 + 2 = 4\nThought 4: more",
                                logprob_per_token=-0.5, honor_stop=False))
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    items = [item async for item in llm.stream_step(spec, PROMPT, llm.CallSettings(
        logprobs=True, retry=SETTINGS.retry))]
    step = items[-1]
    assert step.text == "2 + 2 = 4"
    assert "".join(token.text for token in step.call.tokens) == "2 + 2 = 4"
    assert step.call.total_logprob == pytest.approx(-0.5 * len(step.call.tokens))
    assert len(step.call.tokens) == 5  # "2 ", "+ ", "2 ", "= ", "4" (the "4\n" token, cut)


def test_alignment_edges() -> None:
    raw = "Thought 3: ab cd\nef"
    tokens = [TokenLogprob(text, value) for text, value in [
        ("Thought", -1.0), (" 3", -1.0), (":", -1.0), (" ab", -0.5), (" c", -0.25),
        ("d\ne", -0.75), ("f", -9.0)]]
    start = raw.index("ab")
    kept = aligned_tokens(raw, tokens, start, start + len("ab cd"))
    assert kept == [TokenLogprob("ab", -0.5), TokenLogprob(" c", -0.25),
                    TokenLogprob("d", -0.75)]
    # Tokens that do not spell it:
    assert aligned_tokens(raw, [TokenLogprob("x", -1.0)], 0, 1) is None
    assert aligned_tokens(raw, tokens[:4], start, start + 5) is None  # too few to reach it


def ranked(piece: str, value: float) -> list[tuple[str, float]]:
    """What a server ranks at a token's place: the token itself, then seven others less
    likely (more than any request asks for: the server cuts the list to the number asked)."""
    return [(piece, value), *((f"{piece.strip() or '_'}~{k}", value - k) for k in range(1, 8))]


def check_alternatives(tokens: list[TokenLogprob] | None) -> None:
    assert tokens
    for token in tokens:
        assert len(token.alternatives) == TOP_ALTERNATIVES
        assert [value for _, value in token.alternatives] == sorted(
            (value for _, value in token.alternatives), reverse=True)
        assert token.alternatives[1][0].endswith("~1")


async def test_each_candidates_tokens_keep_their_top_alternatives(
    openai_server: FakeOpenAI,
) -> None:
    """n=8 in one chat call: each kept token carries the top alternatives the server sent
    for its place (as many as asked), the most likely first; tokens past the cut are not
    kept, so neither are their alternatives."""
    openai_server.responder = lambda path, body: reply(alternatives=ranked)
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    check(samples)
    for candidate in samples.candidates:
        check_alternatives(candidate.tokens)
    first = samples.candidates[0].tokens
    assert [t.text for t in first] == ["2 ", "+ ", "2 ", "= ", "4"]
    # " 2 + 2 = 4\n..." comes as " ", "2 ", ...: the leading " " token is not the step's.
    assert first[0].alternatives[0] == ("2 ", LOGPROBS[0])
    assert first[-1].alternatives[0] == ("4\n", LOGPROBS[0])  # cut at the newline, as sent


@pytest.mark.parametrize("form", ["chat", "legacy"])
async def test_text_completion_alternatives_in_both_forms(openai_server: FakeOpenAI,
                                                          form: str) -> None:
    """llama-server sends the chat form on /v1/completions; OpenAI the legacy one (a
    {token: log-probability} per place): both give each token its alternatives."""
    openai_server.responder = lambda path, body: reply(logprob_form=form, alternatives=ranked)
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url, "completion")
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS)
    check(samples)
    for candidate in samples.candidates:
        check_alternatives(candidate.tokens)


async def test_a_streamed_step_keeps_each_tokens_alternatives(openai_server: FakeOpenAI) -> None:
    openai_server.enqueue(Reply("Thought 3: 2 + 2 = 4\nThought 4: more", logprob_per_token=-0.5,
                                honor_stop=False, alternatives=ranked))
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    items = [item async for item in llm.stream_step(spec, PROMPT, llm.CallSettings(
        logprobs=True, retry=SETTINGS.retry))]
    tokens = items[-1].call.tokens
    assert [t.text for t in tokens] == ["2 ", "+ ", "2 ", "= ", "4"]
    check_alternatives(tokens)
    assert tokens[1].alternatives[:2] == (("+ ", -0.5), ("+~1", -1.5))
    body = openai_server.requests[0].body
    assert (body["logprobs"], body["top_logprobs"]) == (True, TOP_ALTERNATIVES)


def held_last(hold: threading.Event) -> Callable[[str, dict], Reply]:
    """One candidate a call, in order; the eighth call is held until the test lets it go."""
    served: list[int] = []

    def respond(path: str, body: dict) -> Reply:
        served.append(1)
        index = len(served) - 1
        return Reply(text=CHOICES[index], logprob_per_token=LOGPROBS[index], honor_stop=False,
                     hold=hold if index == 7 else None)

    return respond


async def test_candidates_are_handed_on_as_each_call_returns(openai_server: FakeOpenAI) -> None:
    """The parallel path: the first candidates are delivered while the last call is still out
    (it is held until then), each at its own place; the result is the same as collected."""
    hold = threading.Event()
    openai_server.responder = held_last(hold)
    arrivals: list[llm.Arrived] = []

    def arrived(arrival: llm.Arrived) -> None:
        arrivals.append(arrival)
        hold.set()  # the eighth call may now return

    spec = llm.ModelSpec("lm_studio/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS, arrived)
    held = [r for r in openai_server.requests if r.released]
    assert len(held) == 1, "the eighth call was let go by the first arrival, not by the clock"
    assert len(arrivals) == 8 and len(openai_server.requests) == 8
    assert sorted(p for a in arrivals for p in a.positions) == list(range(8))
    # Each candidate at the place its call was asked in, whatever order they came back in.
    for arrival in arrivals:
        [position] = arrival.positions
        assert samples.candidates[position] is arrival.candidates[0]
        assert samples.calls[arrival.call_index] is arrival.call
        assert arrival.candidates[0].call == arrival.call_index
    assert samples.how == "parallel"


async def test_the_n_call_then_the_calls_that_make_up_for_it(openai_server: FakeOpenAI) -> None:
    """A server capped at 4: its four choices come at once (places 0-3), then each of the four
    calls that make up for the rest."""
    openai_server.responder = lambda path, body: reply(max_n=4)
    arrivals: list[llm.Arrived] = []
    spec = llm.ModelSpec("openai/test-model", openai_server.base_url)
    samples = await sample_steps(spec, PROMPT, 8, SETTINGS, arrivals.append)
    assert arrivals[0].positions == [0, 1, 2, 3] and arrivals[0].call_index == 0
    assert sorted(a.positions[0] for a in arrivals[1:]) == [4, 5, 6, 7]
    assert [c.text for c in samples.candidates] == [
        c.text for a in sorted(arrivals, key=lambda a: a.call_index) for c in a.candidates]


async def test_cancelled_sampling_hangs_up_on_the_calls_still_out(
    openai_server: FakeOpenAI,
) -> None:
    hold = threading.Event()
    openai_server.responder = held_last(hold)
    first = asyncio.Event()
    spec = llm.ModelSpec("lm_studio/test-model", openai_server.base_url)
    task = asyncio.ensure_future(sample_steps(spec, PROMPT, 8, SETTINGS,
                                              lambda arrival: first.set()))
    await asyncio.wait_for(first.wait(), 10)
    await wait_until(lambda: len(openai_server.requests) == 8)  # the eighth is held
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await wait_until(lambda: any(r.client_closed_early for r in openai_server.requests))
    assert not any(r.released for r in openai_server.requests)


async def wait_until(condition: Callable[[], bool], timeout_s: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)
