"""The provider's own token counts, read from a stream's events as the reply guard passes them
on (http_guard.py; core/llm/usage.py says why, and what the counts mean). Each wire says them
in its own place: Anthropic's `message_start` (the input, with the cache's reads and writes)
and `message_delta` (the output), Gemini's `usageMetadata` in every chunk, OpenAI's `usage`
chunk, Ollama's `prompt_eval_count` / `eval_count` on its last line."""

from __future__ import annotations

import json
import re
from typing import Any

from bbm_tui.core.llm.records import UsageCounts, UsageWatch
from bbm_tui.core.types import sane_tokens

# Where a stream's event holds the provider's own counts: `"usage": {` (OpenAI, Anthropic),
# Gemini's `"usageMetadata": {`, Ollama's `"prompt_eval_count": N` on its last line
# (`"usage": null`, or no key at all, is a provider that did not count).
USAGE_IN_EVENT = re.compile(
    r'"(usage|usageMetadata)"\s*:\s*\{|"(prompt_eval_count|eval_count)"\s*:\s*\d')
# A usage-bearing event is small; a longer line (one huge chunk of text) is passed on unread.
_MAX_LINE_CHARS = 2**18


class UsageReader:
    """Reads one reply's stream, line by line as it passes (server-sent events' `data:` lines,
    or newline-delimited JSON), into the call's `UsageWatch`: whether the provider counted at
    all, and its counts, the latest of each winning."""

    def __init__(self, watch: UsageWatch) -> None:
        self.watch = watch
        self._partial = ""

    def feed(self, text: str) -> None:
        lines = (self._partial + text).split("\n")
        self._partial = lines.pop()
        if len(self._partial) > _MAX_LINE_CHARS:
            self._partial = ""
        for line in lines:
            self._line(line)

    def finish(self) -> None:
        """The stream ended: its last line may have had no line break after it."""
        if self._partial:
            self._line(self._partial)
            self._partial = ""

    def _line(self, line: str) -> None:
        if USAGE_IN_EVENT.search(line) is None:
            return
        self.watch.provider_usage = True
        payload = line.strip()
        if payload.startswith("data:"):
            payload = payload[len("data:"):].strip()
        try:
            event = json.loads(payload)
        except ValueError:
            return
        if isinstance(event, dict):
            absorb_event(self.watch.usage, event)


def absorb_event(counts: UsageCounts, event: dict[str, Any]) -> None:
    """Take the counts one event of a stream carries, whatever the wire."""
    kind = event.get("type")
    if kind == "message_start":  # Anthropic: the input, before the first token
        message = event.get("message")
        _anthropic(counts, message.get("usage") if isinstance(message, dict) else None,
                   with_output=False)
    elif kind == "message_delta":  # Anthropic: the output so far (the input, where repeated)
        _anthropic(counts, event.get("usage"), with_output=True)
    elif isinstance(event.get("usageMetadata"), dict):  # Gemini, in every chunk
        _gemini(counts, event["usageMetadata"])
    elif isinstance(event.get("usage"), dict):  # OpenAI and the servers that copy it
        _openai(counts, event["usage"])
    elif "prompt_eval_count" in event or "eval_count" in event:  # Ollama's last line
        counts.prompt = sane_tokens(event.get("prompt_eval_count"))
        counts.completion = sane_tokens(event.get("eval_count"))


def _anthropic(counts: UsageCounts, usage: Any, *, with_output: bool) -> None:
    """`input_tokens` is the part of the prompt after the last cache mark: neither read from
    the cache nor written to it."""
    if not isinstance(usage, dict):
        return
    if with_output:
        counts.completion = sane_tokens(usage.get("output_tokens"))
    if "input_tokens" not in usage:
        return
    uncached = sane_tokens(usage.get("input_tokens"))
    read = sane_tokens(usage.get("cache_read_input_tokens") or 0)
    written = sane_tokens(usage.get("cache_creation_input_tokens") or 0)
    if uncached is None or read is None or written is None:
        counts.prompt = counts.cached = counts.cache_write = None
        return
    counts.prompt, counts.cached, counts.cache_write = uncached + read + written, read, written


def _gemini(counts: UsageCounts, metadata: dict[str, Any]) -> None:
    """`promptTokenCount` includes the cached part (`cachedContentTokenCount`, sent only when
    there is one); the output is the candidates' tokens and the thinking's, both billed."""
    counts.prompt = sane_tokens(metadata.get("promptTokenCount"))
    counts.cached = sane_tokens(metadata.get("cachedContentTokenCount") or 0)
    candidates = sane_tokens(metadata.get("candidatesTokenCount") or 0)
    thoughts = sane_tokens(metadata.get("thoughtsTokenCount") or 0)
    counts.completion = (None if candidates is None or thoughts is None
                         else candidates + thoughts)
    if "thoughtsTokenCount" in metadata:
        counts.reasoning = thoughts


def _openai(counts: UsageCounts, usage: dict[str, Any]) -> None:
    """`completion_tokens` counts the reasoning's tokens too (a thinking model's), which
    `completion_tokens_details.reasoning_tokens` tells apart."""
    counts.prompt = sane_tokens(usage.get("prompt_tokens"))
    counts.completion = sane_tokens(usage.get("completion_tokens"))
    completion_details = usage.get("completion_tokens_details")
    if isinstance(completion_details, dict) and "reasoning_tokens" in completion_details:
        counts.reasoning = sane_tokens(completion_details.get("reasoning_tokens") or 0)
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and "cached_tokens" in details:
        counts.cached = sane_tokens(details.get("cached_tokens") or 0)
    elif "prompt_cache_hit_tokens" in usage:  # DeepSeek's own name for it
        counts.cached = sane_tokens(usage.get("prompt_cache_hit_tokens"))
