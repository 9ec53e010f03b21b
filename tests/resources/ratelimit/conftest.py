"""Fixtures of the rate limit tests: policies over every backend, on a fake clock.

`limits` makes policies that share one backend location, as separate processes would (on
`memory://` they share one in-process backend instead).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from sluice.clock import FakeClock
from sluice.resources.backends.ratelimit_base import RateLimitBackend
from sluice.resources.backends.ratelimit_memory import MemoryRateLimits
from sluice.resources.ratelimit import RateLimitRule, RateLimits, from_url

LimitsFactory = Callable[..., Awaitable[RateLimits]]


def backend_for(url: str, key_prefix: str) -> RateLimitBackend:
    return from_url(url, key_prefix=key_prefix)


@contextlib.asynccontextmanager
async def factory(location: Any, clock: FakeClock | None) -> AsyncIterator[LimitsFactory]:
    started: list[RateLimits] = []
    memory = MemoryRateLimits()

    async def make(rules: dict[str, str] | None = None, **options: Any) -> RateLimits:
        backend = (
            memory if location.name == "memory" else backend_for(location.url, location.key_prefix)
        )
        options.setdefault("clock", clock)
        options.setdefault("sweep_interval", 1e6)  # tests sweep explicitly
        parsed = {name: RateLimitRule.parse(rate) for name, rate in (rules or {}).items()}
        limits = RateLimits(backend, config_rules=parsed, **options)
        started.append(limits)
        await limits.start()
        return limits

    try:
        yield make
    finally:
        for limits in reversed(started):
            await limits.close()


@pytest.fixture
async def limits_factory(location: Any, clock: FakeClock) -> AsyncIterator[LimitsFactory]:
    """Start policies over the same backend location on the test's fake clock."""
    async with factory(location, clock) as make:
        yield make


@pytest.fixture
async def store_clock_factory(location: Any) -> AsyncIterator[LimitsFactory]:
    """Policies that judge on the store's own clock (clock=None), as production does."""
    async with factory(location, None) as make:
        yield make
