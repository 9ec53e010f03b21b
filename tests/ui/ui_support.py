"""Helpers of the web UI tests: settings with a `warehouse` quota of 1, the UI router in a
minimal FastAPI app, and waiting for a condition seen through the service."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from sluice.config import Settings, load_config
from sluice.http.app import create_app
from sluice.http.deps import open_scope
from sluice.service import Sluice
from support.engine import fast_settings

FLOWS = Path(__file__).parent / "ui_flows.py"
WAIT = 30.0
TERMINAL = ("SUCCEEDED", "FAILED", "ABORTED", "TIMED_OUT", "SKIPPED")


def ui_settings(url: str) -> Settings:
    engine = fast_settings(url).engine.model_dump()
    return load_config(database_url=url, engine=engine, resources={"quotas": {"warehouse": 1}})


def make_app(sluice: Sluice) -> FastAPI:
    """The whole app (the pages use the API: logs are followed over its server-sent events),
    without authentication, as a loopback server runs it."""
    return create_app(sluice, authorize=open_scope)


async def eventually(check: Callable[[], Awaitable[Any]], what: str, within: float = WAIT) -> Any:
    """The first truthy result of `check`, re-run every 0.2 s; fails naming `what`."""
    deadline = asyncio.get_running_loop().time() + within
    while True:
        result = await check()
        if result:
            return result
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"after {within}s: {what}")
        await asyncio.sleep(0.2)


async def finished(sluice: Sluice, execution_id: str) -> bool:
    return (await sluice.execution(execution_id)).phase in TERMINAL
