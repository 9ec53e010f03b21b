"""How long a SIGTERM takes to stop a `sluice engine` that runs tasks (docs/invariants.md
rule 12): the engine drains, so its running attempts end and record their end first.

Each round launches one execution of a task that sleeps `--task` seconds, starts a real
`sluice engine` process on a fresh SQLite store, sends SIGTERM `--after` seconds after the
task's body started, and times the engine's exit. The drain's own cost is the time to exit
minus what the task still had to run; with `--drain-timeout` shorter than that, the engine
hands the attempt over instead. Prints one JSON line.

    python bench/drain.py --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sluice.config import load_config
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module

ROOT = Path(__file__).resolve().parents[1]
FLOW = """
import os
import time

import sluice


@sluice.task
def work(directory: str, seconds: float) -> str:
    open(os.path.join(directory, "started"), "w").close()
    time.sleep(seconds)
    return "done"


@sluice.workflow
def drained(directory: str, seconds: float) -> str:
    return work(directory=directory, seconds=seconds)
"""


async def _launch(url: str, directory: Path, seconds: float) -> None:
    flows = load_module("drain_bench_flow", str(directory / "flow.py"))
    rt = await Runtime.open(load_config(database_url=url), upgrade=True)
    try:
        await rt.launch(flows.drained, {"directory": str(directory), "seconds": seconds})
    finally:
        await rt.close()


def one_round(task: float, after: float, drain_timeout: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as scratch:
        directory = Path(scratch)
        (directory / "flow.py").write_text(FLOW)
        url = f"sqlite:///{directory / 'sluice.db'}"
        asyncio.run(_launch(url, directory, task))
        env = {
            **os.environ,
            "SLUICE_DATABASE_URL": url,
            "SLUICE_ENGINE__WORKERS": "1",
            "SLUICE_ENGINE__DRAIN_TIMEOUT": str(drain_timeout),
        }
        engine = subprocess.Popen(
            [sys.executable, "-m", "sluice", "engine", "--log-level", "WARNING"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            while not (directory / "started").exists():
                time.sleep(0.01)
            started = time.monotonic()
            time.sleep(after)
            sent = time.monotonic()
            engine.send_signal(signal.SIGTERM)
            engine.wait(timeout=task + drain_timeout + 60)
            exited = time.monotonic()
        finally:
            if engine.poll() is None:
                engine.kill()
        left = max(0.0, task - (sent - started))
        return {"drain_s": exited - sent, "task_left_s": left}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--task", type=float, default=3.0, help="seconds the task sleeps")
    parser.add_argument("--after", type=float, default=1.0, help="SIGTERM this long after")
    parser.add_argument("--drain-timeout", type=float, default=30.0)
    args = parser.parse_args()
    rounds = [one_round(args.task, args.after, args.drain_timeout) for _ in range(args.rounds)]
    drains = [r["drain_s"] for r in rounds]
    overheads = [r["drain_s"] - min(r["task_left_s"], args.drain_timeout) for r in rounds]
    print(
        json.dumps(
            {
                "bench": "drain",
                "task_s": args.task,
                "sigterm_after_s": args.after,
                "drain_timeout_s": args.drain_timeout,
                "rounds": args.rounds,
                "drain_s_median": round(statistics.median(drains), 3),
                "drain_s_max": round(max(drains), 3),
                "overhead_s_median": round(statistics.median(overheads), 3),
            }
        )
    )


if __name__ == "__main__":
    main()
