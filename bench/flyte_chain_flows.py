"""Chains of flytekit tasks for bench/flyte_overhead.py (a module of its own: workers import it)."""

from __future__ import annotations

from flytekit import task, workflow


@task
def step(i: int) -> int:
    return i + 1


@workflow
def chain1(x: int = 0) -> int:
    return step(i=x)


@workflow
def chain50(x: int = 0) -> int:
    for _ in range(50):
        x = step(i=x)
    return x
