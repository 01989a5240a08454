"""Prompt caching (docs/DESIGN.md §3). The paper's protocol sends, for every step of every trace
of a task, the same few-shot prompt, then the question and the thoughts so far, each step's
prompt the last one plus a thought: the exact case providers' prompt caches are for.

- Providers that cache on their own (OpenAI, Gemini, DeepSeek, local servers' prefix caches)
  need only the same bytes first: the prompt is sent as one text, unchanged.
- Providers that cache only what is marked (Anthropic, and the providers litellm passes
  `cache_control` on to in the same way: Claude on Vertex AI and Azure AI) get the prompt as
  content blocks that join to exactly the same text, each a slice of it
  (prompts/generation.next_step_parts): the task's prompt (the few-shot prefix, shared by
  every trace of the task), the question with the first label, then one block per thought:
  what the model wrote after its label, the line break, the next label. A step's prompt is
  the step before's and one block more. Two marks (Anthropic allows four): the few-shot
  prefix, read by every trace's first step, and the last block, so that each step writes
  its whole prompt and the next reads it whole (Anthropic looks for a cached prefix at each
  block boundary up to 20 blocks before a mark: a step whose predecessor's write was lost
  reads the last one before it). A step pays full price for nothing, once its prompt is
  past the minimum. The step the step limit makes the last marks the prompt before its own
  new block instead: it reads that, and writes nothing no step would read. A finder's
  few-shot messages get one mark, on the last of them.
- Nothing is cached below the model's minimum (litellm knows some; else Anthropic's and
  OpenAI's 1,024 tokens): `below_caching_minimum` says when a prompt was, for a note (for the
  models litellm's map knows: of another, its caching is not known).

`caching = false` in the config sends the prompts unmarked (CallSettings.caching).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.llm.usage import priced_name
from bbm_tui.core.records import CallRecord
from bbm_tui.core.types import CallSettings, ModelSpec

EPHEMERAL = {"type": "ephemeral"}
# The providers' documented minimum, where litellm's map has none for the model: Anthropic's
# for most of its models, OpenAI's for automatic caching, Gemini's for implicit caching.
DEFAULT_MINIMUM_TOKENS = 1024
_PROVIDERS_WITH_A_MINIMUM = frozenset({"anthropic", "vertex_ai", "azure_ai", "bedrock",
                                       "openai", "azure", "gemini"})


def marks_cache(spec: ModelSpec) -> bool:
    """Whether this model's provider caches only what carries `cache_control` (chat only:
    a text completion is one string)."""
    return spec.mode != "completion" and _takes_cache_control(spec.model)


@functools.lru_cache(maxsize=256)
def _takes_cache_control(model: str) -> bool:
    # Cached: litellm's answer costs ~2 ms, and every step asks.
    litellm = litellm_module()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
        params = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
    except Exception:
        return False
    return "cache_control" in (params or ())


def step_messages(spec: ModelSpec, settings: CallSettings, prompt: str,
                  parts: Sequence[str] = ()) -> list[dict[str, Any]]:
    """The one user message of a generation step. `parts` (the prompt in the pieces
    prompts/generation.py makes: few-shot prefix, question and first label, one per thought)
    join to `prompt`; where the provider needs marks they become content blocks, the first
    and the last marked."""
    if not (settings.caching and len(parts) > 1 and marks_cache(spec)):
        return [{"role": "user", "content": prompt}]
    if "".join(parts) != prompt:
        raise ValueError("the prompt's parts do not join to the prompt")
    blocks: list[dict[str, Any]] = [{"type": "text", "text": part} for part in parts if part]
    blocks[0]["cache_control"] = EPHEMERAL
    # The last step of a trace (settings.cache_for_next off) marks the step before's prompt:
    # read whole, and its own thought-and-label block paid once instead of written.
    last = -1 if settings.cache_for_next or len(blocks) < 3 else -2
    blocks[last]["cache_control"] = EPHEMERAL
    return [{"role": "user", "content": blocks}]


def finder_messages(spec: ModelSpec, settings: CallSettings,
                    messages: Sequence[dict[str, str]]) -> list[dict[str, Any]]:
    """A whole answer's messages: everything before the last message (a finder's few-shot
    messages, the same for every call of its method and task) marked as one cached prefix,
    where the provider needs marks."""
    result: list[dict[str, Any]] = [dict(message) for message in messages]
    if not (settings.caching and len(result) > 1 and marks_cache(spec)):
        return result
    last_shared = result[-2]
    if isinstance(last_shared.get("content"), str):
        last_shared["content"] = [{"type": "text", "text": last_shared["content"],
                                   "cache_control": EPHEMERAL}]
    return result


def caching_minimum(spec: ModelSpec) -> int | None:
    """The fewest prompt tokens the model's provider caches (None: a provider with no
    documented minimum, e.g. a local server's prefix cache)."""
    return _minimum(spec.model)


@functools.lru_cache(maxsize=256)
def _minimum(model: str) -> int | None:
    # Only a model litellm's map knows: "openai/…" at a local server is often a model of the
    # server's own (vLLM, llama.cpp), whose prefix cache has no minimum.
    if priced_name(model) is None:
        return None
    litellm = litellm_module()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
    except Exception:
        return None
    if provider not in _PROVIDERS_WITH_A_MINIMUM:
        return None
    try:
        known = litellm.get_model_info(model).get("prompt_cache_min_tokens")
    except Exception:
        known = None
    return int(known) if known else DEFAULT_MINIMUM_TOKENS


def below_caching_minimum(call: CallRecord, settings: CallSettings) -> str | None:
    """A note when the call's prompt, as the provider counted it, was too short for its
    model's prompt cache (nothing of it was cached), else None. The same words for every such
    call of a model, so that a caller says it once."""
    if not settings.caching or call.prompt_tokens is None or call.cached_tokens:
        return None
    minimum = _minimum(call.model)
    if minimum is None or call.prompt_tokens >= minimum:
        return None
    return (f"{call.model} caches only prompts of {minimum:,} tokens or more: shorter ones "
            "were sent uncached (a trace's prompt grows with each thought, and is cached "
            "once past that)")
