"""HTTP API benchmark: latency of GET /api/v1/executions with 10,000 executions in the store,
on SQLite and PostgreSQL (not a test).

The executions are written straight through the store's repositories in batches (the figure
is about reading them, not about running 10,000 workflows): a mix of phases, two projects,
some with a launch plan, spread over a day, mostly finished
(one in 500 PENDING, one in 100 RUNNING). Then `sluice serve`'s HTTP server (uvicorn, as
`http_server` starts it) answers on loopback and one client in the same process asks, one
request at a time, for the first page (the default 50, newest first), the second page (by
cursor), and the first page of PENDING ones; the figures are client-side p50/p99 of each,
after warm-up. Prints one JSON line.

    python bench/api.py [--executions 10000] [--requests 300] [--backend sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import httpx

from sluice.config import load_config
from sluice.http.server import http_server
from sluice.ids import new_execution_id
from sluice.service import Sluice
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord
from sluice.store.store import Store

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
BATCH = 500
WARM_UP = 20
PHASES = [*[ExecutionPhase.SUCCEEDED] * 6, ExecutionPhase.FAILED, ExecutionPhase.ABORTED]
PENDING_EVERY, RUNNING_EVERY = 500, 100
"""A store of mostly finished executions: one in 500 PENDING (20 of 10,000, queued behind
their launch plan's policy), one in 100 RUNNING."""


def _phase(i: int) -> ExecutionPhase:
    if i % PENDING_EVERY == 0:
        return ExecutionPhase.PENDING
    if i % RUNNING_EVERY == 0:
        return ExecutionPhase.RUNNING
    return PHASES[i % len(PHASES)]


def _record(i: int, now: float, total: int) -> ExecutionRecord:
    created = now - 86_400 * (total - i) / total
    return ExecutionRecord(
        id=new_execution_id(),
        project="alpha" if i % 3 else "beta",
        domain="development",
        workflow_name="bench.flow",
        workflow_version="v1",
        phase=_phase(i),
        inputs={"i": i},
        created_at=created,
        updated_at=created,
        launch_plan="nightly" if i % 2 else None,
        launch_plan_version="v1" if i % 2 else None,
    )


async def _fill(url: str, total: int) -> None:
    store = await Store.open(url, upgrade=True)
    now = time.time()
    try:
        for start in range(0, total, BATCH):
            async with store.write() as repos:
                for i in range(start, min(start + BATCH, total)):
                    await repos.executions.insert(_record(i, now, total))
    finally:
        await store.close()


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2), "p99_ms": round(p99 * 1000, 2)}


async def _timed(client: httpx.AsyncClient, path: str, params: dict[str, Any], n: int) -> Any:
    samples = []
    for i in range(WARM_UP + n):
        started = time.perf_counter()
        response = await client.get(path, params=params)
        if i >= WARM_UP:
            samples.append(time.perf_counter() - started)
        response.raise_for_status()
    return _ms(samples), response.json()


async def _measure(url: str, total: int, requests: int) -> dict[str, Any]:
    await _fill(url, total)
    sluice = await Sluice.open(load_config(None, database_url=url))
    try:
        async with (
            http_server(sluice, "127.0.0.1", 0) as listening,
            httpx.AsyncClient(base_url=listening.url) as client,
        ):
            path = "/api/v1/executions"
            first, page = await _timed(client, path, {}, requests)
            cursor = {"cursor": page["next_cursor"]}
            second, _ = await _timed(client, path, cursor, requests)
            pending, _ = await _timed(client, path, {"phase": "pending"}, requests)
    finally:
        await sluice.close()
    return {"first_page": first, "second_page": second, "pending_first_page": pending}


@contextlib.contextmanager
def _sqlite_url() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as directory:
        yield f"sqlite:///{directory}/bench.db"


@contextlib.contextmanager
def _pg_url() -> Iterator[str]:
    import psycopg

    name = f"sluice_bench_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], action="append")
    args = parser.parse_args()
    figures: dict[str, Any] = {"bench": "api", "executions": args.executions}
    for backend in args.backend or ["sqlite", "postgresql"]:
        with _sqlite_url() if backend == "sqlite" else _pg_url() as url:
            figures[backend] = asyncio.run(_measure(url, args.executions, args.requests))
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
