"""Cost of task log capture on a fan-out of python tasks (the embedded default: SQLite, a local
pool, logs in a directory beside the database), in alternating rounds of three kinds:

- silent: the tasks print nothing (capture is on, with nothing to store);
- printing: each task prints --lines lines, captured and stored (segments + index);
- discarded: the same printing tasks with logs.enabled = false (read from the workers' pipes,
  then dropped): what storing costs beyond reading.

Prints one JSON line: the median seconds of each kind, and the overhead per task of printing
with capture against silent tasks and against discarded output. On a loaded machine those
differences drown in noise, so it also measures, in this process, the engine's CPU time per
line from `write()` to a flushed segment and index row (--probe-lines lines, SQLite, a
directory): what capture costs the engine whatever else the machine does.

    python bench/log_capture.py [--tasks 300] [--lines 10] [--rounds 3] [--workers 2]
                                [--probe-lines 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from overhead_tasks import chatty, noop

import sluice
from sluice.api import run_async
from sluice.clock import SystemClock
from sluice.config import LogsConfig, load_config
from sluice.logs import LogFiles, TaskLogSink
from sluice.store.store import Store


def fanout(n: int, lines: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.logs{n}x{lines}")
    def wf() -> None:
        for i in range(n):
            if lines:
                chatty(i=i, lines=lines)
            else:
                noop(i=i)

    return wf


async def seconds(workflow: sluice.WorkflowDef, db: Path, workers: int, keep: bool) -> float:  # type: ignore[type-arg]
    settings = load_config(
        database_url=f"sqlite:///{db}",
        engine={"workers": workers, "parallelism": 1000},
        logs={"enabled": keep},
    )
    started = time.perf_counter()
    record = await run_async(workflow, {}, settings)
    elapsed = time.perf_counter() - started
    assert record.phase.value == "SUCCEEDED", record
    return elapsed


async def cpu_per_line(directory: Path, lines: int) -> dict[str, float]:
    """Engine CPU microseconds per line: buffering in write(), then flushing (encoding,
    segment writes, one index transaction per flush), 100 attempts of lines/100 lines."""
    store = await Store.open(f"sqlite:///{directory / 's.db'}")
    files = LogFiles.from_url((directory / "logs").as_uri())
    sink = TaskLogSink(files, store.db, SystemClock(), LogsConfig(), "bench")
    writers = [sink.writer("ex", f"n{i}", 0) for i in range(100)]
    text = "a line of task output, about as long as a log line usually is"
    started = time.process_time()
    for n in range(lines):
        writers[n % 100].write(text)
    written = time.process_time()
    for i in range(100):
        sink.end("ex", f"n{i}", 0)
    await sink.flush()
    flushed = time.process_time()
    await sink.close()
    await store.close()
    return {
        "write_us_per_line": round(1e6 * (written - started) / lines, 2),
        "flush_us_per_line": round(1e6 * (flushed - written) / lines, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=300)
    parser.add_argument("--lines", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--probe-lines", type=int, default=100_000)
    args = parser.parse_args()
    kinds = {
        "silent": (fanout(args.tasks, 0), True),
        "printing": (fanout(args.tasks, args.lines), True),
        "discarded": (fanout(args.tasks, args.lines), False),
    }
    times: dict[str, list[float]] = {kind: [] for kind in kinds}
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.rounds):  # alternate, so drift hits every kind alike
            for kind, (workflow, keep) in kinds.items():
                db = Path(tmp) / f"{kind}{round_number}" / "s.db"
                times[kind].append(asyncio.run(seconds(workflow, db, args.workers, keep)))
        probe = asyncio.run(cpu_per_line(Path(tmp), args.probe_lines))
    median = {kind: statistics.median(found) for kind, found in times.items()}
    per_task = 1000 / args.tasks
    print(
        json.dumps(
            {
                "bench": "log_capture",
                "tasks": args.tasks,
                "lines_per_task": args.lines,
                "rounds": args.rounds,
                "workers": args.workers,
                "median_s": {kind: round(value, 3) for kind, value in median.items()},
                "capture_overhead_ms_per_task": round(
                    (median["printing"] - median["silent"]) * per_task, 3
                ),
                "storing_overhead_ms_per_task": round(
                    (median["printing"] - median["discarded"]) * per_task, 3
                ),
                "engine_cpu": probe,
            }
        )
    )


if __name__ == "__main__":
    main()
