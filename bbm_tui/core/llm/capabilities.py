"""What each provider accepts (docs/DESIGN.md §3): native `stop`, temperature, log-probabilities,
the key's environment variable. Measured facts are in docs/NOTES.md."""

from __future__ import annotations

import functools
import os
import re
from typing import Any

from bbm_tui.core.llm.loader import litellm_module
from bbm_tui.core.types import CallSettings, ModelSpec


def is_offline(spec: ModelSpec) -> bool:
    """The bundled models that need no network and cost nothing."""
    from bbm_tui.core.llm.offline.replay import PROVIDERS
    from bbm_tui.core.llm.offline.solver import PROVIDER as SOLVER

    return spec.model.split("/", 1)[0] in (*PROVIDERS, SOLVER)


_REASONING_MODEL = re.compile(r"^(o1|o3|o4|gpt-5)([-.:]|$)")


def model_basename(model: str) -> str:
    return model.rsplit("/", 1)[-1].lower()


def accepts_native_stop(spec: ModelSpec) -> bool:
    """Whether `stop=["\\n"]` may be sent: Anthropic rejects whitespace-only stop sequences and
    OpenAI reasoning models take no `stop` (NOTES: litellm, stop sequences)."""
    if spec.mode == "completion":
        return True
    model = spec.model.lower()
    provider = model.split("/", 1)[0] if "/" in model else ""
    if provider == "anthropic" or "claude" in model:
        return False
    return not _is_openai_reasoning(spec)


def _is_openai_reasoning(spec: ModelSpec) -> bool:
    model = spec.model.lower()
    provider = model.split("/", 1)[0] if "/" in model else ""
    reasoning = _REASONING_MODEL.match(model_basename(model)) is not None
    return provider in ("", "openai", "azure") and reasoning


def accepts_temperature(spec: ModelSpec, temperature: float) -> bool:
    """Whether `temperature` may be sent: OpenAI reasoning models (o-series, gpt-5) take only
    their default, 1, and litellm refuses any other value before sending the request."""
    if spec.mode == "completion" or temperature == 1:
        return True
    return not _is_openai_reasoning(spec)


def asks_logprobs(spec: ModelSpec, settings: CallSettings, *, streamed: bool = True) -> bool:
    """Log-probabilities of a streamed step are asked for in chat mode only: litellm 1.103.7
    drops them from streamed text completions (measured against the test server), so asking
    would be for nothing. A whole (non-streamed) text completion keeps them."""
    return settings.logprobs and (spec.mode == "chat" or not streamed)


# How many of the most likely tokens to ask for at each place, with log-probabilities (the
# token view shows them). `top_logprobs=1` was measured to yield log-probabilities from both
# llama.cpp servers, where 0 makes llama-server send none and leaving it out makes
# llama-cpp-python's chat endpoint send none (docs/NOTES.md, "Real servers"); a larger value
# asks for more entries of the same list (not measured on those servers). OpenAI takes up to
# 20 in chat and 5 on /v1/completions.
TOP_ALTERNATIVES = 5


def logprob_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """What asks for log-probabilities and each token's top alternatives: chat's
    `logprobs` + `top_logprobs`, a text completion's number `logprobs`."""
    if spec.mode == "chat":
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
    try:
        status = litellm_module().validate_environment(model=spec.model, api_base=spec.api_base)
    except Exception:
        return []
    return list(status.get("missing_keys") or [])


def _provider_of(spec: ModelSpec) -> str:
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


def auth_kwargs(spec: ModelSpec) -> dict[str, Any]:
    """Local OpenAI-compatible servers usually want no key, but the OpenAI SDK refuses to start
    without one: give it a placeholder when an api_base is set and the environment has none."""
    if spec.api_base is None:
        return {}
    variable = key_env_var(spec)
    if variable and os.environ.get(variable):
        return {}
    if _provider_of(spec) in ("openai", "text-completion-openai", "hosted_vllm", "azure"):
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
    if is_offline(spec):
        return True  # the offline providers answer `n` themselves
    return _provider_of(spec) in _TAKES_N
