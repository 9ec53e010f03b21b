"""Workflows the web UI tests run. Loaded from this file by the tests and by worker
processes, so everything here must be importable on its own.

Tasks hold while a gate file exists, so a test decides when a quota or a cache reservation
is released and can look at the pages meanwhile."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import sluice

TICK = 0.05


def hold(directory: str, gate: str, name: str) -> None:
    """Print a line now and then while `gate` exists (the node's log while it runs)."""
    (Path(directory) / f"{name}.started").touch()
    print(f"{name}: started", flush=True)
    count = 0
    while (Path(directory) / gate).exists():
        time.sleep(TICK)
        count += 1
        if count % 10 == 0:
            print(f"{name}: still working ({count})", flush=True)
    print(f"{name}: done", flush=True)


@sluice.task(quotas=[sluice.Quota("warehouse")])
def load(directory: str, name: str) -> str:
    hold(directory, f"{name}.gate", name)
    return name


LOADS = ("x1", "x2", "x3")
"""The loads of `warehouse_loads`: each holds while its own gate, `x1.gate`..., exists."""
NODES = ("load", "load-2", "load-3")
"""Their node ids."""


@sluice.workflow
def warehouse_loads(directory: str) -> None:
    for name in LOADS:
        load(directory=directory, name=name)


@sluice.task(cache=sluice.Cache(version="1", serialize=True))
def expensive(directory: str, x: int) -> int:
    hold(directory, "cache.gate", f"expensive-{x}")
    return x * 2


@sluice.workflow
def cached_report(directory: str, x: int = 21) -> int:
    return expensive(directory=directory, x=x)


@sluice.task
def extract(n: int) -> list[int]:
    return list(range(n))


@sluice.task
def square_all(values: list[int]) -> list[int]:
    return [v * v for v in values]


@sluice.task
def explode(values: list[int]) -> int:
    raise ValueError(f"cannot load {len(values)} rows: the table is locked")


@sluice.task
def total(left: list[int], right: list[int]) -> int:
    return sum(left) + sum(right)


@sluice.workflow
def pipeline(n: int = 4) -> int:
    rows = extract(n=n)
    return total(left=square_all(values=rows), right=rows)


@sluice.workflow
def broken(n: int = 3) -> int:
    return explode(values=extract(n=n))


@sluice.task
def report_task(directory: str) -> str:
    hold(directory, "report.gate", "report")
    return "report"


@sluice.workflow
def report(directory: str) -> str:
    return report_task(directory=directory)


nightly = sluice.LaunchPlan(
    "nightly",
    report,
    default_inputs={"directory": tempfile.gettempdir()},  # a firing needs one; tests pass theirs
    concurrency=sluice.ConcurrencyPolicy(1, sluice.ConcurrencyBehavior.WAIT),
    schedule=sluice.Schedule(cron="0 3 * * *"),
)


@sluice.task(locks=sluice.Locks("db/partition/{item}", for_each="partitions"))
def write_partitions(directory: str, name: str, partitions: list[int]) -> str:
    hold(directory, "locks.gate", name)
    return name


@sluice.workflow
def partition_writes(directory: str) -> None:
    write_partitions(directory=directory, name="a", partitions=[1, 2])
    write_partitions(directory=directory, name="b", partitions=[2, 3])


@sluice.task
def chatty(directory: str, lines: int = 5) -> int:
    """Prints `lines` lines, a warning on stderr, then more while `chatty.gate` exists."""
    import sys

    for i in range(lines):
        print(f"chatty line {i}", flush=True)
    print("ValueError: a recoverable hiccup (retried)", file=sys.stderr, flush=True)
    count = 0
    while (Path(directory) / "chatty.gate").exists():
        time.sleep(TICK)
        count += 1
        if count % 4 == 0:
            print(f"chatty tick {count}", flush=True)
    print("chatty done", flush=True)
    return lines


@sluice.workflow
def chatter(directory: str, lines: int = 5, label: str = "weekly", strict: bool = False) -> int:
    return chatty(directory=directory, lines=lines)


@sluice.task
def prepare(directory: str, n: int) -> list[int]:
    """Counts its runs in `directory`/prepare.runs: a retry that reuses it never runs it."""
    runs = Path(directory) / "prepare.runs"
    runs.write_text(str(int(runs.read_text() or "0") + 1) if runs.exists() else "1")
    return list(range(n))


@sluice.task
def fragile(directory: str, values: list[int]) -> int:
    """Fails while `directory`/broken exists."""
    if (Path(directory) / "broken").exists():
        raise RuntimeError("the warehouse is read-only")
    return sum(values)


@sluice.workflow
def two_steps(directory: str, n: int = 4) -> int:
    return fragile(directory=directory, values=prepare(directory=directory, n=n))


@sluice.task
def shout(text: str) -> str:
    return text.upper()


@sluice.workflow
def shouting(text: str) -> str:
    return shout(text=text)
