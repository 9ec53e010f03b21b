"""Rate limit benchmark: admissions/s per backend against the store's own limit, and the most
admissions any window of the limit's period held in a 16-process race.

    .venv/bin/python bench/ratelimit.py            # every backend that is reachable
    .venv/bin/python bench/ratelimit.py --quick    # 1 s figures, a 1 s race

Prints one JSON line:

- `admissions`: per backend, uncontended admissions per second from one client (one key, a
  limit far above the pace, each admission a fresh token judged on the store's clock:
  `RateLimits.admit`, one transaction), against the store's bare limit of the same shape,
  measured in the same process in alternating rounds (`store_limits.py`): a CAS UPDATE +
  commit on SQLite (WAL, synchronous=NORMAL), a one-statement upsert + commit on PostgreSQL
  (our admission is one function call), one no-op EVALSHA carrying an admission's arguments
  on Redis (our admission is one script); `ratio` = ours / limit. Memory has no store.
- `race`: per shared backend, 16 processes (forked) admitting as fast as "20/s, burst 5"
  allows for `--race-seconds`; `largest_window` is the most admissions certainly inside one
  1 s window, from the callers' own (asked, answered) timestamps (each admission happened
  within its span; a group of spans within less than 1 s of each other is a group of
  admissions within one window). It must be at most 20.

PostgreSQL at 127.0.0.1:5432 (a database created for the run and dropped) and Redis at
127.0.0.1:6379 (a key prefix of the run, deleted) are skipped when unreachable.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import secrets
import socket
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import store_limits

from sluice.resources.ratelimit import RateClaim, RateLimitRule, RateLimits, from_url
from sluice.store.database import Database

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"
FAST = "1000000/s, burst 1000"  # never refuses at one client's pace
RACE_RATE, RACE_LIMIT, RACE_PERIOD, RACE_PROCESSES = "20/s, burst 5", 20, 1.0, 16


class RedisNoopScript:
    """One EVALSHA of a script that does nothing, with an admission's arguments."""

    name = "redis_noop_script"
    unit = "scripts"

    def __init__(self, prefix: str) -> None:
        self._args = [
            f"{prefix}:{{ratelimits}}",
            "",
            "t",
            "",
            "",
            "0",
            "30",
            "10",
            "bench",
            "k",
            "1",
        ]
        self._redis: Any = None
        self._sha = ""

    async def open(self) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.Redis.from_url(REDIS_URL)
        self._sha = await self._redis.script_load("return 1")

    async def step(self) -> None:
        await self._redis.evalsha(self._sha, 0, *self._args)

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


def _limit_for(backend: str, url: str, prefix: str) -> Any:
    if backend == "sqlite":
        return store_limits.SqliteCas()
    if backend == "postgresql":
        return store_limits.PostgresUpsert(url)
    return RedisNoopScript(prefix)


async def admissions(backend: str, url: str, prefix: str, seconds: float) -> dict[str, Any]:
    rules = {"bench": RateLimitRule.parse(FAST)}
    limits = RateLimits(from_url(url, key_prefix=prefix), config_rules=rules, remember=0)
    await limits.start()
    count = 0

    async def admit() -> None:
        nonlocal count
        count += 1
        if not (await limits.admit([RateClaim("bench", "k")], f"b{count}", remember=0)).granted:
            raise RuntimeError("an admission far below the limit was refused")

    try:
        if backend == "memory":
            rate = (await store_limits.alternate({"ours": admit}, seconds))["ours"]
            return {"rate": round(rate, 1)}
        limit = _limit_for(backend, url, prefix)
        await limit.open()
        try:
            rates = await store_limits.alternate({"ours": admit, limit.name: limit.step}, seconds)
        finally:
            await limit.close()
        return store_limits.ratio_line(rates, "ours", limit.name)
    finally:
        await limits.close()


def _race_worker(url: str, prefix: str, seconds: float, barrier: Any, results: Any) -> None:
    async def run() -> list[tuple[int, int]]:
        rules = {"race": RateLimitRule.parse(RACE_RATE)}
        spans: list[tuple[int, int]] = []
        async with RateLimits(from_url(url, key_prefix=prefix), config_rules=rules) as limits:
            barrier.wait()
            until, n = time.time() + seconds, 0
            token = f"{secrets.token_hex(4)}-0"
            while time.time() < until:
                asked = time.time_ns()
                admission = await limits.admit([RateClaim("race")], token, remember=0)
                if admission.granted:
                    spans.append((asked, time.time_ns()))
                    n += 1
                    token = f"{token.split('-')[0]}-{n}"
                else:
                    await asyncio.sleep(min(admission.wait, 0.25))
            with contextlib.suppress(Exception):
                await limits.withdraw([RateClaim("race")], token)
        return spans

    results.put(asyncio.run(run()))


def largest_window(spans: list[tuple[int, int]], period: float) -> int:
    spans = sorted(spans)
    width = int(period * 1e9)
    return max(
        (sum(1 for _, a in spans[i:] if a < start + width) for i, (start, _) in enumerate(spans)),
        default=0,
    )


def race(url: str, prefix: str, seconds: float) -> dict[str, Any]:
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(RACE_PROCESSES, timeout=120), ctx.Queue()
    procs = [
        ctx.Process(target=_race_worker, args=(url, prefix, seconds, barrier, results))
        for _ in range(RACE_PROCESSES)
    ]
    for proc in procs:
        proc.start()
    spans = [span for _ in procs for span in results.get(timeout=300)]
    for proc in procs:
        proc.join(timeout=60)
    return {
        "rate": RACE_RATE,
        "processes": RACE_PROCESSES,
        "seconds": seconds,
        "admissions": len(spans),
        "largest_window": largest_window(spans, RACE_PERIOD),
        "limit": RACE_LIMIT,
    }


def _reachable(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@contextlib.contextmanager
def location(backend: str) -> Iterator[tuple[str, str] | None]:
    """(url, key prefix) of a fresh place for `backend`, removed afterwards; None if its
    server is unreachable."""
    prefix = f"bench-rl-{secrets.token_hex(4)}"
    if backend == "memory":
        yield "memory://", prefix
    elif backend == "sqlite":
        with tempfile.TemporaryDirectory(prefix="sluice-rl-") as folder:
            url = f"sqlite:///{Path(folder) / 'bench.db'}"
            asyncio.run(_upgrade(url))
            yield url, prefix
    elif backend == "postgresql":
        if not _reachable(5432):
            yield None
            return
        import psycopg

        name = f"sluice_bench_rl_{secrets.token_hex(4)}"
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        url = PG_ADMIN.rpartition("/")[0] + f"/{name}"
        try:
            asyncio.run(_upgrade(url))
            yield url, prefix
        finally:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    else:
        if not _reachable(6379):
            yield None
            return
        try:
            yield REDIS_URL, prefix
        finally:
            import redis

            client = redis.Redis.from_url(REDIS_URL)
            keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
            if keys:
                client.delete(*keys)
            client.close()


async def _upgrade(url: str) -> None:
    db = await Database.open(url, upgrade=True)
    await db.close()


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0, help="per throughput figure")
    parser.add_argument("--race-seconds", type=float, default=3.0)
    parser.add_argument("--quick", action="store_true", help="1 s figures, a 1 s race")
    args = parser.parse_args(argv)
    if args.quick:
        args.seconds, args.race_seconds = 1.0, 1.0
    line: dict[str, Any] = {"bench": "ratelimit", "admissions": {}, "race": {}}
    for backend in ("memory", "sqlite", "postgresql", "redis"):
        with location(backend) as where:
            if where is None:
                line["admissions"][backend] = "skipped: unreachable"
                continue
            url, prefix = where
            line["admissions"][backend] = asyncio.run(
                admissions(backend, url, prefix, args.seconds)
            )
            if backend != "memory":
                line["race"][backend] = race(url, prefix, args.race_seconds)
    print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
