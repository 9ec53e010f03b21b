"""Two crash-recovery defects, each in a deterministic scenario judged by the history checker.

(a) Quota over-allocation after a restart: X holds the quota of 1 and runs when its engine is
SIGKILLed; Y waits for the quota. A new engine starts only once X's token lease has lapsed.
The resumed attempt of X must re-verify what it holds before it runs on (DESIGN.md section
5, "Resume"); if it skips claiming and runs on its lapsed token while the freed token goes to
Y, two bodies live at once under a quota of 1.

(b) A resumed owner of a serialized cache reservation must go on renewing it (section 6,
"Running tasks extend their reservation every heartbeat"): O owns the reservation and runs
when its engine is SIGKILLed; a standby engine resumes it at once, long before the
reservation can lapse. If the resumed owner never heartbeats, the reservation expires while
it runs and the waiter W computes the same key too.

The probe bodies die with their engine (as python workers do); a resumed attempt's body is
started again by the new engine, and is really live while the other one runs: a body holds
while a file exists, and the test removes the file only once the overlap had every chance to
happen (the waiter started, or a bound passed).

Both defects were in the code when these tests were written: on 737717f (before 7735c04,
"Resumed attempts hold exactly what the stores say") all three tests fail, (a) with "quota
faults-q of 1: 2 bodies at once" on SQLite and PostgreSQL, (b) with "cache key ...: ... and
... computed at once". They pass since 7735c04.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from faults.harness import (
    EXPIRY,
    Engines,
    config,
    lapsed_leases,
    runtime,
    starts,
    verdict,
    wait_for,
    wait_node_phase,
    workload,
)
from sluice.plugins.core.phase import Phase

flows = workload()


async def _hold_until(history: Path, execution_id: str, bound: float) -> None:
    """Wait until `execution_id` has started a body (then a little more, so that the two
    lives overlap clearly), or `bound` seconds."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if starts(history, execution_id):
            break
        await asyncio.sleep(0.05)
    if starts(history, execution_id):
        await asyncio.sleep(0.3)


async def quota_after_lapse(url: str, tmp_path: Path) -> None:
    history, hold = tmp_path / "history.jsonl", tmp_path / "hold"
    hold.touch()
    cfg = config(resources={"lease": 1.0})
    async with runtime(url, cfg) as rt:
        engines = Engines(url, tmp_path / "logs", cfg)
        try:
            first = await asyncio.to_thread(engines.start)
            x = await rt.launch(flows.one_held, {"history": str(history), "hold": str(hold)})
            await wait_for(lambda: starts(history, x.id), what="X started")
            y = await rt.launch(flows.one_held, {"history": str(history)})
            await wait_node_phase(rt, y.id, "held", Phase.WAITING_FOR_RESOURCES)
            await asyncio.to_thread(engines.kill, first)
            deadline = time.monotonic() + 30
            while not await lapsed_leases(rt):  # X's token is free for anyone now
                assert time.monotonic() < deadline, "X's token lease never lapsed"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(engines.start)
            await wait_for(lambda: len(starts(history, x.id)) == 2, what="X resumed")
            await _hold_until(history, y.id, bound=4.0)
            hold.unlink()
            report = await verdict(rt, engines, history, [x.id, y.id])
        finally:
            engines.stop_all()
    print(f"quota after lapse: {report.summary()} peaks={report.peaks}")
    assert report.violations == []


async def reservation_after_resume(url: str, tmp_path: Path) -> None:
    history, hold = tmp_path / "history.jsonl", tmp_path / "hold"
    hold.touch()
    cfg = config()
    inputs = {"history": str(history), "hold": str(hold)}
    async with runtime(url, cfg) as rt:
        engines = Engines(url, tmp_path / "logs", cfg)
        try:
            first = await asyncio.to_thread(engines.start)
            owner = await rt.launch(flows.one_computed, inputs)
            await wait_for(lambda: starts(history, owner.id), what="the owner started")
            waiter = await rt.launch(flows.one_computed, inputs)
            await wait_node_phase(rt, waiter.id, "computed", Phase.WAITING_FOR_CACHE)
            # The standby: it takes over the moment the first one dies.
            await asyncio.to_thread(engines.start)
            await asyncio.to_thread(engines.kill, first)
            await wait_for(lambda: len(starts(history, owner.id)) == 2, what="owner resumed")
            await _hold_until(history, waiter.id, bound=EXPIRY + 3.0)
            hold.unlink()
            report = await verdict(rt, engines, history, [owner.id, waiter.id])
        finally:
            engines.stop_all()
    print(f"reservation after resume: {report.summary()} peaks={report.peaks}")
    assert report.violations == []


async def test_resumed_attempt_never_runs_on_a_lapsed_token_on_sqlite(
    sqlite_url: str, tmp_path: Path
) -> None:
    await quota_after_lapse(sqlite_url, tmp_path)


@pytest.mark.postgres
async def test_resumed_attempt_never_runs_on_a_lapsed_token_on_postgresql(
    pg_url: str, tmp_path: Path
) -> None:
    await quota_after_lapse(pg_url, tmp_path)


async def test_resumed_owner_keeps_its_reservation_on_sqlite(
    sqlite_url: str, tmp_path: Path
) -> None:
    await reservation_after_resume(sqlite_url, tmp_path)
