"""The sync adapter: `do` under the write limiter, with quota tokens, throttling and failures."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from tests.plugins.webapi.fakes import FakeQuota, load_entry, settle, task_context

from sluice.clock import FakeClock
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, Phase, PhaseInfo
from sluice.plugins.testing import setup_context
from sluice.plugins.webapi import PluginConfig, RetryLater, SyncPluginAdapter, webapi_entry
from sluice.resources.models import ResourceConstraintsSpec


@dataclass
class Echo:
    config: PluginConfig = field(default_factory=PluginConfig)
    calls: int = 0
    errors: list[BaseException] = field(default_factory=list)

    async def resource_requirements(
        self, ctx: TaskExecutionContext
    ) -> tuple[str, ResourceConstraintsSpec | None]:
        return "default", None

    async def do(self, ctx: TaskExecutionContext) -> PhaseInfo:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        ctx.outputs.put({"echo": ctx.inputs.get("x")})
        return PhaseInfo.success()


async def load(
    echo: Echo, clock: FakeClock, config: dict[str, Any] | None = None
) -> SyncPluginAdapter:
    setup, _ = setup_context("echo", config, clock)
    plugin = await load_entry(webapi_entry("echo", ("echo",), lambda s: echo), setup)
    assert isinstance(plugin, SyncPluginAdapter)
    return plugin


async def test_do_runs_once_and_its_outcome_sticks() -> None:
    clock, echo = FakeClock(), Echo()
    plugin = await load(echo, clock)
    ctx = task_context("a", inputs={"x": 3}, clock=clock)
    assert (await plugin.handle(ctx)).info.phase is Phase.SUCCESS
    assert (await plugin.handle(ctx)).info.phase is Phase.SUCCESS
    assert echo.calls == 1
    assert ctx.written_outputs == {"echo": 3}


async def test_do_obeys_the_write_limiter() -> None:
    clock, echo = FakeClock(), Echo()
    plugin = await load(echo, clock, {"write_rate_limiter": {"qps": 2, "burst": 5}})
    handles = [
        asyncio.create_task(plugin.handle(task_context(f"t{n}", clock=clock))) for n in range(10)
    ]
    await settle()
    assert echo.calls == 5
    clock.advance(1.0)
    await settle()
    assert echo.calls == 7
    clock.advance(2.0)
    await settle()
    assert echo.calls == 10
    await asyncio.gather(*handles)


async def test_do_waits_for_a_token_and_releases_it() -> None:
    clock, echo = FakeClock(), Echo()
    quota = FakeQuota({"default": 1})
    plugin = await load(echo, clock, {"resource_quotas": {"default": 1}})
    holder, waiter = (task_context(n, quota=quota, clock=clock) for n in ("a", "b"))
    quota.holders["default"] = {"someone"}
    info = (await plugin.handle(holder)).info
    assert info.phase is Phase.WAITING_FOR_RESOURCES
    assert info.reason == "waiting for default: 1/1 in use, position 1"
    assert echo.calls == 0
    quota.holders["default"] = set()
    assert (await plugin.handle(holder)).info.phase is Phase.SUCCESS
    assert quota.holders["default"] == {holder.metadata.generated_name()}
    await plugin.finalize(holder)
    assert quota.holders["default"] == set()
    assert (await plugin.handle(waiter)).info.phase is Phase.SUCCESS


async def test_a_throttled_do_waits_and_a_failing_do_is_a_retryable_system_failure() -> None:
    clock = FakeClock()
    echo = Echo(errors=[RetryLater(3.0, "HTTP 429"), RuntimeError("HTTP 502")])
    plugin = await load(echo, clock)
    ctx = task_context("a", clock=clock)
    waiting = (await plugin.handle(ctx)).info
    assert (waiting.phase, waiting.reason) == (
        Phase.WAITING_FOR_RESOURCES,
        "HTTP 429; do retried in 3s",
    )
    clock.advance(3.0)
    failed = (await plugin.handle(ctx)).info
    assert failed.phase is Phase.RETRYABLE_FAILURE
    assert failed.error is not None
    assert failed.error.kind is ErrorKind.SYSTEM
    assert "HTTP 502" in failed.reason
    assert echo.calls == 2
    await plugin.close()
