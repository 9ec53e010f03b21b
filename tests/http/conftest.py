"""An app over a real store: one Sluice per test (SQLite file, or the session's PostgreSQL
database), a client talking to the app in process on the test's own event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from sluice.config import load_config
from sluice.http.app import create_app
from sluice.http.deps import Authorize, open_scope
from sluice.service import Sluice

BASE = "http://127.0.0.1:8080"


async def open_sluice(url: str, project: str = "alpha") -> Sluice:
    return await Sluice.open(load_config(None, database_url=url, project=project))


@pytest.fixture
async def sluice(sqlite_url: str) -> AsyncIterator[Sluice]:
    opened = await open_sluice(sqlite_url)
    yield opened
    await opened.close()


def client_for(sluice: Sluice, authorize: Authorize = open_scope) -> httpx.AsyncClient:
    app = create_app(sluice, authorize=authorize)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE)


@pytest.fixture
async def client(sluice: Sluice) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(sluice) as opened:
        yield opened
