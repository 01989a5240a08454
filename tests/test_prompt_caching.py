"""Prompt caching (docs/DESIGN.md §3), over real HTTP through litellm's adapters to the local
servers: on Anthropic's wire the paper's prompt goes as marked content blocks that join to
exactly the shipped prompt, so that every step reads the few-shot prefix and the thoughts
before it from the cache (tests/fake_server.py's PromptCache caches as Anthropic documents:
at marked block boundaries, with a look back, and nothing below a minimum); elsewhere it
goes as one text, the shipped prefix first and byte-identical; `caching = false` sends no
marks; a prompt below the model's caching minimum gets a note, once."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bbm_tui.cli import main
from bbm_tui.core import llm
from bbm_tui.core.dataset import bundled_rows
from bbm_tui.core.llm.caching import finder_messages, step_messages
from bbm_tui.core.prompts.generation import next_step_parts, next_step_prompt
from bbm_tui.core.store import Store, default_path
from bbm_tui.core.tasks import TASK_NAMES
from tests.fake_server import PromptCache, Reply, dataset_responder

ROOT = Path(__file__).resolve().parents[1]
ANTHROPIC = "anthropic/claude-haiku-4-5"
# The paper's question lines (docs/DESIGN.md §3), written out here, not taken from our code.
QUESTIONS = {
    "word_sorting": "Q: Sort the following words alphabetically: List: {}",
    "tracking_shuffled_objects": "Q: {}",
    "logical_deduction": "{}",
    "multistep_arithmetic": "Q: {}",
    "dyck_languages": "Q: Complete the rest of the sequence, making sure that the parentheses "
                      "are closed properly. Input: {}",
}


def shipped_prompt(task: str, input_text: str, steps: list[str]) -> bytes:
    """The paper's prompt for the next step, from the shipped prompt file's bytes."""
    few_shot = (ROOT / "prompts" / "generation_prompts" / f"{task}_prompt.txt").read_bytes()
    thoughts = "".join(f"Thought {n}: {s}\n" for n, s in enumerate(steps, start=1))
    rest = f"\n\n{QUESTIONS[task].format(input_text)}\n{thoughts}Thought {len(steps) + 1}:"
    return few_shot + rest.encode("utf-8")


def blocks_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    [message] = body["messages"]
    return message["content"]


@pytest.mark.parametrize("task", TASK_NAMES)
def test_the_marked_blocks_join_to_the_shipped_prompt_byte_for_byte(task: str) -> None:
    row = bundled_rows(task)[0]
    spec = llm.ModelSpec(ANTHROPIC)
    for done in (0, 1, len(row.steps) - 1):
        steps = list(row.steps[:done])
        parts = next_step_parts(task, row.input, steps)
        prompt = next_step_prompt(task, row.input, steps)
        blocks = blocks_of({"messages": step_messages(spec, llm.CallSettings(), prompt, parts)})
        assert "".join(block["text"] for block in blocks).encode() == shipped_prompt(
            task, row.input, steps)
        few_shot = (ROOT / "prompts" / "generation_prompts" / f"{task}_prompt.txt").read_bytes()
        assert blocks[0]["text"].encode() == few_shot
        # Two marks: the few-shot prefix and the last thought (the question, at Thought 1).
        marked = [index for index, block in enumerate(blocks) if "cache_control" in block]
        assert marked == [0, len(blocks) - 2]
        assert blocks[-1]["text"] == f"Thought {done + 1}:"
        assert all(block["cache_control"] == {"type": "ephemeral"}
                   for block in blocks if "cache_control" in block)


def anthropic_calls() -> list[dict[str, Any]]:
    connection = sqlite3.connect(default_path())
    connection.row_factory = sqlite3.Row
    rows = [dict(row) for row in connection.execute(
        "SELECT * FROM calls WHERE purpose = 'step' ORDER BY id")]
    connection.close()
    return rows


def forget_sessions() -> None:
    """Delete every session (and its calls), so that the next run makes its trace again."""
    with Store.open() as store:
        for summary in store.sessions():
            store.delete_session(summary.session.id)


def run_question(server, model: str, tmp_path: Path, capsys, *, caching: bool = True,
                 name: str = "out") -> str:
    config = tmp_path / "config.toml"
    config.write_text(f"caching = {'true' if caching else 'false'}\n")
    code = main(["run", "--model", model, "--api-base", server.base_url, "--task",
                 "word_sorting", "--dataset", "--limit", "1", "--out",
                 str(tmp_path / f"{name}.jsonl"), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0, err
    return err


@pytest.fixture
def caching_anthropic(anthropic_server, monkeypatch):
    """The Anthropic server caching as Anthropic does, with a minimum (in its tokens, which
    are words) the word-sorting few-shot prompt passes, answering like the dataset's model."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=400)
    anthropic_server.responder = dataset_responder
    return anthropic_server


def test_each_step_reads_the_prefix_and_the_thoughts_before_it_from_the_cache(
    caching_anthropic, tmp_path: Path, capsys,
) -> None:
    run_question(caching_anthropic, ANTHROPIC, tmp_path, capsys)
    row = bundled_rows("word_sorting")[0]
    requests = caching_anthropic.requests
    assert len(requests) == len(row.steps)
    for done, request in enumerate(requests):
        texts = "".join(block["text"] for block in blocks_of(request.body))
        assert texts.encode() == shipped_prompt("word_sorting", row.input, row.steps[:done])
    calls = anthropic_calls()
    words = [len(next_step_prompt("word_sorting", row.input, row.steps[:k]).split())
             for k in range(len(row.steps))]
    # Thought 1 writes the few-shot prefix and the question; each step after reads all that
    # the step before it wrote, and writes the thought it adds; only its label is uncached.
    assert [c["prompt_tokens"] for c in calls] == words
    assert (calls[0]["cached_tokens"], calls[0]["cache_write_tokens"]) == (0, words[0] - 2)
    for k in range(1, len(calls)):
        assert calls[k]["cached_tokens"] == words[k - 1] - 2, k
        thought = f"Thought {k}: {row.steps[k - 1]}"
        assert calls[k]["cache_write_tokens"] == len(thought.split()), k
        assert calls[k]["prompt_tokens"] - calls[k]["cached_tokens"] - calls[k][
            "cache_write_tokens"] == 2  # "Thought k+1:"


def test_a_traces_first_step_reads_the_few_shot_prefix_another_trace_wrote(
    caching_anthropic, tmp_path: Path, capsys,
) -> None:
    """The few-shot prefix, marked on its own, is shared by every trace of the task: the
    second trace's Thought 1 reads it (and writes its own question), as the first's wrote it."""
    few_shot = (ROOT / "prompts" / "generation_prompts" / "word_sorting_prompt.txt").read_text(
        encoding="utf-8")
    prefix_words = len(few_shot.split())
    assert main(["run", "--model", ANTHROPIC, "--api-base", caching_anthropic.base_url,
                 "--task", "word_sorting", "--dataset", "--limit", "2", "--concurrency", "1",
                 "--out", str(tmp_path / "out.jsonl"), "--no-progress"]) == 0
    rows = bundled_rows("word_sorting")[:2]
    calls = anthropic_calls()
    assert len(calls) == len(rows[0].steps) + len(rows[1].steps)
    second = calls[len(rows[0].steps)]
    assert second["cached_tokens"] == prefix_words
    question = next_step_prompt("word_sorting", rows[1].input, [])
    assert second["cache_write_tokens"] == len(question.split()) - prefix_words - 2


def test_caching_false_sends_no_mark_and_costs_more(caching_anthropic, tmp_path: Path,
                                                     capsys) -> None:
    run_question(caching_anthropic, ANTHROPIC, tmp_path, capsys, name="cached")
    cached = anthropic_calls()
    caching_anthropic.prompt_cache.clear()
    requests_before = len(caching_anthropic.requests)
    forget_sessions()
    run_question(caching_anthropic, ANTHROPIC, tmp_path, capsys, caching=False,
                 name="uncached")
    uncached = anthropic_calls()
    for request in caching_anthropic.requests[requests_before:]:
        assert "cache_control" not in json.dumps(request.body)
    assert all((c["cached_tokens"], c["cache_write_tokens"]) == (0, 0) for c in uncached)
    assert [c["prompt_tokens"] for c in uncached] == [c["prompt_tokens"] for c in cached]
    assert sum(c["cost"] for c in cached) < sum(c["cost"] for c in uncached)
    # The input billed as Anthropic bills it (reads 0.1x, writes 1.25x): a seven-step trace,
    # its first step writing the whole prefix, already costs under 0.4x.
    assert billed_input(cached) < 0.4 * billed_input(uncached)


def billed_input(calls: list[dict[str, Any]]) -> float:
    """In units of the input price per token."""
    return sum(c["prompt_tokens"] - c["cached_tokens"] - c["cache_write_tokens"]
               + 0.1 * c["cached_tokens"] + 1.25 * c["cache_write_tokens"] for c in calls)


@pytest.mark.parametrize("wire, model", [("openai", "openai/gpt-4o-mini"),
                                         ("gemini", "gemini/gemini-2.5-flash"),
                                         ("ollama", "ollama_chat/llama3")])
def test_elsewhere_the_prompt_is_one_text_with_the_shipped_prefix_first(
    request: pytest.FixtureRequest, monkeypatch, tmp_path: Path, capsys, wire: str, model: str,
) -> None:
    server = request.getfixturevalue(f"{wire}_server")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    server.responder = dataset_responder
    run_question(server, model, tmp_path, capsys)
    row = bundled_rows("word_sorting")[0]
    assert len(server.requests) == len(row.steps)
    for done, recorded in enumerate(server.requests):
        body = recorded.body
        if wire == "gemini":
            [content] = body["contents"]
            [part] = content["parts"]
            text = part["text"]
        else:
            [message] = body["messages"]
            text = message["content"]
        assert isinstance(text, str)
        assert text.encode() == shipped_prompt("word_sorting", row.input, row.steps[:done])
        assert "cache_control" not in json.dumps(body)


async def test_a_finders_few_shot_messages_are_marked_as_one_prefix(
    anthropic_server, monkeypatch,
) -> None:
    from bbm_tui.core.prompts.finding import build_messages

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=100)
    row = bundled_rows("word_sorting")[0]
    messages = build_messages("word_sorting", "direct-trace", row.input, row.steps)
    marked = finder_messages(llm.ModelSpec(ANTHROPIC), llm.CallSettings(), messages)
    assert marked[:-2] == messages[:-2] and marked[-1] == messages[-1]
    assert marked[-2]["content"] == [{"type": "text", "text": messages[-2]["content"],
                                      "cache_control": {"type": "ephemeral"}}]
    spec = llm.ModelSpec(ANTHROPIC, anthropic_server.base_url)
    calls = []
    for _ in range(2):
        anthropic_server.enqueue(Reply(text="No"))
        calls.append((await llm.complete(spec, messages)).call)
    body = anthropic_server.requests[-1].body
    flagged = [message for message in body["messages"] if "cache_control" in json.dumps(message)]
    assert len(flagged) == 1 and flagged[0]["role"] == "assistant"
    assert body["messages"][-1]["content"][-1]["text"] == messages[-1]["content"]
    # The first call writes the few-shot messages, the second reads them.
    assert calls[0].cache_write_tokens > 0 and calls[0].cached_tokens == 0
    assert calls[1].cached_tokens == calls[0].cache_write_tokens
    assert calls[1].cost < calls[0].cost


def test_a_prompt_below_the_caching_minimum_gets_one_note(anthropic_server, monkeypatch,
                                                          tmp_path: Path, capsys) -> None:
    """claude-haiku-4-5 caches prompts of 4,096 tokens or more (litellm knows it); a
    word-sorting trace's prompts are far shorter, and nothing says so unless we do."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=4096)
    anthropic_server.responder = dataset_responder
    assert llm.caching_minimum(llm.ModelSpec(ANTHROPIC)) == 4096
    err = run_question(anthropic_server, ANTHROPIC, tmp_path, capsys)
    note = (f"{ANTHROPIC} caches only prompts of 4,096 tokens or more: shorter ones were "
            "sent uncached")
    assert err.count(note) == 1
    assert all(c["cached_tokens"] == 0 for c in anthropic_calls())
    # With caching off there is nothing to say.
    forget_sessions()
    err = run_question(anthropic_server, ANTHROPIC, tmp_path, capsys, caching=False,
                       name="off")
    assert "caches only prompts" not in err


def test_the_test_servers_cache_looks_back_from_a_mark_as_anthropics_does() -> None:
    """A mark writes the prefix up to it; a later request reads the longest prefix written
    before that ends at one of its block boundaries, at most 20 blocks back from a mark."""
    cache = PromptCache(explicit=True, minimum_tokens=3)
    few_shot = ("a b c", True)
    assert cache.usage([few_shot, ("q", False), ("t1", True), ("l2", False)]) == (0, 5)
    # The next step: its mark is one block further; the step before's mark is read.
    assert cache.usage([few_shot, ("q", False), ("t1", False), ("t2", True),
                        ("l3", False)]) == (5, 1)
    # Another trace of the task reads the few-shot prefix only.
    assert cache.usage([few_shot, ("other", False), ("x", True), ("l", False)]) == (3, 2)
    # Too far back (the look back stops 20 blocks before the mark): nothing read.
    far = [few_shot, *[(f"w{i}", False) for i in range(25)], ("end", True)]
    assert cache.usage([("a b c", False), *far[1:]]) == (0, 29)
    # Below the minimum a mark caches nothing; more than four marks are refused.
    small = PromptCache(explicit=True, minimum_tokens=100)
    assert small.usage([few_shot, ("q", True)]) == (0, 0)
    with pytest.raises(ValueError):
        cache.usage([(f"m{i}", True) for i in range(5)])
