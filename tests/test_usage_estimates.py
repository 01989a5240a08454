"""Token counts as the provider made them, or marked as estimates (docs: NOTES.md "Usage").

A server that sends no usage in its stream (llama.cpp's server, some proxies) gets litellm's
own tiktoken count in its place; a stream closed at the step's newline carries no usage at
all, and one chunk is counted as one token. Both are estimates, and the call record says so;
counts the provider sent are not. Real HTTP through litellm to tests/openai_server.py.
"""

from __future__ import annotations

import asyncio

import pytest

from bbm_tui.core import llm
from tests.openai_server import FakeOpenAI, Reply

PROMPT = "Q: What is 4 + 4?\nThought 1:"
SETTINGS = llm.CallSettings(max_tokens=50, timeout_s=10, idle_timeout_s=10,
                            retry=llm.RetryPolicy(attempts=1))


async def one_step(spec: llm.ModelSpec) -> llm.StepText:
    items = [item async for item in llm.stream_step(spec, PROMPT, SETTINGS)]
    return items[-1]


async def test_the_providers_own_counts_are_not_estimates(openai_server: FakeOpenAI) -> None:
    """Chat streams ask for usage (`stream_options`); the server's figures are kept as sent.
    Text-completion streams do not ask (not every completion server takes the option), so
    their counts are the estimates the next test checks."""
    openai_server.enqueue(Reply("4 + 4 = 8", usage_values={
        "prompt_tokens": 31, "completion_tokens": 6, "total_tokens": 37}))
    step = await one_step(llm.ModelSpec("openai/test-model", openai_server.base_url))
    assert step.text == "4 + 4 = 8"
    assert (step.call.prompt_tokens, step.call.completion_tokens) == (31, 6)
    assert step.call.usage_estimated is False


@pytest.mark.parametrize("mode", ["chat", "completion"])
async def test_a_stream_with_no_usage_is_counted_as_an_estimate(openai_server: FakeOpenAI,
                                                                mode: llm.Mode) -> None:
    openai_server.enqueue(Reply("4 + 4 = 8", usage=False))
    step = await one_step(llm.ModelSpec("openai/test-model", openai_server.base_url, mode))
    assert step.text == "4 + 4 = 8"
    assert step.call.completion_tokens is not None and step.call.completion_tokens > 0
    assert step.call.usage_estimated is True
    # litellm counted the prompt too (with its tokenizer, not the server's).
    assert step.call.prompt_estimated == (step.call.prompt_tokens is not None)


async def test_a_stream_closed_at_the_newline_is_counted_as_an_estimate(
    openai_server: FakeOpenAI
) -> None:
    """The server ignores `stop` and writes on; the step is cut at the newline and the
    stream closed, before any usage could come: both counts are estimates."""
    openai_server.enqueue(Reply("4 + 4 = 8\nThought 2: and then more " + "words " * 200,
                                honor_stop=False, chunk_delay_s=0.005))
    step = await one_step(llm.ModelSpec("openai/test-model", openai_server.base_url))
    assert step.text == "4 + 4 = 8"
    request = openai_server.requests[-1]
    deadline = asyncio.get_running_loop().time() + 5
    while not request.client_closed_early:  # the server notices at its next write
        assert asyncio.get_running_loop().time() < deadline, "the stream was never closed"
        await asyncio.sleep(0.01)
    assert step.call.completion_tokens is not None
    assert step.call.usage_estimated is True
    # The prompt's count never came either: litellm's count stands in, marked (issue 33).
    assert step.call.prompt_tokens and step.call.prompt_estimated


async def test_an_offline_models_counts_are_its_own() -> None:
    """replay/bbm answers in-process (no HTTP reply to watch): what it counts is not an
    estimate of litellm's."""
    from bbm_tui.core.dataset import bundled_rows
    from bbm_tui.core.prompts.generation import next_step_prompt

    row = bundled_rows("multistep_arithmetic")[0]
    prompt = next_step_prompt("multistep_arithmetic", row.input, [])
    items = [item async for item in llm.stream_step(llm.ModelSpec("replay/bbm"), prompt,
                                                   SETTINGS)]
    step = items[-1]
    assert step.text == row.steps[0]
    assert step.call.usage_estimated is False


def test_an_estimate_is_shown_as_one() -> None:
    """Under a thought and in the title's totals, "~" marks counts that are estimates."""
    from bbm_tui.core.store import Step, Totals
    from bbm_tui.ui.text import format_totals, step_meta

    def step(estimated: bool, prompt_estimated: bool = False) -> Step:
        return Step(1, 1, None, 1, "4 + 4 = 8", "model", None, False, 0.0, latency_s=0.4,
                    prompt_tokens=970, completion_tokens=7, usage_estimated=estimated,
                    prompt_estimated=prompt_estimated)

    # litellm's count for a server that sent none: both; a stream closed before the provider
    # counted its output (Anthropic's): the output only.
    assert "~970 in · ~7 out" in step_meta(step(True, True), wall_clock=False)
    assert "970 in · ~7 out" in step_meta(step(True), wall_clock=False)
    assert "970 in · 7 out" in step_meta(step(False), wall_clock=False)
    assert "~" not in step_meta(step(False), wall_clock=False)
    assert format_totals(Totals(2, 970, 12, 0.0, estimated_calls=1)) == (
        "2 calls · 970 in / 0 cached / ~12 out · $0")
    assert format_totals(Totals(2, 970, 12, 0.0, estimated_calls=1,
                                prompt_estimated_calls=1)) == (
        "2 calls · ~970 in / 0 cached / ~12 out · $0")
    assert format_totals(Totals(2, 970, 12, 0.0)) == "2 calls · 970 in / 0 cached / 12 out · $0"
