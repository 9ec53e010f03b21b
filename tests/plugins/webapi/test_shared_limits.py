"""The web-API plugin's read and write limiters on the shared rate limit store: two adapters
(two engines) over one store send together what one would, reads and writes apart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from tests.plugins.webapi.fakes import ScriptedRemote, load_entry, settle, task_context

from sluice.clock import FakeClock
from sluice.plugins.testing import setup_context
from sluice.plugins.webapi import AsyncPluginAdapter, webapi_entry
from sluice.resources.ratelimit import RateLimits, from_url

LIMITED = {
    "write_rate_limiter": {"qps": 1, "burst": 5},
    "read_rate_limiter": {"qps": 1, "burst": 5},
}


@pytest.fixture
async def engines(sqlite_url: str) -> AsyncIterator[tuple[FakeClock, list[RateLimits]]]:
    clock = FakeClock()
    limits = [RateLimits(from_url(sqlite_url), clock=clock) for _ in range(2)]
    yield clock, limits
    for each in limits:
        await each.close()


async def _load(remote: ScriptedRemote, clock: FakeClock, limits: RateLimits) -> AsyncPluginAdapter:
    entry = webapi_entry("remote", ("scripted",), lambda setup: remote)
    setup, _ = setup_context("remote", LIMITED, clock)
    setup.rate_limits = limits.for_plugin("remote")
    plugin = await load_entry(entry, setup)
    assert isinstance(plugin, AsyncPluginAdapter)
    return plugin


async def _settle_io(rounds: int = 20) -> None:
    for _ in range(rounds):  # the store's answers come back through threads and sockets
        await settle()
        await asyncio.sleep(0.01)


async def test_two_engines_share_one_write_budget(
    engines: tuple[FakeClock, list[RateLimits]],
) -> None:
    clock, limits = engines
    remote = ScriptedRemote()
    plugins = [await _load(remote, clock, each) for each in limits]
    contexts = [task_context(f"t{n}", clock=clock) for n in range(12)]
    handles = [asyncio.create_task(plugins[n % 2].handle(ctx)) for n, ctx in enumerate(contexts)]
    await _settle_io()
    assert remote.created == 5  # one burst for both engines, not one each
    clock.advance(1.0)
    await _settle_io()
    assert remote.created == 6
    while not all(h.done() for h in handles):
        clock.advance(1.0)
        await _settle_io(5)
    assert remote.created == 12
    # reads have a budget of their own: the writes did not spend it
    [read] = await limits[0].describe("remote/read")
    assert (read.source, read.rule.rate, read.keys) == ("plugin", "qps 1, burst 5", ())  # type: ignore[union-attr]
    for plugin in plugins:
        await plugin.close()
