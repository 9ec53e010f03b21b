"""Catalog policy on a fake clock, mostly on every backend: heartbeats, expiry, release, max age."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry

from sluice.cache import (
    CacheEntry,
    CacheSource,
    Catalog,
    CatalogRepository,
    MemoryRepository,
    Reservation,
)
from sluice.cache.backends.memory import MemoryReservations
from sluice.clock import FakeClock
from sluice.config import CacheConfig, load_config
from sluice.errors import ConfigError, InvalidArgumentError, OutputsError, StoreError

START = FakeClock().now()  # where the `clock` fixture starts


def entry(value: object = 1) -> CacheEntry:
    return CacheEntry({"y": value}, "wf.t", "v1", CacheSource("x1", "n0"))


# Heartbeats and expiry.


@pytest.mark.parametrize(
    ("requested", "heartbeat"),
    [
        (5.0, 5.0),
        (9.99, 9.99),
        (10.0, 10.0),
        (60.0, 10.0),
        (0.0, 10.0),
        (-3.0, 10.0),
        (math.nan, 10.0),
        (math.inf, 10.0),
    ],
)
async def test_heartbeat_is_clamped(requested: float, heartbeat: float) -> None:
    # Pure policy: the memory backend suffices (storage has its contract suite).
    catalog = Catalog(MemoryRepository(), clock=FakeClock(START), config=CacheConfig())
    got = await catalog.get_or_extend_reservation("k", "a", requested)
    assert (got.owner_id, got.heartbeat_interval) == ("a", heartbeat)
    assert got.expires_at == START + heartbeat * 3


@pytest.mark.parametrize(
    ("max_heartbeat", "multiplier", "expected"),
    [(0.0, 0, (10.0, 3)), (-1.0, -2, (10.0, 3)), (2.0, 5, (2.0, 5))],
)
async def test_non_positive_config_falls_back(
    clock: FakeClock, max_heartbeat: float, multiplier: int, expected: tuple[float, int]
) -> None:
    config = CacheConfig(
        max_reservation_heartbeat=max_heartbeat, heartbeat_grace_period_multiplier=multiplier
    )
    catalog = Catalog(MemoryRepository(), clock=clock, config=config)
    got = await catalog.get_or_extend_reservation("k", "a", 100.0)
    assert (got.heartbeat_interval, got.expires_at) == (
        expected[0],
        START + expected[0] * expected[1],
    )


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_non_finite_max_heartbeat_is_refused_by_the_config(bad: float) -> None:
    # NaN cannot fall back like a non-positive value: the config refuses it, naming the key.
    with pytest.raises(ConfigError, match=r"cache\.max_reservation_heartbeat"):
        load_config(cache={"max_reservation_heartbeat": bad})


async def test_others_see_the_holder(catalog: Catalog, clock: FakeClock) -> None:
    mine = await catalog.get_or_extend_reservation("k", "a", 10.0)
    clock.advance(29.9)
    assert await catalog.get_or_extend_reservation("k", "b", 5.0) == mine


async def test_owner_extends(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.get_or_extend_reservation("k", "a", 10.0)
    clock.advance(20)
    extended = await catalog.get_or_extend_reservation("k", "a", 4.0)
    assert (extended.owner_id, extended.expires_at) == ("a", START + 20 + 12)
    clock.advance(11.9)
    assert (await catalog.get_or_extend_reservation("k", "b", 10.0)).owner_id == "a"


async def test_takeover_after_expiry(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.get_or_extend_reservation("k", "a", 10.0)
    clock.advance(30)
    taken = await catalog.get_or_extend_reservation("k", "b", 10.0)
    assert (taken.owner_id, taken.expires_at) == ("b", START + 60)
    assert await catalog.get_or_extend_reservation("k", "a", 10.0) == taken


async def test_owner_renews_its_own_expired_reservation(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.get_or_extend_reservation("k", "a", 10.0)
    clock.advance(100)
    again = await catalog.get_or_extend_reservation("k", "a", 10.0)
    assert (again.owner_id, again.expires_at) == ("a", START + 130)


async def test_release_is_idempotent_and_owner_only(catalog: Catalog) -> None:
    held = await catalog.get_or_extend_reservation("k", "a", 10.0)
    assert not await catalog.release_reservation("k", "b")
    assert await catalog.get_or_extend_reservation("k", "c", 10.0) == held
    assert await catalog.release_reservation("k", "a")
    assert not await catalog.release_reservation("k", "a")
    assert not await catalog.release_reservation("never-reserved", "a")
    assert (await catalog.get_or_extend_reservation("k", "c", 10.0)).owner_id == "c"


@pytest.mark.parametrize(("key", "owner"), [("", "a"), ("k", ""), ("k" * 129, "a"), ("k", None)])
async def test_bad_ids_are_rejected(catalog: Catalog, key: str, owner: str) -> None:
    with pytest.raises(InvalidArgumentError):
        await catalog.get_or_extend_reservation(key, owner, 10.0)


async def test_catalog_without_clock_uses_the_repository_clock() -> None:
    authority = FakeClock(5_000.0)
    catalog = Catalog(MemoryRepository(authority), clock=None, config=CacheConfig())
    assert (await catalog.get_or_extend_reservation("k", "a", 10.0)).expires_at == 5_030.0
    await catalog.put("k", entry())
    assert (await catalog.get("k", max_age=1)) is not None
    authority.advance(1.5)
    assert await catalog.get("k", max_age=1) is None


class _EverChanging(MemoryReservations):
    """A row that someone else recreates and deletes between each of our steps."""

    async def create(self, reservation: Reservation, now: float) -> bool:
        return False


async def test_endless_contention_gives_up(clock: FakeClock) -> None:
    repo = MemoryRepository()
    repo.reservations = _EverChanging()
    catalog = Catalog(repo, clock=clock, config=CacheConfig())
    with pytest.raises(StoreError, match="changed hands"):
        await catalog.get_or_extend_reservation("k", "a", 10.0)


# Entries.


async def test_put_stamps_creation_and_refuses_overwrite(
    catalog: Catalog, clock: FakeClock
) -> None:
    assert await catalog.get("k") is None
    assert await catalog.put("k", entry(1))
    clock.advance(5)
    assert not await catalog.put("k", entry(2))
    got = await catalog.get("k")
    assert got is not None
    assert (got.outputs, got.created_at, got.source) == ({"y": 1}, START, CacheSource("x1", "n0"))


async def test_overwrite_replaces_and_restamps(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.put("k", entry(1))
    clock.advance(5)
    assert await catalog.put("k", entry(2), overwrite=True)
    got = await catalog.get("k")
    assert got is not None
    assert (got.outputs, got.created_at) == ({"y": 2}, START + 5)


async def test_max_age_makes_old_entries_misses(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.put("k", entry(1))
    clock.advance(60)
    assert await catalog.get("k", max_age=60) is not None
    clock.advance(0.5)
    assert await catalog.get("k", max_age=60) is None
    assert await catalog.get("k") is not None


async def test_stale_entry_does_not_block_its_replacement(
    catalog: Catalog, clock: FakeClock
) -> None:
    await catalog.put("k", entry(1))
    clock.advance(30)
    assert not await catalog.put("k", entry(2), max_age=60)
    clock.advance(31)
    assert await catalog.put("k", entry(3), max_age=60)
    got = await catalog.get("k", max_age=60)
    assert got is not None
    assert (got.outputs, got.created_at) == ({"y": 3}, START + 61)


@pytest.mark.parametrize("max_age", [0.0, -1.0, math.nan, math.inf])
async def test_bad_max_age_is_rejected(catalog: Catalog, max_age: float) -> None:
    with pytest.raises(InvalidArgumentError, match="max_age"):
        await catalog.get("k", max_age=max_age)


@pytest.mark.parametrize("outputs", [{"y": {1, 2}}, {"y": math.nan}, {"y": object()}, [1], {1: 2}])
async def test_non_json_outputs_are_not_cached(catalog: Catalog, outputs: object) -> None:
    bad = CacheEntry(outputs, "wf.t", "v1")  # type: ignore[arg-type]
    with pytest.raises(OutputsError, match=r"wf\.t"):
        await catalog.put("k", bad)
    assert await catalog.get("k") is None


# Visibility.


async def test_list_and_remove_entries(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.put("k1", entry())
    clock.advance(1)
    await catalog.put("k2", CacheEntry({}, "wf.other", "v2"))
    assert [(i.key, i.task_name, i.created_at) for i in await catalog.list_entries()] == [
        ("k2", "wf.other", START + 1),
        ("k1", "wf.t", START),
    ]
    assert await catalog.remove_entries(task_name="wf.other") == 1
    assert await catalog.remove_entries(["k1"]) == 1
    assert await catalog.list_entries() == []


async def test_remove_entries_needs_a_selection(catalog: Catalog) -> None:
    with pytest.raises(InvalidArgumentError):
        await catalog.remove_entries()
    with pytest.raises(InvalidArgumentError):
        await catalog.remove_entries("k1")


async def test_list_reservations_shows_expiry(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.get_or_extend_reservation("k1", "a", 10.0)
    clock.advance(40)
    await catalog.get_or_extend_reservation("k2", "b", 2.0)
    listed = [
        (i.reservation.key, i.reservation.owner_id, i.expires_in)
        for i in await catalog.list_reservations()
    ]
    assert listed == [("k1", "a", -10.0), ("k2", "b", 6.0)]


async def test_sweep_removes_only_expired(catalog: Catalog, clock: FakeClock) -> None:
    await catalog.get_or_extend_reservation("k1", "a", 10.0)
    await catalog.get_or_extend_reservation("k2", "b", 1.0)
    assert await catalog.sweep_expired() == 0
    clock.advance(3)
    assert await catalog.sweep_expired() == 1
    assert [i.reservation.key for i in await catalog.list_reservations()] == ["k1"]


# Metrics.


async def test_metrics_count_outcomes(repository: CatalogRepository, clock: FakeClock) -> None:
    registry = CollectorRegistry()
    catalog = Catalog(repository, clock=clock, config=CacheConfig(), metrics=registry)
    await catalog.get("k")
    await catalog.put("k", entry())
    await catalog.put("k", entry())
    await catalog.get("k")
    await catalog.get_or_extend_reservation("r", "a", 10.0)
    await catalog.get_or_extend_reservation("r", "a", 10.0)
    await catalog.get_or_extend_reservation("r", "b", 10.0)
    await catalog.release_reservation("r", "b")
    await catalog.release_reservation("r", "a")
    catalog.observe_reservation_wait(2.5)

    def value(name: str) -> float | None:
        return registry.get_sample_value(f"sluice_cache_{name}")

    assert [
        value(n + "_total")
        for n in (
            "hits",
            "misses",
            "puts",
            "put_conflicts",
            "reservations_acquired",
            "reservations_extended",
            "reservations_held_elsewhere",
            "reservations_released",
        )
    ] == [1, 1, 1, 1, 1, 1, 1, 1]
    assert value("reservation_wait_seconds_sum") == 2.5
