"""Processes the concurrency tests spawn.

python cc_proc.py create URL PLAN COUNT SECONDS   create COUNT executions, print their ids
python cc_proc.py controller URL [POINT[:N]]      run a controller candidate until killed; with
                                                  POINT (controller.STEP) it SIGKILLs itself
                                                  the N-th time it reaches that crash point
python cc_proc.py once URL [POINT[:N]]            for each KEY read from stdin, create an
                                                  execution of `napping` under idempotency key
                                                  KEY and print its id (`done` after each key);
                                                  with POINT, SIGKILL itself there
python cc_proc.py backfills URL [POINT[:N]]       run a backfill runner until killed; with
                                                  POINT (backfill.STEP) it SIGKILLs itself
                                                  the N-th time it reaches that crash point
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cc_support import FLOWS, fast_options, fast_settings, launch_with_priority

from sluice import faults
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.service.local import run_controller_candidate


async def creator(url: str) -> None:
    flows = load_module("cc_flows", str(FLOWS))
    rt = await Runtime.open(fast_settings(url), role="creator", upgrade=True)
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            plan_name, count, seconds = line.split()
            plan = getattr(flows, plan_name)
            for i in range(int(count)):
                record = await launch_with_priority(rt, plan, i % 3, float(seconds))
                print(record.id, flush=True)
            print("done", flush=True)
    finally:
        await rt.close()


async def controller(url: str, crash: str) -> None:
    if crash:
        faults.install(faults.KillAt.parse(crash))
    rt = await Runtime.open(fast_settings(url), role="controller")
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        options = fast_options()
        async with run_controller_candidate(rt, options) as candidate:
            print(f"candidate {rt.instance_id}", flush=True)
            await stop.wait()
            del candidate
    finally:
        await rt.close()


async def once(url: str, crash: str) -> None:
    if crash:
        faults.install(faults.KillAt.parse(crash))
    flows = load_module("cc_flows", str(FLOWS))
    rt = await Runtime.open(fast_settings(url), role="once", upgrade=True)
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            for key in line.split():
                record = await rt.launch(flows.napping, {"tag": "once"}, idempotency_key=key)
                print(record.id, flush=True)
            print("done", flush=True)
    finally:
        await rt.close()


async def backfills(url: str, crash: str) -> None:
    from sluice.executions.backfill_runner import BackfillRunner

    if crash:
        faults.install(faults.KillAt.parse(crash))
    rt = await Runtime.open(fast_settings(url), role="backfills")
    print("ready", flush=True)
    try:
        await BackfillRunner(rt.store, rt.notifier, rt.clock, rescan_interval=1.0).run()
    finally:
        await rt.close()


def main() -> None:
    command, url, *rest = sys.argv[1:]
    if command == "creator":
        asyncio.run(creator(url))
    elif command == "controller":
        asyncio.run(controller(url, rest[0] if rest else ""))
    elif command == "backfills":
        asyncio.run(backfills(url, rest[0] if rest else ""))
    elif command == "once":
        asyncio.run(once(url, rest[0] if rest else ""))
    else:
        raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    main()
