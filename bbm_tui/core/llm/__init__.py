"""The model-call boundary (docs/DESIGN.md §3, §7): the only package that imports litellm.

Everything the rest of the code needs comes out of here as plain dataclasses and `LLMError`s:

- transport.py: one generation step, streamed and cut at its first line break; one whole
  answer (the finders'), streamed and read to its end;
- sampling.py: n candidates for one step, with their token log-probabilities (backtracking);
- errors.py: one failure kind per `LLMError`, and our own bounded retries;
- capabilities.py: what each provider accepts (native stop, temperature, log-probabilities);
- caching.py: prompts marked for the providers' prompt caches, and their minimums;
- usage.py, usage_events.py: a call's usage as the provider counted it, and its price;
- probe.py: "test connection", one tiny call;
- loader.py: litellm imported lazily, once, with the offline providers registered;
- http_guard.py: every reply body bounded and made valid UTF-8;
- one_call.py: one streamed call for many steps (one-call mode, opt-in);
- thinking.py: one thinking call (reasoning, then the answer) read back as one stream of
  events, whatever the provider's wire;
- router.py: many servers behind one model name (litellm's Router, from a file);
- turns.py: calls to a server that serves one request at a time take turns;
- offline/: `replay/bbm` and `simulated/rm-X`, served as a litellm custom provider.
"""

from __future__ import annotations

from bbm_tui.core.llm.caching import below_caching_minimum, caching_minimum, marks_cache
from bbm_tui.core.llm.capabilities import (
    accepts_native_stop,
    accepts_temperature,
    asks_logprobs,
    gives_logprobs,
    is_offline,
    key_env_var,
    key_env_vars,
    model_basename,
)
from bbm_tui.core.llm.errors import (
    RETRYABLE,
    STOPS_A_BATCH,
    ErrorKind,
    LLMError,
    classify_error,
    key_check,
)
from bbm_tui.core.llm.loader import is_loaded, litellm_module, warm_up
from bbm_tui.core.llm.one_call import CallStopped, LineStarted, stream_steps
from bbm_tui.core.llm.probe import ConnectionCheck, check_connection
from bbm_tui.core.llm.records import (
    CHARS_PER_TOKEN_CAP,
    Completion,
    Restart,
    StepText,
    TextDelta,
)
from bbm_tui.core.llm.refusals import generation_refusal, offline_refusal
from bbm_tui.core.llm.router import (
    DeploymentPin,
    RouterFile,
    RouterFileError,
    check_group,
    read_router_file,
)
from bbm_tui.core.llm.sampling import Arrived, Candidate, Samples, sample_steps
from bbm_tui.core.llm.thinking import (
    AnswerDelta,
    ReasoningDelta,
    RedactedReasoning,
    ThinkingDone,
    ThinkingEvent,
    ThinkingSettings,
    stream_thinking,
    thinking_refusal,
)
from bbm_tui.core.llm.transport import (
    call_to_json,
    complete,
    complete_events,
    stream_step,
    unicode_text,
)
from bbm_tui.core.llm.turns import one_at_a_time_endpoints
from bbm_tui.core.records import CallRecord
from bbm_tui.core.types import (
    DEFAULT_MODEL,
    DEFAULT_STEP_MAX_TOKENS,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    MAX_CALL_COST,
    MAX_CALL_TOKENS,
    MODES,
    CallSettings,
    Mode,
    ModelSpec,
    RetryPolicy,
    sane_cost,
    sane_tokens,
)


def replay_pace() -> float:
    """Tokens a second replay/bbm (and solver/bbm) stream at now; 0 is instant."""
    from bbm_tui.core.llm.offline.replay import pace

    return pace()


def set_replay_pace(tokens_per_second: float | None) -> None:
    """Set the offline models' streaming pace (None: BBM_TUI_REPLAY_TPS or the default).
    Imported when called: the replay module reads the dataset module, which the first
    frame need not wait for."""
    from bbm_tui.core.llm.offline.replay import set_pace

    set_pace(tokens_per_second)


def set_batch_replay_pace(tokens_per_second: float) -> None:
    """The offline models' pace for a headless command and every process it starts (they are
    spawned fresh, so it goes through BBM_TUI_REPLAY_TPS): a batch replays at full speed (0)
    unless asked otherwise; the app's pace (30, for a person to watch) is not a batch's."""
    import os

    from bbm_tui.core.llm.offline.replay import PACE_ENV, set_pace

    os.environ[PACE_ENV] = f"{tokens_per_second:g}"
    set_pace(None)  # read from there


__all__ = [
    "CHARS_PER_TOKEN_CAP",
    "DEFAULT_MODEL",
    "DEFAULT_STEP_MAX_TOKENS",
    "DEFAULT_STEP_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "MAX_CALL_COST",
    "MAX_CALL_TOKENS",
    "MODES",
    "RETRYABLE",
    "STOPS_A_BATCH",
    "AnswerDelta",
    "Arrived",
    "CallRecord",
    "CallSettings",
    "CallStopped",
    "Candidate",
    "Completion",
    "ConnectionCheck",
    "DeploymentPin",
    "ErrorKind",
    "LLMError",
    "LineStarted",
    "Mode",
    "ModelSpec",
    "ReasoningDelta",
    "RedactedReasoning",
    "Restart",
    "RetryPolicy",
    "RouterFile",
    "RouterFileError",
    "Samples",
    "StepText",
    "TextDelta",
    "ThinkingDone",
    "ThinkingEvent",
    "ThinkingSettings",
    "accepts_native_stop",
    "accepts_temperature",
    "asks_logprobs",
    "below_caching_minimum",
    "caching_minimum",
    "call_to_json",
    "check_connection",
    "check_group",
    "classify_error",
    "complete",
    "complete_events",
    "generation_refusal",
    "gives_logprobs",
    "is_loaded",
    "is_offline",
    "key_check",
    "key_env_var",
    "key_env_vars",
    "litellm_module",
    "marks_cache",
    "model_basename",
    "offline_refusal",
    "one_at_a_time_endpoints",
    "read_router_file",
    "replay_pace",
    "sample_steps",
    "sane_cost",
    "sane_tokens",
    "set_batch_replay_pace",
    "set_replay_pace",
    "stream_step",
    "stream_steps",
    "stream_thinking",
    "thinking_refusal",
    "unicode_text",
    "warm_up",
]
