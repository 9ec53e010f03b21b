"""Tasks for bench/engine_overhead.py, in their own module so worker processes import them."""

from __future__ import annotations

import sluice


@sluice.task
def noop(i: int) -> int:
    return i


@sluice.task
def step(i: int) -> int:
    return i + 1


@sluice.task
def chatty(i: int, lines: int) -> int:
    for n in range(lines):
        print(f"task {i} says line {n} of its output")
    return i


@sluice.task(cache=sluice.Cache(version="1"))
def cached_noop(i: int) -> int:
    return i
