"""Engine overhead on the embedded default against its limit measured in the same run: a
fan-out of N no-op python tasks and a chain of M, each run to completion by `sluice run`'s code
path (SQLite + local process pool), in alternating rounds with the limit:

- limit of a fan-out: the same worker pool running N empty jobs submitted at once, plus one
  bare SQLite commit (WAL, synchronous=NORMAL, on a file beside the store) per task;
- limit of a chain: M empty jobs one after the other through the pool (a worker round trip
  each), plus one bare commit per step.

Prints one JSON line per shape: medians and spread over the rounds of the execution's own
time (from the engine's RUNNING to its end, as recorded), of the whole `run_async` call
(store open, engine and workers started, stopped), tasks/s, the limit and the ratio
limit_s / execution_s (1.0 = as fast as the pool and the disk allow).

    python bench/engine_overhead.py [--fanout 1000] [--chain 200] [--rounds 3] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from overhead_tasks import noop, step

import sluice
from sluice.api import run_async
from sluice.config import Settings, load_config
from sluice.plugins.builtin.pool import WorkerPool

LAST_CPU = [0.0]
"""CPU seconds of this process (its threads too, not the workers) in the last run_once."""
_TASKS_FILE = str(Path(__file__).parent / "overhead_tasks.py")


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


async def run_once(workflow: sluice.WorkflowDef, settings: Settings) -> tuple[float, float]:  # type: ignore[type-arg]
    """(seconds of the whole run_async call, seconds of the execution as recorded)."""
    started = time.perf_counter()
    cpu = time.process_time()
    record = await run_async(workflow, {}, settings)
    elapsed = time.perf_counter() - started
    LAST_CPU[0] = time.process_time() - cpu
    assert record.phase.value == "SUCCEEDED", record
    assert record.started_at is not None and record.ended_at is not None
    return elapsed, record.ended_at - record.started_at


def _job(i: int) -> dict[str, Any]:
    return {"module": "overhead_tasks", "file": _TASKS_FILE, "qualname": "noop", "inputs": {"i": i}}


async def pool_limit(pool: WorkerPool, tasks: int, parallel: bool) -> float:
    """Seconds for the pool to run `tasks` empty jobs, all at once or one after the other."""
    started = time.perf_counter()
    if parallel:
        jobs = [pool.submit(f"limit/{i}", _job(i)) for i in range(tasks)]
        await asyncio.gather(*(job.future for job in jobs))
    else:
        for i in range(tasks):
            await pool.submit(f"limit/{i}", _job(i)).future
    for i in range(tasks):
        pool.cancel(f"limit/{i}")
    return time.perf_counter() - started


def commit_limit(path: Path, commits: int) -> float:
    """Seconds for `commits` bare one-row UPDATE transactions (WAL, synchronous=NORMAL)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v INTEGER)")
    conn.execute("INSERT OR IGNORE INTO t VALUES (1, 0)")
    started = time.perf_counter()
    for _ in range(commits):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("UPDATE t SET v = v + 1 WHERE id = 1")
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


async def limit_once(tasks: int, parallel: bool, workers: int, work: Path) -> float:
    pool = WorkerPool(workers)
    try:
        await pool_limit(pool, workers, parallel=True)  # spawned and warm, as the engine's
        seconds = await pool_limit(pool, tasks, parallel)
    finally:
        await pool.close()
    return seconds + commit_limit(work / "limit.db", tasks)


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--quick", action="store_true", help="fan-out 100, chain 20, 1 round")
    parser.add_argument("--profile", metavar="FILE", help="write a cProfile of the run to FILE")
    args = parser.parse_args()
    if args.quick:
        args.fanout, args.chain, args.rounds = 100, 20, 1
    shapes = {
        "fanout": (fanout(args.fanout), args.fanout),
        "chain": (chain(args.chain), args.chain),
    }
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    seen: dict[str, dict[str, list[float]]] = {
        name: {"run_s": [], "execution_s": [], "limit_s": [], "engine_cpu_s": []} for name in shapes
    }
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        settings = load_config(
            database_url=f"sqlite:///{work}/bench.db",
            engine={"workers": args.workers, "parallelism": 1000},
        )
        asyncio.run(run_once(chain(1), settings))  # the store exists: every round finds it warm
        for _ in range(args.rounds):
            for name, (workflow, tasks) in shapes.items():
                limit = asyncio.run(limit_once(tasks, name == "fanout", args.workers, work))
                run_s, execution_s = asyncio.run(run_once(workflow, settings))
                seen[name]["limit_s"].append(limit)
                seen[name]["run_s"].append(run_s)
                seen[name]["execution_s"].append(execution_s)
                seen[name]["engine_cpu_s"].append(LAST_CPU[0])
    if args.profile:
        profiler.disable()
        profiler.dump_stats(args.profile)
    for name, (_, tasks) in shapes.items():
        times = seen[name]
        execution = statistics.median(times["execution_s"])
        limit = statistics.median(times["limit_s"])
        ratios = [lim / ex for lim, ex in zip(times["limit_s"], times["execution_s"], strict=True)]
        report = {
            "bench": "engine_overhead",
            "shape": name,
            "tasks": tasks,
            "workers": args.workers,
            "rounds": args.rounds,
            "tasks_per_s": round(tasks / execution, 1),
            "tasks_per_s_whole_run": round(tasks / statistics.median(times["run_s"]), 1),
            "limit_tasks_per_s": round(tasks / limit, 1),
            "ratio_to_limit": round(limit / execution, 3),
            "ratio_spread": [round(min(ratios), 3), round(max(ratios), 3)],
            "engine_cpu_ms_per_task": round(
                1000 * statistics.median(times["engine_cpu_s"]) / tasks, 3
            ),
            **{key: _spread(values) for key, values in times.items()},
        }
        print(json.dumps(report))


if __name__ == "__main__":
    main()
