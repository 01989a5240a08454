"""What each provider accepts (docs/DESIGN.md §3): native `stop`, temperature, log-probabilities,
the key's environment variable. Measured facts are in docs/NOTES.md."""

from __future__ import annotations

import functools
import os
import re
from typing import Any, Literal

from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.llm.router import deployment_spec
from bbm_tui.core.types import CallSettings, ModelSpec


def is_offline(spec: ModelSpec) -> bool:
    """The bundled models that need no network and cost nothing."""
    from bbm_tui.core.llm.offline.replay import PROVIDERS
    from bbm_tui.core.llm.offline.solver import PROVIDER as SOLVER

    spec = deployment_spec(spec)
    return spec.model.split("/", 1)[0] in (*PROVIDERS, SOLVER)


_REASONING_MODEL = re.compile(r"^(o1|o3|o4|gpt-5)([-.:]|$)")


def model_basename(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()


def accepts_native_stop(spec: ModelSpec) -> bool:
    """Whether `stop=["\\n"]` may be sent: Anthropic rejects whitespace-only stop sequences and
    OpenAI reasoning models take no `stop` (NOTES: litellm, stop sequences). Behind a
    router, every question of this module is asked of the group's first deployment."""
    spec = deployment_spec(spec)
    model = spec.model.lower()
    provider = model.split("/", 1)[0] if "/" in model else ""
    if provider == "anthropic" or "claude" in model:
        return False  # in either mode: litellm sends Anthropic's text completions as chat
    if spec.mode == "completion":
        return True
    return not _is_openai_reasoning(spec)


def _is_openai_reasoning(spec: ModelSpec) -> bool:
    model = spec.model.lower()
    provider = model.split("/", 1)[0] if "/" in model else ""
    reasoning = _REASONING_MODEL.match(model_basename(model)) is not None
    return provider in ("", "openai", "azure") and reasoning


def accepts_temperature(spec: ModelSpec, temperature: float) -> bool:
    """Whether `temperature` may be sent: OpenAI reasoning models (o-series, gpt-5) take only
    their default, 1, and litellm refuses any other value before sending the request."""
    spec = deployment_spec(spec)
    if spec.mode == "completion" or temperature == 1:
        return True
    return not _is_openai_reasoning(spec)


def gives_logprobs(spec: ModelSpec) -> bool:
    """Whether this model's provider returns token log-probabilities at all. litellm refuses
    `logprobs` before sending anything for Anthropic, Ollama, Mistral, Bedrock, Cohere and
    OpenAI's reasoning models (docs/NOTES.md, "Providers' own wires"): asking them would
    fail the call, so they are asked for none, and backtracking takes the first sample that
    differs, saying so. What litellm does not know (a model it cannot place) is asked."""
    return _supports(spec, "logprobs")


def gives_alternatives(spec: ModelSpec) -> bool:
    """Whether the provider also returns each token's most likely alternatives
    (`top_logprobs`): Gemini gives log-probabilities but litellm refuses `top_logprobs`."""
    return _supports(spec, "top_logprobs")


def _supports(spec: ModelSpec, param: str) -> bool:
    spec = deployment_spec(spec)
    if is_offline(spec):
        return True  # the offline providers answer these themselves
    params = _supported_params(spec.model, spec.api_base)
    return params is None or param in params


@functools.lru_cache(maxsize=256)
def _supported_params(model: str, api_base: str | None) -> frozenset[str] | None:
    """The OpenAI parameters litellm passes on for this model (None: it cannot tell)."""
    litellm = litellm_module()
    try:
        name, provider, _, _ = litellm.get_llm_provider(model, api_base=api_base)
        params = litellm.get_supported_openai_params(model=name, custom_llm_provider=provider)
    except Exception:
        return None
    return frozenset(params) if params is not None else None


def asks_logprobs(spec: ModelSpec, settings: CallSettings, *, streamed: bool = True) -> bool:
    """Log-probabilities are asked for where the settings want them and the provider gives
    them; for a streamed step, in chat mode only: litellm 1.103.7 drops them from streamed
    text completions (measured against the test server), so asking would be for nothing. A
    whole (non-streamed) text completion keeps them."""
    return (settings.logprobs and gives_logprobs(spec)
            and (spec.mode != "completion" or not streamed))


# How many of the most likely tokens to ask for at each place, with log-probabilities (the
# token view shows them). `top_logprobs=1` was measured to yield log-probabilities from both
# llama.cpp servers, where 0 makes llama-server send none and leaving it out makes
# llama-cpp-python's chat endpoint send none (docs/NOTES.md, "Real servers"); a larger value
# asks for more entries of the same list (not measured on those servers). OpenAI takes up to
# 20 in chat and 5 on /v1/completions.
TOP_ALTERNATIVES = 5


def logprob_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """What asks for log-probabilities and each token's top alternatives: chat's
    `logprobs` + `top_logprobs`, a text completion's number `logprobs`; `logprobs` alone
    where the provider gives no alternatives (Gemini)."""
    if not gives_alternatives(spec):
        return {"logprobs": True}
    if spec.mode != "completion":
        return {"logprobs": True, "top_logprobs": TOP_ALTERNATIVES}
    return {"logprobs": TOP_ALTERNATIVES}


def sent_params(spec: ModelSpec, settings: CallSettings) -> dict[str, Any]:
    """The parameters recorded beside a call: those that were sent."""
    params = settings.params() | {"mode": spec.mode}
    if not accepts_temperature(spec, settings.temperature):
        del params["temperature"]
    if not asks_logprobs(spec, settings):
        params.pop("logprobs", None)
    return params


def key_env_vars(spec: ModelSpec) -> list[str]:
    """The environment variables that hold the key for this model's provider, if litellm knows."""
    if spec.router is not None:
        return []  # the router file holds each deployment's key (or names its variable)
    try:
        status = litellm_module().validate_environment(model=spec.model, api_base=spec.api_base)
    except Exception:
        return []
    return list(status.get("missing_keys") or [])


def missing_key(spec: ModelSpec) -> str | None:
    """The variable to set, when this model's provider needs an API key and the environment
    has none (litellm knows which variables a provider reads: `validate_environment`).
    None when a key is there, when none is needed (the offline models; an OpenAI-compatible
    server at an api base, which gets a placeholder), or when litellm cannot tell. Asked
    before every call, so that a missing key is named at once, before any request."""
    if spec.router is not None or is_offline(spec) or auth_kwargs(spec):
        return None
    try:
        status = litellm_module().validate_environment(model=spec.model, api_base=spec.api_base)
    except Exception:
        return None
    if status.get("keys_in_environment"):
        return None
    # Only keys: a provider may also miss its api base (Ollama's OLLAMA_API_BASE), which
    # has a default.
    keys = [name for name in status.get("missing_keys") or []
            if name.endswith(("_KEY", "_TOKEN"))]
    preferred = key_env_var(spec)
    return preferred if preferred in keys else (keys[0] if keys else None)


def _provider_of(spec: ModelSpec) -> str:
    spec = deployment_spec(spec)
    return _provider_of_model(spec.model, spec.api_base)


@functools.lru_cache(maxsize=256)
def _provider_of_model(model: str, api_base: str | None) -> str:
    # Cached: litellm's lookup costs ~0.15 ms and every call asks it twice.
    try:
        return litellm_module().get_llm_provider(model, api_base=api_base)[1]
    except Exception:
        return model.split("/", 1)[0] if "/" in model else "openai"


_KEY_VARS = {
    "openai": "OPENAI_API_KEY",
    "text-completion-openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "fireworks_ai": "FIREWORKS_AI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "cohere": "COHERE_API_KEY",
    "hosted_vllm": "HOSTED_VLLM_API_KEY",
    "azure": "AZURE_API_KEY",
}


def key_env_var(spec: ModelSpec) -> str | None:
    """The one environment variable a user should set for this model's key."""
    return _KEY_VARS.get(_provider_of(spec))


# Providers litellm reaches through OpenAI's own client and wire (the request's options go to
# the server as they are).
_OPENAI_WIRE = frozenset({"openai", "text-completion-openai", "hosted_vllm", "azure",
                          "azure_text", "custom_openai"})


def speaks_openai_wire(spec: ModelSpec) -> bool:
    """Whether litellm sends this model's requests on OpenAI's wire, options and all (an
    OpenAI-compatible server), rather than through an adapter of its own (Anthropic, Gemini,
    Ollama), which maps what it takes and leaves the rest."""
    return _provider_of(spec) in _OPENAI_WIRE


def auth_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """Local OpenAI-compatible servers usually want no key, but the OpenAI SDK refuses to start
    without one: give it a placeholder when an api_base is set and the environment has none.
    Behind a router, the file's deployments carry their own."""
    if spec.api_base is None or spec.router is not None:
        return {}
    variable = key_env_var(spec)
    if variable and os.environ.get(variable):
        return {}
    if _provider_of(spec) in _OPENAI_WIRE:
        return {"api_key": "no-key-set"}
    return {}


# Providers that return several choices for one request's `n` (docs/NOTES.md): OpenAI,
# Azure, Gemini, DeepSeek, Together, vLLM and any OpenAI-compatible server (a server that
# ignores or caps `n` is made up for with parallel calls). Anthropic, Ollama, Mistral, Bedrock
# and the rest get parallel calls.
_TAKES_N = frozenset({"openai", "text-completion-openai", "azure", "azure_text", "gemini",
                      "vertex_ai", "deepseek", "together_ai", "hosted_vllm", "vllm",
                      "fireworks_ai", "openrouter"})


def accepts_n(spec: ModelSpec) -> bool:
    """Whether one call may ask this model for several candidates."""
    spec = deployment_spec(spec)
    if is_offline(spec):
        return True  # the offline providers answer `n` themselves
    return _provider_of(spec) in _TAKES_N


# -- Thinking models (docs/DESIGN.md §16; docs/NOTES.md, "Thinking models")

# How a provider's thinking call is made and read, one name a family of wires:
# - "anthropic": extended thinking (`thinking` with a budget), `thinking_delta` blocks with a
#   signature, `redacted_thinking` blocks; Claude 4 and later send a summary;
# - "gemini": `thinkingConfig` with `includeThoughts`, parts marked `thought: true` (summaries);
# - "ollama": `think` in the request, `thinking` in the reply;
# - "openai_reasoning": OpenAI's o-series and gpt-5 through chat completions: an effort, no
#   reasoning text, only a count of reasoning tokens;
# - "deepseek": `deepseek-reasoner`'s `reasoning_content`, always thinking;
# - "openai_compatible": any other server on OpenAI's wire (llama-server, vLLM, the offline
#   thinking model): `reasoning_content` or vLLM's `reasoning`, or `<think>` in the content.
ThinkingWire = Literal["anthropic", "gemini", "ollama", "openai_reasoning", "deepseek",
                       "openai_compatible"]

_GEMINI_PROVIDERS = frozenset({"gemini", "vertex_ai", "vertex_ai_beta"})
_OLLAMA_PROVIDERS = frozenset({"ollama", "ollama_chat"})
# Claude 3.7 Sonnet returns its whole thinking; every later Claude model a summary of it.
_CLAUDE_RAW_THINKING = re.compile(r"claude-3[-.]7")


def thinking_wire(spec: ModelSpec) -> ThinkingWire:
    """Which family of wires this model's thinking call goes over (asked of a router's first
    deployment, as every question here is)."""
    spec = deployment_spec(spec)
    provider = _provider_of(spec)
    if provider == "anthropic":
        return "anthropic"
    if provider in _GEMINI_PROVIDERS:
        return "gemini"
    if provider in _OLLAMA_PROVIDERS:
        return "ollama"
    if provider == "deepseek":
        return "deepseek"
    if _is_openai_reasoning(spec):
        return "openai_reasoning"
    return "openai_compatible"


def reasoning_is_summary(spec: ModelSpec) -> bool:
    """Whether the reasoning text this model's provider sends is a summary of its thinking
    rather than the thinking itself: Anthropic's Claude 4 models and later (Claude 3.7 sends
    the whole), Gemini's thought parts, OpenAI's reasoning models' summaries (the Responses
    API's; chat completions send none), and a Claude or Gemini model reached through another
    provider (OpenRouter, a proxy), which passes on what the model's maker sends. Told of a
    model nobody can place, a summary is the safer word: nobody takes it for the thinking."""
    spec = deployment_spec(spec)
    wire = thinking_wire(spec)
    name = model_basename(spec.model)
    if wire == "gemini" or "gemini" in name:
        return True
    if wire == "openai_reasoning":
        # OpenAI never sends its reasoning models' own reasoning: any text of it (the
        # Responses API's, through litellm's `openai/responses/…` or a proxy) is a summary.
        return True
    if wire == "anthropic" or "claude" in name:
        return _CLAUDE_RAW_THINKING.search(name) is None
    return False


def sends_no_reasoning_text(spec: ModelSpec) -> bool:
    """Whether this model's thinking call sends no text of its reasoning at all, only a count
    of its tokens: OpenAI's reasoning models through chat completions (the Responses API,
    `openai/responses/…`, sends a summary)."""
    spec = deployment_spec(spec)
    return thinking_wire(spec) == "openai_reasoning" and "responses/" not in spec.model


def takes_thinking_budget(spec: ModelSpec) -> bool:
    """Whether the provider's thinking call takes a budget of thinking tokens (Anthropic's
    `budget_tokens`, Gemini's `thinkingBudget`); the others take an effort, or nothing."""
    return thinking_wire(spec) in ("anthropic", "gemini")


def takes_thinking_effort(spec: ModelSpec) -> bool:
    """Whether the provider's thinking call takes an effort (low, medium, high): litellm
    maps `reasoning_effort` to each provider's own field (Anthropic's and Gemini's budgets,
    Ollama's `think`, OpenAI's `reasoning_effort`); DeepSeek's reasoner takes none."""
    spec = deployment_spec(spec)
    if is_offline(spec):
        return False
    if thinking_wire(spec) == "deepseek":
        return False
    params = _supported_params(spec.model, spec.api_base)
    return params is None or "reasoning_effort" in params


def takes_ollama_effort(spec: ModelSpec) -> bool:
    """Ollama's `think` is on or off, except for gpt-oss, which takes low, medium or high
    (litellm 1.103.7 sends the effort as it is only for a model named `gpt-oss…`)."""
    return deployment_spec(spec).model.split("/", 1)[-1].startswith("gpt-oss")
