"""The web-API adapter's quota path against the real QuotaManager (memory, SQLite, PostgreSQL
and Redis backends), not a fake: the quota the plugin registers at load, the token it takes per
task, the manager's reason while it waits, and the release at finalize that hands the room on
and leaves no waiter behind."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry
from tests.plugins.webapi.fakes import ScriptedRemote, load_entry, step, task_context

from sluice.clock import FakeClock
from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.phase import Phase
from sluice.plugins.testing import DictSecrets, FakeTaskContext
from sluice.plugins.webapi import AsyncPluginAdapter, webapi_entry
from sluice.resources import Holder, QuotaManager, from_url

BACKENDS = [
    "memory",
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]
NAMESPACE = "remote:default"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture(params=BACKENDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """(URL, key prefix) of one resource backend."""
    if request.param == "memory":
        return "memory://", "sluice"
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'tokens.db'}", "sluice"
    if request.param == "postgresql":
        request.getfixturevalue("pg_upgraded_url")
        return str(request.getfixturevalue("pg_url")), "sluice"
    return (
        str(request.getfixturevalue("redis_server_url")),
        str(request.getfixturevalue("redis_prefix")),
    )


@pytest.fixture
async def manager(location: tuple[str, str], clock: FakeClock) -> AsyncIterator[QuotaManager]:
    url, prefix = location
    quotas = QuotaManager(from_url(url, key_prefix=prefix), clock=clock, sweep_interval=1e6)
    yield quotas
    await quotas.close()


async def adapter(
    manager: QuotaManager, remote: ScriptedRemote, clock: FakeClock
) -> AsyncPluginAdapter:
    """Load the adapter as the runtime does: its quota registered with the real manager."""
    setup = SetupContext(
        plugin_id="remote",
        registrar=manager.registrar("remote"),
        metrics=CollectorRegistry(),
        secrets=DictSecrets(),
        config={"resource_quotas": {"default": 1}},
        clock=clock,
    )
    plugin = await load_entry(webapi_entry("remote", ("scripted",), lambda _: remote), setup)
    assert isinstance(plugin, AsyncPluginAdapter)
    await manager.start()  # after load: the registered quota is stored now
    return plugin


def context(manager: QuotaManager, name: str, clock: FakeClock) -> FakeTaskContext:
    ctx = task_context(name, clock=clock)
    meta = ctx.metadata
    holder = Holder(meta.project, meta.domain, meta.execution_id, meta.node_id)
    ctx.resource_manager = manager.for_task("remote", holder)
    return ctx


async def test_a_quota_of_one_is_never_over_allocated_and_the_wait_is_explained(
    manager: QuotaManager, clock: FakeClock
) -> None:
    remote = ScriptedRemote()
    plugin = await adapter(manager, remote, clock)
    first, second = context(manager, "a", clock), context(manager, "b", clock)
    assert (await step(plugin, first)).phase is Phase.QUEUED
    waiting = await step(plugin, second)
    assert waiting.phase is Phase.WAITING_FOR_RESOURCES
    assert waiting.reason.startswith(f"waiting for {NAMESPACE}: 1/1 in use"), waiting.reason
    (snapshot,) = await manager.describe(NAMESPACE)
    assert (snapshot.quota, snapshot.in_use, len(snapshot.holders)) == (1, 1, 1)
    assert [w.token for w in snapshot.waiters] == ["ex:p:d:xb-" + second.metadata.generated_name()]
    assert remote.created == 1

    await plugin.finalize(first)  # releases the token: the waiter can take it now
    assert (await step(plugin, second)).phase is Phase.QUEUED
    (snapshot,) = await manager.describe(NAMESPACE)
    assert snapshot.in_use == 1 and snapshot.waiters == ()
    assert remote.created == 2
    await plugin.finalize(second)
    (snapshot,) = await manager.describe(NAMESPACE)
    assert snapshot.in_use == 0
    await plugin.close()


async def test_finalizing_a_waiting_task_leaves_no_waiter_behind(
    manager: QuotaManager, clock: FakeClock
) -> None:
    remote = ScriptedRemote()
    plugin = await adapter(manager, remote, clock)
    first, second = context(manager, "a", clock), context(manager, "b", clock)
    await step(plugin, first)
    assert (await step(plugin, second)).phase is Phase.WAITING_FOR_RESOURCES
    await plugin.abort(second)
    await plugin.finalize(second)  # the task was aborted while it waited
    (snapshot,) = await manager.describe(NAMESPACE)
    assert snapshot.waiters == (), "a ghost waiter"
    await plugin.finalize(first)
    third = context(manager, "c", clock)
    assert (await step(plugin, third)).phase is Phase.QUEUED, "the room went to a live task"
    assert remote.created == 2
    await plugin.finalize(third)
    await plugin.close()
