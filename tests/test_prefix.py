"""Going on from a prefix of the reasoning (issue 35, core/llm/prefix.py), over HTTP against
the suite's servers taught llama-server's endpoints (tests/llama_server.py), an
OpenAI-compatible server's /v1/completions and Ollama's /api/generate."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bbm_tui.core import llm
from bbm_tui.core.llm.prefix import Prefixer, PrefixSettings, prefix_refusal
from tests.fake_server import Reply
from tests.llama_server import FakeLlamaServer, Fault, qwen3_template
from tests.ollama_server import FakeOllama
from tests.openai_server import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Sort: b a"}]
# Raw slices of a reasoning as the paragraph rule cut it: odd whitespace, CRLF, all kept.
RAW_STEPS = ["First, the words.  \n\n", "Then a\r\nand b. \n\n\n", "So: a b.\n\n"]


def test_llama_server_prompt_is_its_template_the_opened_reasoning_and_the_raw_steps(
        llama: FakeLlamaServer) -> None:
    llama.continuation = lambda prompt, body: "Next step here.\n\nMore."
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    kept = "".join(RAW_STEPS[:2])
    continuation = asyncio.run(prefixer.go_on(kept, PrefixSettings(max_tokens=50)))
    assert [record.path for record in llama.requests] == ["/apply-template", "/completion"]
    assert llama.requests[0].body == {"messages": MESSAGES}
    assert llama.prompts == [qwen3_template(MESSAGES) + "<think>\n" + kept]
    assert llama.requests[1].body["n_probs"] == 1
    assert llama.requests[1].body["temperature"] == 1.0
    assert continuation.text == "Next step here.\n\nMore."
    assert continuation.tokens is not None
    assert [token.text for token in continuation.tokens] == ["Next", " step", " here.",
                                                             "\n\nMore."]
    assert continuation.finish_reason == "stop"
    assert continuation.call.completion_tokens == 4


def test_a_429s_retry_after_is_waited_before_the_next_attempt(llama: FakeLlamaServer) -> None:
    """A sample's call (not streamed) answered 429 with Retry-After: 1 is retried after that
    second, not after the 0.5 s backoff (the wait was read from the body's status alone)."""
    import time

    llama.continuation = lambda prompt, body: "Next step here."
    llama.faults.append(Fault(429, {"Retry-After": "1"}))
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    started = time.monotonic()
    continuation = asyncio.run(prefixer.go_on("", PrefixSettings()))
    assert time.monotonic() - started >= 1.0
    assert continuation.text == "Next step here."
    assert len(llama.prompts) == 2


def test_the_token_limit_is_a_length_finish(llama: FakeLlamaServer) -> None:
    llama.continuation = lambda prompt, body: "one two three four"
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    continuation = asyncio.run(prefixer.go_on("", PrefixSettings(max_tokens=2)))
    assert continuation.text == "one two"
    assert continuation.finish_reason == "length"


def test_a_template_that_opens_the_reasoning_is_not_opened_twice(
        llama: FakeLlamaServer) -> None:
    llama.template = lambda messages: qwen3_template(messages) + "<think>\n"
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)
    asyncio.run(prefixer.go_on(RAW_STEPS[0], PrefixSettings()))
    assert llama.prompts == [qwen3_template(MESSAGES) + "<think>\n" + RAW_STEPS[0]]


def test_the_head_is_asked_once_for_many_continuations(llama: FakeLlamaServer) -> None:
    prefixer = Prefixer(llm.ModelSpec("openai/tiny", api_base=llama.base_url), MESSAGES)

    async def three() -> None:
        for kept in RAW_STEPS:
            await prefixer.go_on(kept, PrefixSettings())

    asyncio.run(three())
    assert [record.path for record in llama.requests].count("/apply-template") == 1


TEMPLATE = ("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def test_completions_wire_renders_the_users_template(openai_server: FakeOpenAI,
                                                     tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    openai_server.enqueue(Reply(text="Next."))
    spec = llm.ModelSpec("hosted_vllm/r1", api_base=openai_server.base_url)
    prefixer = Prefixer(spec, MESSAGES, template)
    continuation = asyncio.run(prefixer.go_on(RAW_STEPS[0], PrefixSettings(top_p=0.95)))
    (request,) = openai_server.requests
    assert request.path == "/v1/completions"
    assert request.body["prompt"] == "<|user|>Sort: b a\n<|assistant|><think>\n" + RAW_STEPS[0]
    assert request.body["top_p"] == 0.95
    assert continuation.text == "Next."


def test_a_template_that_does_not_render_names_its_file(tmp_path: Path) -> None:
    template = tmp_path / "bad.jinja"
    template.write_text("{% if %}")
    prefixer = Prefixer(llm.ModelSpec("hosted_vllm/r1", api_base="http://127.0.0.1:9/v1"),
                        MESSAGES, template)
    with pytest.raises(llm.LLMError, match=r"bad\.jinja"):
        asyncio.run(prefixer.head())


def test_ollama_goes_on_through_generate_raw(ollama_server: FakeOllama,
                                             tmp_path: Path) -> None:
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    ollama_server.enqueue(Reply(text="Next."))
    spec = llm.ModelSpec("ollama/qwen3", api_base=ollama_server.base_url)
    prefixer = Prefixer(spec, MESSAGES, template)
    continuation = asyncio.run(prefixer.go_on(RAW_STEPS[0], PrefixSettings()))
    (request,) = ollama_server.requests
    assert request.path == "/api/generate"
    assert request.body["raw"] is True and request.body["stream"] is False
    assert request.body["model"] == "qwen3"
    assert request.body["prompt"] == "<|user|>Sort: b a\n<|assistant|><think>\n" + RAW_STEPS[0]
    assert continuation.text == "Next."


@pytest.mark.parametrize(("model", "api_base", "says"), [
    ("anthropic/claude-sonnet-4-5", None, "Anthropic's API"),
    ("gemini/gemini-2.5-pro", None, "Gemini's API"),
    ("openai/o3", None, "OpenAI's reasoning models"),
    ("deepseek/deepseek-reasoner", None, "DeepSeek's API"),
    ("openai/gpt-4.1", None, "OpenAI's API"),
    ("replay/bbm", None, "offline models"),
    ("ollama/qwen3", "http://127.0.0.1:9", "Go templates"),
])
def test_providers_that_cannot_go_on_are_refused_before_any_request(
        model: str, api_base: str | None, says: str, openai_server: FakeOpenAI) -> None:
    spec = llm.ModelSpec(model, api_base=api_base)
    refusal = prefix_refusal(spec)
    assert refusal is not None and says in refusal
    with pytest.raises(llm.LLMError, match=r"cannot|Go templates"):
        Prefixer(spec, MESSAGES)
    assert openai_server.requests == []


def test_a_server_without_apply_template_says_to_name_the_template(
        openai_server: FakeOpenAI) -> None:
    prefixer = Prefixer(llm.ModelSpec("openai/r1", api_base=openai_server.base_url), MESSAGES)
    with pytest.raises(llm.LLMError, match="--chat-template"):
        asyncio.run(prefixer.head())


def test_completions_read_llama_servers_chat_form_of_logprobs(openai_server: FakeOpenAI,
                                                              tmp_path: Path) -> None:
    """llama-server's /v1/completions sends log-probabilities in the chat form (measured:
    `logprobs.content[i].token/logprob`), not OpenAI's `tokens`/`token_logprobs`."""
    template = tmp_path / "chat.jinja"
    template.write_text(TEMPLATE)
    entry = {"id": 306, "token": " I", "bytes": [32, 73], "logprob": -1.01}
    openai_server.enqueue(Reply(raw_body=json.dumps({
        "choices": [{"text": " I", "index": 0, "finish_reason": "length",
                     "logprobs": {"content": [{**entry, "top_logprobs": [entry]}]}}],
        "usage": {"completion_tokens": 1, "prompt_tokens": 37, "total_tokens": 38},
        "object": "text_completion"}).encode()))
    spec = llm.ModelSpec("openai/tiny", api_base=openai_server.base_url)
    continuation = asyncio.run(Prefixer(spec, MESSAGES, template).go_on("", PrefixSettings()))
    assert continuation.tokens is not None
    assert [(token.text, token.logprob) for token in continuation.tokens] == [(" I", -1.01)]
    assert continuation.call.prompt_tokens == 37
