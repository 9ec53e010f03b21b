"""The policy's own duties, on the memory backend: the plugin-facing proxy, explanations,
metrics, registration and construction from config."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client import CollectorRegistry

from sluice.clock import FakeClock
from sluice.config import ResourcesConfig
from sluice.errors import ConfigError, InvalidQuotaError
from sluice.resources import (
    AllocationStatus,
    Claim,
    Holder,
    QuotaManager,
    ResourceConstraintsSpec,
    TaskResourceManager,
)
from sluice.resources.backends.memory import MemoryBackend

TASK = Holder("foo", "dev", "x1", "n1")


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
async def quota_manager(
    clock: FakeClock, registry: CollectorRegistry
) -> AsyncIterator[QuotaManager]:
    manager = QuotaManager(
        MemoryBackend(), clock=clock, config_quotas={"warehouse": 2}, metrics=registry
    )
    manager.registrar("hive").register_resource_quota("default", 2)
    async with manager:
        yield manager


async def test_the_task_proxy_qualifies_namespace_and_token(quota_manager: QuotaManager) -> None:
    proxy = quota_manager.for_task("hive", TASK)

    assert await proxy.allocate_resource("default", "job-1") is AllocationStatus.GRANTED

    [snapshot] = await quota_manager.describe("hive:default")
    [holder] = snapshot.holders
    assert (holder.token, holder.project, holder.domain) == ("ex:foo:dev:x1-job-1", "foo", "dev")
    assert isinstance(proxy, TaskResourceManager)
    assert proxy.allocations == (("hive:default", "ex:foo:dev:x1-job-1"),)


async def test_the_task_proxy_passes_units_and_constraints(quota_manager: QuotaManager) -> None:
    proxy = quota_manager.for_task("hive", TASK)
    capped = ResourceConstraintsSpec(project_scope=1)

    assert await proxy.allocate_resource("default", "a", capped) is AllocationStatus.GRANTED
    status = await proxy.allocate_resource("default", "b", capped)

    assert status is AllocationStatus.NAMESPACE_QUOTA_EXCEEDED
    assert await proxy.explain("default", "b") == (
        "waiting for hive:default: project cap 1/1 in use, position 1"
    )
    assert await proxy.explain("default", "a") == ""
    await proxy.release_resource("default", "a")
    assert await proxy.allocate_resource("default", "c", units=2) is AllocationStatus.EXHAUSTED


async def test_explain_reads_the_backend_when_this_proxy_never_asked(
    quota_manager: QuotaManager,
) -> None:
    first = quota_manager.for_task("hive", TASK)
    await first.allocate_resource("default", "a")
    await first.allocate_resource("default", "b")
    await first.allocate_resource("default", "c")

    fresh = quota_manager.for_task("hive", TASK)  # e.g. after an engine restart

    assert await fresh.explain("default", "c") == "waiting for hive:default: 2/2 in use, position 1"
    assert await fresh.explain("default", "a") == ""


async def test_a_plugin_cannot_register_one_namespace_with_two_quotas(
    quota_manager: QuotaManager,
) -> None:
    registrar = quota_manager.registrar("hive")
    registrar.register_resource_quota("default", 2)  # the same again is fine

    with pytest.raises(InvalidQuotaError, match="already registered with quota 2, not 3"):
        registrar.register_resource_quota("default", 3)


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(name, labels)


async def test_metrics_count_answers_waits_tokens_and_waiters(
    quota_manager: QuotaManager, registry: CollectorRegistry, clock: FakeClock
) -> None:
    for token in ("t1", "t2", "t3"):
        await quota_manager.allocate(token, [Claim("warehouse")], TASK)
    clock.advance(4.0)
    await quota_manager.release("t1", ["warehouse"])
    await quota_manager.allocate("t3", [Claim("warehouse")], TASK)

    counts = "sluice_resource_allocations_total"
    assert sample(registry, counts, namespace="warehouse", status="granted") == 3
    assert sample(registry, counts, namespace="warehouse", status="exhausted") == 1
    assert sample(registry, "sluice_resource_wait_seconds_sum", namespace="warehouse") == 4.0
    assert sample(registry, "sluice_resource_tokens_in_use", namespace="warehouse") == 2
    assert sample(registry, "sluice_resource_waiters", namespace="warehouse") == 0


async def test_from_config_builds_the_backend_from_the_url(clock: FakeClock) -> None:
    config = ResourcesConfig(url="memory://", quotas={"warehouse": 1}, lease=5.0)

    async with QuotaManager.from_config(config, store_db=None, clock=clock) as manager:
        assert manager.lease == 5.0
        assert (await manager.allocate("t1", [Claim("warehouse")], TASK)).granted
        assert not (await manager.allocate("t2", [Claim("warehouse")], TASK)).granted


def test_from_config_without_url_needs_the_store(clock: FakeClock) -> None:
    with pytest.raises(ConfigError, match="no store database"):
        QuotaManager.from_config(ResourcesConfig(), store_db=None, clock=clock)
