"""An app over a real store: one Sluice per test (SQLite file, or the session's PostgreSQL
database), a client talking to the app in process on the test's own event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from sluice.service import Sluice
from support.http_world import Project, client_for, open_sluice, populate


@pytest.fixture
async def sluice(sqlite_url: str) -> AsyncIterator[Sluice]:
    opened = await open_sluice(sqlite_url)
    yield opened
    await opened.close()


@pytest.fixture
async def client(sluice: Sluice) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(sluice) as opened:
        yield opened


@pytest.fixture
async def two_projects(sqlite_url: str) -> AsyncIterator[tuple[Sluice, Project, Project]]:
    """An unscoped Sluice (configured for alpha) over a store holding alpha's and beta's
    executions, launch plans, holders, cache entries, reservations and caps."""
    alpha = await open_sluice(sqlite_url, "alpha")
    beta = await open_sluice(sqlite_url, "beta")
    try:
        mine = await populate(alpha, "alpha")
        theirs = await populate(beta, "beta")
        yield alpha, mine, theirs
    finally:
        await beta.close()
        await alpha.close()
