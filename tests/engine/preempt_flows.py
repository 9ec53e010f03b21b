"""Flows of the preemption tests: a long low-priority body and a short urgent one, both on
the quota `warehouse` (1). Each body appends "<name> start|end <time>" to `log`."""

from __future__ import annotations

import time
from pathlib import Path

import sluice


def note(log: str, line: str) -> None:
    with Path(log).open("a") as f:
        f.write(f"{line} {time.time()}\n")


@sluice.task(quotas=[sluice.Quota("warehouse")], priority=0, retries=1)
def backfill(log: str, stop: str) -> str:
    note(log, "low start")
    deadline = time.monotonic() + 60
    while not Path(stop).exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    note(log, "low end")
    return "low"


@sluice.task(quotas=[sluice.Quota("warehouse")], priority=10)
def urgent(log: str, stop: str) -> str:
    note(log, "high start")
    Path(stop).touch()  # the low one's next attempt finishes at once
    note(log, "high end")
    return "high"


@sluice.workflow
def low(log: str, stop: str) -> None:
    backfill(log=log, stop=stop)


@sluice.workflow
def high(log: str, stop: str) -> None:
    urgent(log=log, stop=stop)
