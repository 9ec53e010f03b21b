"""The resource manager's Prometheus series as a scrape shows them."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from sluice.clock import FakeClock
from sluice.resources import Claim, Holder, QuotaManager
from sluice.resources.backends.memory import MemoryBackend

TASK = Holder("foo", "dev", "x1", "n1")


async def test_levels_show_busy_namespaces_and_idle_ones_leave_no_series(
    clock: FakeClock,
) -> None:
    registry = CollectorRegistry()
    quotas = {"warehouse": 1, "lake": 1}
    async with QuotaManager(
        MemoryBackend(), clock=clock, config_quotas=quotas, metrics=registry
    ) as manager:
        await manager.allocate("t1", [Claim("warehouse")], TASK)
        await manager.allocate("t2", [Claim("warehouse")], TASK)
        await manager.allocate("t3", [Claim("lake")], TASK)
        await manager.release("t3", ["lake"])

    def level(name: str, namespace: str) -> float | None:
        return registry.get_sample_value(name, {"namespace": namespace})

    assert level("sluice_resource_tokens_in_use", "warehouse") == 1
    assert level("sluice_resource_waiters", "warehouse") == 1
    assert level("sluice_resource_tokens_in_use", "lake") is None
    assert level("sluice_resource_waiters", "lake") is None
    scrape = generate_latest(registry).decode()
    assert "# TYPE sluice_resource_tokens_in_use gauge" in scrape
    assert "# TYPE sluice_resource_waiters gauge" in scrape


def test_a_registry_takes_the_series_once(clock: FakeClock) -> None:
    registry = CollectorRegistry()
    QuotaManager(MemoryBackend(), clock=clock, metrics=registry)

    with pytest.raises(ValueError, match="Duplicated timeseries"):
        QuotaManager(MemoryBackend(), clock=clock, metrics=registry)
