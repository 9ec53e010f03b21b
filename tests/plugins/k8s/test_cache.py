"""The watch cache (informer) over the in-memory API, and the refresh registry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from sluice.clock import FakeClock
from sluice.plugins.k8s import (
    KindRef,
    KubeApiError,
    KubeNotFoundError,
    ObjectRef,
    RefreshRegistry,
    WatchCache,
)
from sluice.plugins.k8s.testing import FakeKubeClient

CONFIG_MAP = KindRef("v1", "ConfigMap")


def config_map(name: str, labels: dict[str, str] | None = None) -> dict[str, object]:
    metadata = {"name": name, "namespace": "ns", "labels": labels or {"app": "x"}}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": {}}


def ref(name: str) -> ObjectRef:
    return ObjectRef("v1", "ConfigMap", "ns", name)


async def until(condition: Callable[[], bool]) -> None:
    """Let the event loop run until `condition` holds (a bounded number of turns)."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("condition never held")


def gets(kube: FakeKubeClient) -> int:
    return sum(1 for op, _ in kube.calls if op == "get")


async def test_cache_serves_reads_and_reports_changes():
    kube, changes = FakeKubeClient(), []
    cache = WatchCache(kube, FakeClock(), changes.append, "app=x")
    await kube.create(config_map("a"))
    try:
        cache.watch(CONFIG_MAP, "ns")
        await until(lambda: cache.is_synced(CONFIG_MAP, "ns"))
        await kube.patch(ref("a"), {"data": {"k": "v"}})
        await until(lambda: changes.count(ref("a")) >= 2)

        assert (await cache.get(ref("a")))["data"] == {"k": "v"}
        assert gets(kube) == 0
    finally:
        await cache.close()


async def test_objects_outside_the_selector_are_read_from_the_api():
    kube = FakeKubeClient()
    cache = WatchCache(kube, FakeClock(), lambda _: None, "app=x")
    await kube.create(config_map("foreign", labels={"app": "other"}))
    try:
        cache.watch(CONFIG_MAP, "ns")
        await until(lambda: cache.is_synced(CONFIG_MAP, "ns"))
        assert (await cache.get(ref("foreign")))["metadata"]["name"] == "foreign"
        assert gets(kube) == 1
    finally:
        await cache.close()


async def test_a_lost_watch_history_relists_and_catches_up():
    kube, changes = FakeKubeClient(), []
    cache = WatchCache(kube, FakeClock(), changes.append, "app=x")
    await kube.create(config_map("a"))
    try:
        cache.watch(CONFIG_MAP, "ns")
        await until(lambda: cache.is_synced(CONFIG_MAP, "ns"))
        await kube.create(config_map("b"))
        kube.compact()
        kube.disconnect_watches()  # the informer resumes from an expired version: Gone
        await until(lambda: sum(op == "list" for op, _ in kube.calls) == 2)
        await until(lambda: ref("b") in changes)

        assert (await cache.get(ref("b")))["metadata"]["name"] == "b"
        assert gets(kube) == 0
    finally:
        await cache.close()


async def test_deleted_objects_leave_the_cache():
    kube, changes = FakeKubeClient(), []
    cache = WatchCache(kube, FakeClock(), changes.append, "app=x")
    await kube.create(config_map("a"))
    try:
        cache.watch(CONFIG_MAP, "ns")
        await until(lambda: cache.is_synced(CONFIG_MAP, "ns"))
        await kube.delete(ref("a"))
        await until(lambda: changes.count(ref("a")) >= 2)
        with pytest.raises(KubeNotFoundError):
            await cache.get(ref("a"))
    finally:
        await cache.close()


async def test_reads_fall_back_to_the_api_until_the_watch_recovers():
    kube, clock = FakeKubeClient(), FakeClock()
    cache = WatchCache(kube, clock, lambda _: None, "app=x", retry_delay=5.0)
    await kube.create(config_map("a"))
    kube.fail("list", KubeApiError("apiserver restarting"))
    try:
        cache.watch(CONFIG_MAP, "ns")
        await until(lambda: any(op == "list" for op, _ in kube.calls))
        assert (await cache.get(ref("a")))["metadata"]["name"] == "a"
        assert gets(kube) == 1

        clock.advance(5.0)
        await until(lambda: cache.is_synced(CONFIG_MAP, "ns"))
        await cache.get(ref("a"))
        assert gets(kube) == 1
    finally:
        await cache.close()


def test_refresh_registry_calls_only_the_registered_callback():
    registry, called = RefreshRegistry(), []

    def broken() -> None:
        raise RuntimeError("boom")

    registry.register(ref("a"), lambda: called.append("a"))
    registry.register(ref("b"), broken)
    registry.notify(ref("b"))  # a failing callback is logged, not raised
    registry.notify(ref("a"))
    registry.notify(ref("c"))
    registry.unregister(ref("a"))
    registry.notify(ref("a"))

    assert called == ["a"]
    assert len(registry) == 1
