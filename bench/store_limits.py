"""The physical limits the store benches compare their paths with, measured in the same process.

    .venv/bin/python bench/store_limits.py            # every limit that is reachable, 1 s each
    .venv/bin/python bench/store_limits.py --quick    # 0.3 s each

- `sqlite_cas`: a compare-and-swap UPDATE (`... SET v = v + 1 WHERE k = ? AND v = ?`) and its
  commit, on a WAL file with synchronous=NORMAL, through the plain sqlite3 module: what one
  write transaction of the embedded store costs at the least;
- `postgresql_upsert`: one `INSERT ... ON CONFLICT DO UPDATE` of one row of a plain (logged)
  table in autocommit through a plain psycopg 3 async connection: one round trip and one
  commit, with its WAL flush (a temporary table would skip the flush);
- `redis_two_pings`: two PINGs on one redis-py async connection: the round trips an
  allocate+release pair needs at the least.

The benches (`resources.py`, `cache.py`) import the `Limit` classes and run them in rounds
alternating with the path they measure, so that a change of load weighs on both alike; run
alone, this prints one JSON line per limit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import sqlite3
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/0"
Step = Callable[[], Awaitable[None]]


class SqliteCas:
    """A bare CAS UPDATE + commit per step, on a WAL NORMAL file of its own."""

    name = "sqlite_cas"
    unit = "updates"

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="sluice-limit-")
        path = Path(self._dir.name) / "cas.db"
        self._conn = sqlite3.connect(str(path), isolation_level=None)
        self._conn.execute("PRAGMA journal_mode = WAL")
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._conn.execute("CREATE TABLE cas (k INTEGER PRIMARY KEY, v INTEGER NOT NULL)")
        self._conn.execute("INSERT INTO cas VALUES (1, 0)")
        self._version = 0

    async def open(self) -> None:
        return None

    async def step(self) -> None:
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        cur = conn.execute("UPDATE cas SET v = v + 1 WHERE k = 1 AND v = ?", (self._version,))
        conn.execute("COMMIT")
        if cur.rowcount != 1:
            raise RuntimeError("the CAS lost: nobody else writes this file")
        self._version += 1

    async def close(self) -> None:
        self._conn.close()
        self._dir.cleanup()


class PostgresUpsert:
    """A bare single-statement upsert per step, autocommit, psycopg 3 async."""

    name = "postgresql_upsert"
    unit = "upserts"

    def __init__(self, url: str) -> None:
        self._url = url
        self._conn: Any = None
        self._count = 0
        # A plain (logged) table: a temporary one writes no WAL, so its commits cost nothing.
        self._table = f"sluice_limit_upsert_{os.getpid()}_{secrets.token_hex(3)}"

    async def open(self) -> None:
        import psycopg

        self._conn = await psycopg.AsyncConnection.connect(self._url, autocommit=True)
        await self._conn.execute(
            f"CREATE TABLE {self._table} (k integer PRIMARY KEY, v bigint NOT NULL)"
        )

    async def step(self) -> None:
        self._count += 1
        await self._conn.execute(
            f"INSERT INTO {self._table} VALUES (1, %s)"
            " ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v",
            (self._count,),
        )

    async def close(self) -> None:
        if self._conn is not None:
            await self._conn.execute(f"DROP TABLE IF EXISTS {self._table}")
            await self._conn.close()


class RedisTwoPings:
    """Two bare PINGs per step on one connection."""

    name = "redis_two_pings"
    unit = "pairs of PINGs"

    def __init__(self, url: str = REDIS_URL) -> None:
        self._url = url
        self._redis: Any = None

    async def open(self) -> None:
        import redis.asyncio as aioredis

        self._redis = aioredis.Redis.from_url(self._url)
        await self._redis.ping()

    async def step(self) -> None:
        await self._redis.ping()
        await self._redis.ping()

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()


async def alternate(steps: dict[str, Step], seconds: float, rounds: int = 10) -> dict[str, float]:
    """Rates (steps/s) of each step, run back to back in `rounds` alternating slices of
    `seconds / rounds` each, after a short warm-up of each."""
    for step in steps.values():
        for _ in range(20):
            await step()
    done = dict.fromkeys(steps, 0)
    spent = dict.fromkeys(steps, 0.0)
    for _ in range(rounds):
        for name, step in steps.items():
            started = time.perf_counter()
            deadline = started + seconds / rounds
            while time.perf_counter() < deadline:
                await step()
                done[name] += 1
            spent[name] += time.perf_counter() - started
    return {name: done[name] / spent[name] for name in steps}


def ratio_line(rates: dict[str, float], measured: str, limit: str) -> dict[str, Any]:
    """`measured`'s rate, `limit`'s, and their ratio."""
    return {
        "rate": round(rates[measured], 1),
        "limit": limit,
        "limit_rate": round(rates[limit], 1),
        "ratio": round(rates[measured] / rates[limit], 3),
    }


def main(argv: Sequence[str]) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=1.0, help="per limit")
    parser.add_argument("--quick", action="store_true", help="0.3 s per limit")
    args = parser.parse_args(argv)
    seconds = 0.3 if args.quick else args.seconds

    async def run() -> None:
        for limit in (SqliteCas(), PostgresUpsert(PG_ADMIN), RedisTwoPings()):
            try:
                await limit.open()
            except Exception as exc:  # an unreachable server: say so and go on
                print(json.dumps({"limit": limit.name, "skipped": repr(exc)}), flush=True)
                continue
            try:
                rate = (await alternate({limit.name: limit.step}, seconds, 1))[limit.name]
            finally:
                await limit.close()
            print(json.dumps({"limit": limit.name, "per_s": round(rate, 1)}), flush=True)

    asyncio.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
