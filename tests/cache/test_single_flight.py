"""Concurrent gets of one key share one read, unless a wake-up came after that read began."""

from __future__ import annotations

import asyncio

import pytest

from sluice.cache import CacheEntry, Catalog, MemoryRepository
from sluice.clock import FakeClock
from sluice.config import CacheConfig
from support.cache import HeldEntries

ENTRY = CacheEntry({"y": 1}, "wf.t", "v1")


def held_catalog() -> tuple[Catalog, HeldEntries]:
    repository = MemoryRepository()
    entries = HeldEntries()
    repository.entries = entries
    return Catalog(repository, clock=FakeClock(), config=CacheConfig()), entries


async def settle() -> None:
    for _ in range(3):  # let every task reach its await
        await asyncio.sleep(0)


async def test_a_herd_of_gets_costs_one_read_and_all_see_its_answer() -> None:
    catalog, entries = held_catalog()
    await catalog.put("k", ENTRY)
    gets = [asyncio.create_task(catalog.get("k")) for _ in range(8)]
    await settle()
    entries.go.set()
    results = await asyncio.gather(*gets)
    assert entries.reads == 1
    assert all(r is not None and r.outputs == {"y": 1} for r in results)


async def test_a_get_after_a_wake_up_does_not_join_a_read_begun_before_it() -> None:
    catalog, entries = held_catalog()
    catalog.subscribe(lambda key: None)
    before = asyncio.create_task(catalog.get("k"))
    await settle()
    await catalog.put("k", ENTRY)  # a wake-up: the read in flight may predate it
    after = asyncio.create_task(catalog.get("k"))
    await settle()
    entries.go.set()
    assert (await after) is not None
    await before
    assert entries.reads == 2


async def test_fresh_never_joins_a_read_in_flight() -> None:
    catalog, entries = held_catalog()
    shared = asyncio.create_task(catalog.get("k"))
    await settle()
    fresh = asyncio.create_task(catalog.get("k", fresh=True))
    await settle()
    entries.go.set()
    await asyncio.gather(shared, fresh)
    assert entries.reads == 2


async def test_a_cancelled_getter_leaves_the_shared_read_to_the_others() -> None:
    catalog, entries = held_catalog()
    await catalog.put("k", ENTRY)
    quitter = asyncio.create_task(catalog.get("k"))
    stayer = asyncio.create_task(catalog.get("k"))
    await settle()
    quitter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await quitter
    entries.go.set()
    assert (await stayer) is not None
    assert entries.reads == 1


async def test_a_failed_read_fails_every_sharer_and_the_next_get_reads_again() -> None:
    catalog, entries = held_catalog()
    real_get = entries.get

    async def broken(key: str) -> CacheEntry | None:
        await real_get(key)
        raise RuntimeError("store unreachable")

    entries.get = broken  # type: ignore[method-assign]
    gets = [asyncio.create_task(catalog.get("k")) for _ in range(3)]
    await settle()
    entries.go.set()
    outcomes = await asyncio.gather(*gets, return_exceptions=True)
    assert all(isinstance(o, RuntimeError) for o in outcomes)
    entries.get = real_get  # type: ignore[method-assign]
    assert await catalog.get("k") is None
    assert entries.reads == 2
