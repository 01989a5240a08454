"""What a model call hands back: a step's text, a whole answer, and the events of a stream."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass, field, fields

from bbm_tui.core.records import CallRecord

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
    """The call is being retried (attempt `attempt` comes after `delay_s`): discard any text
    shown of it. `reason` is the failure's message, `kind` its ErrorKind."""

    attempt: int
    reason: str
    delay_s: float
    kind: str = "unknown"


@dataclass
class UsageCounts:
    """A call's token counts as the provider gave them (None: unknown). `prompt` is every
    prompt token; `cached` (read from the provider's prompt cache) and `cache_write` (written
    to it) are parts of it, as litellm counts them; `reasoning` is part of `completion`."""

    prompt: int | None = None
    completion: int | None = None
    cached: int | None = None
    cache_write: int | None = None
    # Of `completion`: a thinking model's reasoning tokens, where the provider counts them
    # apart (OpenAI's `completion_tokens_details`, Gemini's `thoughtsTokenCount`).
    reasoning: int | None = None

    def or_else(self, other: UsageCounts) -> UsageCounts:
        """Each count from here where known, else from `other`."""
        return UsageCounts(*(getattr(self, f.name) if getattr(self, f.name) is not None
                             else getattr(other, f.name) for f in fields(self)))


@dataclass
class UsageWatch:
    """What the replies of one model call said about usage: how many HTTP replies there were
    (none: an in-process provider, whose counts are its own), whether any stream carried the
    provider's own counts, and those counts as its events gave them (core/llm/usage.py)."""

    replies: int = 0
    provider_usage: bool = False
    usage: UsageCounts = field(default_factory=UsageCounts)


# Set by the caller around one model call; the guard reports into it. A context variable,
# because litellm makes the request inside the caller's task, several calls at once.
usage_watch: ContextVar[UsageWatch | None] = ContextVar("usage_watch", default=None)
