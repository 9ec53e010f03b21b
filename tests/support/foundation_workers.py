"""Code run in spawned processes by the store and notifier tests (importable by name).

Each worker opens its own Store or Notifier on the URL it is given, so contenders share
nothing but the database.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sluice.spec.phases import ExecutionPhase
from sluice.store.database import Database
from sluice.store.notify import Notifier
from sluice.store.store import Store

T0 = 1_700_000_000.0


def contend(owner: str, jobs: Any, barrier: Any, results: Any) -> None:
    """Play each job (url, cas_execution_id, claim_execution_id) taken from `jobs` until None.

    Per job, once every contender is ready: try QUEUED -> RUNNING on the first execution, then
    (after everyone tried) try to claim the second one. Reports
    ("ok", owner, won_cas, won_claim) or ("error", owner, text).
    """
    for url, cas_id, claim_id in iter(jobs.get, None):
        try:
            results.put(asyncio.run(_contend(url, owner, cas_id, claim_id, barrier)))
        except BaseException as exc:
            barrier.abort()  # the others must not wait for this process forever
            results.put(("error", owner, repr(exc)))


async def _contend(
    url: str, owner: str, cas_id: str, claim_id: str, barrier: Any
) -> tuple[str, str, bool, bool]:
    store = await Store.open(url)
    try:
        await asyncio.to_thread(barrier.wait)
        async with store.write() as repos:
            won_cas = await repos.executions.compare_and_set_phase(
                cas_id, [ExecutionPhase.QUEUED], ExecutionPhase.RUNNING, T0, reason=owner
            )
        await asyncio.to_thread(barrier.wait)
        async with store.write() as repos:
            won_claim = await repos.executions.claim(claim_id, owner, T0, 30.0) is not None
        return ("ok", owner, won_cas, won_claim)
    finally:
        await store.close()


def publish(url: str, channel: str, payload: str) -> None:
    """Publish one notification from this process, in a committed transaction."""
    asyncio.run(_publish(url, channel, payload))


async def _publish(url: str, channel: str, payload: str) -> None:
    db = await Database.open(url)
    try:
        notifier = Notifier(db, origin="publisher-process")
        async with db.begin() as conn:
            await notifier.publish(conn, channel, payload)
    finally:
        await db.close()
