"""Fixtures of the cache tests: every repository backend, and a catalog on a fake clock."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sluice.cache import Catalog, CatalogRepository, MemoryRepository, open_repository
from sluice.clock import FakeClock
from sluice.config import CacheConfig


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
async def repository(request: pytest.FixtureRequest) -> AsyncIterator[CatalogRepository]:
    """Each contract test runs on memory, SQLite and PostgreSQL."""
    if request.param == "memory":
        repo: CatalogRepository = MemoryRepository()
    else:
        url = request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")
        repo = await open_repository(url, upgrade=True)
    yield repo
    await repo.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def catalog(repository: CatalogRepository, clock: FakeClock) -> AsyncIterator[Catalog]:
    catalog = Catalog(repository, clock=clock, config=CacheConfig())
    yield catalog
    await catalog.close()
