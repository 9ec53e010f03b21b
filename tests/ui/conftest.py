"""Fixtures of the web UI tests: a runtime on a real SQLite store with a `warehouse` quota of
1, an engine driving every execution, and the UI in a minimal FastAPI app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import ModuleType
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.service import Sluice
from ui.ui_support import FLOWS, make_app, ui_settings


@pytest.fixture
def flows() -> ModuleType:
    return load_module("ui_flows", str(FLOWS))


@pytest.fixture
async def runtime(sqlite_url: str) -> AsyncIterator[Runtime]:
    rt = await Runtime.open(ui_settings(sqlite_url))
    yield rt
    await rt.close()


@pytest.fixture
async def engine(runtime: Runtime) -> AsyncIterator[Any]:
    running = await runtime.engine()
    await running.start()
    yield running
    await running.stop()


@pytest.fixture
def app(runtime: Runtime) -> FastAPI:
    return make_app(Sluice(runtime))


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ui.test") as c:
        yield c
