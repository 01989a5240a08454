"""A local server speaking the Gemini API's `generateContent` and
`streamGenerateContent?alt=sse`, written from its public reference, for litellm's `gemini/…`
adapter pointed at it with `--api-base` (`FakeGemini.base_url`, which ends in `/v1beta`:
litellm builds `{api_base}/models/{model}:{action}`).

- Streamed: server-sent events, each a whole `GenerateContentResponse` (`candidates[0]`
  with `content.parts[0].text`, `usageMetadata` with `promptTokenCount`,
  `candidatesTokenCount` so far, `totalTokenCount` and, when part of the prompt came from
  the cache, `cachedContentTokenCount`) in every chunk; the last chunk carries the
  candidate's `finishReason` (`STOP`, also at a stop sequence; `MAX_TOKENS`). No `[DONE]`:
  the stream just ends.
- Whole: one such object with all the text.
- `generationConfig.stopSequences` (or `stop_sequences`) and `maxOutputTokens` (or
  `max_output_tokens`) are honoured; the API takes either spelling. `candidateCount` asks a
  whole answer for several candidates (`Reply.choices`, as `n` on the OpenAI wire), and
  `responseLogprobs` for each token's log-probability (`logprobsResult.chosenCandidates`,
  and `avgLogprobs`, from `Reply.logprob_per_token` or `choice_logprobs`; the most likely
  alternatives, `topCandidates`, only when `logprobs` asks for a number of them).
- Thinking: a reply's `reasoning` is the model's thought summary. With
  `generationConfig.thinkingConfig.includeThoughts` it streams first, in parts marked
  `"thought": true`, then the text; without it the model thinks all the same and sends none of
  it. Either way `usageMetadata.thoughtsTokenCount` counts the thinking, apart from
  `candidatesTokenCount` (Google bills both).
- Errors have Google's body, `{"error": {"code", "message", "status", "details"}}`: a wrong
  key (`x-goog-api-key` or `?key=`, when `api_key` is set) is 400 `INVALID_ARGUMENT` with
  the reason `API_KEY_INVALID`; `rate_limited(delay)` is a 429 `RESOURCE_EXHAUSTED` whose
  `google.rpc.RetryInfo` says how long to wait (`retryDelay`, e.g. "7s").
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp import web

from tests.fake_server import (
    Answer,
    Asked,
    FakeServer,
    Reply,
    Usage,
    choice_logprob,
    choice_texts,
    pieces_of,
    prompt_of,
    reasoning_pieces,
)

STATUSES = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

KEY_INVALID = "API key not valid. Please pass a valid API key."


def gemini_error(code: int, message: str, details: list[dict[str, Any]] | None = None
                 ) -> dict[str, Any]:
    return {"error": {"code": code, "message": message,
                      "status": STATUSES.get(code, "UNKNOWN"), "details": details or []}}


def key_invalid() -> dict[str, Any]:
    return gemini_error(400, KEY_INVALID, [{
        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
        "reason": "API_KEY_INVALID",
        "domain": "googleapis.com",
        "metadata": {"service": "generativelanguage.googleapis.com"},
    }])


def rate_limited(retry_delay: str) -> Reply:
    """A 429 whose RetryInfo says to wait `retry_delay` (Google's duration: "7s", "0.5s")."""
    return Reply(status=429, error_body=gemini_error(
        429, "You exceeded your current quota, please check your plan and billing details.",
        [{"@type": "type.googleapis.com/google.rpc.QuotaFailure",
          "violations": [{"quotaMetric": "generativelanguage.googleapis.com/"
                                         "generate_content_free_tier_requests",
                          "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"}]},
         {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": retry_delay}]))


class FakeGemini(FakeServer):
    thread_name = "fake-gemini"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v1beta"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1beta/models/{call}", self._call)

    def error_body(self, status: int, message: str) -> dict[str, Any]:
        return gemini_error(status, message)

    def asked(self, body: dict[str, Any], request: web.Request) -> Asked:
        config = body.get("generationConfig") or body.get("generation_config") or {}
        stops = config.get("stopSequences") or config.get("stop_sequences") or ()
        limit = config.get("maxOutputTokens") or config.get("max_output_tokens")
        return Asked(prompt=prompt_of(body), stops=tuple(stops),
                     max_tokens=int(limit) if limit else None,
                     stream=request.match_info["call"].endswith(":streamGenerateContent"))

    async def _call(self, request: web.Request) -> web.StreamResponse:
        model, _, action = request.match_info["call"].partition(":")
        if action not in ("generateContent", "streamGenerateContent"):
            return web.json_response(gemini_error(404, f"unknown method {action}"), status=404)
        record, body = await self._record(request)
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if self.api_key is not None and key != self.api_key:
            return web.json_response(key_invalid(), status=400)
        answer = await self._answer(request, record, body)
        if not isinstance(answer, Answer):
            return answer
        reply, asked, text = answer.reply, answer.asked, answer.text
        finish = answer.finish("STOP", "MAX_TOKENS")
        pieces = pieces_of(text, reply.chunk_chars)
        thought = reasoning_pieces(reply) if _includes_thoughts(body) else []
        if asked.stream:
            if request.query.get("alt") != "sse":
                return web.json_response(
                    gemini_error(400, "this server streams server-sent events only"),
                    status=400)
            framing = _Framing(self, reply, model, asked, finish, len(thought) + len(pieces),
                               _config(body), len(thought))
            return await self._stream(request, record, reply, thought + pieces, framing)
        await self.writing_time(reply, len(pieces))
        config = _config(body)
        texts = choice_texts(reply, text, int(config.get("candidateCount")
                                              or config.get("candidate_count") or 1), asked)
        usage = self.usage_of(reply, asked, sum(len(pieces_of(t, None)) for t in texts))
        candidates = [_candidate(reply, t, finish, index, config)
                      for index, t in enumerate(texts)]
        return web.json_response(_response(reply, model, candidates, usage),
                                 headers=reply.headers)


def _config(body: dict[str, Any]) -> dict[str, Any]:
    return body.get("generationConfig") or body.get("generation_config") or {}


def _includes_thoughts(body: dict[str, Any]) -> bool:
    config = _config(body)
    thinking = config.get("thinkingConfig") or config.get("thinking_config") or {}
    return bool(thinking.get("includeThoughts") or thinking.get("include_thoughts"))


def _candidate(reply: Reply, text: str, finish: str | None, index: int,
               config: dict[str, Any], thought: bool = False) -> dict[str, Any]:
    part: dict[str, Any] = {"text": text, "thought": True} if thought else {"text": text}
    candidate: dict[str, Any] = {"content": {"parts": [part], "role": "model"},
                                 "index": index}
    if finish is not None:
        candidate["finishReason"] = finish
    value = choice_logprob(reply, index)
    if config.get("responseLogprobs") and value is not None and text:
        tokens = pieces_of(text, None)
        result: dict[str, Any] = {"chosenCandidates": [
            {"token": token, "logProbability": value} for token in tokens]}
        alternatives = config.get("logprobs")
        if isinstance(alternatives, int) and not isinstance(alternatives, bool):
            result["topCandidates"] = [{"candidates": [
                {"token": token, "logProbability": value}][:alternatives]} for token in tokens]
        candidate["logprobsResult"] = result
        candidate["avgLogprobs"] = value
    return candidate


def _response(reply: Reply, model: str, candidates: list[dict[str, Any]], usage: Usage
              ) -> dict[str, Any]:
    return {"candidates": candidates,
            "usageMetadata": (reply.usage_values if reply.usage_values is not None
                              else _usage_metadata(usage)),
            "modelVersion": model, "responseId": "test-1"}


def _usage_metadata(usage: Usage) -> dict[str, Any]:
    """Gemini counts the thinking (`thoughtsTokenCount`) apart from the candidates."""
    metadata: dict[str, Any] = {"promptTokenCount": usage.prompt,
                                "candidatesTokenCount": usage.completion - usage.reasoning,
                                "totalTokenCount": usage.prompt + usage.completion,
                                "promptTokensDetails": [{"modality": "TEXT",
                                                         "tokenCount": usage.prompt}]}
    if usage.reasoning:
        metadata["thoughtsTokenCount"] = usage.reasoning
    if usage.cached:
        metadata["cachedContentTokenCount"] = usage.cached
        metadata["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": usage.cached}]
    return metadata


class _Framing:
    content_type = "text/event-stream"

    def __init__(self, server: FakeGemini, reply: Reply, model: str, asked: Asked,
                 finish: str, count: int, config: dict[str, Any], thinking: int = 0) -> None:
        self.reply, self.model, self.finish = reply, model, finish
        self.usage = server.usage_of(reply, asked, 0)
        self.count = count
        self.config = config
        # The first `thinking` pieces are thought parts. A model that thought without
        # showing it still counts its thinking's tokens.
        self.thinking = thinking
        self.unshown = 0 if thinking else (len(reasoning_pieces(reply))
                                           if reply.reasoning_tokens is None
                                           else reply.reasoning_tokens)

    def opening(self) -> list[bytes]:
        return []

    def _event(self, text: str, sent: int, finish: str | None, thought: bool = False
               ) -> bytes:
        reasoning = min(sent, self.thinking) + self.unshown
        usage = Usage(self.usage.prompt, sent + self.unshown, self.usage.cached,
                      self.usage.cache_write, reasoning)
        candidate = _candidate(self.reply, text, finish, 0, self.config, thought)
        payload = _response(self.reply, self.model, [candidate], usage)
        return b"data: " + json.dumps(payload).encode() + b"\r\n\r\n"

    def piece(self, text: str, index: int, last: bool) -> bytes:
        return self._event(text, index + 1, self.finish if last else None,
                           thought=index < self.thinking)

    def malformed(self) -> bytes:
        return b'data: {"candidates": [{"content": {"parts": [{"text": "x"\r\n\r\n'

    def closing(self, sent: int) -> list[bytes]:
        # The finish reason rode on the last piece; with no text at all it comes alone.
        return [] if self.count else [self._event("", 0, self.finish)]


__all__ = ["FakeGemini", "Reply", "gemini_error", "key_invalid", "rate_limited"]
