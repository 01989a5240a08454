"""Going on from a prefix of a thinking model's reasoning (issue 35; docs/NOTES.md, "Thinking
models"): what resampling step k of a thinking trace needs. Only a server that takes a raw
prompt can do it, so the client writes the prompt itself:

    the chat template applied to the question + the reasoning opened (`<think>\\n`, or
    nothing where the template opens it) + steps 1..k-1 exactly as the raw reasoning had them

and sends it on one of three wires (`PrefixWire`):

- `llama_server`: llama.cpp's server applies its own template (`POST /apply-template`), then
  `POST /completion` with `n_probs` for log-probabilities (its `/v1/chat/completions` refuses
  an assistant prefill with thinking on);
- `completions`: vLLM or any OpenAI-compatible server's `/v1/completions`, the template a Jinja
  file the user names (`--chat-template FILE`, the model's own), rendered here;
- `ollama`: Ollama's `/api/generate` with `raw: true`, the template the user's Jinja file too
  (Ollama's own templates are Go templates).

Anthropic, OpenAI, Gemini and DeepSeek's API cannot go on from a prefix of the reasoning
(`prefix_refusal` says why, before any call). The replies are read through the same guard as
every reply litellm reads (core/llm/http_guard.py: bounded, valid UTF-8).
"""

from __future__ import annotations

import functools
import math
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bbm_tui.core.llm.capabilities import _provider_of, is_offline, key_env_var, thinking_wire
from bbm_tui.core.llm.errors import ErrorKind, LLMError, parse_retry_after, with_retries
from bbm_tui.core.llm.router import deployment_spec
from bbm_tui.core.records import CallRecord, TokenLogprob
from bbm_tui.core.types import ModelSpec, RetryPolicy

PrefixWire = Literal["llama_server", "completions", "ollama", "offline"]

# The reasoning opened after the template's generation prompt (Qwen3's, QwQ's, gpt-oss-like
# templates leave it to the model; DeepSeek-R1's writes it itself).
THINK_OPEN = "<think>\n"
THINK_CLOSE = "</think>"

_OLLAMA = frozenset({"ollama", "ollama_chat"})

_REFUSALS = {
    "anthropic": ("Anthropic's API cannot go on from a prefix of the reasoning: with thinking "
                  "on it takes no prefill of the assistant turn, and its thinking blocks are "
                  "signed (Claude 4 and later send only a summary)"),
    "gemini": ("Gemini's API cannot go on from a prefix of the reasoning: it takes no raw "
               "prompt, and its thoughts are summaries"),
    "openai_reasoning": ("OpenAI's reasoning models cannot go on from a prefix of the "
                         "reasoning: their reasoning is hidden and no raw prompt is taken"),
    "deepseek": ("DeepSeek's API cannot go on from a prefix of the reasoning: its prefix "
                 "completion continues the answer, not the reasoning"),
}
_OPENAI_API = ("OpenAI's API cannot go on from a prefix of the reasoning: it takes no raw "
               "prompt for a chat model and hides its models' reasoning; use a server that "
               "takes one (llama-server, vLLM's /v1/completions, Ollama) with --api-base")
_OFFLINE = ("the offline models but solver/thinking cannot go on from a prefix of the "
            "reasoning (they write whole traces); use solver/thinking, llama-server, vLLM or "
            "Ollama")
# The offline thinking model goes on from a prefix itself (offline/continuation.py).
OFFLINE_THINKING = "solver/thinking"
_OLLAMA_TEMPLATE = ("Ollama's raw prompts need the model's chat template as a Jinja file "
                    "(--chat-template FILE): Ollama's own templates are Go templates")


def prefix_refusal(spec: ModelSpec, chat_template: Path | None = None) -> str | None:
    """The sentence saying why this model cannot go on from a prefix of its reasoning, or
    None: it can. Asked before any call."""
    spec = deployment_spec(spec)
    if is_offline(spec):
        return None if spec.model == OFFLINE_THINKING else _OFFLINE
    wire = thinking_wire(spec)
    if wire in _REFUSALS:
        return _REFUSALS[wire]
    provider = _provider_of(spec)
    if wire == "ollama":
        return _OLLAMA_TEMPLATE if chat_template is None else None
    if provider in ("openai", "azure") and spec.api_base is None:
        return _OPENAI_API
    return None


def prefix_wire(spec: ModelSpec, chat_template: Path | None) -> PrefixWire:
    """Which wire goes on from a prefix: Ollama's own; with the user's template, any
    OpenAI-compatible server's `/v1/completions`; else llama-server's template and
    `/completion`."""
    spec = deployment_spec(spec)
    if spec.model == OFFLINE_THINKING:
        return "offline"
    if _provider_of(spec) in _OLLAMA:
        return "ollama"
    return "completions" if chat_template is not None else "llama_server"


@dataclass(frozen=True)
class PrefixSettings:
    temperature: float = 1.0
    top_p: float | None = None
    max_tokens: int = 512
    logprobs: bool = True
    timeout_s: float = 120.0
    # The server's sampling seed (None: its own): a rollout with a seed of its own is the same
    # rollout again on a server that honours it (llama-server, vLLM, Ollama).
    seed: int | None = None


@dataclass
class Continuation:
    """What one call wrote after the prompt: `text` as sent, `tokens` with their
    log-probabilities (None: the server sent none), and the call."""

    text: str
    tokens: list[TokenLogprob] | None
    finish_reason: str | None
    call: CallRecord


class Prefixer:
    """Goes on from prefixes of one question's reasoning: the prompt's head (template and
    opening) is made once, each call sends it with the kept reasoning after it."""

    def __init__(self, spec: ModelSpec, messages: list[dict[str, Any]],
                 chat_template: Path | None = None) -> None:
        refusal = prefix_refusal(spec, chat_template)
        if refusal is not None:
            raise LLMError("bad_request", refusal)
        self.spec = deployment_spec(spec)
        self.messages = messages
        self.chat_template = chat_template
        self.wire = prefix_wire(self.spec, chat_template)
        self._head: str | None = None
        self._client: Any = None

    async def aclose(self) -> None:
        """Close the connections kept open between calls."""
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def http_client(self) -> Any:
        """The client kept open between this question's calls (httpx, through the guard)."""
        if self._client is None:
            self._client = new_client(self.spec)
        return self._client

    async def _post(self, path: str, body: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        return await _post(self.http_client(), _root(self.spec) + path, body, timeout_s,
                           self.spec)

    async def head(self) -> str:
        """The chat template applied to the question and the reasoning opened."""
        if self._head is None:
            if self.wire == "offline":
                prompt = _offline_prompt(self.messages)
            elif self.wire == "llama_server":
                try:
                    reply = await self._post("/apply-template",
                                             {"messages": self.messages}, 60.0)
                except LLMError as error:
                    if error.kind != "not_found":
                        raise
                    reply = {}
                prompt = reply.get("prompt")
                if not isinstance(prompt, str):
                    raise LLMError("unknown", f"{_root(self.spec)}/apply-template sent no "
                                   "prompt: is it llama-server? Otherwise name the model's "
                                   "chat template with --chat-template FILE")
            else:
                assert self.chat_template is not None
                prompt = render_template(self.chat_template, self.messages)
            self._head = opened(prompt)
        return self._head

    async def prompt(self, kept: str) -> str:
        return await self.head() + kept

    async def go_on(self, kept: str, settings: PrefixSettings) -> Continuation:
        """One continuation of the reasoning after `kept` (steps 1..k-1, raw)."""
        prompt = await self.prompt(kept)
        started = time.monotonic()
        if self.wire == "offline":
            return _offline_continuation(self.spec, self.messages, kept, prompt, settings)
        if self.wire == "llama_server":
            body = _llama_body(prompt, settings)
            reply = await self._post("/completion", body, settings.timeout_s)
            return _llama_continuation(self.spec, reply, body, time.monotonic() - started)
        if self.wire == "ollama":
            body = _ollama_body(_model_name(self.spec), prompt, settings)
            reply = await self._post("/api/generate", body, settings.timeout_s)
            return _ollama_continuation(self.spec, reply, body, time.monotonic() - started)
        body = _completions_body(_model_name(self.spec), prompt, settings)
        reply = await self._post("/v1/completions", body, settings.timeout_s)
        return _completions_continuation(self.spec, reply, body, time.monotonic() - started)


def _llama_body(prompt: str, settings: PrefixSettings) -> dict[str, Any]:
    """llama-server's /completion; `cache_prompt` lets a slot reuse the head it evaluated."""
    body: dict[str, Any] = {"prompt": prompt, "n_predict": settings.max_tokens,
                            "temperature": settings.temperature, "cache_prompt": True}
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.logprobs:
        body["n_probs"] = 1
    if settings.seed is not None:
        body["seed"] = settings.seed
    return body


def _ollama_body(model: str, prompt: str, settings: PrefixSettings) -> dict[str, Any]:
    """Ollama's /api/generate, raw (no template of its own), whole (not streamed)."""
    options: dict[str, Any] = {"temperature": settings.temperature,
                               "num_predict": settings.max_tokens}
    if settings.top_p is not None:
        options["top_p"] = settings.top_p
    if settings.seed is not None:
        options["seed"] = settings.seed
    return {"model": model, "prompt": prompt, "raw": True, "stream": False,
            "options": options}


def _completions_body(model: str, prompt: str, settings: PrefixSettings) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "prompt": prompt,
                            "max_tokens": settings.max_tokens,
                            "temperature": settings.temperature}
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if settings.logprobs:
        body["logprobs"] = 1
    if settings.seed is not None:
        body["seed"] = settings.seed
    return body


def _offline_prompt(messages: list[dict[str, Any]]) -> str:
    """What solver/thinking's prompt would be under a plain chat template (shown and counted;
    the model reads the messages themselves)."""
    turns = [f"<|{message.get('role', 'user')}|>\n{message.get('content', '')}\n"
             for message in messages]
    return "".join(turns) + "<|assistant|>\n"


def _offline_continuation(spec: ModelSpec, messages: list[dict[str, Any]], kept: str,
                          prompt: str, settings: PrefixSettings) -> Continuation:
    """solver/thinking's continuation (offline/continuation.py), as a server's would come."""
    import random

    from bbm_tui.core.llm.offline.continuation import ContinuationError, continue_reasoning

    started = time.monotonic()
    rng = random.Random(settings.seed) if settings.seed is not None else random.Random()
    try:
        written = continue_reasoning(spec.model, messages, kept,
                                     temperature=settings.temperature,
                                     max_tokens=settings.max_tokens, rng=rng)
    except ContinuationError as error:
        raise LLMError("bad_request", str(error)) from None
    tokens = written.tokens if settings.logprobs else None
    params: dict[str, Any] = {"temperature": settings.temperature,
                              "max_tokens": settings.max_tokens}
    if settings.seed is not None:
        params["seed"] = settings.seed
    call = CallRecord(
        model=spec.model, params=params, latency_s=time.monotonic() - started,
        prompt_tokens=len(prompt.split()), completion_tokens=len(written.tokens), cost=0.0,
        logprobs=[token.logprob for token in tokens] if tokens else None,
        finish_reason=written.finish_reason, tokens=tokens)
    return Continuation(written.text, tokens, written.finish_reason, call)


def opened(prompt: str) -> str:
    """The template's prompt with the reasoning opened: `<think>\\n` after it, unless the
    template opened the reasoning itself (DeepSeek-R1's ends with `<think>\\n`)."""
    if prompt.rstrip().endswith("<think>"):
        return prompt
    return prompt + THINK_OPEN


def render_template(path: Path, messages: list[dict[str, Any]]) -> str:
    """A Hugging Face chat template (Jinja) applied to the messages with the generation
    prompt, in a sandbox (the file is the user's, but templates come from model repositories).
    Raises LLMError naming the file when it cannot be read or rendered."""
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    try:
        source = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise LLMError("bad_request", f"{path}: cannot read the chat template ({error})") from None

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    try:
        return env.from_string(source).render(messages=messages, add_generation_prompt=True,
                                              enable_thinking=True, bos_token="",
                                              eos_token="")
    except jinja2.TemplateError as error:
        raise LLMError("bad_request", f"{path}: the chat template does not render "
                       f"({error})") from None


def _root(spec: ModelSpec) -> str:
    """The server's root URL: the api base without OpenAI's `/v1`."""
    base = (spec.api_base or "http://127.0.0.1:11434").rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def _model_name(spec: ModelSpec) -> str:
    return spec.model.split("/", 1)[1] if "/" in spec.model else spec.model


async def _post(client: Any, url: str, body: dict[str, Any], timeout_s: float,
                spec: ModelSpec) -> dict[str, Any]:
    """One JSON request, retried as every call is (errors.with_retries)."""

    async def once(_attempt: int) -> dict[str, Any]:
        return await _post_once(client, url, body, timeout_s)

    return await with_retries(spec, RetryPolicy(), once)


def new_client(spec: ModelSpec) -> Any:
    """An HTTP client whose replies go through the guard (core/llm/http_guard.py), keeping
    its connections open between calls: a new connection a call cost more of the client's
    CPU than the call's own work (bench/anchors.py)."""
    import httpx

    from bbm_tui.core.llm.http_guard import GuardedTransport

    headers = {}
    key = os.environ.get(key_env_var(spec) or "")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    transport = GuardedTransport(httpx.AsyncHTTPTransport(verify=_tls_context(), limits=limits))
    return httpx.AsyncClient(transport=transport, headers=headers)


async def _post_once(client: Any, url: str, body: dict[str, Any],
                     timeout_s: float) -> dict[str, Any]:
    """One JSON request; an error as LLMError."""
    import httpx

    try:
        response = await client.post(url, json=body, timeout=timeout_s)
        if response.status_code >= 400:
            raise status_error(url, response.status_code, response.text, response.headers)
        reply = response.json()
    except httpx.TimeoutException:
        raise LLMError("timeout", f"{url} did not answer within {timeout_s:g} s") from None
    except httpx.HTTPError as error:
        raise LLMError("connection", f"{url}: {error}") from None
    except ValueError:
        raise LLMError("unknown", f"{url} sent something that is not JSON") from None
    if not isinstance(reply, dict):
        raise LLMError("unknown", f"{url} sent JSON that is not an object")
    return reply


def error_kind(status: int) -> ErrorKind:
    """The kind of error an HTTP status says (a retry waits on some: errors.with_retries)."""
    return ("rate_limit" if status == 429 else "server" if status >= 500 else
            "not_found" if status == 404 else "bad_request")


def status_error(url: str, status: int, text: str, headers: Mapping[str, str]) -> LLMError:
    """A server's error status as an LLMError, with the wait its Retry-After asks for (a 429
    or 503's: errors.with_retries waits that long before the next attempt)."""
    after = headers.get("retry-after")
    return LLMError(error_kind(status), f"{url} answered {status}: {text[:300]}",
                    None if after is None else parse_retry_after(after))


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """One TLS context for every call: httpx builds (and loads the CA bundle into) a new one
    for each transport, ~tens of ms of CPU a call, which made the client, not the server, the
    limit of `anchors` at concurrency 16 (bench/anchors.py)."""
    import certifi

    return ssl.create_default_context(cafile=certifi.where())


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) and value <= 0.0 else None


def _llama_tokens(reply: dict[str, Any]) -> list[TokenLogprob] | None:
    """llama-server's `completion_probabilities`: each token's text and log-probability."""
    entries = reply.get("completion_probabilities")
    if not isinstance(entries, list) or not entries:
        return None
    tokens = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("token"), str):
            return None
        logprob = _finite(entry.get("logprob"))
        if logprob is None:
            return None
        tokens.append(TokenLogprob(entry["token"], logprob))
    return tokens


def _record(spec: ModelSpec, body: dict[str, Any], latency_s: float, prompt_tokens: Any,
            completion_tokens: Any, finish: str | None,
            tokens: list[TokenLogprob] | None) -> CallRecord:
    params = {key: value for key, value in body.items() if key not in ("prompt", "model")}
    return CallRecord(
        model=spec.model, params=params, latency_s=latency_s,
        prompt_tokens=prompt_tokens if isinstance(prompt_tokens, int) else None,
        completion_tokens=completion_tokens if isinstance(completion_tokens, int) else None,
        cost=None, logprobs=[token.logprob for token in tokens] if tokens else None,
        finish_reason=finish, tokens=tokens)


def _text_of(reply: dict[str, Any], key: str, url: str) -> str:
    text = reply.get(key)
    if not isinstance(text, str):
        raise LLMError("unknown", f"{url} sent no text ({key})")
    return text


def _llama_continuation(spec: ModelSpec, reply: dict[str, Any], body: dict[str, Any],
                        latency_s: float) -> Continuation:
    text = _text_of(reply, "content", _root(spec) + "/completion")
    tokens = _llama_tokens(reply) if "n_probs" in body else None
    finish = {"limit": "length", "eos": "stop", "word": "stop"}.get(reply.get("stop_type", ""))
    call = _record(spec, body, latency_s, reply.get("tokens_evaluated"),
                   reply.get("tokens_predicted"), finish, tokens)
    return Continuation(text, tokens, finish, call)


def _ollama_continuation(spec: ModelSpec, reply: dict[str, Any], body: dict[str, Any],
                         latency_s: float) -> Continuation:
    text = _text_of(reply, "response", _root(spec) + "/api/generate")
    finish = {"length": "length", "stop": "stop"}.get(reply.get("done_reason", ""))
    call = _record(spec, body, latency_s, reply.get("prompt_eval_count"),
                   reply.get("eval_count"), finish, None)
    return Continuation(text, None, finish, call)


def _completions_continuation(spec: ModelSpec, reply: dict[str, Any], body: dict[str, Any],
                              latency_s: float) -> Continuation:
    url = _root(spec) + "/v1/completions"
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise LLMError("unknown", f"{url} sent no choice")
    choice = choices[0]
    text = _text_of(choice, "text", url)
    tokens = _completion_tokens(choice.get("logprobs")) if "logprobs" in body else None
    usage = reply.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    finish = choice.get("finish_reason") if isinstance(choice.get("finish_reason"), str) else None
    call = _record(spec, body, latency_s, usage.get("prompt_tokens"),
                   usage.get("completion_tokens"), finish, tokens)
    return Continuation(text, tokens, finish, call)


def _completion_tokens(logprobs: object) -> list[TokenLogprob] | None:
    """OpenAI's text-completion form (`tokens` + `token_logprobs`), or the chat form
    llama-server sends even on /v1/completions (`content[i].token/logprob`)."""
    if not isinstance(logprobs, dict):
        return None
    if isinstance(logprobs.get("content"), list):
        return _llama_tokens({"completion_probabilities": logprobs["content"]})
    texts, values = logprobs.get("tokens"), logprobs.get("token_logprobs")
    if not isinstance(texts, list) or not isinstance(values, list) or len(texts) != len(values):
        return None
    tokens = []
    for text, value in zip(texts, values, strict=True):
        logprob = _finite(value)
        if not isinstance(text, str) or logprob is None:
            return None
        tokens.append(TokenLogprob(text, logprob))
    return tokens or None
