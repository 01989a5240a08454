"""Prompt caching (docs/DESIGN.md §3), over real HTTP through litellm's adapters to the local
servers: on Anthropic's wire the paper's prompt goes as marked content blocks that join to
exactly the shipped prompt, so that every step reads the few-shot prefix and the thoughts
before it from the cache (tests/fake_server.py's PromptCache caches as Anthropic documents:
at marked block boundaries, with a look back, and nothing below a minimum); elsewhere it
goes as one text, the shipped prefix first and byte-identical; `caching = false` sends no
marks; a prompt below the model's caching minimum gets a note, once."""

from __future__ import annotations

import asyncio
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
from tests.test_usage_wires import by_hand

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
    """Every step's blocks join to the paper's prompt from the shipped files; the first is
    the few-shot prompt file's bytes; each step's blocks are the step before's and one more
    (so a prefix the step before wrote ends at one of its block boundaries), that one the
    model's step after its label, the line break and the next label; the few-shot prompt and
    the last block are marked."""
    row = max(bundled_rows(task)[:20], key=lambda row: len(row.steps))
    spec = llm.ModelSpec(ANTHROPIC)
    few_shot = (ROOT / "prompts" / "generation_prompts" / f"{task}_prompt.txt").read_bytes()
    before: list[str] = []
    for done in range(len(row.steps) + 1):
        steps = list(row.steps[:done])
        parts = next_step_parts(task, row.input, steps)
        prompt = next_step_prompt(task, row.input, steps)
        blocks = blocks_of({"messages": step_messages(spec, llm.CallSettings(), prompt, parts)})
        texts = [block["text"] for block in blocks]
        assert "".join(texts).encode() == shipped_prompt(task, row.input, steps)
        assert texts[0].encode() == few_shot
        if done == 0:
            assert texts[1] == f"\n\n{QUESTIONS[task].format(row.input)}\nThought 1:"
        else:
            assert texts[:-1] == before
            assert texts[-1] == f" {row.steps[done - 1]}\nThought {done + 1}:"
        before = texts
        marked = [index for index, block in enumerate(blocks) if "cache_control" in block]
        assert marked == [0, len(blocks) - 1]
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


def words_of_prompts(row) -> list[int]:
    """Each step's prompt length in the server's tokens (words), Thought 1's first."""
    return [len(next_step_prompt("word_sorting", row.input, row.steps[:k]).split())
            for k in range(len(row.steps))]


def test_each_step_reads_the_whole_prompt_of_the_step_before_from_the_cache(
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
    words = words_of_prompts(row)
    # Thought 1 writes its whole prompt; each step after reads all of the step before's
    # prompt and writes the thought it adds with the next label: nothing is uncached.
    assert [c["prompt_tokens"] for c in calls] == words
    assert (calls[0]["cached_tokens"], calls[0]["cache_write_tokens"]) == (0, words[0])
    for k in range(1, len(calls)):
        assert calls[k]["cached_tokens"] == words[k - 1], k
        assert calls[k]["cache_write_tokens"] == words[k] - words[k - 1], k
    # Stored as reported, and priced as cached (reads 0.1x, writes 1.25x the input price).
    for call in calls:
        assert call["cost"] == pytest.approx(by_hand(
            ANTHROPIC, call["prompt_tokens"], call["cached_tokens"],
            call["cache_write_tokens"], call["completion_tokens"]), rel=1e-9)


def test_the_step_limits_step_reads_the_step_befores_prompt_and_writes_nothing(
    caching_anthropic, tmp_path: Path, capsys,
) -> None:
    """A step no step can follow (the step limit's, the trace's last) marks the prompt the
    step before wrote, not its own last block: it reads that whole, and writes nothing that
    no one would read (its thought and label are paid once, not written at 1.25x)."""
    limit = 3
    code = main(["run", "--model", ANTHROPIC, "--api-base", caching_anthropic.base_url,
                 "--task", "word_sorting", "--dataset", "--limit", "1", "--step-limit",
                 str(limit), "--out", str(tmp_path / "out.jsonl"), "--no-progress"])
    assert code == 0, capsys.readouterr().err
    words = words_of_prompts(bundled_rows("word_sorting")[0])[:limit]
    calls = anthropic_calls()
    assert [(c["cached_tokens"], c["cache_write_tokens"]) for c in calls] == [
        (0, words[0]), (words[0], words[1] - words[0]), (words[1], 0)]
    last = blocks_of(caching_anthropic.requests[-1].body)
    marked = [index for index, block in enumerate(last) if "cache_control" in block]
    assert marked == [0, len(last) - 2]


def test_when_thought_1s_prompt_is_below_the_minimum_thought_2_writes_it_all(
    anthropic_server, monkeypatch, tmp_path: Path, capsys,
) -> None:
    """As with word sorting on Claude Sonnet 4.5 (Thought 1's prompt 985 tokens, the minimum
    1,024): nothing of Thought 1's prompt is cached, Thought 2 writes its whole prompt, and
    from Thought 3 on each step reads what the one before wrote."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    row = bundled_rows("word_sorting")[0]
    words = words_of_prompts(row)
    anthropic_server.prompt_cache = PromptCache(explicit=True, minimum_tokens=words[0] + 1)
    anthropic_server.responder = dataset_responder
    run_question(anthropic_server, ANTHROPIC, tmp_path, capsys)
    calls = anthropic_calls()
    assert [c["prompt_tokens"] for c in calls] == words
    assert (calls[0]["cached_tokens"], calls[0]["cache_write_tokens"]) == (0, 0)
    assert (calls[1]["cached_tokens"], calls[1]["cache_write_tokens"]) == (0, words[1])
    for k in range(2, len(calls)):
        assert (calls[k]["cached_tokens"], calls[k]["cache_write_tokens"]) == (
            words[k - 1], words[k] - words[k - 1]), k


def test_backtracking_and_rewriting_from_a_middle_thought_read_the_shared_part(
    caching_anthropic, tmp_path: Path, capsys,
) -> None:
    """After a trace, the samples for its Thought m+1 (the same prompt as the trace's step
    m+1) read that prompt whole, and a trace going on from a rewritten Thought m+1 reads
    everything before it and writes only the new thought."""
    from bbm_tui.core.generation.backtrack import resample_step
    from bbm_tui.core.generation.stepper import StepFinished, StepperSettings, run_steps

    run_question(caching_anthropic, ANTHROPIC, tmp_path, capsys)
    row = bundled_rows("word_sorting")[0]
    words = words_of_prompts(row)
    middle = len(row.steps) // 2
    prior = list(row.steps[:middle])
    spec = llm.ModelSpec(ANTHROPIC, caching_anthropic.base_url)
    rewritten = "I should start by looking at the first letter of each word."

    async def backtrack_then_go_on():
        resample = await resample_step("word_sorting", row.input, prior, row.steps[middle],
                                       spec, llm.CallSettings(), n=3)
        caching_anthropic.enqueue(Reply(text=" The list is sorted.\n"))  # not the dataset's
        events = run_steps("word_sorting", row.input, spec, [*prior, rewritten],
                           max_new_steps=1, settings=StepperSettings())
        return resample, [event async for event in events if isinstance(event, StepFinished)]

    resample, [step] = asyncio.run(backtrack_then_go_on())
    assert len(resample.samples.calls) == 3
    for call in resample.samples.calls:
        assert (call.prompt_tokens, call.cached_tokens, call.cache_write_tokens) == (
            words[middle], words[middle], 0)
    added = len(f" {rewritten}\nThought {middle + 2}:".split())
    assert (step.call.prompt_tokens, step.call.cached_tokens, step.call.cache_write_tokens) == (
        words[middle] + added, words[middle], added)


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
    assert second["cache_write_tokens"] == len(question.split()) - prefix_words


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
    """A mark writes the prefix up to and including its block; a later request reads the
    longest prefix written before that ends at one of its block boundaries, at most 20
    blocks back from a mark, and writes the rest up to its last mark."""
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
    # 20 blocks back is still found; 21 is not.
    cache = PromptCache(explicit=True, minimum_tokens=1)
    assert cache.usage([("p", True)]) == (0, 1)
    assert cache.usage([("p", False), *[(f"x{i}", False) for i in range(19)],
                        ("y", True)]) == (1, 20)
    assert cache.usage([("p", False), *[(f"z{i}", False) for i in range(20)],
                        ("y", True)]) == (0, 22)
    # A prefix that ends inside a block is not found: hits are at block boundaries only.
    cache = PromptCache(explicit=True, minimum_tokens=1)
    assert cache.usage([("a b", True)]) == (0, 2)
    assert cache.usage([("a b c", True)]) == (0, 3)
    # Below the minimum a mark caches nothing; more than four marks are refused.
    small = PromptCache(explicit=True, minimum_tokens=100)
    assert small.usage([few_shot, ("q", True)]) == (0, 0)
    with pytest.raises(ValueError):
        cache.usage([(f"m{i}", True) for i in range(5)])


@pytest.mark.parametrize("model, minimum", [
    ("claude-sonnet-4-5", 1024), ("claude-sonnet-4-5-20250929", 1024),
    ("claude-opus-4-1", 1024), ("claude-sonnet-4-20250514", 1024),
    ("claude-3-7-sonnet-20250219", 1024), ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096), ("claude-3-5-haiku-20241022", 2048),
    ("claude-3-haiku-20240307", 2048),
])
def test_the_test_servers_cache_has_anthropics_documented_minimum_per_model(
    model: str, minimum: int,
) -> None:
    """Without a minimum given, the one Anthropic documents for the request's model: a
    prefix one token short of it is not cached, one of exactly that length is."""
    cache = PromptCache(explicit=True)
    short, enough = " ".join(["w"] * (minimum - 1)), " ".join(["v"] * minimum)
    assert cache.usage([(short, True)], model) == (0, 0)
    assert cache.usage([(enough, True)], model) == (0, minimum)
    assert cache.usage([(enough, True), ("more", False)], model) == (minimum, 0)


async def test_the_anthropic_server_takes_the_minimum_from_the_requests_model(
    anthropic_server, monkeypatch,
) -> None:
    """Over HTTP through litellm: the same 1,500-word prompt, marked, is cached for
    claude-sonnet-4-5 (1,024) and not for claude-haiku-4-5 (4,096)."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    anthropic_server.prompt_cache = PromptCache(explicit=True)
    prompt = " ".join(f"w{i}" for i in range(1500)) + "\nThought 1:"
    parts = (prompt[:-len("\nThought 1:")], "\nThought 1:")
    written = {}
    for model in ("anthropic/claude-sonnet-4-5", "anthropic/claude-haiku-4-5"):
        anthropic_server.enqueue(Reply(text=" x\n"))
        spec = llm.ModelSpec(model, anthropic_server.base_url)
        items = [item async for item in llm.stream_step(spec, prompt, llm.CallSettings(),
                                                         parts=parts)]
        result = items[-1]
        assert isinstance(result, llm.StepText)
        written[model] = result.call.cache_write_tokens
    assert written == {"anthropic/claude-sonnet-4-5": 1502, "anthropic/claude-haiku-4-5": 0}


def test_the_test_servers_cache_is_each_models_own() -> None:
    """What one model wrote another does not read."""
    cache = PromptCache(explicit=True, minimum_tokens=2)
    prompt = [("a b c", True), ("d", False)]
    assert cache.usage(prompt, "claude-sonnet-4-5") == (0, 3)
    assert cache.usage(prompt, "claude-opus-4-1") == (0, 3)
    assert cache.usage(prompt, "claude-sonnet-4-5") == (3, 0)
