"""Figures of the invariants that hold through faults, one JSON line each.

    .venv/bin/python bench/invariants.py                 # every backend that is reachable
    .venv/bin/python bench/invariants.py --rounds 10

- `hol_warehouse_only` (one line per backend): quotas `warehouse=2`, `lock:p1=1`,
  `lock:p2=1`; p1 and p2 held; claims `[lock:p1, warehouse]` and `[lock:p2, warehouse]`
  waiting. A claim of `warehouse` alone must be granted on its first ask (room is never held
  back for waiters that another namespace blocks): `granted_first_ask` over the rounds and the
  latency of that one allocate call (p50/max, ms). The same call on an idle namespace is
  measured in alternating rounds as the limit (`idle_allocate_ms`), so the ratio shows what
  the waiting claims cost the newcomer.
- `hung_plugin_timeout`: a plugin whose handle() awaits forever, a task `timeout` of 0.5 s and
  of 2.5 s (the second outlives one reconcile's step budget, so the call goes on in the
  background): seconds from the task's deadline to its terminal phase being stored in SQLite.

PostgreSQL at 127.0.0.1:5432 (a database created for the run and dropped) and Redis at
127.0.0.1:6379 (a key prefix of the run, deleted) are skipped when unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sluice
from resources import REDIS_URL, delete_redis_keys, postgres_database, reachable, upgrade
from sluice.clock import SystemClock
from sluice.config import load_config
from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import Transition
from sluice.plugins.core.plugin import PluginEntry, PluginProperties
from sluice.resources import Claim, Holder, QuotaManager, from_url
from sluice.runtime import Runtime


# Head-of-line blocking across namespaces.
async def _claim(manager: QuotaManager, token: str, *namespaces: str) -> bool:
    holder = Holder("bench", "dev", token, "n")
    result = await manager.allocate(token, [Claim(ns) for ns in namespaces], holder)
    return result.granted


async def _hol_round(url: str, prefix: str) -> tuple[bool, float, float]:
    manager = QuotaManager(from_url(url, key_prefix=prefix), clock=SystemClock())
    await manager.start()
    try:
        tag = secrets.token_hex(3)
        wh, p1, p2, idle = (f"{n}-{tag}" for n in ("warehouse", "lock:p1", "lock:p2", "idle"))
        for namespace, quota in ((wh, 2), (p1, 1), (p2, 1), (idle, 2)):
            await manager.set_quota(namespace, quota)
        assert await _claim(manager, f"h1-{tag}", p1)
        assert await _claim(manager, f"h2-{tag}", p2)
        assert not await _claim(manager, f"w1-{tag}", p1, wh)
        assert not await _claim(manager, f"w2-{tag}", p2, wh)
        started = time.perf_counter()
        granted = await _claim(manager, f"new-{tag}", wh)
        waited = time.perf_counter() - started
        started = time.perf_counter()
        assert await _claim(manager, f"idle-{tag}", idle)
        idle_call = time.perf_counter() - started
        return granted, waited * 1000, idle_call * 1000
    finally:
        await manager.close()


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 3), "max": round(max(values), 3)}


async def hol(backend: str, url: str, rounds: int, prefix: str) -> dict[str, Any]:
    granted, waits, idles = [], [], []
    for _ in range(rounds):
        ok, waited, idle = await _hol_round(url, prefix)
        granted.append(ok)
        waits.append(waited)
        idles.append(idle)
    return {
        "bench": "hol_warehouse_only",
        "backend": backend,
        "rounds": rounds,
        "granted_first_ask": sum(granted),
        "allocate_ms": _ms(waits),
        "idle_allocate_ms": _ms(idles),
        "ratio_p50": round(statistics.median(waits) / statistics.median(idles), 2),
    }


def hol_lines(rounds: int) -> list[dict[str, Any]]:
    prefix = f"bench-inv-{os.getpid()}"
    lines = [asyncio.run(hol("memory", "memory://", rounds, prefix))]
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'r.db'}"
        asyncio.run(upgrade(url))
        lines.append(asyncio.run(hol("sqlite", url, rounds, prefix)))
    if reachable("127.0.0.1", 5432):
        with postgres_database() as url:
            lines.append(asyncio.run(hol("postgresql", url, rounds, prefix)))
    if reachable("127.0.0.1", 6379):
        try:
            lines.append(asyncio.run(hol("redis", REDIS_URL, rounds, prefix)))
        finally:
            delete_redis_keys(prefix)
    return lines


# A plugin that never returns.
class Hang:
    id = "bench-hang"
    properties = PluginProperties()

    async def handle(self, ctx: TaskExecutionContext) -> Transition:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def abort(self, ctx: TaskExecutionContext) -> None:
        return None

    async def finalize(self, ctx: TaskExecutionContext) -> None:
        return None


@sluice.task(type="bench-hang", timeout=0.5, name="bench.hung_short")
def hung_short() -> int: ...


@sluice.task(type="bench-hang", timeout=2.5, name="bench.hung_long")
def hung_long() -> int: ...


@sluice.workflow(name="bench.hung_short_flow")
def hung_short_flow() -> int:
    return hung_short()


@sluice.workflow(name="bench.hung_long_flow")
def hung_long_flow() -> int:
    return hung_long()


async def _hung_once(tmp: Path, flow: Any, node: str, task_timeout: float) -> float:
    settings = load_config(
        database_url=f"sqlite:///{tmp / 's.db'}",
        engine={"workers": 1, "max_system_failures": 0, "plugin_call_timeout": 60.0},
    )
    rt = await Runtime.open(settings)
    try:
        await rt.load_plugins(
            [PluginEntry(id=Hang.id, task_types=(Hang.id,), load=lambda _: Hang())]
        )
        record = await rt.launch(flow, {})
        engine = await rt.engine(only=[record.id])
        await engine.start()
        try:
            while True:
                async with rt.store.read() as repos:
                    nodes = {n.node_id: n for n in await repos.nodes.list(record.id)}
                found = nodes.get(node)
                if found is not None and found.phase.is_terminal:
                    seen = time.time()
                    break
                await asyncio.sleep(0.002)
        finally:
            await engine.stop()
        assert found.attempt_started_at is not None
        return seen - (found.attempt_started_at + task_timeout)
    finally:
        await rt.close()


async def hung_lines(rounds: int) -> list[dict[str, Any]]:
    lines = []
    for flow, node, timeout in (
        (hung_short_flow, "hung_short", 0.5),
        (hung_long_flow, "hung_long", 2.5),
    ):
        seconds = []
        for _ in range(rounds):
            with tempfile.TemporaryDirectory() as tmp:
                seconds.append(await _hung_once(Path(tmp), flow, node, timeout))
        lines.append(
            {
                "bench": "hung_plugin_timeout",
                "task_timeout_s": timeout,
                "rounds": rounds,
                "deadline_to_stored_s": {
                    "p50": round(statistics.median(seconds), 3),
                    "max": round(max(seconds), 3),
                },
            }
        )
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    for line in hol_lines(args.rounds) + asyncio.run(hung_lines(args.rounds)):
        print(json.dumps(line), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
