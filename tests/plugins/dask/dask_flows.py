"""Dask tasks of the tests: they run on the test cluster through the plugin's configured
address (`plugins.config.dask.address`)."""

from __future__ import annotations

import time
from pathlib import Path

import sluice


@sluice.task(type="dask")
def square(x: int) -> int:
    print(f"squaring {x}")
    return x * x


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


@sluice.workflow
def squares() -> int:
    return total(values=[square(x=i) for i in range(1, 3)])


@sluice.task(type="dask", retries=1)
def broken(x: int) -> int:
    raise ValueError(f"no square for {x} today")


@sluice.workflow
def broken_flow() -> int:
    return broken(x=7)


@sluice.task(type="dask")
def chatty(lines: int) -> int:
    for i in range(lines):
        print(f"line {i}")
    return lines


@sluice.task(type="dask")
def wait_for(path: str, runs: str, timeout: float) -> str:
    """Note a run in `runs`, then wait until `path` exists (the test's signal)."""
    with Path(runs).open("a") as f:
        f.write("run\n")
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.1)
    return Path(path).read_text()


@sluice.workflow
def waiting(path: str, runs: str) -> str:
    return wait_for(path=path, runs=runs, timeout=120.0)
