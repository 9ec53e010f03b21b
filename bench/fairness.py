"""How long a multi-unit claim waits among a stream of 1-unit claims, one JSON line per backend.

    .venv/bin/python bench/fairness.py                   # every backend that is reachable
    .venv/bin/python bench/fairness.py --rounds 5 --backends memory sqlite

Quota 4; eight claimers each take 1 unit, hold it `--hold` seconds (0.1), release it and ask
again at once, in a loop; after a warm-up, one claim of 4 units. Every claimer waits as the
engine does: woken by the manager when its token would now be granted (`subscribe_ready`),
and asking again every `RETRY` seconds regardless. All share one manager per backend (one
engine). Per backend, over the rounds (p50/max):

- `wait_s`: seconds from the 4-unit claim's first refusal to its grant;
- `wait_turnovers`: the same in hold times (`wait_s / hold`), as the issue counts them;
- `grants_to_others`: grants to the 1-unit claimers in that time, and `grant_turnovers`, the
  same over the quota (one turnover: every unit changed hands once). A grant is counted when
  its claimer sees it, so one made just before the first refusal may count (+1 at most per
  claimer whose answer was in flight);
- `starved`: rounds where it was not granted within `--cap` seconds (counted at the cap).

PostgreSQL at 127.0.0.1:5432 (a database created for the run and dropped) and Redis at
127.0.0.1:6379 (a key prefix of the run, deleted) are skipped when unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from resources import REDIS_URL, delete_redis_keys, postgres_database, reachable, upgrade
from sluice.clock import SystemClock
from sluice.resources import Claim, Holder, QuotaManager, from_url
from sluice.resources.admission import STARVATION_BOUND

QUOTA, CLAIMERS, WARM_UP_HOLDS = 4, 8, 5
RETRY = 1.0
"""A refused claimer asks again this often even without a wake-up (wake-ups are the norm)."""


class Round:
    """One namespace of its own, eight 1-unit claimers in a loop, one 4-unit claim."""

    def __init__(self, manager: QuotaManager, hold: float) -> None:
        self.manager, self.hold = manager, hold
        self.namespace = f"fair-{secrets.token_hex(4)}"
        self.grants = 0  # to the 1-unit claimers
        self.woken: dict[str, asyncio.Event] = {}

    def on_ready(self, namespace: str, tokens: tuple[str, ...] | None) -> None:
        if namespace == self.namespace:
            for token, event in self.woken.items():
                if tokens is None or token in tokens:
                    event.set()

    async def claim(self, token: str, units: int) -> tuple[float, int] | None:
        """Ask until granted; the time and grant count of the first refusal, if any."""
        event = self.woken.setdefault(token, asyncio.Event())
        claims, holder = [Claim(self.namespace, units)], Holder("bench", "dev", token, "n")
        first: tuple[float, int] | None = None
        try:
            while True:
                event.clear()  # before asking: a wake-up after the answer is kept
                if (await self.manager.allocate(token, claims, holder)).granted:
                    return first
                first = first or (time.perf_counter(), self.grants)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(RETRY):
                        await event.wait()
        finally:
            del self.woken[token]

    async def claimer(self, index: int) -> None:
        await asyncio.sleep(index * self.hold / CLAIMERS)
        for cycle in range(1_000_000):
            token = f"c{index}.{cycle}"
            try:
                await self.claim(token, 1)
                self.grants += 1
                await asyncio.sleep(self.hold)
            finally:
                await self.manager.release(token, [self.namespace])

    async def run(self, cap: float) -> dict[str, Any]:
        await self.manager.set_quota(self.namespace, QUOTA)
        unsubscribe = self.manager.subscribe_ready(self.on_ready)
        stream = [asyncio.create_task(self.claimer(i)) for i in range(CLAIMERS)]
        first: tuple[float, int] | None = None
        started = starved = False
        asked = 0
        try:
            await asyncio.sleep(WARM_UP_HOLDS * self.hold)
            started, asked = True, self.grants
            try:
                async with asyncio.timeout(cap):
                    first = await self.claim("big", QUOTA)
            except TimeoutError:
                starved = True
            granted, grants = time.perf_counter(), self.grants
        finally:
            for task in stream:
                task.cancel()
            await asyncio.gather(*stream, return_exceptions=True)
            if started:
                await self.manager.release("big", [self.namespace])
            unsubscribe()
        if starved:  # counted at the cap, from when it first asked
            return {"wait_s": cap, "grants_to_others": grants - asked, "starved": True}
        since, before = first if first is not None else (granted, grants)
        return {"wait_s": granted - since, "grants_to_others": grants - before, "starved": False}


def _spread(values: list[float], digits: int = 3) -> dict[str, float]:
    return {"p50": round(statistics.median(values), digits), "max": round(max(values), digits)}


async def measure(backend: str, url: str, prefix: str, args: argparse.Namespace) -> dict[str, Any]:
    manager = QuotaManager(from_url(url, key_prefix=prefix), clock=SystemClock(), lease=120.0)
    await manager.start()
    try:
        rounds = [await Round(manager, args.hold).run(args.cap) for _ in range(args.rounds)]
    finally:
        await manager.close()
    waits = [r["wait_s"] for r in rounds]
    others = [float(r["grants_to_others"]) for r in rounds]
    return {
        "bench": "fairness_four_unit_claim",
        "backend": backend,
        "rounds": args.rounds,
        "quota": QUOTA,
        "claimers": CLAIMERS,
        "hold_s": args.hold,
        "wait_s": _spread(waits),
        "wait_turnovers": _spread([w / args.hold for w in waits], 1),
        "grants_to_others": _spread(others, 0),
        "grant_turnovers": _spread([g / QUOTA for g in others], 2),
        "starved": sum(r["starved"] for r in rounds),
    }


def run_backend(backend: str, args: argparse.Namespace) -> dict[str, Any] | None:
    prefix = f"bench-fair-{os.getpid()}"
    if backend == "memory":
        return asyncio.run(measure(backend, "memory://", prefix, args))
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as tmp:
            url = f"sqlite:///{Path(tmp) / 'r.db'}"
            asyncio.run(upgrade(url))
            return asyncio.run(measure(backend, url, prefix, args))
    if backend == "postgresql" and reachable("127.0.0.1", 5432):
        with postgres_database() as url:
            return asyncio.run(measure(backend, url, prefix, args))
    if backend == "redis" and reachable("127.0.0.1", 6379):
        try:
            return asyncio.run(measure(backend, REDIS_URL, prefix, args))
        finally:
            delete_redis_keys(prefix)
    return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--hold", type=float, default=0.1)
    parser.add_argument("--cap", type=float, default=STARVATION_BOUND + 10)
    parser.add_argument(
        "--backends", nargs="+", default=["memory", "sqlite", "postgresql", "redis"]
    )
    args = parser.parse_args(argv)
    for backend in args.backends:
        line = run_backend(backend, args)
        if line is not None:
            print(json.dumps(line), flush=True)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
