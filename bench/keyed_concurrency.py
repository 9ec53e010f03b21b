"""Keyed concurrency and idempotent creation figures (a benchmark, not a test). Prints one
JSON line:

- `fairness`: the controller's own decisions (concurrency/decide.py, in memory, simulated
  time) for one launch plan keyed by customer over 10 keys whose arrival rates differ 10x
  (0.5 to 5 executions/s), each key at most `--per-key` active, `--total` active over all
  keys, every execution taking 1 s. Every key arrives faster than its fair share of the
  total, so every key always has work waiting: runs per key over the measured window,
  max/min of those counts, and the same workload with the keys' turns ignored (the heads
  compete by creation time only: first come, first served) for comparison. `max_overtaken`
  is the most promotions of other keys seen while one key had work waiting and room, to set
  against the bound K = keys - 1 (docs/concurrency.md).
- `idempotent_create`: `Runtime.launch` of a one-task workflow (QUEUED, no policy) without a
  key and with a fresh idempotency key each time, in alternating rounds on SQLite and (with
  `--pg`) PostgreSQL: median milliseconds per create of each, their ratio, and a replay (the
  same key again). On PostgreSQL a scratch database is created for the run and dropped.

    python bench/keyed_concurrency.py [--seconds 2000] [--rounds 5] [--creates 100]
                                      [--pg postgresql://postgres@127.0.0.1:5432/postgres]
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import json
import random
import secrets
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import sluice
from sluice.concurrency import decide as decisions
from sluice.concurrency.decide import Caps, decide
from sluice.concurrency.queues import ControllerState, LaunchPlanQueue, Tracked
from sluice.config import load_config
from sluice.executions.policies import UNDECIDED_REASON
from sluice.runtime import Runtime
from sluice.spec.models import ConcurrencyPolicy
from sluice.spec.phases import ExecutionPhase

PLAN = ("bench", "bench", "per_customer")
KEYS = 10


class Book:
    def __init__(self, policy: ConcurrencyPolicy) -> None:
        self.given = policy

    def policy(self, item: Tracked) -> ConcurrencyPolicy | None:
        return self.given


def simulate(seconds: float, per_key: int, total: int, seed: int) -> dict[str, Any]:
    """One simulated run: arrivals (Poisson per key), promotions by decide(), 1 s runs."""
    rng = random.Random(seed)
    rates = [0.5 * 10 ** (i / (KEYS - 1)) for i in range(KEYS)]  # 0.5 .. 5 per second
    policy = ConcurrencyPolicy(per_key, key="{customer}", total_max=total)
    state, book = ControllerState(), Book(policy)
    state.shared_plans = {PLAN}
    events: list[tuple[float, int, str, str]] = []
    for k, rate in enumerate(rates):
        heapq.heappush(events, (rng.expovariate(rate), 0, "arrive", f"k{k}"))
    runs: Counter[str] = Counter()
    overtaken: Counter[str] = Counter()
    max_overtaken, serial, warmup = 0, 0, seconds / 10
    while events:
        at, _, kind, what = heapq.heappop(events)
        if at > seconds:
            break
        serial += 1
        if kind == "arrive":
            key = what
            state.observe(_item(f"e{serial}", key, at))
            heapq.heappush(events, (at + rng.expovariate(rates[int(key[1:])]), serial, kind, key))
        else:
            known = state.executions[what]
            state.observe(
                Tracked(what, PLAN, "v", ExecutionPhase.SUCCEEDED, 0, known.created_at), at
            )
        eligible = {q.group for q in state.queues.values() if _eligible(q, policy)}
        for promoted in decide(state, book, Caps()).promote:
            heapq.heappush(events, (at + 1.0, serial, "end", promoted.id))
            if at >= warmup:
                runs[promoted.group] += 1
            for other in eligible - {promoted.group}:
                overtaken[other] += 1
                max_overtaken = max(max_overtaken, overtaken[other])
            overtaken[promoted.group] = 0
            if not _eligible(state.queues[promoted.queue_key], policy):
                eligible.discard(promoted.group)
    counts = [runs[f"k{k}"] for k in range(KEYS)]
    return {
        "arrival_rates": [round(r, 2) for r in rates],
        "runs_per_key": counts,
        "max_min_ratio": round(max(counts) / max(min(counts), 1), 3),
        "max_overtaken": max_overtaken,
    }


def _item(execution_id: str, key: str, at: float) -> Tracked:
    return Tracked(
        execution_id,
        PLAN,
        "v",
        ExecutionPhase.PENDING,
        0,
        at,
        reason=UNDECIDED_REASON,
        concurrency_key=key,
        group=key,
    )


def _eligible(queue: LaunchPlanQueue, policy: ConcurrencyPolicy) -> bool:
    return bool(queue.pending) and len(queue.active) < policy.limit_for(queue.group)


def first_come_first_served(queue: LaunchPlanQueue) -> tuple[int, int, float, str] | None:
    """decide's rank with the keys' turns left out: heads compete by creation time."""
    head = queue.head()
    return None if head is None else (-head.priority, 0, head.created_at, head.id)


def fairness(seconds: float, per_key: int, total: int) -> dict[str, Any]:
    rotating = simulate(seconds, per_key, total, seed=7)
    rank = decisions._rank
    decisions._rank = first_come_first_served  # the comparison run only
    try:
        fifo = simulate(seconds, per_key, total, seed=7)
    finally:
        decisions._rank = rank
    return {
        "keys": KEYS,
        "per_key": per_key,
        "total_max": total,
        "simulated_seconds": seconds,
        **rotating,
        "bound_K": KEYS - 1,
        "first_come_runs_per_key": fifo["runs_per_key"],
        "first_come_max_min_ratio": fifo["max_min_ratio"],
    }


@sluice.task
def noop(n: int) -> int:
    return n


@sluice.workflow
def one(n: int = 0) -> int:
    return noop(n=n)


async def creates(url: str, rounds: int, count: int) -> dict[str, float]:
    rt = await Runtime.open(load_config(database_url=url), role="bench", upgrade=True)
    plain: list[float] = []
    keyed: list[float] = []
    replay: list[float] = []
    try:
        await rt.launch(one, {"n": -1})  # warm: plugins loaded, workflow stored
        for r in range(rounds):
            sides: list[tuple[list[float], Callable[[int], Any]]] = [
                (plain, lambda i: rt.launch(one, {"n": i})),
                (keyed, lambda i, r=r: rt.launch(one, {"n": i}, idempotency_key=f"k{r}-{i}")),
            ]
            for times, make in sides if r % 2 == 0 else reversed(sides):
                for i in range(count):
                    started = time.perf_counter()
                    await make(i)
                    times.append(time.perf_counter() - started)
            for i in range(count):
                started = time.perf_counter()
                await rt.launch(one, {"n": i}, idempotency_key=f"k{r}-{i}")
                replay.append(time.perf_counter() - started)
    finally:
        await rt.close()
    p, k = statistics.median(plain), statistics.median(keyed)
    return {
        "plain_ms": round(p * 1000, 3),
        "keyed_ms": round(k * 1000, 3),
        "keyed_over_plain": round(k / p, 3),
        "replay_ms": round(statistics.median(replay) * 1000, 3),
    }


async def on_postgresql(admin: str, rounds: int, count: int) -> dict[str, float]:
    import psycopg

    name = f"sluice_bench_{secrets.token_hex(4)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        return await creates(f"{admin.rpartition('/')[0]}/{name}", rounds, count)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=2000.0)
    parser.add_argument("--per-key", type=int, default=2)
    parser.add_argument("--total", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--creates", type=int, default=100)
    parser.add_argument("--pg", help="an admin URL of a PostgreSQL server (scratch database)")
    args = parser.parse_args()
    figures: dict[str, Any] = {"fairness": fairness(args.seconds, args.per_key, args.total)}
    with tempfile.TemporaryDirectory() as tmp:
        sqlite = asyncio.run(creates(f"sqlite:///{tmp}/bench.db", args.rounds, args.creates))
    figures["idempotent_create"] = {"sqlite": sqlite}
    if args.pg:
        pg = asyncio.run(on_postgresql(args.pg, args.rounds, args.creates))
        figures["idempotent_create"]["postgresql"] = pg
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
