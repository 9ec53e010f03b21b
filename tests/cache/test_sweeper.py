"""The background sweeper: started and stopped by the catalog, resilient to failed sweeps."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from sluice.cache import Catalog
from sluice.cache.sweeper import Sweeper
from sluice.clock import FakeClock
from sluice.errors import StoreError


async def _until(done: Callable[[], bool], clock: FakeClock, step: float) -> None:
    """Move fake time on until `done()`; the real-time bound only catches a hang."""
    async with asyncio.timeout(20):
        while not done():
            clock.advance(step)
            await asyncio.sleep(0.01)


async def test_catalog_sweeps_in_the_background(catalog: Catalog, clock: FakeClock) -> None:
    swept: list[str] = []
    catalog.subscribe(swept.append)
    await catalog.get_or_extend_reservation("short", "a", 1.0)
    await catalog.start()
    await catalog.start()  # idempotent
    await _until(lambda: swept == ["short"], clock, 1.0)
    assert await catalog.list_reservations() == []
    await catalog.close()
    await catalog.close()  # idempotent


async def test_a_failed_sweep_is_retried_next_round() -> None:
    clock, calls = FakeClock(), []

    async def sweep() -> None:
        calls.append(clock.now())
        if len(calls) == 1:
            raise StoreError("database briefly unreachable")

    sweeper = Sweeper(sweep, 5.0, clock)
    sweeper.start()
    assert sweeper.running
    await _until(lambda: len(calls) >= 2, clock, 5.0)
    await sweeper.stop()
    assert not sweeper.running
    count = len(calls)
    clock.advance(50)
    await asyncio.sleep(0.01)
    assert len(calls) == count
