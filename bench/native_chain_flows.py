"""Chains of native sluice tasks for bench/flyte_overhead.py, the same shape as the flytekit
ones in flyte_chain_flows.py."""

from __future__ import annotations

import sluice


@sluice.task
def step(i: int) -> int:
    return i + 1


@sluice.workflow
def chain1(x: int = 0) -> int:
    return step(i=x)


@sluice.workflow
def chain50(x: int = 0) -> int:
    for _ in range(50):
        x = step(i=x)
    return x
