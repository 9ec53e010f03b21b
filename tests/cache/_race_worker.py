"""Code run in each spawned contender process of test_races.py (importable by name)."""

from __future__ import annotations

import asyncio
from typing import Any

from sluice.cache import Catalog, SqlRepository
from sluice.clock import FakeClock
from sluice.config import CacheConfig
from sluice.store.database import Database


def serve(owner: str, jobs: Any, barrier: Any, results: Any) -> None:
    """Play each job (url, rounds) taken from `jobs` as `owner`, until a None job."""
    for url, rounds in iter(jobs.get, None):
        try:
            asyncio.run(_contend(url, owner, rounds, barrier, results))
        except BaseException as exc:
            barrier.abort()  # the others must not wait for this process forever
            results.put(("error", owner, repr(exc)))


async def _contend(
    url: str, owner: str, rounds: list[tuple[str, float]], barrier: Any, results: Any
) -> None:
    """For each (key, now) round: once every contender is ready, reserve `key` as `owner` at
    `now`; once every claim is done, try to release it as a non-owner. Puts one report per
    round: ("ok", owner, key, holder seen, expires_at seen, released by a non-owner)."""
    db = await Database.open(url)
    clock = FakeClock()
    catalog = Catalog(SqlRepository(db), clock=clock, config=CacheConfig())
    try:
        for key, now in rounds:
            clock.advance(now - clock.now())
            await asyncio.to_thread(barrier.wait)  # every process is ready: go at once
            seen = await catalog.get_or_extend_reservation(key, owner, 10.0)
            await asyncio.to_thread(barrier.wait)  # every claim is done before any release
            released = seen.owner_id != owner and await catalog.release_reservation(key, owner)
            results.put(("ok", owner, key, seen.owner_id, seen.expires_at, released))
    finally:
        await db.close()
