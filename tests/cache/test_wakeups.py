"""Wake-ups: a put or a release reaches waiters in this process at once, and other processes
through the store's notifier; refused writes wake nobody."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from sluice.cache import CacheEntry, Catalog, MemoryRepository
from sluice.clock import FakeClock
from sluice.config import CacheConfig
from sluice.store.database import Database
from sluice.store.notify import Notifier

ENTRY = CacheEntry({"y": 1}, "wf.t", "v1")


async def test_local_subscribers_hear_puts_releases_and_sweeps() -> None:
    clock = FakeClock()
    catalog = Catalog(MemoryRepository(), clock=clock, config=CacheConfig())
    heard: list[str] = []
    unsubscribe = catalog.subscribe(heard.append)
    await catalog.put("e1", ENTRY)
    await catalog.put("e1", ENTRY)  # refused: nothing changed
    await catalog.get_or_extend_reservation("r1", "a", 10.0)
    await catalog.release_reservation("r1", "b")  # not the owner: nothing changed
    await catalog.release_reservation("r1", "a")
    await catalog.get_or_extend_reservation("r2", "a", 1.0)
    clock.advance(3)
    await catalog.sweep_expired()
    unsubscribe()
    unsubscribe()
    await catalog.put("e2", ENTRY)
    assert heard == ["e1", "r1", "r2"]


async def test_a_failing_subscriber_does_not_break_the_put() -> None:
    catalog = Catalog(MemoryRepository(), clock=FakeClock(), config=CacheConfig())
    heard: list[str] = []

    def broken(key: str) -> None:
        raise RuntimeError("subscriber bug")

    catalog.subscribe(broken)
    catalog.subscribe(heard.append)
    assert await catalog.put("k", ENTRY)
    assert heard == ["k"]


class _Listener:
    """Keys heard by a subscriber, and a way to wait for one."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, key: str) -> None:
        self.keys.append(key)
        self._changed.set()

    async def wait_for(self, key: str) -> None:
        async with asyncio.timeout(20):  # a bound on a hang, not a timing assertion
            while key not in self.keys:
                self._changed.clear()
                await self._changed.wait()


@pytest.fixture
async def db(store_url: str) -> AsyncIterator[Database]:
    db = await Database.open(store_url, upgrade=True)
    yield db
    await db.close()


async def test_other_engines_hear_changes_through_the_store(db: Database) -> None:
    # Two catalogs with notifiers of their own, as two engines (processes) would have.
    notifiers = [Notifier(db, f"engine-{i}", poll_interval=0.005) for i in range(2)]
    writer, waiter = [await Catalog.open(db, config=CacheConfig(), notifier=n) for n in notifiers]
    heard = _Listener()
    waiter.subscribe(heard)
    for notifier in notifiers:
        await notifier.start()
    try:
        await _write_and_listen(writer, heard)
    finally:
        for notifier in notifiers:
            await notifier.close()


async def _write_and_listen(writer: Catalog, heard: _Listener) -> None:
    await writer.get_or_extend_reservation("r1", "a", 10.0)
    await writer.put("e1", ENTRY)
    await heard.wait_for("e1")
    await writer.put("e1", ENTRY)  # refused
    await writer.release_reservation("r1", "someone-else")  # not the owner
    await writer.release_reservation("r1", "a")
    await heard.wait_for("r1")
    # Notifications arrive in commit order, so the refused writes would have come before r1.
    assert heard.keys == ["e1", "r1"]
