"""Tasks for bench/engine_overhead.py, in their own module so worker processes import them."""

from __future__ import annotations

import sluice


@sluice.task
def noop(i: int) -> int:
    return i


@sluice.task
def step(i: int) -> int:
    return i + 1
