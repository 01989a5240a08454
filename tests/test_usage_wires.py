"""True usage and cost on each provider's own wire, over real HTTP through litellm's adapters
to the local servers (tests/anthropic_server.py and friends): the counts are stored as the
provider reported them, also when the client closes the stream at the step's newline (every
Anthropic step: no whitespace stop can be sent), the prompt cache's reads and writes with
them, and the cost is litellm's price of the whole usage (cached tokens at the cache's
price), checked here against a sum made by hand from the published per-token prices."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows, read_rows
from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.llm.records import UsageCounts, UsageWatch
from bbm_tui.core.llm.usage import cost_of
from bbm_tui.core.llm.usage_events import UsageReader
from bbm_tui.core.store import default_path
from tests.fake_server import FakeServer, Reply, dataset_responder

# The published prices per token, as litellm 1.103.7's map has them (checked below):
# input, cache read, cache write (None: the provider reports no writes), output.
PRICES: dict[str, tuple[float, float, float | None, float]] = {
    "anthropic/claude-haiku-4-5": (1e-6, 1e-7, 1.25e-6, 5e-6),
    "gemini/gemini-2.5-flash": (3e-7, 3e-8, None, 2.5e-6),
    "openai/gpt-4o-mini": (1.5e-7, 7.5e-8, None, 6e-7),
}
KEYS = {"anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY", "openai": "OPENAI_API_KEY"}


def by_hand(model: str, prompt: int, cached: int, written: int, completion: int) -> float:
    """The bill: the uncached prompt at the input price, the cached part at the cache's, the
    part written at the write price, the output at its own."""
    price_in, price_read, price_write, price_out = PRICES[model]
    uncached = prompt - cached - written
    return (uncached * price_in + cached * price_read + written * (price_write or price_in)
            + completion * price_out)


def test_the_prices_used_by_hand_are_litellms() -> None:
    litellm = litellm_module()
    for model, (price_in, price_read, price_write, price_out) in PRICES.items():
        info = litellm.get_model_info(model)
        assert (info["input_cost_per_token"], info["output_cost_per_token"]) == (
            price_in, price_out), model
        assert info["cache_read_input_token_cost"] == price_read, model
        if price_write is not None:
            assert info["cache_creation_input_token_cost"] == price_write, model


def calls_of(source: str = "run") -> list[dict[str, Any]]:
    connection = sqlite3.connect(default_path())
    connection.row_factory = sqlite3.Row
    rows = [dict(row) for row in connection.execute(
        "SELECT c.* FROM calls AS c JOIN sessions AS s ON s.id = c.session_id "
        "WHERE s.source = ? ORDER BY c.id", (source,))]
    connection.close()
    return rows


def slow_tail(prompt_tokens: int, cached: int, written: int, **extra: Any):
    """Answer like the dataset's model, then write on past the newline, slowly: a client that
    cuts the step at its newline closes the stream long before the end."""
    def respond(path: str, body: dict[str, Any]) -> Reply:
        reply = dataset_responder(path, body)
        reply.text += ("" if "\n" in reply.text else "\n") + " and so on" * 60
        reply.chunk_delay_s = 0.003
        reply.prompt_tokens, reply.cached_tokens = prompt_tokens, cached
        reply.cache_write_tokens = written
        for name, value in extra.items():
            setattr(reply, name, value)
        return reply
    return respond


def wait_until(condition, limit_s: float = 5.0) -> bool:
    deadline = time.monotonic() + limit_s
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.01)
    return condition()


def run_one_question(server: FakeServer, model: str, tmp_path: Path, mode: str = "chat"
                     ) -> int:
    out = tmp_path / "out.jsonl"
    return main(["run", "--model", model, "--api-base", server.base_url, "--mode", mode,
                 "--task", "word_sorting", "--dataset", "--limit", "1", "--out", str(out),
                 "--no-progress"])


@pytest.mark.parametrize("wire, model", [
    ("anthropic", "anthropic/claude-haiku-4-5"),
    ("gemini", "gemini/gemini-2.5-flash"),
])
def test_usage_is_stored_as_reported_after_the_client_closed_the_stream(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
    wire: str, model: str,
) -> None:
    """Anthropic's input (with the cache's reads and writes) comes in `message_start`,
    Gemini's counts in every chunk; litellm hands usage on only in its last chunk, which a
    stream closed at the step's newline never reaches. Gemini is made to ignore the stop
    here, so that its stream too is closed by the client."""
    server = request.getfixturevalue(f"{wire}_server")
    monkeypatch.setenv(KEYS[wire], "test-key")
    written = 0 if wire == "gemini" else 40
    server.responder = slow_tail(1300, 1024, written, honor_stop=False)
    assert run_one_question(server, model, tmp_path) == 0
    calls = calls_of()
    row = bundled_rows("word_sorting")[0]
    assert read_rows(tmp_path / "out.jsonl")[0].steps == row.steps
    assert len(calls) == len(row.steps)
    assert wait_until(lambda: all(r.client_closed_early for r in server.requests))
    assert not any(r.finished for r in server.requests)
    for call in calls:
        assert (call["prompt_tokens"], call["cached_tokens"]) == (1300, 1024)
        assert call["cache_write_tokens"] == (None if wire == "gemini" else 40)
        assert call["completion_tokens"] >= 1
        # Anthropic counts its output at the end of the stream: a count of chunks stands in
        # (its prompt's count is its own).
        assert call["usage_estimated"] == (wire == "anthropic")
        assert call["prompt_estimated"] == 0
        assert call["cost"] == pytest.approx(
            by_hand(model, 1300, 1024, written, call["completion_tokens"]), rel=1e-9)


async def test_openai_cached_tokens_are_priced_as_cached(openai_server, monkeypatch) -> None:
    """NOTES' example: 20 steps of 1,011 prompt tokens, 512 of them read from the cache, and
    50 output tokens each, on gpt-4o-mini: $0.003633 by the counts alone, $0.002865 billed."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    step = " ".join(["word"] * 50)
    openai_server.responder = lambda path, body: Reply(
        text=step + "\nThought 2: more", prompt_tokens=1011, cached_tokens=512)
    spec = llm.ModelSpec("openai/gpt-4o-mini", openai_server.base_url)
    calls = []
    for _ in range(20):
        items = [item async for item in llm.stream_step(spec, "Q: sort\nThought 1:")]
        calls.append(items[-1].call)
    assert all((c.prompt_tokens, c.cached_tokens, c.completion_tokens) == (1011, 512, 50)
               for c in calls)
    assert not any(c.usage_estimated for c in calls)
    total = sum(c.cost for c in calls)
    assert total == pytest.approx(20 * by_hand("openai/gpt-4o-mini", 1011, 512, 0, 50))
    assert round(total, 6) == 0.002865
    by_counts = 20 * by_hand("openai/gpt-4o-mini", 1011, 0, 0, 50)
    assert round(by_counts, 6) == 0.003633


async def test_a_whole_answer_keeps_the_caches_part_and_its_price(anthropic_server,
                                                                   monkeypatch) -> None:
    """A finder's answer is one whole message: its usage is litellm's, cache parts and all."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.enqueue(Reply(text="No mistake: the answer is right.",
                                   prompt_tokens=2000, cached_tokens=1500,
                                   cache_write_tokens=300))
    spec = llm.ModelSpec("anthropic/claude-haiku-4-5", anthropic_server.base_url)
    answer = await llm.complete(spec, [{"role": "user", "content": "Is it right?"}])
    call = answer.call
    assert (call.prompt_tokens, call.cached_tokens, call.cache_write_tokens) == (2000, 1500, 300)
    assert call.completion_tokens == 6
    assert call.cost == pytest.approx(
        by_hand("anthropic/claude-haiku-4-5", 2000, 1500, 300, 6), rel=1e-9)


# -- unknown stays unknown


def test_a_model_litellm_has_no_price_for_costs_unknown_not_zero() -> None:
    counts = UsageCounts(prompt=1000, completion=10, cached=0)
    assert cost_of(llm.ModelSpec("openai/my-local-model"), counts) is None
    # litellm answers a price of 0 for some Anthropic models its map does not hold.
    assert cost_of(llm.ModelSpec("anthropic/claude-sonnet-4-20250514"), counts) is None
    assert cost_of(llm.ModelSpec("openai/gpt-4o-mini"), UsageCounts(prompt=None,
                                                                    completion=10)) is None
    # A local model litellm prices is free, on either of Ollama's routes.
    assert cost_of(llm.ModelSpec("ollama/llama3"), counts) == 0.0
    assert cost_of(llm.ModelSpec("ollama_chat/llama3"), counts) == 0.0
    assert cost_of(llm.ModelSpec("replay/bbm"), UsageCounts()) == 0.0


# -- reading a stream's events


def read(*pieces: str) -> UsageCounts:
    watch = UsageWatch()
    reader = UsageReader(watch)
    for piece in pieces:
        reader.feed(piece)
    reader.finish()
    return watch.usage


def test_events_are_read_across_pieces_and_absurd_counts_are_unknown() -> None:
    start = ('event: message_start\ndata: {"type": "message_start", "message": {"usage": '
             '{"input_tokens": 12, "cache_read_input_tokens": 1000, '
             '"cache_creation_input_tokens": 30, "output_tokens": 1}}}\n\n')
    for cut in (5, 40, 90, len(start) - 3):
        counts = read(start[:cut], start[cut:])
        assert (counts.prompt, counts.cached, counts.cache_write) == (1042, 1000, 30)
        assert counts.completion is None  # message_start's output is not the answer's
    delta = 'data: {"type": "message_delta", "usage": {"output_tokens": 9}}\n\n'
    assert read(start, delta).completion == 9
    gemini = ['data: {"usageMetadata": {"promptTokenCount": 50, "candidatesTokenCount": '
              f'{n}, "cachedContentTokenCount": 32}}}}\r\n\r\n' for n in (1, 2, 3)]
    counts = read(*gemini)
    assert (counts.prompt, counts.cached, counts.completion) == (50, 32, 3)
    ollama = '{"done": true, "prompt_eval_count": 26, "eval_count": 7}'  # no line break
    assert (read(ollama).prompt, read(ollama).completion) == (26, 7)
    absurd = 'data: {"usage": {"prompt_tokens": 1e23, "completion_tokens": -5}}\n'
    assert (read(absurd).prompt, read(absurd).completion) == (None, None)


async def test_an_offline_model_still_costs_nothing() -> None:
    from bbm_tui.core.prompts.generation import next_step_prompt

    row = bundled_rows("word_sorting")[0]
    prompt = next_step_prompt("word_sorting", row.input, [])
    items = [item async for item in llm.stream_step(llm.ModelSpec("replay/bbm"), prompt)]
    assert items[-1].call.cost == 0.0
    await asyncio.sleep(0)


@pytest.mark.parametrize("model, mode", [("ollama/llama3", "completion"),
                                         ("ollama_chat/llama3", "chat")])
def test_ollamas_own_counts_are_stored(ollama_server, tmp_path: Path, model: str,
                                       mode: str) -> None:
    """Ollama honours the stop, and counts the prompt and the answer on its last line
    (`prompt_eval_count`, `eval_count`); litellm prices its models at $0. (`ollama/` takes
    the raw prompt: in chat mode litellm wraps it in a template of its own.)"""
    ollama_server.responder = slow_tail(2048, 0, 0)
    assert run_one_question(ollama_server, model, tmp_path, mode) == 0
    calls = calls_of()
    row = bundled_rows("word_sorting")[0]
    assert len(calls) == len(row.steps)
    for call, step in zip(calls, row.steps, strict=True):
        assert (call["prompt_tokens"], call["usage_estimated"], call["cost"]) == (2048, 0, 0.0)
        # The server counts a word a token; the step is the text before the stop.
        assert call["completion_tokens"] == len(step.split())


def test_an_ollama_step_closed_before_its_last_line_has_its_prompt_estimated(
    ollama_server, tmp_path: Path
) -> None:
    """Ollama counts only in its last line; a server that ignores the stop writes on, and the
    client closes the stream at the step's newline, before that line: the prompt's count
    is litellm's, marked an estimate, never left empty (issue 33, item 9)."""
    ollama_server.responder = slow_tail(2048, 0, 0, honor_stop=False)
    assert run_one_question(ollama_server, "ollama_chat/llama3", tmp_path, "chat") == 0
    calls = calls_of()
    assert calls
    for call in calls:
        assert call["prompt_tokens"] and call["prompt_tokens"] != 2048  # not the server's
        assert call["prompt_estimated"] == 1 and call["usage_estimated"] == 1
