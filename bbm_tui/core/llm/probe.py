""""Test connection" in the model dialog: one tiny call that says whether the model answers,
and how fast, before a session depends on it."""

from __future__ import annotations

from dataclasses import dataclass

from bbm_tui.core.llm.capabilities import is_offline
from bbm_tui.core.llm.transport import complete
from bbm_tui.core.types import CallSettings, ModelSpec, RetryPolicy

# A short request any chat or base model can answer in a token or two.
PROBE_MESSAGES = [{"role": "user", "content": "Reply with the single word OK."}]
PROBE_MAX_TOKENS = 5


@dataclass(frozen=True)
class ConnectionCheck:
    """The model answered: after `latency_s` seconds, with `reply`; an offline model answers
    without any call (`offline`)."""

    latency_s: float
    reply: str
    offline: bool = False


async def check_connection(spec: ModelSpec, timeout_s: float) -> ConnectionCheck:
    """One call of at most a few tokens, not retried (a retry would hide the latency and the
    error the person asked about). Raises LLMError with what went wrong."""
    if is_offline(spec):
        return ConnectionCheck(0.0, "", offline=True)
    settings = CallSettings(temperature=0.0, max_tokens=PROBE_MAX_TOKENS, timeout_s=timeout_s,
                            retry=RetryPolicy(attempts=1))
    # A few tokens: one reply, not a stream (a slow model's long answers are the finders').
    answer = await complete(spec, PROBE_MESSAGES, settings, streamed=False)
    return ConnectionCheck(answer.call.latency_s, answer.text)
