"""Execution concurrency controller figures (a benchmark, not a test). Prints one JSON line:

- promotions/s with 10,000 PENDING executions over 100 launch plans: `bulk` (every one may
  run: the rebuild decides them all) and `steady` (max 2 per launch plan; a stand-in engine
  ends each execution as soon as it is QUEUED, so every promotion follows an end through the
  notification path, as in production);
- promotion latency: from an execution's end (the ended_at written in the transaction that
  ends it and announces it) to the commit of the next PENDING one's QUEUED, measured by the
  controller (p50/p99), with ends paced so the controller is not saturated;
- controller memory with 100,000 PENDING executions (tracemalloc of its state, and the RSS
  growth of the process).

The controller runs against the store directly, without an engine. With --db postgresql://
the benchmark EMPTIES every sluice table of that database: give it a scratch database.

    python bench/concurrency.py [--db sqlite|postgresql://...] [--pending 10000]
                                [--plans 100] [--memory-pending 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from sluice.clock import SystemClock
from sluice.concurrency.controller import ConcurrencyController, ControllerOptions
from sluice.concurrency.leader import leader_lock_for
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.config import ConcurrencyConfig
from sluice.ids import new_execution_id
from sluice.spec.models import ConcurrencyPolicy, LaunchPlanSpec
from sluice.spec.phases import ExecutionPhase
from sluice.store import schema
from sluice.store.notify import EXECUTIONS_CHANNEL, Notifier
from sluice.store.store import Store

PROJECT, DOMAIN = "bench", "bench"


async def open_store(url: str) -> tuple[Store, Notifier]:
    store = await Store.open(url, upgrade=True)
    if store.db.dialect == "postgresql":
        async with store.write() as repos:
            names = ", ".join(t.name for t in schema.metadata.sorted_tables)
            await repos.conn.execute(sa.text(f"TRUNCATE {names}"))
    notifier = Notifier(store.db, f"bench:{new_execution_id()}")
    await notifier.start()
    return store, notifier


async def seed(store: Store, plans: int, pending: int, max_active: int, running: int = 0) -> None:
    """`plans` launch plans with ConcurrencyPolicy(max_active), `pending` PENDING executions
    spread over them, and `running` RUNNING ones per plan, inserted in bulk."""
    now = time.time()
    async with store.write() as repos:
        for p in range(plans):
            spec = LaunchPlanSpec(
                name=f"lp{p}",
                version="v1",
                workflow="wf@v1",
                concurrency=ConcurrencyPolicy(max_active),
            )
            await repos.launch_plans.put(PROJECT, DOMAIN, spec, now)
            await repos.launch_plans.set_active(PROJECT, DOMAIN, spec.name, "v1", now)
        rows = [_row(i % plans, "PENDING", now + i * 1e-6) for i in range(pending)]
        rows += [_row(p, "RUNNING", now) for p in range(plans) for _ in range(running)]
        for start in range(0, len(rows), 5000):
            await repos.conn.execute(sa.insert(schema.executions), rows[start : start + 5000])


def _row(plan: int, phase: str, at: float) -> dict[str, Any]:
    waiting = "waiting: behind others" if phase == "PENDING" else ""
    return {
        "id": new_execution_id(),
        "project": PROJECT,
        "domain": DOMAIN,
        "workflow_name": "wf",
        "workflow_version": "v1",
        "launch_plan": f"lp{plan}",
        "launch_plan_version": "v1",
        "phase": phase,
        "reason": waiting,
        "inputs": {},
        "options": {},
        "priority": 0,
        "created_at": at,
        "updated_at": at,
    }


def controller(store: Store, notifier: Notifier) -> ConcurrencyController:
    lock = leader_lock_for(store.db)
    options = ControllerOptions(standby_interval=0.5)  # production intervals otherwise
    return ConcurrencyController(
        store,
        notifier,
        SystemClock(),
        lock=lock,
        config=ConcurrencyConfig(),
        instance_id=f"bench:{new_execution_id()}",
        options=options,
    )


class StandInEngine:
    """Ends every QUEUED execution it hears of (or one per `pace` seconds), like engines
    whose executions finish at once: each end is committed and announced."""

    def __init__(self, store: Store, notifier: Notifier, pace: float | None = None) -> None:
        self.store, self.notifier, self.pace = store, notifier, pace
        self.heard: set[str] = set()
        self.wake = asyncio.Event()
        self.ended = 0
        notifier.subscribe(EXECUTIONS_CHANNEL, self._hear)

    def _hear(self, execution_id: str) -> None:
        self.heard.add(execution_id)
        self.wake.set()

    async def run(self, total: int) -> None:
        queued: list[str] = []
        while self.ended < total:
            if not queued:
                await self.wake.wait()
            self.wake.clear()
            ids, self.heard = self.heard, set()
            async with self.store.read() as repos:
                rows = await ConcurrencyRepository(repos.conn).by_ids(ids)
            queued += [item.id for item, _ in rows if item.phase is ExecutionPhase.QUEUED]
            batch, queued = (queued[:1], queued[1:]) if self.pace else (queued, [])
            await self._end(batch)
            if self.pace:
                await asyncio.sleep(self.pace)

    async def _end(self, ids: list[str]) -> None:
        if not ids:
            return
        t = schema.executions
        async with self.store.write() as repos:
            now = time.time()
            statement = (
                sa.update(t)
                .where(t.c.id.in_(ids), t.c.phase == ExecutionPhase.QUEUED.value)
                .values(phase=ExecutionPhase.SUCCEEDED.value, ended_at=now, updated_at=now)
                .returning(t.c.id)
            )
            ended = [row.id for row in await repos.conn.execute(statement)]
            await self.notifier.publish_many(repos.conn, EXECUTIONS_CHANNEL, ended)
        self.ended += len(ended)


async def bench_bulk(url: str, plans: int, pending: int) -> float:
    store, notifier = await open_store(url)
    try:
        await seed(store, plans, pending, max_active=pending)
        ctl = controller(store, notifier)
        assert await ctl.lock.try_acquire()
        started = time.perf_counter()
        await ctl.start_term()  # the lead taken, memory rebuilt from the store
        await ctl.step()  # one pass: every execution is promoted
        elapsed = time.perf_counter() - started
        assert ctl.state.pending_count == 0
        await ctl.lock.release()
        return pending / elapsed
    finally:
        await notifier.close()
        await store.close()


async def bench_cycle(
    url: str, plans: int, pending: int, max_active: int, pace: float | None
) -> tuple[float, list[float]]:
    """Promotions/s and the controller's end-to-QUEUED latencies while a stand-in engine ends
    executions; every promotion after the first pass follows an end."""
    store, notifier = await open_store(url)
    try:
        await seed(store, plans, pending, max_active)
        ctl = controller(store, notifier)
        engine = StandInEngine(store, notifier, pace)  # one process, as in `sluice serve`
        running = asyncio.create_task(ctl.run())
        await asyncio.wait_for(ctl.leading.wait(), 60)
        started = time.perf_counter()
        engine.wake.set()
        ending = asyncio.create_task(engine.run(pending))
        await asyncio.wait_for(ending, 600)
        elapsed = time.perf_counter() - started
        running.cancel()
        await asyncio.gather(running, return_exceptions=True)
        return pending / elapsed, list(ctl.latencies)
    finally:
        await notifier.close()
        await store.close()


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


async def bench_memory(url: str, plans: int, pending: int) -> dict[str, float]:
    store, notifier = await open_store(url)
    try:
        await seed(store, plans, pending, max_active=1, running=1)
        ctl = controller(store, notifier)
        assert await ctl.lock.try_acquire()
        gc.collect()
        rss_before = rss_mb()
        tracemalloc.start()
        await ctl.start_term()
        await ctl.step()
        gc.collect()
        traced, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert ctl.state.pending_count == pending
        state_mb = traced / 2**20
        await ctl.lock.release()
        return {
            "state_traced_mb": round(state_mb, 1),
            "rss_growth_mb": round(rss_mb() - rss_before, 1),
        }
    finally:
        await notifier.close()
        await store.close()


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="sluice-bench-"))

    def url(name: str) -> str:
        return args.db if args.db != "sqlite" else f"sqlite:///{work / name}.db"

    bulk = await bench_bulk(url("bulk"), args.plans, args.pending)
    steady, _ = await bench_cycle(url("steady"), args.plans, args.pending, 2, None)
    _, latencies = await bench_cycle(url("latency"), args.plans, args.latency_samples, 1, args.pace)
    memory = await bench_memory(url("memory"), args.plans, args.memory_pending)
    return {
        "benchmark": "concurrency_controller",
        "database": "sqlite" if args.db == "sqlite" else "postgresql",
        "pending": args.pending,
        "launch_plans": args.plans,
        "promotions_per_s_bulk": round(bulk),
        "promotions_per_s_steady": round(steady),
        "promotion_latency_ms_p50": round(statistics.median(latencies) * 1000, 1),
        "promotion_latency_ms_p99": round(percentile(latencies, 0.99) * 1000, 1),
        "latency_samples": len(latencies),
        "memory_pending": args.memory_pending,
        **memory,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--db",
        default="sqlite",
        help="sqlite (a temporary file) or a postgresql:// URL of a scratch database (emptied)",
    )
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--plans", type=int, default=100)
    parser.add_argument("--memory-pending", type=int, default=100_000)
    parser.add_argument("--latency-samples", type=int, default=2_000)
    parser.add_argument("--pace", type=float, default=0.005, help="seconds between paced ends")
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
