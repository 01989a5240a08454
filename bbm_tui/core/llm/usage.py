"""A call's usage as the provider counted it, and its price (docs/DESIGN.md §3: usage is read
wherever the provider sends it; unknown stays unknown).

Where the counts come from:

- a whole answer: litellm's `usage`, which keeps the prompt cache's part in
  `prompt_tokens_details` (`cached_tokens`, `cache_creation_tokens`);
- a stream: the provider's own events, read by the reply guard as they pass
  (usage_events.py), because litellm hands usage on only in its last chunk, which a stream the
  client closes at the step's newline never reaches. Each wire says it in its own place
  (docs/NOTES.md, "Providers' own wires"): Anthropic's input in its first event
  (`message_start`) and the output in `message_delta`; Gemini's `usageMetadata` in every
  chunk; OpenAI's `usage` chunk at the end (with `prompt_tokens_details.cached_tokens`);
  Ollama's `prompt_eval_count` / `eval_count` on its last line.

Counts follow litellm's convention: `prompt` is every prompt token, cached or not; `cached`
(read from the provider's prompt cache) and `cache_write` (written to it) are parts of it.
A count that is not a sane whole number is unknown (None), never a guess.
"""

from __future__ import annotations

from typing import Any

from bbm_tui.core.llm.capabilities import is_offline
from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.llm.records import UsageCounts
from bbm_tui.core.llm.router import deployment_spec
from bbm_tui.core.types import ModelSpec, sane_cost, sane_tokens


def counts_from_litellm(usage: Any) -> UsageCounts:
    """The counts of litellm's `usage`. All zeros is what litellm makes of an answer that sent
    no usage (or whose usage the reply guard set aside): unknown, since a real call has a
    prompt."""
    if usage is None:
        return UsageCounts()
    prompt = sane_tokens(getattr(usage, "prompt_tokens", None))
    completion = sane_tokens(getattr(usage, "completion_tokens", None))
    if not (prompt or completion):
        return UsageCounts()
    details = getattr(usage, "prompt_tokens_details", None)
    cached = sane_tokens(getattr(details, "cached_tokens", None))
    written = sane_tokens(getattr(details, "cache_creation_tokens", None)
                          or getattr(details, "cache_write_tokens", None))
    if written is None:
        written = sane_tokens(getattr(usage, "cache_creation_input_tokens", None))
    completion_details = getattr(usage, "completion_tokens_details", None)
    reasoning = sane_tokens(getattr(completion_details, "reasoning_tokens", None))
    return UsageCounts(prompt, completion, cached, written, reasoning)


def cost_of(spec: ModelSpec, counts: UsageCounts) -> float | None:
    """The call's price from litellm's own cost function given the whole usage (cached
    tokens at the cache's price, cache writes at theirs); None where a count or the model's
    price is unknown. Offline models cost nothing. Behind a router: priced as its group's
    first deployment."""
    spec = deployment_spec(spec)
    if is_offline(spec):
        return 0.0
    if counts.prompt is None or counts.completion is None:
        return None
    model = priced_name(spec.model)
    if model is None:
        return None
    litellm = litellm_module()
    details: dict[str, int] = {}
    if counts.cached:
        details["cached_tokens"] = counts.cached
    if counts.cache_write:
        details["cache_creation_tokens"] = counts.cache_write
    usage = litellm.Usage(prompt_tokens=counts.prompt, completion_tokens=counts.completion,
                          total_tokens=counts.prompt + counts.completion,
                          prompt_tokens_details=details or None)
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=counts.prompt, completion_tokens=counts.completion,
            usage_object=usage)
    except Exception:
        return None
    return sane_cost(float(prompt_cost) + float(completion_cost))


_PRICED: dict[str, str | None] = {}


def _has_price(entry: dict[str, Any]) -> bool:
    """A price map entry that prices something (a token, a character, a second...)."""
    return any("cost_per" in key and isinstance(value, int | float)
               for key, value in entry.items())


def priced_name(model: str) -> str | None:
    """The name litellm prices `model` under, or None when its price map has no price for it
    (litellm then makes up a price of 0 for some models, e.g. an Anthropic model it does not
    know: unknown, not free). An entry without a price is none: litellm's Router adds one for
    each deployment's model (and id) when it is built, and a local model behind a router file
    was priced $0 by it, and so was the same model called directly after. `ollama_chat/…` is
    the same local model as `ollama/…`, which litellm prices (at $0). Asked once per model: a
    lookup costs ~0.5 ms."""
    if model in _PRICED:
        return _PRICED[model]
    litellm = litellm_module()
    name = "ollama/" + model.removeprefix("ollama_chat/") if model.startswith(
        "ollama_chat/") else model
    try:
        info = litellm.get_model_info(name)
        entry = litellm.model_cost.get(info.get("key"))
        found = name if isinstance(entry, dict) and _has_price(entry) else None
    except Exception:
        found = None
    _PRICED[model] = found
    return found
