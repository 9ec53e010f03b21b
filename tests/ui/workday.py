"""One server and one browser for a module of browser tests: a real store and engine, the
whole app (API and UI) served by uvicorn on loopback, launch plans registered, and helpers to
wait for what the tests drive (through the service, never by sleeping for a result)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import sluice as sl
from sluice.config import load_config
from sluice.http.app import create_app
from sluice.http.auth import token_auth
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.service import Sluice
from support.engine import fast_settings
from ui.browser import ConsoleErrors, chromium, serving
from ui.ui_support import FLOWS, eventually

LIVE = 15_000
"""Milliseconds a page has to show a change (it polls every second)."""


@dataclass
class World:
    runtime: Runtime
    sluice: Sluice
    flows: ModuleType
    directory: Path
    base: str
    browser: Any
    shots: Path
    errors: ConsoleErrors = field(default_factory=ConsoleErrors)

    async def page(self, **options: Any) -> Any:
        context = await self.browser.new_context(viewport={"width": 1280, "height": 900}, **options)
        return self.errors.watch(await context.new_page())

    async def phase(self, execution_id: str) -> str:
        return (await self.sluice.execution(execution_id)).phase

    async def until_phase(self, execution_id: str, *phases: str) -> str:
        async def reached() -> str | None:
            found = await self.phase(execution_id)
            return found if found in phases else None

        found: str = await eventually(reached, f"{execution_id} reaches {phases}")
        return found

    def gate(self, name: str) -> Path:
        return self.directory / name


def settings(url: str) -> Any:
    engine = fast_settings(url).engine.model_dump() | {"workers": 4}
    return load_config(
        database_url=url,
        engine=engine,
        resources={"quotas": {"warehouse": 1}},
        logs={"flush_interval": 0.1},
    )


@contextlib.asynccontextmanager
async def world(directory: Path, shots: Path) -> AsyncIterator[World]:
    runtime = await Runtime.open(settings(f"sqlite:///{directory / 's.db'}"))
    service = Sluice(runtime)
    flows = load_module("ui_flows", str(FLOWS))
    chatter_plan = sl.LaunchPlan(
        "chatter_plan",
        flows.chatter,
        default_inputs={"directory": str(directory)},
        fixed_inputs={"strict": False},
    )
    await service.register_launch_plan(chatter_plan, activate=True)
    await service.register_launch_plan(flows.nightly, activate=True)
    engine = await runtime.engine()
    await engine.start()
    app = create_app(service, authorize=token_auth(service, required=False))
    try:
        async with serving(app) as base, chromium() as browser:
            yield World(runtime, service, flows, directory, base, browser, shots)
    finally:
        _open_gates(directory)
        await engine.stop()
        await runtime.close()


def _open_gates(directory: Path) -> None:
    """Let every task still holding go, so that the engine stops at once."""
    for gate in directory.glob("*.gate"):
        gate.unlink()
