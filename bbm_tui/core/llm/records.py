"""What a model call hands back: a step's text, a whole answer, and the events of a stream."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass

from bbm_tui.core.types import CallRecord

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


@dataclass
class UsageWatch:
    """What the replies of one model call said about usage: how many HTTP replies there were
    (none: an in-process provider, whose counts are its own) and whether any event stream
    carried the provider's own usage object."""

    replies: int = 0
    provider_usage: bool = False


# Set by the caller around one model call; the guard reports into it. A context variable,
# because litellm makes the request inside the caller's task, several calls at once.
usage_watch: ContextVar[UsageWatch | None] = ContextVar("usage_watch", default=None)
