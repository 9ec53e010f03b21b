"""Value types of keyed rate limits, shared by the policy, the backends and the engine."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, Protocol

from sluice.spec.rates import RateLimitRule

RateLimitSource = Literal["operator", "config", "plugin"]
RATE_LIMIT_SOURCES: tuple[RateLimitSource, ...] = ("operator", "config", "plugin")
"""Highest precedence first: an operator's `sluice ratelimit set` wins over the config, which
wins over what a plugin registers."""


@dataclass(frozen=True)
class RateClaim:
    """`units` of the budget of one key of a limit ("" is the limit's single key)."""

    name: str
    key: str = ""
    units: int = 1

    @property
    def label(self) -> str:
        """How reasons and listings name it: `openai/acme`, or `openai` for the "" key."""
        return f"{self.name}/{self.key}" if self.key else self.name


@dataclass(frozen=True)
class Asker:
    """Who asks, for `sluice ratelimit ls` (empty for callers that are not tasks)."""

    execution_id: str = ""
    node_id: str = ""


@dataclass(frozen=True)
class AdmitRequest:
    """One token asking for every claim at once, all or nothing; validated by the policy."""

    claims: tuple[RateClaim, ...]
    token: str
    asker: Asker
    remember: float
    """Seconds a grant is remembered under `token`: asking again within them (a retry after a
    lost answer, a restarted engine) is granted without being counted again. 0: not kept."""
    recheck: float
    """A refused token asks again no later than this many seconds after its refusal."""
    grace: float
    """Seconds a waiter keeps its place past its slot (or its next ask), to come and take it."""


@dataclass(frozen=True)
class Admission:
    """The store's answer: granted, or the slot to wait for and the place in line."""

    granted: bool
    now: float
    """The store's time of the judgment (its own clock, or the caller's test clock)."""
    repeated: bool = False
    """Granted earlier under the same token (within `remember`): not counted again."""
    next_at: float = 0.0
    """Refused: the store time at which this token's turn should come."""
    name: str = ""
    key: str = ""
    """Refused: the limit and key whose slot comes last (the one to wait for)."""
    position: int = 0
    """Refused: 1-based rank among the live waiters of that key."""
    rate: str = ""

    @property
    def wait(self) -> float:
        """Seconds until the slot, on the store's clock (a duration any clock can wait)."""
        return max(0.0, self.next_at - self.now) if not self.granted else 0.0

    def reason(self) -> str:
        """A waiting task's reason, e.g.
        "rate-limited on openai/acme: next slot in 1.2 s, position 3"."""
        if self.granted:
            return ""
        label = RateClaim(self.name, self.key).label
        return (
            f"rate-limited on {label}: next slot in {_seconds(self.wait)}, position {self.position}"
        )


def _seconds(value: float) -> str:
    return f"{math.ceil(value * 10) / 10:.1f} s" if value < 60 else f"{value:.0f} s"


@dataclass(frozen=True)
class RateWaiter:
    position: int
    token: str
    execution_id: str
    node_id: str
    units: int
    since: float
    """When the token was first refused: the waiters' order (then the token)."""
    expires_at: float
    """When it loses its place unless it asks again."""


@dataclass(frozen=True)
class KeySnapshot:
    key: str
    tat: float
    next_free: float
    """Store time from which one unit could be admitted (waiters aside)."""
    available: int
    """Units that could be admitted at once now (waiters aside)."""
    waiters: tuple[RateWaiter, ...] = ()


@dataclass(frozen=True)
class LimitSnapshot:
    """What `sluice ratelimit ls` shows for one limit name."""

    name: str
    rule: RateLimitRule | None
    source: RateLimitSource | None
    now: float
    """The store's time the snapshot was read at."""
    keys: tuple[KeySnapshot, ...] = ()
    rules: tuple[tuple[RateLimitSource, RateLimitRule], ...] = ()
    """Every source that sets this limit, highest precedence first."""


class RateLimitRegistrar(Protocol):
    """What a plugin gets at load time to share a rate limit across every engine."""

    def register_rate_limit(self, name: str, rule: RateLimitRule) -> None:
        """Declare `<plugin id>/<name>` with `rule`; an operator's or the config's one wins."""
        ...

    async def acquire(self, name: str, key: str = "", units: int = 1) -> None:
        """Wait (first come, first served across engines) until `units` may go, and take them;
        a cancelled waiter takes nothing."""
        ...
