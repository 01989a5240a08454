"""The model-call boundary's failures: one `LLMError` per kind, with one clear message
(redacted), and our own bounded retries with backoff that honour Retry-After (litellm's are
off: `max_retries=0`)."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from bbm_tui.core.errors import UserError
from bbm_tui.core.llm.capabilities import key_env_var, missing_key
from bbm_tui.core.llm.turns import call_turn
from bbm_tui.core.types import ModelSpec, RetryPolicy

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


class LLMError(UserError):
    """One failure kind, one clear message (safe to show: any key a provider echoed back in it
    is redacted)."""

    title = "The model call failed"

    def __init__(self, kind: ErrorKind, message: str, retry_after_s: float | None = None) -> None:
        from bbm_tui.core.redact import redact

        super().__init__(redact(message))
        self.kind = kind
        self.retry_after_s = retry_after_s
        self.attempts = 1

    @property
    def retryable(self) -> bool:
        return self.kind in RETRYABLE


class StreamInterrupted(LLMError):
    """A stream that ended without the provider's finish reason: cut short (by the server, or
    by a proxy or the network on the way)."""

    def __init__(self, message: str) -> None:
        super().__init__("stream", message)


def _retry_after_seconds(error: BaseException, detail: str = "") -> float | None:
    """How long the provider asked us to wait, in seconds, if it said: Retry-After in its
    response's headers, or Gemini's `google.rpc.RetryInfo` (`"retryDelay": "7s"`) in its
    error body."""
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
            return parse_retry_after(str(value))
    delay = _RETRY_DELAY.search(str(getattr(error, "message", None) or error) + detail)
    return float(delay.group(1)) if delay else None


# Google's RetryInfo: a Duration in its JSON form, seconds with an "s" ("7s", "0.5s").
_RETRY_DELAY = re.compile(r'"retryDelay"\s*:\s*"(\d+(?:\.\d+)?)s"')


def parse_retry_after(value: str) -> float | None:
    """Retry-After's seconds (a number, or an HTTP date); None: neither."""
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
# litellm's advice to the programmer, appended to some messages.
_HANDLE_WITH = re.compile(r"\.?\s*Handle with `litellm\.\w+`\.?")


def _detail(error: BaseException) -> str:
    """The provider's own words, without litellm's stacked class-name prefixes or a Python
    traceback litellm pasted into them; an error body litellm quoted (as JSON, or as the
    repr of its bytes: b'{"type": "error", ...}') is read for its message."""
    return _short(provider_words(_body_text(error)))


# litellm's Router appends its own state to a deployment's error ("Received Model Group=tiny
# Available Model Group Fallbacks=None"), and aiohttp names the TLS context it would have used
# ("ssl:<ssl.SSLContext object at 0x7f…>", "ssl:default"): neither says anything to a person.
_ROUTER_STATE = re.compile(r"\s*Received Model Group=.*$", re.DOTALL)
_SSL_CONTEXT = re.compile(r"\s*ssl:(<ssl\.SSLContext object at 0x[0-9a-fA-F]+>|default)")


def _body_text(error: BaseException) -> str:
    text = str(getattr(error, "message", None) or error)
    text = text.split("Traceback (most recent call last)")[0]
    text = _SSL_CONTEXT.sub("", _ROUTER_STATE.sub("", text))
    text = re.sub(r"\.\.+$", ".", text.strip())  # "Connection error.." once the tail is gone
    return _HANDLE_WITH.sub("", _NOISE.sub("", text.strip()))


def provider_words(text: str) -> str:
    """What a provider's error body says, where `text` holds one: Anthropic's and OpenAI's
    `error.message`, Gemini's `error.message`, Ollama's `error`; else `text` itself, with
    any bytes repr made text."""
    body = _error_body(text)
    if body is None:
        return text
    error = body.get("error", body)
    if isinstance(error, str):
        return error
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return error["message"]
    return text


def _error_body(text: str) -> dict | None:
    """The JSON object in `text` (as text, or as the repr of bytes), if there is one."""
    text = text.strip()
    if re.match(r"^b(['\"]).*\1$", text, re.DOTALL):
        try:
            text = ast.literal_eval(text).decode("utf-8", "replace")
        except (ValueError, SyntaxError, UnicodeError, AttributeError):
            return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        body = json.loads(text[start:])
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def _status(error: BaseException) -> int | None:
    """The provider's real status: litellm reports some as another (Anthropic's 529
    "overloaded" arrives as a 500), so the error body's own word counts first."""
    body = _error_body(_body_text(error)) or {}
    inner = body.get("error")
    if not isinstance(inner, dict):
        inner = {}
    if inner.get("type") == "overloaded_error":
        return 529
    code = inner.get("code")
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    status = getattr(error, "status_code", None)
    return status if isinstance(status, int) else None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def classify_error(error: BaseException, spec: ModelSpec, *,
                   whole_answer: bool = False) -> LLMError:
    """One clear message per failure kind; authentication names the key's variable. A whole
    answer's stream (`whole_answer`) that breaks is told as a whole answer's body was: cut
    off (a connection fault) or malformed (a server fault), not as a step's stream."""
    if isinstance(error, LLMError):
        return error
    where = f" at {spec.api_base}" if spec.api_base else ""
    if isinstance(error, asyncio.TimeoutError | TimeoutError):
        return LLMError("timeout", f"{spec.model}{where} did not answer in time")
    from bbm_tui.core.llm.loader import litellm_module

    litellm = litellm_module()
    error = _answered_with_an_error(error, litellm)
    detail = _detail(error)
    if _is_auth_failure(error, detail, litellm):
        return _auth_error(spec, where)
    routed = _router_error(error, spec)
    if routed is not None:
        return routed
    if isinstance(error, litellm.RateLimitError):
        return LLMError(
            "rate_limit",
            f"{spec.model}{where} is rate-limiting requests",
            _retry_after_seconds(error, _body_text(error)),
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
    if _credentials_in_url(causes):
        from bbm_tui.core.llm.capabilities import key_env_var

        variable = key_env_var(spec)
        return LLMError("bad_request", f"{spec.model}{where}: the api base holds a user name "
                        "and password, which the OpenAI client will not send beside its own "
                        "Authorization header; leave them out of the api base"
                        + (f" (give the key in {variable})" if variable else ""))
    guard = _guard_error(causes)
    if guard is not None:
        return LLMError("stream", f"the reply from {spec.model}{where} was not a model's "
                        f"answer: {guard}")
    if isinstance(error, exceptions.MidStreamFallbackError):
        if _timed_out(causes):  # the transport's read timeout, before our idle deadline
            return LLMError("timeout", f"{spec.model}{where} went silent mid-answer")
        if "delimiter" in detail or "JSON" in detail or "Expecting" in detail:
            if whole_answer:
                return LLMError("server", f"{spec.model}{where} sent a malformed response")
            return LLMError("stream", f"{spec.model}{where} sent a malformed stream chunk")
        # The provider's words here are the HTTP library's (class names and all): leave them.
        if whole_answer:
            return LLMError("connection", f"the connection to {spec.model}{where} broke off "
                            "mid-answer")
        return LLMError("stream", f"the stream from {spec.model}{where} broke off mid-answer")
    not_an_answer = _not_an_answer(causes, detail)
    if not_an_answer is not None:
        return LLMError("server", f"the reply from {spec.model}{where} was not a model's "
                        f"answer ({not_an_answer})")
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
        status = _status(error)
        if _looks_like_connection_failure(detail):
            return LLMError("connection", f"cannot reach {spec.model}{where}: {detail}")
        what = "is overloaded" if status == 529 else "had a server error"
        return LLMError(
            "server",
            f"{spec.model}{where} {what} ({status or 'no status'}): {detail}",
            _retry_after_seconds(error),
        )
    return LLMError("unknown", f"{spec.model}{where} failed: {type(error).__name__}: {detail}")


def _answered_with_an_error(error: BaseException, litellm: Any) -> BaseException:
    """The provider's own error where litellm reports it as a broken stream: a streamed call
    (Gemini's) whose reply was an HTTP error, found only when the stream was first read,
    comes as a MidStreamFallbackError before the first chunk around the real one (a 429, a
    401, a 503), which is what must be classified and retried (or not)."""
    if not isinstance(error, litellm.exceptions.MidStreamFallbackError):
        return error
    original = getattr(error, "original_exception", None)
    if not isinstance(original, BaseException):
        return error
    status = getattr(original, "status_code", None)
    if (getattr(error, "is_pre_first_chunk", False) and isinstance(status, int)
            and 400 <= status <= 599
            and isinstance(original, litellm.exceptions.APIError | litellm.RateLimitError
                           | litellm.AuthenticationError | litellm.BadRequestError
                           | litellm.ServiceUnavailableError | litellm.NotFoundError)):
        return original
    return error


# What litellm and the OpenAI client say when a key is missing or refused, whatever class
# they raise it as: the OpenAI client's "Missing credentials" is a 500, a missing Gemini key
# an APIConnectionError, Gemini's refused key a 400 with the reason API_KEY_INVALID.
_AUTH_WORDS = ("Missing credentials", "API_KEY_INVALID", "API key not valid",
               "Missing Gemini API key", "Missing Anthropic API Key")


def _is_auth_failure(error: BaseException, detail: str, litellm: Any) -> bool:
    if isinstance(error, litellm.AuthenticationError | litellm.PermissionDeniedError):
        return True
    text = f"{detail} {getattr(error, 'message', '')}"
    return any(words in text for words in _AUTH_WORDS)


def _auth_error(spec: ModelSpec, where: str) -> LLMError:
    from bbm_tui.core.llm.router import key_sources

    sources = key_sources(spec)
    if sources:  # behind a router: the file says where each deployment's key comes from
        unset = [source for source in sources
                 if source.isidentifier() and not os.environ.get(source)]
        if unset:
            return LLMError("auth", f"{spec.model} in {spec.router} needs an API key: set "
                            f"{', '.join(unset)}")
        return LLMError("auth", f"{spec.model} in {spec.router} rejected the API key in "
                        f"{', '.join(sources)}")
    missing = missing_key(spec)
    variable = missing or key_env_var(spec)
    if missing or (variable and not os.environ.get(variable)):
        message = f"{spec.model}{where} needs an API key: set {variable}"
    elif variable:
        message = f"{spec.model}{where} rejected the API key in {variable}"
    else:
        message = f"{spec.model}{where} rejected the request's credentials"
    return LLMError("auth", message)


def _router_error(error: BaseException, spec: ModelSpec) -> LLMError | None:
    """What a router file or litellm's Router said: a broken file stops the batch; every
    deployment of the group cooling down is a wait (the Router's cooldown) and a retry."""
    from bbm_tui.core.llm.loader import router_rate_limit_errors
    from bbm_tui.core.llm.router import RouterFileError

    if isinstance(error, RouterFileError):
        return LLMError("not_found", str(error))
    if isinstance(error, router_rate_limit_errors()):
        cooldown = getattr(error, "cooldown_time", None)
        return LLMError("rate_limit", f"every deployment of {spec.model} in {spec.router} is "
                        "cooling down after failures",
                        float(cooldown) if isinstance(cooldown, int | float) else None)
    return None


def key_check(spec: ModelSpec) -> LLMError | None:
    """The error a call would end in, found before it is made: the provider needs a key and
    its variable is not set (litellm says which; no request goes out)."""
    from bbm_tui.core.llm.router import check_group

    unroutable = check_group(spec)
    if unroutable is not None:
        return LLMError("not_found", unroutable)
    variable = missing_key(spec)
    if variable is None:
        return None
    where = f" at {spec.api_base}" if spec.api_base else ""
    return LLMError("auth", f"{spec.model}{where} needs an API key: set {variable}")


def _guard_error(causes: list[BaseException]) -> str | None:
    """What the reply guard (http_guard) refused, if that is what failed."""
    from bbm_tui.core.llm import http_guard

    for cause in causes:
        if isinstance(cause, http_guard.ReplyTooLarge | http_guard.UnsupportedEncoding
                      | http_guard.NotAnAnswer):
            return str(cause)
    return None


def _credentials_in_url(causes: list[BaseException]) -> bool:
    """The OpenAI client (aiohttp under it) refuses an api base with a user and password in
    it, as its own Authorization header carries the key; litellm reports a connection error
    (docs/NOTES.md)."""
    return any(isinstance(cause, ValueError) and "credentials encoded in URL" in str(cause)
               for cause in causes)


def _not_an_answer(causes: list[BaseException], detail: str) -> str | None:
    """Why a whole answer with status 200 was not one, in litellm 1.103.7's words: a body
    that is not JSON (an HTML page) is handed to litellm as text, which it reports (chat) or
    fails on (text completion); a JSON object with no `choices` list. The tests in
    tests/test_hostile_server.py fail if litellm changes these."""
    if "Empty or invalid response from LLM endpoint" in detail or any(
        isinstance(cause, AttributeError) and str(cause).startswith("'str' object has no")
        for cause in causes
    ):
        return "not JSON"
    if "provider returned 'choices' that is not a list" in detail:
        return "no choice"
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


async def with_retries(
    spec: ModelSpec,
    policy: RetryPolicy,
    attempt_once: Callable[[int], Awaitable[Any]],
    on_retry: Callable[[int, LLMError, float], Awaitable[None]] | None = None,
) -> Any:
    missing = key_check(spec)
    if missing is not None:
        raise missing
    for attempt in range(1, policy.attempts + 1):
        try:
            async with call_turn(spec) as call:
                try:
                    return await attempt_once(attempt)
                except StreamInterrupted:
                    if call.overlapped():
                        # Cut short by our own other call, most likely (turns.py): not a
                        # failure of the server's; from now on the calls take turns.
                        call.take_turns_from_now_on()
                    raise
        except asyncio.CancelledError:
            raise
        except Exception as raw:
            error = classify_error(raw, spec)
            error.attempts = attempt
            if not error.retryable or attempt == policy.attempts:
                if attempt > 1:
                    error.args = (f"{error.message} (after {attempt} attempts)",)
                raise error from None
            delay = policy.delay(attempt, error.retry_after_s)
            if on_retry is not None:
                await on_retry(attempt + 1, error, delay)
            await asyncio.sleep(delay)
    raise AssertionError("unreachable")
