"""Engine overhead on the embedded default: a fan-out of N no-op python tasks and a chain of
M, each run to completion by `sluice run`'s code path (SQLite + local process pool).

Prints one JSON line: tasks/s and per-task overhead for each shape.

    python bench/engine_overhead.py [--fanout 1000] [--chain 200] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from overhead_tasks import noop, step

import sluice
from sluice.api import run_async
from sluice.config import load_config


def fanout(n: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.fanout{n}")
    def wf() -> None:
        for i in range(n):
            noop(i=i)

    return wf


def chain(n: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.chain{n}")
    def wf() -> int:
        value = step(i=0)
        for _ in range(n - 1):
            value = step(i=value)
        return value

    return wf


async def measure(
    workflow: sluice.WorkflowDef, tasks: int, db: Path, workers: int
) -> dict[str, float]:  # type: ignore[type-arg]
    settings = load_config(
        database_url=f"sqlite:///{db}", engine={"workers": workers, "parallelism": 1000}
    )
    started = time.perf_counter()
    record = await run_async(workflow, {}, settings)
    elapsed = time.perf_counter() - started
    assert record.phase.value == "SUCCEEDED", record
    return {
        "tasks": tasks,
        "seconds": round(elapsed, 3),
        "tasks_per_s": round(tasks / elapsed, 1),
        "overhead_ms_per_task": round(1000 * elapsed / tasks, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run to FILE")
    args = parser.parse_args()
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    with tempfile.TemporaryDirectory() as tmp:
        out = {
            "bench": "engine_overhead",
            "workers": args.workers,
            "fanout": asyncio.run(
                measure(fanout(args.fanout), args.fanout, Path(tmp) / "f.db", args.workers)
            ),
            "chain": asyncio.run(
                measure(chain(args.chain), args.chain, Path(tmp) / "c.db", args.workers)
            ),
        }
    if args.profile:
        profiler.disable()
        profiler.dump_stats(args.profile)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
