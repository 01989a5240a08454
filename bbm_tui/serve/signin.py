"""Who is signed in, and how fast someone may guess: the front's sessions (a random token in
an HttpOnly cookie, held only in this process's memory, so a restart signs everyone out and a
cookie cannot be made up), and the delay a failed sign-in earns (doubling with each failure of
a name or an address, so guessing passwords costs hours, not seconds)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from bbm_tui.serve.users import Role

# A session lasts this long unused (a working day and more), then its user signs in again.
IDLE_LIMIT_S = 12 * 3600.0
# The delay after the first failure, doubled with each further one, and its ceiling.
FIRST_DELAY_S = 1.0
MAX_DELAY_S = 30.0
# Failures older than this are forgotten.
FAILURE_MEMORY_S = 15 * 60.0
# Past this many names and addresses with failures, the stale ones are dropped at once.
MAX_KEYS = 10_000


@dataclass
class SignedIn:
    name: str
    role: Role
    last_seen: float


@dataclass
class Sessions:
    """The signed-in sessions, by token."""

    clock: Callable[[], float] = time.monotonic
    _by_token: dict[str, SignedIn] = field(default_factory=dict)

    def start(self, name: str, role: Role) -> str:
        token = secrets.token_urlsafe(32)
        self._by_token[token] = SignedIn(name, role, self.clock())
        return token

    def find(self, token: str | None) -> SignedIn | None:
        """The session a cookie's token names, if it is one of ours and still fresh."""
        if not token:
            return None
        session = self._by_token.get(token)
        now = self.clock()
        if session is None:
            return None
        if now - session.last_seen > IDLE_LIMIT_S:
            del self._by_token[token]
            return None
        session.last_seen = now
        return session

    def end(self, token: str | None) -> None:
        if token:
            self._by_token.pop(token, None)


@dataclass
class Throttle:
    """Failed sign-ins by key (a name, an address): after N recent failures a key may try
    again only 1, 2, 4 ... seconds (up to MAX_DELAY_S) after its last one. Tries sent at once,
    in parallel, are refused without checking the password, so waiting cannot be dodged."""

    clock: Callable[[], float] = time.monotonic
    _failures: dict[str, list[float]] = field(default_factory=dict)

    def wait_left(self, *keys: str) -> float:
        """Seconds before these keys may try again (0: now)."""
        now = self.clock()
        left = 0.0
        for key in keys:
            recent = self._recent(key, now)
            if recent:
                delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2 ** (len(recent) - 1))
                left = max(left, recent[-1] + delay - now)
        return left

    def failed(self, *keys: str) -> None:
        now = self.clock()
        if len(self._failures) > MAX_KEYS:  # many made-up names: forget the stale ones
            for key in list(self._failures):
                self._recent(key, now)
        for key in keys:
            self._failures.setdefault(key, []).append(now)

    def succeeded(self, key: str) -> None:
        self._failures.pop(key, None)

    def _recent(self, key: str, now: float) -> list[float]:
        recent = [at for at in self._failures.get(key, []) if now - at < FAILURE_MEMORY_S]
        if recent:
            self._failures[key] = recent
        else:
            self._failures.pop(key, None)
        return recent
