"""Quickstart on the embedded default (SQLite in ./.sluice, a local pool of worker processes).

    python examples/quickstart.py                   # the three demos below
    sluice run examples/quickstart.py:quickstart     # just the fan-out/fan-in

1. `quickstart`: a fan-out/fan-in workflow.
2. `nightly_load`: tasks that each need a token of the "warehouse" quota (1 here), so they
   run one at a time; the others show WAITING_FOR_RESOURCES with
   "waiting for warehouse: 1/1 in use, position N".
3. `train_report`, run twice at once: the serializable cached task `train` runs once; the
   second run waits (WAITING_FOR_CACHE, naming the owner) and reuses its outputs (HIT).
"""

from __future__ import annotations

import asyncio
import os
import time

import sluice


@sluice.task(retries=1)
def square(x: int, scale: int = 1) -> int:
    return scale * x * x


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


@sluice.workflow
def quickstart(scale: int = 1) -> int:
    squares = [square(x=i, scale=scale) for i in range(8)]
    return total(values=squares)


@sluice.task(quotas=[sluice.Quota("warehouse")])
def load_partition(partition: int) -> int:
    time.sleep(0.5)  # a query against a warehouse that takes one at a time
    return partition


@sluice.workflow
def nightly_load() -> int:
    return total(values=[load_partition(partition=p) for p in range(3)])


@sluice.task(cache=sluice.Cache(version="1", serialize=True))
def train(seed: int) -> float:
    time.sleep(2.0)  # an expensive computation many runs need at once
    return seed / 10


@sluice.task
def report(score: float) -> str:
    return f"model score {score}"


@sluice.workflow
def train_report(seed: int = 7) -> str:
    return report(score=train(seed=seed))


async def _two_runs_share_one_computation() -> None:
    from sluice.api import events_of, run_async

    print("\n== two runs of train_report at once: train computes once")
    runs = await asyncio.gather(run_async(train_report, {}), run_async(train_report, {}))
    for run in runs:
        print(f"execution {run.id} {run.phase.value}: {run.outputs}")
        for event in await events_of(run.id):
            if event.node_id == "train":
                reason = f": {event.reason}" if event.reason else ""
                print(f"    train {event.phase}{reason}")


if __name__ == "__main__":
    os.environ.setdefault("SLUICE_RESOURCES__QUOTAS", '{"warehouse": 1}')
    for target in ("quickstart", "nightly_load"):
        print(f"\n== sluice run examples/quickstart.py:{target}")
        code = sluice.main(["run", f"{__file__}:{target}"])
        if code:
            raise SystemExit(code)
    asyncio.run(_two_runs_share_one_computation())
