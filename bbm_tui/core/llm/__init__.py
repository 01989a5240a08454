"""The one module that talks to litellm (DESIGN §3, §7).

litellm costs 3-5 s and ~175 MB to import, so it is imported lazily, on first use or by
`warm_up()` in the background, never at module level. Everything the rest of the code needs
comes out of here as plain dataclasses and `LLMError`s.

A generation step is always streamed and cut on the client at the first newline (after any
leading whitespace), then the stream is closed so that the provider stops generating; native
`stop=["\\n"]` is sent only where the provider accepts it. Retries are our own: bounded, with
backoff, honouring Retry-After (litellm is told `max_retries=0`).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import math
import os
import re
import threading
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bbm_tui.core.prompts.thoughts import LINE_BREAK, EchoStripper, asked_number
from bbm_tui.core.types import (
    DEFAULT_MODEL,
    DEFAULT_STEP_MAX_TOKENS,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    MAX_CALL_COST,
    MAX_CALL_TOKENS,
    MODES,
    CallRecord,
    CallSettings,
    Mode,
    ModelSpec,
    RetryPolicy,
)

__all__ = [
    "DEFAULT_MODEL", "DEFAULT_STEP_MAX_TOKENS", "DEFAULT_STEP_TIMEOUT_S", "DEFAULT_TIMEOUT_S",
    "MAX_CALL_COST", "MAX_CALL_TOKENS", "MODES", "CallRecord", "CallSettings", "Mode",
    "ModelSpec", "RetryPolicy",
]

# Past this many characters without a newline, a step is cut even if the server ignores
# max_tokens; a token is rarely more than a few characters.
CHARS_PER_TOKEN_CAP = 8


@dataclass
class StepText:
    """One generated step: the text up to the first newline, stripped."""

    text: str
    call: CallRecord
    truncated: bool = False


@dataclass
class Completion:
    """A whole (non-step) answer, e.g. a mistake finder's."""

    text: str
    call: CallRecord


@dataclass
class TextDelta:
    text: str


@dataclass
class Restart:
    """The call is being retried after some text had streamed: discard what was shown."""

    attempt: int
    reason: str
    delay_s: float


ErrorKind = Literal[
    "auth",
    "rate_limit",
    "connection",
    "timeout",
    "bad_request",
    "context_window",
    "not_found",
    "server",
    "stream",
    "replay",
    "unknown",
]
RETRYABLE: frozenset[str] = frozenset({"rate_limit", "connection", "timeout", "server", "stream"})
# Errors that no retry or other trace will cure: a batch stops and says why. A prompt too long
# for the model is not among them: it fails that one (long) trace, and the others go on.
STOPS_A_BATCH: frozenset[str] = frozenset({"auth", "bad_request", "not_found", "replay"})


class LLMError(Exception):
    """One failure kind, one clear message (safe to show: any key a provider echoed back in it
    is redacted)."""

    def __init__(self, kind: ErrorKind, message: str, retry_after_s: float | None = None) -> None:
        from bbm_tui.core.redact import redact

        message = redact(message)
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.retry_after_s = retry_after_s
        self.attempts = 1

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


# --------------------------------------------------------------------------- lazy litellm

_import_lock = threading.Lock()
_litellm: Any = None


def litellm_module() -> Any:
    """Import and configure litellm once; safe to call from any thread."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _import_lock:
        if _litellm is None:
            # Without this, litellm fetches its price map from the internet at import time.
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm

            # Banners on stdout, or log lines on stderr, would wreck a full-screen app; so
            # would pydantic's warnings about a provider's odd usage values.
            warnings.filterwarnings("ignore", category=UserWarning, module="pydantic")
            litellm.suppress_debug_info = True
            litellm.set_verbose = False
            _quiet_loggers()
            from bbm_tui.core.llm import http_guard

            http_guard.install(litellm)
            _register_offline_providers(litellm)
            _litellm = litellm
    return _litellm


def _quiet_loggers() -> None:
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx", "openai"):
        logger = logging.getLogger(name)
        for handler in list(logger.handlers):
            logger.removeHandler(handler)
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
        logger.setLevel(logging.ERROR)


def is_loaded() -> bool:
    return _litellm is not None


def warm_up() -> None:
    """Import litellm now (call from a background thread after the first frame)."""
    litellm_module()


def _register_offline_providers(litellm: Any) -> None:
    from bbm_tui.core.llm.offline import replay

    # One handler per provider: litellm hands a custom provider the model name without its
    # provider, and replay/ and simulated/ answer differently.
    providers = [
        {"provider": provider,
         "custom_handler": _make_offline_handler(litellm, replay.engine(), provider)}
        for provider in replay.PROVIDERS
    ]
    existing = [
        entry
        for entry in (litellm.custom_provider_map or [])
        if entry.get("provider") not in replay.PROVIDERS
    ]
    litellm.custom_provider_map = existing + providers
    # custom_provider_map is read when litellm sets up its provider list.
    from litellm.utils import custom_llm_setup

    custom_llm_setup()


def _make_offline_handler(litellm: Any, engine: Any, provider: str = "replay") -> Any:
    """A litellm CustomLLM over the offline replay engine (DESIGN §6)."""
    from litellm import CustomLLM
    from litellm.types.utils import ModelResponse

    from bbm_tui.core.llm.offline.replay import ReplayError, paced_pieces, tokens_of

    def respond(model: str, messages: list[dict], optional_params: dict) -> str:
        if "/" not in model:
            model = f"{provider}/{model}"
        try:
            text = engine.respond(model, messages, optional_params)
        except ReplayError as error:
            raise litellm.BadRequestError(
                message=str(error), model=model, llm_provider=model.split("/")[0]
            ) from None
        for stop in optional_params.get("stop") or []:
            if stop and stop in text:
                text = text[: text.index(stop)]
        return text

    def usage(messages: list[dict], text: str) -> dict[str, int]:
        prompt_tokens = sum(len(tokens_of(str(m.get("content", "")))) for m in messages)
        completion_tokens = len(tokens_of(text))
        return {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }

    def full_response(model: str, messages: list[dict], optional_params: dict) -> Any:
        text = respond(model, messages, optional_params)
        return ModelResponse(
            model=model,
            choices=[
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": text},
                }
            ],
            usage=usage(messages, text),
        )

    def chunk(text: str, finished: bool = False, usage_: dict | None = None) -> dict:
        return {
            "text": text,
            "is_finished": finished,
            "finish_reason": "stop" if finished else None,
            "index": 0,
            "usage": usage_,
            "tool_use": None,
        }

    class OfflineLLM(CustomLLM):
        def completion(self, *args: Any, **kwargs: Any) -> Any:
            return full_response(kwargs["model"], kwargs["messages"], kwargs["optional_params"])

        async def acompletion(self, *args: Any, **kwargs: Any) -> Any:
            return full_response(kwargs["model"], kwargs["messages"], kwargs["optional_params"])

        def streaming(self, *args: Any, **kwargs: Any) -> Any:
            model, messages = kwargs["model"], kwargs["messages"]
            text = respond(model, messages, kwargs["optional_params"])
            pace = engine.seconds_per_token()
            for piece in paced_pieces(text, pace):
                if pace:
                    time.sleep(pace)
                yield chunk(piece)
            yield chunk("", True, usage(messages, text))

        async def astreaming(self, *args: Any, **kwargs: Any) -> Any:
            model, messages = kwargs["model"], kwargs["messages"]
            text = respond(model, messages, kwargs["optional_params"])
            pace = engine.seconds_per_token()
            for piece in paced_pieces(text, pace):
                if pace:
                    await asyncio.sleep(pace)
                yield chunk(piece)
            yield chunk("", True, usage(messages, text))

    return OfflineLLM()


# --------------------------------------------------------------------------- capabilities

def is_offline(spec: ModelSpec) -> bool:
    """The bundled models that need no network and cost nothing."""
    from bbm_tui.core.llm.offline.replay import PROVIDERS

    return spec.model.split("/", 1)[0] in PROVIDERS


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


def asks_logprobs(spec: ModelSpec, settings: CallSettings) -> bool:
    """Log-probabilities are asked for in chat mode only: litellm 1.103.7 drops them from
    streamed text completions (measured against the test server), so asking would be for
    nothing, and the completions API wants a number there, not `true`."""
    return settings.logprobs and spec.mode == "chat"


def _sent_params(spec: ModelSpec, settings: CallSettings) -> dict[str, Any]:
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


def _auth_kwargs(spec: ModelSpec) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- errors

def _retry_after_seconds(error: BaseException) -> float | None:
    """Retry-After from the provider's response, in seconds, if it sent one."""
    response = getattr(error, "response", None)
    for headers in (
        getattr(error, "litellm_response_headers", None),
        getattr(response, "headers", None) if response is not None else None,
        getattr(error, "headers", None),
    ):
        if not headers:
            continue
        value = headers.get("retry-after") or headers.get("Retry-After")
        if value is not None:
            return _parse_retry_after(str(value))
    return None


def _parse_retry_after(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


_NOISE = re.compile(
    r"^(litellm\.\w+:\s*|\w*(Error|Exception)\s*[:-]\s*|OpenAIException\s*-\s*)+"
)


def _detail(error: BaseException) -> str:
    """The provider's own words, without litellm's stacked class-name prefixes or a Python
    traceback litellm pasted into them."""
    text = str(getattr(error, "message", None) or error)
    text = text.split("Traceback (most recent call last)")[0]
    return _short(_NOISE.sub("", text.strip()))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify_error(error: BaseException, spec: ModelSpec) -> LLMError:
    """One clear message per failure kind; authentication names the key's variable."""
    if isinstance(error, LLMError):
        return error
    where = f" at {spec.api_base}" if spec.api_base else ""
    if isinstance(error, asyncio.TimeoutError | TimeoutError):
        return LLMError("timeout", f"{spec.model}{where} did not answer in time")
    litellm = litellm_module()
    detail = _detail(error)
    if isinstance(error, litellm.AuthenticationError | litellm.PermissionDeniedError):
        variable = key_env_var(spec)
        if variable and not os.environ.get(variable):
            message = f"{spec.model}{where} needs an API key: set {variable}"
        elif variable:
            message = f"{spec.model}{where} rejected the API key in {variable}"
        else:
            message = f"{spec.model}{where} rejected the request's credentials"
        return LLMError("auth", message)
    if isinstance(error, litellm.RateLimitError):
        return LLMError(
            "rate_limit",
            f"{spec.model}{where} is rate-limiting requests",
            _retry_after_seconds(error),
        )
    if isinstance(error, litellm.ContextWindowExceededError):
        return LLMError("context_window", f"the prompt is too long for {spec.model}: {detail}")
    if isinstance(error, litellm.Timeout):
        return LLMError("timeout", f"{spec.model}{where} did not answer in time")
    if "replay/" in detail or "simulated/" in detail:
        return LLMError("replay", _replay_detail(detail))
    if isinstance(error, litellm.BadRequestError | litellm.UnsupportedParamsError):
        return LLMError("bad_request", f"{spec.model}{where} refused the request: {detail}")
    if isinstance(error, litellm.NotFoundError):
        return LLMError("not_found", f"{spec.model}{where} was not found: {detail}")
    exceptions = litellm.exceptions
    causes = _causes(error)
    guard = _guard_error(causes)
    if guard is not None:
        return LLMError("stream", f"the reply from {spec.model}{where} was not a model's "
                        f"answer: {guard}")
    if isinstance(error, exceptions.MidStreamFallbackError):
        if _timed_out(causes):  # the transport's read timeout, before our idle deadline
            return LLMError("timeout", f"{spec.model}{where} went silent mid-answer")
        if "delimiter" in detail or "JSON" in detail or "Expecting" in detail:
            return LLMError("stream", f"{spec.model}{where} sent a malformed stream chunk")
        # The provider's words here are the HTTP library's (class names and all): leave them.
        return LLMError("stream", f"the stream from {spec.model}{where} broke off mid-answer")
    if any(isinstance(cause, json.JSONDecodeError) for cause in causes):
        # litellm reports a 200 whose body is not JSON as a 500 it made up.
        return LLMError("server", f"{spec.model}{where} sent a malformed response")
    if _cut_off(causes):
        return LLMError("connection", f"the connection to {spec.model}{where} broke off "
                        "mid-answer")
    if isinstance(error, litellm.APIConnectionError) and not _has_status(error):
        return LLMError("connection", f"cannot reach {spec.model}{where}: {detail}")
    if isinstance(
        error,
        litellm.InternalServerError
        | litellm.ServiceUnavailableError
        | litellm.BadGatewayError
        | litellm.APIError
        | litellm.APIConnectionError,
    ):
        status = getattr(error, "status_code", None)
        if _looks_like_connection_failure(detail):
            return LLMError("connection", f"cannot reach {spec.model}{where}: {detail}")
        return LLMError(
            "server",
            f"{spec.model}{where} had a server error ({status or 'no status'}): {detail}",
            _retry_after_seconds(error),
        )
    return LLMError("unknown", f"{spec.model}{where} failed: {type(error).__name__}: {detail}")


def _guard_error(causes: list[BaseException]) -> str | None:
    """What the reply guard (http_guard) refused, if that is what failed."""
    from bbm_tui.core.llm import http_guard

    for cause in causes:
        if isinstance(cause, http_guard.ReplyTooLarge | http_guard.UnsupportedEncoding):
            return str(cause)
    return None


def _replay_detail(detail: str) -> str:
    for marker in ("replay/", "simulated/"):
        start = detail.find(marker)
        if start >= 0:
            return detail[start:]
    return detail


def _causes(error: BaseException) -> list[BaseException]:
    """The error and what it was raised from, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and len(chain) < 12 and all(current is not c for c in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _type_names(causes: list[BaseException]) -> set[str]:
    return {kind.__name__ for cause in causes for kind in type(cause).__mro__}


def _timed_out(causes: list[BaseException]) -> bool:
    names = _type_names(causes)
    return "TimeoutError" in names or "TimeoutException" in names


# A response that started and then stopped short (httpx and aiohttp names, not imported here).
_CUT_OFF = frozenset({"ReadError", "RemoteProtocolError", "ClientPayloadError",
                      "ContentLengthError", "TransferEncodingError"})


def _cut_off(causes: list[BaseException]) -> bool:
    return bool(_type_names(causes) & _CUT_OFF)


def _has_status(error: BaseException) -> bool:
    status = getattr(error, "status_code", None)
    return isinstance(status, int) and status >= 400 and status != 500


def _looks_like_connection_failure(detail: str) -> bool:
    lowered = detail.lower()
    return any(
        marker in lowered
        for marker in ("connection refused", "connect call failed", "connection error",
                       "cannot connect", "name or service not known", "connecterror")
    )


# --------------------------------------------------------------------------- retries

async def _with_retries(
    spec: ModelSpec,
    policy: RetryPolicy,
    attempt_once: Callable[[int], Awaitable[Any]],
    on_retry: Callable[[int, LLMError, float], Awaitable[None]] | None = None,
) -> Any:
    for attempt in range(1, policy.attempts + 1):
        try:
            return await attempt_once(attempt)
        except asyncio.CancelledError:
            raise
        except Exception as raw:
            error = classify_error(raw, spec)
            error.attempts = attempt
            if not error.retryable or attempt == policy.attempts:
                if attempt > 1:
                    error.message = f"{error.message} (after {attempt} attempts)"
                    error.args = (error.message,)
                raise error from None
            delay = policy.delay(attempt, error.retry_after_s)
            if on_retry is not None:
                await on_retry(attempt + 1, error, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- one step

@dataclass
class _StreamState:
    pieces: list[str] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    chunks: int = 0
    chars: int = 0
    started: bool = False
    cut: bool = False
    truncated: bool = False
    finish_reason: str | None = None
    usage: Any = None
    leading_newline: bool = False
    usage_lost: bool = False  # the usage chunk after the answer could not be read
    time_cut: bool = False  # cut at the step's wall-clock limit
    # Text completion: litellm's chat stream wrapper under the text one (False: none found).
    inner_stream: Any = None


async def stream_step(
    spec: ModelSpec, prompt: str, settings: CallSettings | None = None
) -> AsyncIterator[TextDelta | Restart | StepText]:
    """Stream one step: yields TextDelta as text arrives (after echo stripping), Restart when a
    retry discards shown text, and finally one StepText. Raises LLMError."""
    settings = settings or CallSettings()
    queue: asyncio.Queue[TextDelta | Restart | StepText | BaseException] = asyncio.Queue()

    async def on_retry(attempt: int, error: LLMError, delay: float) -> None:
        await queue.put(Restart(attempt, error.message, delay))

    async def run() -> None:
        try:
            result = await _with_retries(
                spec,
                settings.retry,
                lambda attempt: _stream_step_once(spec, prompt, settings, attempt, queue),
                on_retry,
            )
            await queue.put(result)
        except BaseException as error:  # handed to the consumer, cancellation included
            await queue.put(error)

    task = asyncio.ensure_future(run())
    try:
        while True:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if isinstance(item, StepText):
                return
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task


def _call_kwargs(spec: ModelSpec, settings: CallSettings) -> dict[str, Any]:
    """What every call sends: our own retries only (litellm's off), the timeout, the key
    placeholder for local servers, and the settings the model accepts."""
    kwargs: dict[str, Any] = {
        "model": spec.model,
        "timeout": settings.timeout_s,
        "max_retries": 0,
        **_auth_kwargs(spec),
    }
    if accepts_temperature(spec, settings.temperature):
        kwargs["temperature"] = settings.temperature
    if spec.api_base:
        kwargs["api_base"] = spec.api_base
    if settings.max_tokens is not None:
        kwargs["max_tokens"] = settings.max_tokens
    return kwargs


async def _stream_step_once(
    spec: ModelSpec,
    prompt: str,
    settings: CallSettings,
    attempt: int,
    queue: asyncio.Queue,
) -> StepText:
    litellm = litellm_module()
    native_stop = accepts_native_stop(spec)
    kwargs = _call_kwargs(spec, settings)
    kwargs["stream"] = True
    if native_stop:
        kwargs["stop"] = ["\n"]
    if asks_logprobs(spec, settings):
        kwargs["logprobs"] = True
    started_at = time.perf_counter()
    if spec.mode == "chat":
        kwargs["messages"] = [{"role": "user", "content": prompt}]
        kwargs["stream_options"] = {"include_usage": True}
        stream = await litellm.acompletion(**kwargs)
    else:
        kwargs["prompt"] = prompt
        stream = await litellm.atext_completion(**kwargs)
    state = _StreamState()
    stripper = EchoStripper()
    number = asked_number(prompt)
    char_cap = (settings.max_tokens or DEFAULT_STEP_MAX_TOKENS) * CHARS_PER_TOKEN_CAP
    loop = asyncio.get_running_loop()
    step_deadline = loop.time() + settings.step_timeout_s
    try:
        await _read_step(stream, state, stripper, number, char_cap, settings, spec.mode,
                         queue, step_deadline)
    except TimeoutError:
        if not (state.pieces and loop.time() >= step_deadline - 0.01):
            raise
        # The step's wall-clock limit: keep what came, cut like a token-limit cut.
        state.truncated = state.time_cut = True
    finally:
        await _close_stream(stream)
    tail = stripper.finish()
    if tail:
        state.pieces.append(tail)
        await queue.put(TextDelta(tail))
    latency = time.perf_counter() - started_at
    if state.finish_reason == "length" and not state.cut:
        state.truncated = True
    text = "".join(state.pieces).strip()
    if not (state.cut or state.truncated):
        _check_the_stream_ended_well(stream, state, text, spec)
    call = _call_record(spec, settings, prompt, state, latency, attempt, native_stop, text)
    return StepText(text=text, call=call, truncated=state.truncated)


async def _read_step(
    stream: Any,
    state: _StreamState,
    stripper: EchoStripper,
    number: int | None,
    char_cap: int,
    settings: CallSettings,
    mode: Mode,
    queue: asyncio.Queue,
    step_deadline: float,
) -> None:
    """Read chunks until the step's first line break, its token limit, or the stream's end.
    Raises TimeoutError for a silence (idle) or the step's wall-clock limit."""
    loop = asyncio.get_running_loop()
    iterator = stream.__aiter__()
    # One idle deadline pushed on after every chunk, rather than `asyncio.wait_for` per
    # chunk: that wraps each chunk in a task (two more turns of the event loop, each
    # polling the socket), which made a step ~10% slower than litellm alone
    # (bench/step_overhead.py). The only suspension point in this block is `__anext__`.
    # Until the first text arrives the wait is the call's timeout, not the idle one: a
    # model may think a long while before it writes (reasoning models send nothing then).
    wait_s = max(settings.timeout_s, settings.idle_timeout_s)
    async with asyncio.timeout(wait_s) as idle:
        while True:
            idle.reschedule(min(loop.time() + wait_s, step_deadline))
            try:
                chunk = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except Exception:
                if state.finish_reason is None:
                    raise
                # The provider had finished the answer; what failed after it (a usage chunk
                # litellm could not parse: 1e23 tokens, NaN, a string) costs the accounting
                # only, not the step.
                state.usage_lost = True
                return
            if mode == "completion" and state.inner_stream is None:
                # The chat stream wrapper under a text-completion one is reachable only while
                # the generators run; it knows whether the provider sent a finish reason.
                state.inner_stream = next(
                    (wrapper for wrapper in _text_completion_closables(stream)
                     if hasattr(wrapper, "received_finish_reason")), False)
            text = _absorb_chunk(chunk, state, mode)
            if text is None:
                continue
            wait_s = settings.idle_timeout_s
            if settings.max_tokens is not None and state.chars > char_cap:
                # One huge chunk: keep no more than the cap, as many small ones would.
                text = text[: max(0, len(text) - (state.chars - char_cap))]
                state.chars = char_cap
            released = stripper.feed(text)
            if state.leading_newline and stripper.label not in (None, number):
                # An empty line, then the next thought's label: this thought is empty (the
                # provider ignored or was not sent `stop`), and what follows is not ours.
                state.cut = True
                return
            if released:
                state.pieces.append(released)
                await queue.put(TextDelta(released))
            if state.cut:
                return
            if settings.max_tokens is not None and (
                state.chunks >= settings.max_tokens or state.chars >= char_cap
            ):
                state.truncated = True
                return


def _check_the_stream_ended_well(stream: Any, state: _StreamState, text: str,
                                 spec: ModelSpec) -> None:
    """A stream that ended with no line break must have been ended by the provider (its own
    finish reason). Without one it is a provider fault, retried: no choice and no text at
    all (an HTML page, an event stream that is not one, `[DONE]` first) is not a model's
    answer; text with no end is a stream cut short (llama-cpp-python ends an interrupted
    generation with `[DONE]` and no finish reason, and litellm then reports "stop")."""
    if _provider_finish_reason(stream, state) is not None:
        return
    where = f" at {spec.api_base}" if spec.api_base else ""
    if not text and not state.chunks:
        raise LLMError("stream", f"the reply from {spec.model}{where} was not a model's answer "
                       "(no choice, no text and no finish reason)")
    raise LLMError("stream", f"the stream from {spec.model}{where} ended mid-step without a "
                   "finish reason (interrupted)")


def _provider_finish_reason(stream: Any, state: _StreamState) -> str | None:
    """The finish reason the provider itself sent. litellm's stream wrapper makes up "stop"
    for a stream that ended without one; it keeps what it received in
    `received_finish_reason` (litellm 1.103.7; tests/test_hostile_server.py fails if that
    changes). Text-completion streams wrap a chat stream wrapper (`state.inner_stream`)."""
    for wrapper in (stream, state.inner_stream):
        if wrapper and hasattr(wrapper, "received_finish_reason"):
            return wrapper.received_finish_reason
    return state.finish_reason


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def unicode_text(text: str) -> str:
    """Model text as valid Unicode: a lone UTF-16 surrogate (a JSON "\\ud800" with no
    partner) becomes U+FFFD, as an invalid UTF-8 byte already does on its way in, so that the
    step can be saved, shown and exported like any other."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub("\ufffd", text)


def _absorb_chunk(chunk: Any, state: _StreamState, mode: Mode) -> str | None:
    """Take what a chunk carries into the state; return the text to keep (cut at the first
    newline after leading whitespace), or None when there is none."""
    usage = getattr(chunk, "usage", None)
    if usage is not None and getattr(usage, "total_tokens", None):
        state.usage = usage
    choices = getattr(chunk, "choices", None) or []
    if not choices:
        return None
    choice = choices[0]
    if getattr(choice, "finish_reason", None):
        state.finish_reason = choice.finish_reason
    if mode == "chat":
        delta = getattr(choice, "delta", None)
        text = getattr(delta, "content", None) if delta is not None else None
        _absorb_logprobs(getattr(choice, "logprobs", None), state)
    else:
        text = getattr(choice, "text", None)
    if not text:
        return None
    text = unicode_text(text)
    state.chunks += 1
    if not state.started:
        stripped = text.lstrip()
        if LINE_BREAK.search(text[: len(text) - len(stripped)]):
            state.leading_newline = True
        text = stripped
        if not text:
            return None
        state.started = True
    line_break = LINE_BREAK.search(text)
    if line_break:
        text = text[: line_break.start()]
        state.cut = True
    state.chars += len(text)
    return text


def _absorb_logprobs(logprobs: Any, state: _StreamState) -> None:
    if logprobs is None or state.cut:
        return
    content = getattr(logprobs, "content", None)
    if content is None and isinstance(logprobs, dict):
        content = logprobs.get("content")
    for token in content or []:
        value = getattr(token, "logprob", None)
        if value is None and isinstance(token, dict):
            value = token.get("logprob")
        if value is not None:
            state.logprobs.append(float(value))


async def _close_stream(stream: Any) -> None:
    # The step is already decided; a failure to close the connection changes nothing.
    close = getattr(stream, "aclose", None)
    closables = [stream] if close is not None else _text_completion_closables(stream)
    for closable in closables:
        with contextlib.suppress(Exception):
            await closable.aclose()


def _text_completion_closables(stream: Any) -> list[Any]:
    """litellm's TextCompletionStreamWrapper (1.103.7) has no aclose (NOTES): under it is a
    chain of async generators that ends in the CustomStreamWrapper holding the HTTP response.
    Walk the chain through the generators' frames; return what to close, innermost first.
    On another litellm, where the chain differs, this finds less and closes what it found."""
    found: list[Any] = []
    current = getattr(stream, "completion_stream", None)
    while current is not None and hasattr(current, "aclose") and len(found) < 8:
        found.append(current)
        frame = getattr(current, "ag_frame", None)
        if frame is None:
            break
        names = frame.f_locals
        current = next(
            (names[name] for name in ("streamwrapper", "response")
             if hasattr(names.get(name), "aclose")),
            None,
        )
    return found[::-1]


def _call_record(
    spec: ModelSpec,
    settings: CallSettings,
    prompt: str,
    state: _StreamState,
    latency: float,
    attempt: int,
    native_stop: bool,
    text: str,
) -> CallRecord:
    prompt_tokens = completion_tokens = None
    if state.usage is not None:
        prompt_tokens = sane_tokens(getattr(state.usage, "prompt_tokens", None))
        completion_tokens = sane_tokens(getattr(state.usage, "completion_tokens", None))
    if completion_tokens is None and state.chunks and not state.usage_lost:
        # Streams closed early carry no usage: one chunk is one token on OpenAI-style servers.
        completion_tokens = state.chunks
    finish_reason = state.finish_reason or ("newline" if state.cut else None)
    if state.time_cut:
        finish_reason = "time_limit"
    return CallRecord(
        model=spec.model,
        params=_sent_params(spec, settings),
        latency_s=latency,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=_cost(spec, prompt_tokens, completion_tokens),
        logprobs=state.logprobs or None,
        finish_reason=finish_reason,
        attempts=attempt,
        native_stop=native_stop,
    )


def sane_tokens(value: Any) -> int | None:
    """A token count as a provider should send it, else None (unknown): whole, 0 or more,
    at most MAX_CALL_TOKENS. Never a bool, a float, a string, NaN or 2**64."""
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if 0 <= value <= MAX_CALL_TOKENS else None


def sane_cost(value: Any) -> float | None:
    """A call's cost in dollars, else None (unknown): finite, 0 or more, at most
    MAX_CALL_COST."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    cost = float(value)
    return cost if math.isfinite(cost) and 0.0 <= cost <= MAX_CALL_COST else None


def _cost(
    spec: ModelSpec, prompt_tokens: int | None, completion_tokens: int | None
) -> float | None:
    if is_offline(spec):
        return 0.0
    if prompt_tokens is None or completion_tokens is None or spec.model in _UNPRICED:
        return None
    try:
        prompt_cost, completion_cost = litellm_module().cost_per_token(
            model=spec.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
        )
    except Exception:
        # A model litellm has no price for; asking again costs ~0.5 ms a call for nothing.
        _UNPRICED.add(spec.model)
        return None
    return sane_cost(float(prompt_cost) + float(completion_cost))


_UNPRICED: set[str] = set()


# --------------------------------------------------------------------------- whole answers

async def complete(
    spec: ModelSpec,
    messages: Sequence[dict[str, str]],
    settings: CallSettings | None = None,
) -> Completion:
    """One whole answer (no stop), e.g. for the mistake finders. Raises LLMError."""
    settings = settings or CallSettings(max_tokens=None)

    async def once(attempt: int) -> Completion:
        return await _complete_once(spec, list(messages), settings, attempt)

    return await _with_retries(spec, settings.retry, once)


async def _complete_once(
    spec: ModelSpec, messages: list[dict[str, str]], settings: CallSettings, attempt: int
) -> Completion:
    litellm = litellm_module()
    kwargs = _call_kwargs(spec, settings)
    started_at = time.perf_counter()
    if spec.mode == "chat":
        response = await asyncio.wait_for(
            litellm.acompletion(messages=messages, **kwargs), settings.timeout_s + 5
        )
        choice = response.choices[0]
        text = choice.message.content or ""
    else:
        prompt = "\n\n".join(message["content"] for message in messages)
        response = await asyncio.wait_for(
            litellm.atext_completion(prompt=prompt, **kwargs), settings.timeout_s + 5
        )
        choice = response.choices[0]
        text = choice.text or ""
    text = unicode_text(text)
    latency = time.perf_counter() - started_at
    usage = getattr(response, "usage", None)
    prompt_tokens = sane_tokens(getattr(usage, "prompt_tokens", None)) if usage else None
    completion_tokens = sane_tokens(getattr(usage, "completion_tokens", None)) if usage else None
    call = CallRecord(
        model=spec.model,
        params=_sent_params(spec, settings),
        latency_s=latency,
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost=_cost(spec, prompt_tokens, completion_tokens),
        finish_reason=getattr(choice, "finish_reason", None),
        attempts=attempt,
    )
    return Completion(text=text, call=call)


def call_to_json(call: CallRecord) -> str:
    return json.dumps(call.__dict__)
