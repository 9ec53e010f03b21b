"""Fixtures of the resource manager tests: every backend, and managers on a fake clock.

`managers` makes managers that share one backend location, as separate processes would
(two managers on `memory://` share one in-process backend instead).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from sluice.clock import FakeClock
from sluice.resources import QuotaManager, ResourceBackend, from_url
from sluice.resources.backends.memory import MemoryBackend

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
SHARED_BACKENDS = BACKENDS[1:]
ManagerFactory = Callable[..., Awaitable[QuotaManager]]


@dataclass(frozen=True)
class Location:
    """Where a backend keeps its tokens: a URL and, for Redis, a key prefix."""

    name: str
    url: str
    key_prefix: str = "sluice"

    def backend(self) -> ResourceBackend:
        return from_url(self.url, key_prefix=self.key_prefix)


def location_for(name: str, request: pytest.FixtureRequest) -> Location:
    if name == "memory":
        return Location(name, "memory://")
    if name == "sqlite":
        return Location(name, str(request.getfixturevalue("sqlite_url")))
    if name == "postgresql":
        request.getfixturevalue("pg_upgraded_url")
        return Location(name, str(request.getfixturevalue("pg_url")))
    prefix = str(request.getfixturevalue("redis_prefix"))
    return Location(name, str(request.getfixturevalue("redis_server_url")), prefix)


@pytest.fixture(params=BACKENDS)
def location(request: pytest.FixtureRequest) -> Location:
    """Each contract test runs on memory, SQLite, PostgreSQL and Redis."""
    return location_for(request.param, request)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=SHARED_BACKENDS)
def shared_location(request: pytest.FixtureRequest) -> Location:
    """The backends several processes can share: SQLite, PostgreSQL and Redis."""
    return location_for(request.param, request)


@contextlib.asynccontextmanager
async def _factory(location: Location, clock: FakeClock) -> AsyncIterator[ManagerFactory]:
    started: list[QuotaManager] = []
    memory = MemoryBackend()

    async def make(*, start: bool = True, **options: Any) -> QuotaManager:
        backend = memory if location.name == "memory" else location.backend()
        options.setdefault("clock", clock)
        # Tests sweep explicitly; a background sweep woken by clock.advance would race them.
        options.setdefault("sweep_interval", 1e6)
        manager = QuotaManager(backend, **options)
        started.append(manager)
        if start:
            await manager.start()
        return manager

    try:
        yield make
    finally:
        for manager in reversed(started):
            await manager.close()


@pytest.fixture
async def managers(location: Location, clock: FakeClock) -> AsyncIterator[ManagerFactory]:
    """Start managers over the same backend location; all are closed after the test."""
    async with _factory(location, clock) as make:
        yield make


@pytest.fixture
async def shared_managers(
    shared_location: Location, clock: FakeClock
) -> AsyncIterator[ManagerFactory]:
    """Managers over one shared backend, each with its own connection, as processes are."""
    async with _factory(shared_location, clock) as make:
        yield make


@pytest.fixture
async def manager(managers: ManagerFactory) -> QuotaManager:
    return await managers(config_quotas={"warehouse": 2})
