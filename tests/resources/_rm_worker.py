"""Code run in the spawned processes of test_processes.py (importable by name)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import time
from typing import Any

from sluice.clock import SystemClock
from sluice.resources import Claim, Holder, QuotaManager, from_url

RACE = "race"
RETRY = 1.0  # asks again this often even without a wake-up (wake-ups are the normal path)


def manager_for(url: str, key_prefix: str, **options: Any) -> QuotaManager:
    return QuotaManager(from_url(url, key_prefix=key_prefix), clock=SystemClock(), **options)


def contend(
    url: str,
    key_prefix: str,
    index: int,
    cycles: int,
    quota: int,
    hold: float,
    barrier: Any,
    results: Any,
) -> None:
    """Allocate, hold from hold/5 to `hold` seconds, release, `cycles` times; put
    ("ok", index, [(granted_ns, releasing_ns)])."""
    try:
        intervals = asyncio.run(_contend(url, key_prefix, index, cycles, quota, hold, barrier))
        results.put(("ok", index, intervals))
    except BaseException as exc:
        barrier.abort()  # the others must not wait for this process forever
        results.put(("error", index, repr(exc)))


async def _contend(
    url: str, key_prefix: str, index: int, cycles: int, quota: int, hold: float, barrier: Any
) -> list[tuple[int, int]]:
    manager = manager_for(url, key_prefix, config_quotas={RACE: quota}, lease=120.0)
    await manager.start()
    woken = asyncio.Event()
    manager.subscribe(lambda namespace: woken.set())
    holder = Holder("race", "dev", f"x{index}", f"n{index}")
    intervals = []
    try:
        barrier.wait()
        for cycle in range(cycles):
            token = f"p{index}-{cycle}"
            await _until_granted(manager, token, holder, woken)
            granted = time.time_ns()
            await asyncio.sleep(hold * (0.2 + 0.8 * random.random()))
            intervals.append((granted, time.time_ns()))
            await manager.release(token, [RACE])
    finally:
        await manager.close()
    return intervals


async def _until_granted(
    manager: QuotaManager, token: str, holder: Holder, woken: asyncio.Event
) -> None:
    while True:
        woken.clear()
        if (await manager.allocate(token, [Claim(RACE)], holder)).granted:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(woken.wait(), RETRY)


def hold_and_hang(
    url: str, key_prefix: str, lease: float, namespaces: list[str], results: Any
) -> None:
    """Take every namespace with a short lease, report each lease's expiry, then hang until
    killed."""
    asyncio.run(_hold_and_hang(url, key_prefix, lease, namespaces, results))


async def _hold_and_hang(
    url: str, key_prefix: str, lease: float, namespaces: list[str], results: Any
) -> None:
    manager = manager_for(url, key_prefix, lease=lease, sweep_interval=1e6)
    await manager.start()
    for ns in namespaces:
        result = await manager.allocate(f"doomed-{ns}", [Claim(ns)], Holder("crash", "dev"))
        assert result.granted, result
    expiries = {
        ns: s.holders[0].lease_expires_at for ns in namespaces for s in await manager.describe(ns)
    }
    results.put((os.getpid(), expiries))
    await asyncio.sleep(3600)
