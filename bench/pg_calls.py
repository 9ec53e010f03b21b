"""Where a PostgreSQL allocate + release pair's time goes, call by call, against the bare
upsert that `resources.py` divides it by.

Each step runs in an explicit transaction so that the statement and its commit are timed
apart, on one plain psycopg connection (no manager, no pool), in alternating rounds:

- `round_trip`: `BEGIN` alone (a round trip with no work);
- `upsert`: the bare one-row upsert of `store_limits.py`, then its COMMIT (which waits for
  the WAL flush);
- `grant`: the one-call uncontended grant (`sluice_resources_try_grant`, migration 0005) with
  the arguments the manager sends, then its COMMIT (synchronous: a grant must survive a crash);
- `release`: the one-call release (`sluice_resources_try_release`, migration 0006), then its
  COMMIT (the function turns the flush wait off for its own transaction).

Prints one JSON line: per step the median microseconds of the statement and of the commit,
the statement's server work over the round trip, and what a pair costs against the upsert
(`pair_over_upsert`: the `resources.py` ratio's inverse, measured with its parts). The
statements' own executor time (auto_explain) is a small part of the functions' work: the
rest is PL/pgSQL executing several statements, each with its snapshot, locks and index
updates (a pair writes about 11 rows and index entries, the upsert one).

    python bench/pg_calls.py [--rounds 8] [--per-round 300]

Needs PostgreSQL at 127.0.0.1:5432 (a database created for the run and dropped).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import resources
from sluice.resources.backends.base import AllocationRequest
from sluice.resources.backends.sql import pg_direct

_GRANT = pg_direct._TRY_GRANT
_RELEASE = pg_direct._TRY_RELEASE
_UPSERT = "INSERT INTO sluice_pg_calls VALUES (1, %s) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v"


async def captured_request(url: str) -> AllocationRequest:
    """The request the manager sends for the bench's uncontended claim (captured from one
    real allocate through `QuotaManager`, so the arguments are the real ones)."""
    seen: list[AllocationRequest] = []
    original = pg_direct.try_grant

    async def capture(conn: Any, request: AllocationRequest) -> Any:
        seen.append(request)
        return await original(conn, request)

    client = await resources.opener(
        resources.Target("postgresql", url), resources.NAMESPACE, 1000, 0.0
    )(0)
    pg_direct.try_grant = capture
    try:
        if not await client.allocate("bench-capture"):
            raise RuntimeError("the capturing claim was refused")
        await client.release("bench-capture")
    finally:
        pg_direct.try_grant = original
        await client.close()
    return seen[0]


def measure(url: str, request: AllocationRequest, rounds: int, per_round: int) -> dict[str, Any]:
    import psycopg

    times: dict[str, list[float]] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE sluice_pg_calls (k integer PRIMARY KEY, v bigint NOT NULL)")

        def timed(name: str, sql: str, params: Any = None) -> Any:
            started = time.perf_counter()
            cursor = conn.execute(sql, params)
            times.setdefault(name, []).append((time.perf_counter() - started) * 1e6)
            return cursor

        def transaction(name: str, sql: str, params: Any) -> Any:
            timed("round_trip", "BEGIN")
            cursor = timed(f"{name}_statement", sql, params)
            row = cursor.fetchone() if cursor.description is not None else None
            timed(f"{name}_commit", "COMMIT")
            return row

        count = 0

        def upsert() -> None:
            transaction("upsert", _UPSERT, (count,))

        def pair() -> None:
            token = f"calls-{count}"
            now = time.time()
            ask = dataclasses.replace(request, token=token, now=now)
            grant = [*pg_direct._claim_arguments(ask), now, now + ask.lease]
            if transaction("grant", _GRANT, grant)[0] is None:
                raise RuntimeError("the uncontended one-call grant declined")
            names = [c.namespace for c in ask.claims]
            release = pg_direct.release_arguments(token, names, "sluice_pg_calls", "bench")
            if transaction("release", _RELEASE, release)[0] is None:
                raise RuntimeError("the one-call release declined")

        steps: list[Callable[[], None]] = [upsert, pair]
        for _ in range(rounds):  # alternating: a change of load weighs on both alike
            for step in steps:
                for _ in range(per_round):
                    count += 1
                    step()
        conn.execute("DROP TABLE sluice_pg_calls")
    skip = per_round // 5  # each series' first calls prepare the statements
    med = {name: statistics.median(values[skip:]) for name, values in times.items()}
    trip = med["round_trip"]
    line: dict[str, Any] = {"bench": "pg_calls", "rounds": rounds, "per_round": per_round}
    line["round_trip_us"] = round(trip)
    for name in ("upsert", "grant", "release"):
        statement, commit = med[f"{name}_statement"], med[f"{name}_commit"]
        line[name] = {
            "statement_us": round(statement),
            "server_work_us": round(statement - trip),
            "commit_us": round(commit),
        }
    # In autocommit a call is one round trip carrying the statement and its commit.
    one_call = med["upsert_statement"] + med["upsert_commit"] - trip
    pair_cost = sum(
        med[f"{name}_statement"] + med[f"{name}_commit"] - trip for name in ("grant", "release")
    )
    line["upsert_autocommit_estimate_us"] = round(one_call)
    line["pair_autocommit_estimate_us"] = round(pair_cost)
    line["pair_over_upsert"] = round(pair_cost / one_call, 2)
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--per-round", type=int, default=300)
    args = parser.parse_args()
    if not resources.reachable("127.0.0.1", 5432):
        sys.exit("PostgreSQL is not reachable at 127.0.0.1:5432")
    with resources.postgres_database() as url:
        request = asyncio.run(captured_request(url))
        print(json.dumps(measure(url, request, args.rounds, args.per_round)))


if __name__ == "__main__":
    main()
