"""Code run in the spawned processes of tests/store/test_direct_paths.py (importable by
name once tests/ is on sys.path)."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

from sluice.clock import SystemClock
from sluice.resources import Claim, Holder, QuotaManager, from_url
from sluice.store.database import Database
from sluice.store.localwake import WakeReceiver
from sluice.store.notify import Notifier


def publish(url: str, payload: str) -> None:
    async def run() -> None:
        db = await Database.open(url)
        notifier = Notifier(db, "child")  # never started: sending needs no receiver
        try:
            async with db.begin() as conn:
                await notifier.publish(conn, "test", payload)
        finally:
            await notifier.close()
            await db.close()

    asyncio.run(run())


def register_and_hang(database: str, ready: Any) -> None:
    receiver = WakeReceiver.open(Path(database))
    ready.put(receiver is not None)
    time.sleep(600)


NAMESPACES = ("a", "b")


def churn(url: str, started: Any) -> None:
    async def run() -> None:
        manager = QuotaManager(from_url(url), clock=SystemClock(), config_quotas={"a": 5, "b": 3})
        await manager.start()
        started.put(os.getpid())
        holder = Holder("p", "d", "x", "n")
        count = 0
        while True:  # until SIGKILL: claims of one or both namespaces, some refused
            count += 1
            names = NAMESPACES[: 1 + count % 2]
            token = f"t{count}"
            await manager.allocate(token, [Claim(ns, units=1 + count % 2) for ns in names], holder)
            if count % 3:
                await manager.release(token, names)

    asyncio.run(run())
