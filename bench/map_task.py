"""Map task cost: one map node over N items of a no-op task, against a static fan-out of N
task nodes, on SQLite or PostgreSQL, run to completion by `sluice run`'s code path.

For each shape it prints one JSON line: seconds and ms per item, the rows the execution left
in the store (node rows and event rows, per item) and the bytes of its node rows. A second run
of a cached map (every item a cache HIT, nothing computed) shows what a resumed or repeated
map costs per item. (Not a test.)

    python bench/map_task.py [--items 1000 3000] [--concurrency 64] [--backend sqlite]
    python bench/map_task.py --quick
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from overhead_tasks import cached_noop, noop

import sluice
from sluice.api import run_async
from sluice.config import Settings, load_config
from sluice.store.store import Store

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def mapped(n: int, concurrency: int | None, cached: bool) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    task = cached_noop if cached else noop

    @sluice.workflow(name=f"bench.map{n}{'cached' if cached else ''}")
    def wf() -> list[int]:
        return sluice.map(task, concurrency=concurrency)(items=list(range(n)))  # type: ignore[no-any-return]

    return wf


def fanout(n: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.fanout{n}")
    def wf() -> None:
        for i in range(n):
            noop(i=i)

    return wf


async def _store_cost(url: str, execution_id: str) -> dict[str, Any]:
    store = await Store.open(url)
    try:
        async with store.read() as repos:
            nodes = await repos.nodes.list(execution_id)
            events = await repos.events.list(execution_id)
    finally:
        await store.close()
    node_bytes = sum(
        len(json.dumps([n.inputs, n.outputs, n.plugin_state, n.claims, n.error, n.reason]))
        for n in nodes
    )
    return {"node_rows": len(nodes), "event_rows": len(events), "node_json_bytes": node_bytes}


async def measure(
    shape: str,
    workflow: sluice.WorkflowDef,
    items: int,
    settings: Settings,  # type: ignore[type-arg]
) -> dict[str, Any]:
    started = time.perf_counter()
    record = await run_async(workflow, {}, settings)
    elapsed = time.perf_counter() - started
    assert record.phase.value == "SUCCEEDED", record
    cost = await _store_cost(settings.database_url, record.id)
    return {
        "bench": "map_task",
        "shape": shape,
        "items": items,
        "seconds": round(elapsed, 3),
        "ms_per_item": round(1000 * elapsed / max(items, 1), 3),
        **cost,
        "node_rows_per_item": round(cost["node_rows"] / max(items, 1), 3),
        "event_rows_per_item": round(cost["event_rows"] / max(items, 1), 3),
        "node_json_bytes_per_item": round(cost["node_json_bytes"] / max(items, 1), 1),
    }


@contextlib.contextmanager
def _database(backend: str) -> Iterator[str]:
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as directory:
            yield f"sqlite:///{directory}/bench.db"
        return
    import psycopg

    name = f"sluice_bench_{os.getpid()}_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def bench(sizes: list[int], concurrency: int | None, workers: int, backend: str) -> None:
    for n in sizes:
        with _database(backend) as url:
            if backend != "sqlite":
                await (await Store.open(url, upgrade=True)).close()
            settings = load_config(
                database_url=url, engine={"workers": workers, "parallelism": 1000}
            )
            shapes = [
                ("map", mapped(n, concurrency, cached=False)),
                ("static_fanout", fanout(n)),
                ("cached_map_first", mapped(n, concurrency, cached=True)),
                ("cached_map_all_hits", mapped(n, concurrency, cached=True)),
            ]
            for shape, workflow in shapes:
                figures = await measure(shape, workflow, n, settings)
                print(json.dumps({**figures, "backend": backend, "concurrency": concurrency}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, nargs="+", default=[1000, 3000])
    parser.add_argument("--concurrency", type=int, default=64, help="the map's bound (0: none)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    parser.add_argument("--quick", action="store_true", help="200 items only")
    args = parser.parse_args()
    sizes = [200] if args.quick else args.items
    asyncio.run(bench(sizes, args.concurrency or None, args.workers, args.backend))


if __name__ == "__main__":
    main()
