"""Tests written against mutants of the catalog (docs/mutation.md): its reservation and entry
policy on the memory repository and a FakeClock. In process."""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable

import pytest
from prometheus_client import CollectorRegistry

from sluice.cache import CacheEntry, Catalog, MemoryRepository, Reservation
from sluice.cache.backends.memory import MemoryEntries, MemoryReservations
from sluice.clock import FakeClock
from sluice.config import CacheConfig
from sluice.errors import InvalidArgumentError, StoreError

T0 = 1_000.0
ENTRY = CacheEntry({"y": 1}, "wf.t", "v1")


def catalog(**config: float) -> Catalog:
    clock = FakeClock(T0)
    return Catalog(MemoryRepository(clock), clock=clock, config=CacheConfig(**config))


async def test_hits_and_misses_are_counted_apart() -> None:
    registry = CollectorRegistry()
    cat = Catalog(MemoryRepository(), clock=FakeClock(T0), config=CacheConfig(), metrics=registry)
    await cat.get("k")
    await cat.get("k")
    await cat.put("k", ENTRY)
    await cat.get("k")
    assert registry.get_sample_value("sluice_cache_misses_total") == 2
    assert registry.get_sample_value("sluice_cache_hits_total") == 1


@pytest.mark.parametrize(
    ("key", "owner", "named"),
    [
        ("", "a", "key"),
        ("k" * 129, "a", "key"),
        ("k", "", "owner_id"),
        ("k", "o" * 401, "owner_id"),
    ],
)
async def test_a_bad_reservation_id_is_named_in_the_error(key: str, owner: str, named: str) -> None:
    with pytest.raises(InvalidArgumentError, match=rf"^{named} must be a non-empty str"):
        await catalog().get_or_extend_reservation(key, owner, 1.0)


async def test_the_longest_ids_are_accepted() -> None:
    held = await catalog().get_or_extend_reservation("k" * 128, "o" * 400, 1.0)
    assert (len(held.key), len(held.owner_id)) == (128, 400)


@pytest.mark.parametrize("key", ["", "k" * 129])
async def test_a_bad_entry_key_is_named_in_the_error(key: str) -> None:
    cat = catalog()
    with pytest.raises(InvalidArgumentError, match=r"^key must be a non-empty str of at most 128"):
        await cat.put(key, ENTRY)


@pytest.mark.parametrize("max_age", [0.0, -1.0, math.nan, math.inf])
async def test_put_refuses_a_bad_max_age_before_writing(max_age: float) -> None:
    cat = catalog()
    with pytest.raises(InvalidArgumentError, match="max_age"):
        await cat.put("k", ENTRY, max_age=max_age)
    assert await cat.list_entries() == []


async def test_a_reservation_that_keeps_changing_hands_gives_up_after_five_tries() -> None:
    class Lost(MemoryReservations):
        creates = 0

        async def create(self, reservation: Reservation, now: float) -> bool:
            Lost.creates += 1
            return False

    repo = MemoryRepository(FakeClock(T0))
    repo.reservations = Lost()
    cat = Catalog(repo, clock=None, config=CacheConfig())
    with pytest.raises(StoreError) as raised:
        await cat.get_or_extend_reservation("k", "a", 1.0)
    assert str(raised.value) == (
        "reservation of 'k' changed hands 5 times while claiming it; try again"
    )
    assert Lost.creates == 5


@pytest.mark.parametrize(
    ("requested", "max_heartbeat", "multiplier", "heartbeat", "expires_in"),
    [
        (4.0, 10.0, 3, 4.0, 12.0),  # under the max: as asked, times the grace multiplier
        (10.0, 10.0, 3, 10.0, 30.0),  # at the max
        (12.0, 10.0, 3, 10.0, 30.0),  # over it: capped
        (0.0, 10.0, 3, 10.0, 30.0),  # a non-positive request gets the max
        (-1.0, 6.0, 2, 6.0, 12.0),
        (4.0, 6.0, 1, 4.0, 4.0),  # a multiplier of 1 is kept
        (8.0, 0.0, 0, 8.0, 24.0),  # non-positive config falls back to 10 s and x3
        (20.0, -5.0, -1, 10.0, 30.0),
    ],
)
async def test_the_reservation_expires_a_heartbeat_times_the_grace_multiplier_from_now(
    requested: float, max_heartbeat: float, multiplier: int, heartbeat: float, expires_in: float
) -> None:
    cat = catalog(
        max_reservation_heartbeat=max_heartbeat, heartbeat_grace_period_multiplier=multiplier
    )
    held = await cat.get_or_extend_reservation("k", "a", requested)
    assert (held.heartbeat_interval, held.expires_at) == (heartbeat, T0 + expires_in)
    assert (cat.max_heartbeat, cat.multiplier) == (
        max_heartbeat if max_heartbeat > 0 else 10.0,
        multiplier if multiplier > 0 else 3,
    )


async def test_a_live_reservation_has_one_owner_until_it_expires() -> None:
    clock = FakeClock(T0)
    cat = Catalog(MemoryRepository(clock), clock=clock, config=CacheConfig())
    mine = await cat.get_or_extend_reservation("k", "a", 2.0)
    clock.advance(5.9)
    assert await cat.get_or_extend_reservation("k", "b", 2.0) == mine
    clock.advance(0.1)  # expired at exactly expires_at
    taken = await cat.get_or_extend_reservation("k", "b", 2.0)
    assert taken == Reservation("k", "b", 2.0, T0 + 12.0)
    assert await cat.get_or_extend_reservation("k", "a", 2.0) == taken


async def test_a_release_wakes_only_when_it_deleted_the_owners_row() -> None:
    cat = catalog()
    woken: list[str] = []
    cat.subscribe(woken.append)
    await cat.get_or_extend_reservation("k", "a", 1.0)
    assert not await cat.release_reservation("k", "b")
    assert woken == []
    assert await cat.release_reservation("k", "a")
    assert woken == ["k"]
    assert not await cat.release_reservation("k", "a")
    assert woken == ["k"]


async def test_a_put_wakes_only_when_it_stored() -> None:
    cat = catalog()
    woken: list[str] = []
    cat.subscribe(woken.append)
    assert await cat.put("k", ENTRY)
    assert not await cat.put("k", ENTRY)
    assert woken == ["k"]


class OutOfOrderEntries(MemoryEntries):
    """Entry reads that each wait for their own event, so a later read can finish first."""

    def __init__(self) -> None:
        super().__init__()
        self.gates: list[asyncio.Event] = []

    async def get(self, key: str) -> CacheEntry | None:
        gate = asyncio.Event()
        self.gates.append(gate)
        await gate.wait()
        return await super().get(key)


async def test_a_stale_read_finishing_after_a_fresh_one_is_forgotten_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    repo = MemoryRepository()
    entries = OutOfOrderEntries()
    repo.entries = entries
    cat = Catalog(repo, clock=FakeClock(T0), config=CacheConfig())
    first = asyncio.create_task(cat.get("k"))
    await asyncio.sleep(0)
    second = asyncio.create_task(cat.get("k", fresh=True))
    for _ in range(3):
        await asyncio.sleep(0)
    entries.gates[1].set()
    assert await second is None
    entries.gates[0].set()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        assert await first is None
        for _ in range(3):
            await asyncio.sleep(0)
    assert caplog.records == []
    assert cat._reads == {}


class FakeNotifier:
    """The one method of Notifier the catalog uses, and a way to deliver a notification."""

    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callable[[str], None]]] = {}

    def subscribe(self, channel: str, callback: Callable[[str], None]) -> Callable[[], None]:
        self.callbacks.setdefault(channel, []).append(callback)
        return lambda: self.callbacks[channel].remove(callback)

    def deliver(self, channel: str, payload: str) -> None:
        for callback in list(self.callbacks.get(channel, [])):
            callback(payload)


async def test_a_wake_up_from_another_process_reaches_the_subscriber() -> None:
    notifier = FakeNotifier()
    cat = Catalog(
        MemoryRepository(),
        clock=FakeClock(T0),
        config=CacheConfig(),
        notifier=notifier,  # type: ignore[arg-type]
    )
    woken: list[str] = []
    unsubscribe = cat.subscribe(woken.append)
    notifier.deliver("cache", "k")
    assert woken == ["k"]
    unsubscribe()
    notifier.deliver("cache", "k")
    assert (woken, notifier.callbacks["cache"]) == (["k"], [])


async def test_the_sweeper_runs_on_the_injected_clock() -> None:
    clock = FakeClock(T0)
    cat = Catalog(MemoryRepository(clock), clock=clock, config=CacheConfig())
    swept: list[str] = []
    cat.subscribe(swept.append)
    await cat.get_or_extend_reservation("k", "a", 1.0)  # expires in 3 s; sweeps every 10 s
    await cat.start()
    for _ in range(5):
        await asyncio.sleep(0)
    clock.advance(10.0)
    for _ in range(20):
        if swept:
            break
        await asyncio.sleep(0)
    await cat.close()
    assert swept == ["k"]
