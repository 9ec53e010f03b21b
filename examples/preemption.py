"""Priority preemption: an urgent task takes the warehouse's only slot from a backfill now,
instead of waiting behind it.

The quota "warehouse" (1) has preemption on. A priority-0 backfill holds it with a long body;
a priority-10 report then asks for it. The backfill's attempt is stopped (event PREEMPTED,
naming the report), its slot goes to the report (event PREEMPTING, naming the backfill), and
the backfill starts its attempt again once the report is done, without spending a retry.

    python examples/preemption.py       # on a fresh SQLite file; prints the order and events

In a deployment: `sluice quota set warehouse 1 --preempt` (or `resources.preempt =
["warehouse"]` in the config), and priorities on the tasks (`@sluice.task(priority=10)`).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

import sluice


def note(log: str, line: str) -> None:
    with Path(log).open("a") as f:
        f.write(f"{line} {time.time()}\n")


@sluice.task(quotas=[sluice.Quota("warehouse")], priority=0, retries=1)
def backfill(log: str, stop: str) -> str:
    note(log, "backfill start")
    deadline = time.monotonic() + 60
    while not Path(stop).exists() and time.monotonic() < deadline:
        time.sleep(0.02)  # a long body: it runs until the report is done
    note(log, "backfill end")
    return "backfilled"


@sluice.task(quotas=[sluice.Quota("warehouse")], priority=10)
def report(log: str, stop: str) -> str:
    note(log, "report start")
    Path(stop).touch()
    note(log, "report end")
    return "reported"


@sluice.workflow
def low(log: str, stop: str) -> None:
    backfill(log=log, stop=stop)


@sluice.workflow
def urgent(log: str, stop: str) -> None:
    report(log=log, stop=stop)


def _has(log: Path, line: str) -> bool:
    return log.exists() and line in log.read_text()


async def _started(log: Path) -> None:
    """Until the backfill's body runs (a poll of its log: the example has no other signal)."""
    for _ in range(6000):
        if _has(log, "backfill start"):
            return
        await asyncio.sleep(0.01)
    raise TimeoutError("the backfill never started")


async def preempt_once(
    database_url: str, resources: dict[str, Any], workdir: Path
) -> dict[str, Any]:
    """Run the backfill, then the report once the backfill's body runs; return the events of
    both and the report's wait: from its first ask (which marked the backfill) to its grant."""
    from sluice.config import load_config
    from sluice.runtime import Runtime

    settings = load_config(
        database_url=database_url,
        engine={"workers": 2, "backoff_base": 0.05, "backoff_max": 0.2},
        resources={"quotas": {"warehouse": 1}, "preempt": ["warehouse"], **resources},
    )
    log, stop = workdir / "log", workdir / "stop"
    inputs = {"log": str(log), "stop": str(stop)}
    rt = await Runtime.open(settings)
    try:
        backfilling = await rt.launch(low, inputs)
        engines = [await rt.engine(only=[backfilling.id])]
        await engines[0].start()
        await _started(log)
        reporting = await rt.launch(urgent, inputs)
        engines.append(await rt.engine(only=[reporting.id]))
        await engines[1].start()
        await asyncio.wait_for(engines[1].wait(reporting.id), 120)
        await asyncio.wait_for(engines[0].wait(backfilling.id), 120)
        for engine in engines:
            await engine.stop()
        async with rt.store.read() as repos:
            events = {
                "backfill": await repos.events.list(backfilling.id),
                "report": await repos.events.list(reporting.id),
            }
    finally:
        await rt.close()
    asked = min(e.occurred_at for e in events["report"] if e.phase == "PREEMPTING")
    granted = min(e.occurred_at for e in events["report"] if e.phase == "GRANTED")
    return {"events": events, "wait_s": granted - asked, "log": log.read_text().splitlines()}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        found = asyncio.run(preempt_once(f"sqlite:///{tmp}/sluice.db", {}, Path(tmp)))
    for line in found["log"]:
        print(line.rsplit(" ", 1)[0])
    for side in ("backfill", "report"):
        for event in found["events"][side]:
            if event.phase in ("PREEMPTED", "PREEMPTING"):
                print(f"{side}: {event.phase}: {event.reason}")
    print(f"the report waited {found['wait_s']:.2f} s from its ask to its grant")


if __name__ == "__main__":
    main()
