"""Servers that answer one request at a time by cutting the running one short.

llama-cpp-python's server stops a running generation whenever another request arrives (even
`GET /v1/models`) and ends that stream with `[DONE]` and no finish reason (docs/NOTES.md,
"Real servers"). Calls made side by side (a batch's concurrency, backtracking's parallel
samples, the finders' step-level calls) would then cut each other short until their retries
ran out. Once a stream to an endpoint is interrupted while another call to it had started,
every later call to that endpoint waits its turn: one at a time, for the rest of the run.

Only endpoints given by `api_base` (local and self-hosted servers) are watched; a hosted
provider's API is never made to wait. The state belongs to one event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from bbm_tui.core.types import ModelSpec


@dataclass
class Endpoint:
    started: int = 0  # calls started so far
    one_at_a_time: bool = False
    turn: asyncio.Lock = field(default_factory=asyncio.Lock)


_endpoints: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, Endpoint]] = (
    weakref.WeakKeyDictionary()
)


def _endpoint(api_base: str) -> Endpoint:
    by_base = _endpoints.setdefault(asyncio.get_running_loop(), {})
    return by_base.setdefault(api_base.rstrip("/"), Endpoint())


@dataclass
class Call:
    """One attempt at a call, as the endpoint saw it."""

    endpoint: Endpoint | None
    started_as: int = 0

    def overlapped(self) -> bool:
        """Another call to the endpoint started while this one ran."""
        return self.endpoint is not None and self.endpoint.started > self.started_as + 1

    def take_turns_from_now_on(self) -> None:
        """This call's stream was cut short while another call ran: the server serves one
        request at a time, and later calls to it wait their turn."""
        if self.endpoint is not None:
            self.endpoint.one_at_a_time = True


@contextlib.asynccontextmanager
async def call_turn(spec: ModelSpec) -> AsyncIterator[Call]:
    """Around one attempt at a call: waits its turn where the endpoint takes one request at a
    time, and counts the call as started."""
    if not spec.api_base:
        yield Call(None)
        return
    endpoint = _endpoint(spec.api_base)
    if not endpoint.one_at_a_time:
        endpoint.started += 1
        yield Call(endpoint, endpoint.started - 1)
        return
    async with endpoint.turn:
        endpoint.started += 1
        yield Call(endpoint, endpoint.started - 1)


def one_at_a_time_endpoints() -> list[str]:
    """The endpoints found to serve one request at a time (in this event loop)."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return []
    return sorted(base for base, endpoint in _endpoints.get(loop, {}).items()
                  if endpoint.one_at_a_time)
