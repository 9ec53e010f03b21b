"""Scale curves: does the cost per task (per execution) stay flat as the size grows?

- fan-out: one workflow of N no-op python tasks run to completion by `sluice run`'s code path
  (embedded SQLite, local pool), N = 100, 1,000, 10,000, 50,000;
- controller: N PENDING executions (over 100 launch plans, none capped) decided by one
  controller pass: its lead taken, its state rebuilt from the store, every one promoted;
  N = 1,000, 10,000, 100,000.

Each size runs in its own child process, so that its peak RSS (ru_maxrss) is its own. Prints
one JSON line per size: seconds, microseconds per task (or execution), peak RSS in MB and
its growth per 1,000 items over the smallest size.

    python bench/scale.py [--quick] [--fanout 100,1000,10000,50000]
                          [--controller 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def child_fanout(tasks: int, workers: int) -> dict[str, Any]:
    from engine_overhead import chain, fanout, run_once

    from sluice.config import load_config

    with tempfile.TemporaryDirectory() as tmp:
        settings = load_config(
            database_url=f"sqlite:///{tmp}/scale.db",
            engine={"workers": workers, "parallelism": 1000},
        )
        asyncio.run(run_once(chain(1), settings))  # the store created and warm
        run_s, execution_s = asyncio.run(run_once(fanout(tasks), settings))
    return {
        "what": "fanout",
        "size": tasks,
        "run_s": round(run_s, 3),
        "execution_s": round(execution_s, 3),
        "us_per_task": round(1e6 * execution_s / tasks, 1),
        "tasks_per_s": round(tasks / execution_s, 1),
    }


def child_controller(pending: int) -> dict[str, Any]:
    from concurrency import controller, open_store, seed

    async def measure(url: str) -> tuple[float, float]:
        store, notifier = await open_store(url)
        try:
            seeding = time.perf_counter()
            await seed(store, 100, pending, max_active=pending)
            seeded = time.perf_counter() - seeding
            ctl = controller(store, notifier)
            assert await ctl.lock.try_acquire()
            started = time.perf_counter()
            await ctl.start_term()  # the lead taken, its state rebuilt from the store
            await ctl.step()  # one pass: every execution promoted
            elapsed = time.perf_counter() - started
            assert ctl.state.pending_count == 0
            await ctl.lock.release()
            return seeded, elapsed
        finally:
            await notifier.close()
            await store.close()

    with tempfile.TemporaryDirectory() as tmp:
        seeded, elapsed = asyncio.run(measure(f"sqlite:///{tmp}/controller.db"))
    return {
        "what": "controller",
        "size": pending,
        "seed_s": round(seeded, 3),
        "decide_s": round(elapsed, 3),
        "us_per_execution": round(1e6 * elapsed / pending, 1),
    }


def run_child(what: str, size: int, workers: int) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", what, str(size), "--workers", str(workers)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", default="100,1000,10000,50000", type=_sizes)
    parser.add_argument("--controller", default="1000,10000,100000", type=_sizes)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--quick", action="store_true", help="fan-out 100 and 1,000; controller 1,000"
    )
    parser.add_argument("--child", nargs=2, metavar=("WHAT", "SIZE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        what, size = args.child[0], int(args.child[1])
        result = child_fanout(size, args.workers) if what == "fanout" else child_controller(size)
        print(json.dumps({**result, "peak_rss_mb": round(peak_rss_mb(), 1)}))
        return
    if args.quick:
        args.fanout, args.controller = [100, 1000], [1000]
    for what, sizes in (("fanout", args.fanout), ("controller", args.controller)):
        smallest: dict[str, Any] | None = None
        for size in sizes:
            result = run_child(what, size, args.workers)
            if smallest is None:
                smallest = result
            elif size > smallest["size"]:
                growth = result["peak_rss_mb"] - smallest["peak_rss_mb"]
                result["rss_mb_per_1000"] = round(1000 * growth / (size - smallest["size"]), 2)
            print(json.dumps({"bench": "scale", **result}), flush=True)


if __name__ == "__main__":
    main()
