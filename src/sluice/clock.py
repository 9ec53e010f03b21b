"""Time as an injected dependency: the system clock, and a fake one that tests drive."""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol


class Clock(Protocol):
    """A source of wall time and of sleeping; seconds as float everywhere."""

    def now(self) -> float:
        """Seconds since the epoch."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Suspend the caller for `seconds` of this clock's time."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class FakeClock:
    """A clock that only moves when a test calls `advance`; sleepers wake as time passes them."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def now(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self._now + seconds, next(self._seq), future))
        await future

    def advance(self, seconds: float) -> None:
        """Move time forward and wake every sleeper whose deadline has passed."""
        self._now += seconds
        while self._sleepers and self._sleepers[0][0] <= self._now:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


def store_now(clock: Clock) -> float | None:
    """The time to hand a store for judging leases and expiries.

    None for the real clock: the store then reads its own clock inside the atomic operation
    (PostgreSQL's `clock_timestamp()`, Redis `TIME`, the host's clock for SQLite and memory),
    so an engine whose clock is skewed can never make a live lease look lapsed or a lapsed
    one look live. A test clock's time is handed down as the store's time, so tests that
    drive time stay deterministic on every backend (docs/invariants.md, "One clock")."""
    return None if isinstance(clock, SystemClock) else clock.now()
