"""The OpenAI test server taught llama-server's own endpoints for going on from a prefix
(issue 35): `POST /apply-template` (the chat template applied to the messages, as
`{"prompt": …}`) and `POST /completion` (a raw prompt; `n_predict`, `n_probs`), answered as
llama.cpp's server answers them (measured against it, docs/NOTES.md "Going on from a prefix"):

- `/apply-template` gives Qwen3's prompt and leaves the reasoning for the model to open;
- `/completion` with `stream: true` sends server-sent events: one `data: {…}` a token
  (`content`, `tokens_predicted` so far, `completion_probabilities` of that token with
  `n_probs`) and a last one with `stop: true`, its `stop_type` and counts, no `[DONE]`;
- `/completion`'s `content` is the raw text after the prompt, `<think>`/`</think>` tags and
  all (no reasoning parser on this endpoint), its `stop_type` `limit` at `n_predict`, else
  `eos`; `completion_probabilities` (with `n_probs`) a list of `{id, token, bytes, logprob,
  top_logprobs}`; its counts `tokens_evaluated` and `tokens_predicted`, no `usage`; its
  `prompt` echoed with the BOS token in front.

What the model writes after a prompt is the test's function of the prompt and the request
(`continuation`), so a test can
make the answers depend on which steps the prompt keeps. A `/completion` can be made to fail
(`faults`, first in first out): an error status with llama-server's error body (a 503 while
the model loads, a 429) and its headers (`Retry-After`), or the connection reset, before a
byte of the reply or after some tokens of its stream.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.openai_server import FakeOpenAI

Continuation = Callable[[str, dict[str, Any]], str]
TokenLogprob = Callable[[str, int], float]

_TOKEN = re.compile(r"\s*\S+|\s+")


def qwen3_template(messages: list[dict[str, Any]]) -> str:
    """Qwen3's template as llama-server renders it with the generation prompt."""
    turns = "".join(f"<|im_start|>{message['role']}\n{message['content']}<|im_end|>\n"
                    for message in messages)
    return turns + "<|im_start|>assistant\n"


def tokens_of(text: str) -> list[str]:
    """The server's tokens: a word with the whitespace before it (whitespace at the end is a
    token of its own)."""
    return _TOKEN.findall(text)


@dataclass(frozen=True)
class Fault:
    """What one `/completion` does instead of answering: an error `status` with its
    `headers`; or (no status) the connection reset after `after_tokens` tokens of its stream
    (0: before a byte of the reply)."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    after_tokens: int = 0


class FakeLlamaServer(FakeOpenAI):
    thread_name = "fake-llama-server"

    def __init__(self, latency_s: float = 0.0) -> None:
        super().__init__(latency_s)
        self.template: Callable[[list[dict[str, Any]]], str] = qwen3_template
        self.continuation: Continuation = lambda prompt, body: "</think>\n\nSo the answer is 0."
        # Each token's log-probability, by its text and place (default: -1.0 each).
        self.token_logprob: TokenLogprob = lambda token, place: -1.0
        self.send_logprobs = True
        # How the model's text is cut into tokens (the real one cut `</think>` as `' </'`,
        # `think`, `>`: a tag split across tokens).
        self.tokenize: Callable[[str], list[str]] = tokens_of
        # A streamed /completion's wait before each token (seconds).
        self.token_delay_s = 0.0
        # An embedding model's vector for a text (`/v1/embeddings`, OpenAI's wire).
        self.embed: Callable[[str], list[float]] = lambda text: [1.0, 0.0]
        # The next /completion requests' failures, first in first out.
        self.faults: deque[Fault] = deque()

    def add_routes(self, app: web.Application) -> None:
        super().add_routes(app)
        app.router.add_post("/apply-template", self._apply_template)
        app.router.add_post("/completion", self._completion)
        app.router.add_post("/v1/embeddings", self._embeddings)

    @property
    def prompts(self) -> list[str]:
        return [record.body["prompt"] for record in self.requests
                if record.path == "/completion"]

    async def _apply_template(self, request: web.Request) -> web.StreamResponse:
        _, body = await self._record(request)
        return web.json_response({"prompt": self.template(body["messages"])})

    async def _embeddings(self, request: web.Request) -> web.StreamResponse:
        _, body = await self._record(request)
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        data = [{"object": "embedding", "index": index, "embedding": self.embed(text)}
                for index, text in enumerate(texts)]
        return web.json_response({"object": "list", "data": data, "model": body["model"],
                                  "usage": {"prompt_tokens": len(texts), "total_tokens":
                                            len(texts)}})

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        _, body = await self._record(request)
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        fault = self.faults.popleft() if self.faults else None
        if fault is not None and fault.status is not None:
            # llama-server's error body (a 503 while the model loads: "Loading model").
            error = {"error": {"code": fault.status, "message": "Loading model",
                               "type": "unavailable_error"}}
            return web.json_response(error, status=fault.status, headers=fault.headers)
        if fault is not None and fault.after_tokens == 0:
            return _reset(request)
        prompt = body["prompt"]
        tokens = self.tokenize(self.continuation(prompt, body))
        limit = int(body.get("n_predict", -1))
        cut = 0 <= limit < len(tokens)
        if cut:
            tokens = tokens[:limit]
        if body.get("stream"):
            return await self._streamed(request, prompt, body, tokens, cut,
                                        None if fault is None else fault.after_tokens)
        reply: dict[str, Any] = {
            "index": 0, "content": "".join(tokens), "tokens": [], "id_slot": 0, "stop": True,
            "model": "tiny", "tokens_predicted": len(tokens),
            "tokens_evaluated": len(tokens_of(prompt)), "prompt": "<s> " + prompt,
            "has_new_line": "\n" in "".join(tokens), "truncated": False,
            "stop_type": "limit" if cut else "eos", "stopping_word": "", "tokens_cached": 0,
            "timings": {"prompt_n": 1, "predicted_n": len(tokens)},
        }
        if int(body.get("n_probs", 0)) > 0 and self.send_logprobs:
            reply["completion_probabilities"] = [
                _probability(token, self.token_logprob(token, place))
                for place, token in enumerate(tokens)]
        return web.json_response(reply)


    async def _streamed(self, request: web.Request, prompt: str, body: dict[str, Any],
                        tokens: list[str], cut: bool, reset_after: int | None = None
                        ) -> web.StreamResponse:
        """llama-server's stream (measured): a `data:` event a token, the last with `stop`;
        the connection reset after `reset_after` tokens where given."""
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                               "Cache-Control": "no-cache"})
        await response.prepare(request)
        evaluated = len(tokens_of(prompt))
        for place, token in enumerate(tokens):
            if place == reset_after:
                _reset(request)
                return response
            if self.token_delay_s:
                await asyncio.sleep(self.token_delay_s)
            chunk: dict[str, Any] = {"index": 0, "content": token, "tokens": [0], "stop": False,
                                     "id_slot": -1, "tokens_predicted": place + 1,
                                     "tokens_evaluated": evaluated}
            if int(body.get("n_probs", 0)) > 0 and self.send_logprobs:
                chunk["completion_probabilities"] = [
                    _probability(token, self.token_logprob(token, place))]
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        last = {"index": 0, "content": "", "tokens": [], "id_slot": 0, "stop": True,
                "model": "tiny", "tokens_predicted": len(tokens),
                "tokens_evaluated": evaluated, "prompt": "<s> " + prompt,
                "has_new_line": "\n" in "".join(tokens), "truncated": False,
                "stop_type": "limit" if cut else "eos", "stopping_word": "",
                "tokens_cached": 0, "timings": {"prompt_n": 1, "predicted_n": len(tokens)}}
        await response.write(b"data: " + json.dumps(last).encode() + b"\n\n")
        await response.write_eof()
        return response


def _reset(request: web.Request) -> web.StreamResponse:
    """The connection closed abruptly, with nothing more written."""
    if request.transport is not None:
        request.transport.abort()
    return web.StreamResponse()


def _probability(token: str, logprob: float) -> dict[str, Any]:
    entry = {"id": 0, "token": token, "bytes": list(token.encode("utf-8")), "logprob": logprob}
    return {**entry, "top_logprobs": [entry]}
