"""Token-bucket rate limiters on an injected clock, fair under contention.

In any window of T seconds at most `burst + qps * T` calls get through. Callers are served in
the order they asked (first come, first served), so a steady stream of newcomers cannot starve
an earlier caller. A remote service's "retry after" can pause the limiter for everyone.

`RateLimiter` keeps its bucket in this process (a plugin loaded without the engine's shared
rate limits: tests, tools); `SharedRateLimiter` keeps it in the store every engine shares, the
same GCRA bucket (T = 1 / qps, burst) as every keyed rate limit.
"""

from __future__ import annotations

import asyncio

from sluice.clock import Clock
from sluice.resources.ratelimit.models import RateLimitRegistrar
from sluice.spec.rates import RateLimitRule

# Float arithmetic can leave 0.999999999 of a token; treating that as a whole token avoids a
# sleep of a few nanoseconds that a fake clock would never wake from.
_EPSILON = 1e-9


class RateLimiter:
    """`await limiter.acquire()` before each call to the limited service."""

    def __init__(self, qps: float, burst: int, clock: Clock) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError(f"RateLimiter needs qps > 0 and burst >= 1, got {qps}, {burst}")
        self._qps = qps
        self._burst = float(burst)
        self._clock = clock
        self._tokens = float(burst)
        self._stamp = clock.now()
        self._paused_until = 0.0
        # asyncio.Lock hands the lock to waiters in FIFO order and does not let newcomers barge.
        self._lock = asyncio.Lock()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return int(self._burst)

    async def acquire(self) -> None:
        """Wait for a token and take it; a cancelled waiter takes none."""
        async with self._lock:
            while (wait := self._wait_time()) > 0:
                await self._clock.sleep(wait)
            self._tokens -= 1.0

    def pause_until(self, deadline: float) -> None:
        """Let no call through before `deadline` (clock time), e.g. a service's Retry-After."""
        self._paused_until = max(self._paused_until, deadline)

    def _wait_time(self) -> float:
        now = self._clock.now()
        self._tokens = min(self._burst, self._tokens + max(0.0, now - self._stamp) * self._qps)
        self._stamp = max(self._stamp, now)
        missing = 0.0 if self._tokens >= 1.0 - _EPSILON else (1.0 - self._tokens) / self._qps
        return max(self._paused_until - now, missing)


class SharedRateLimiter:
    """The limiter of one kind of call (reads or writes) of one plugin, its bucket kept in the
    shared rate limit store (`<plugin id>/read`, `<plugin id>/write`), so N engines together
    send what one would. Callers of this engine go one at a time, in arrival order; engines
    take turns in the store's order. A service's "retry after" pauses this engine's callers
    (each engine learns it from its own calls)."""

    def __init__(
        self, shared: RateLimitRegistrar, name: str, qps: float, burst: int, clock: Clock
    ) -> None:
        shared.register_rate_limit(name, RateLimitRule.token_bucket(qps, burst))
        self._shared = shared
        self._name = name
        self._qps, self._burst = qps, burst
        self._clock = clock
        self._paused_until = 0.0
        self._lock = asyncio.Lock()

    @property
    def qps(self) -> float:
        return self._qps

    @property
    def burst(self) -> int:
        return self._burst

    async def acquire(self) -> None:
        """Wait for a slot and take it; a cancelled waiter takes none."""
        async with self._lock:
            while (wait := self._paused_until - self._clock.now()) > 0:
                await self._clock.sleep(wait)
            await self._shared.acquire(self._name)

    def pause_until(self, deadline: float) -> None:
        self._paused_until = max(self._paused_until, deadline)


Limiter = RateLimiter | SharedRateLimiter
