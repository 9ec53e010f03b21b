"""flytekit conditionals sluice runs: each then-task records its run, so tests see that only
the chosen case ran."""

from __future__ import annotations

import os
import time
from pathlib import Path

from flytekit import conditional, task, workflow


def record(event: str) -> None:
    where = os.environ.get("SLUICE_FLYTE_TEST_DIR")
    if not where:
        return
    fd = os.open(Path(where, "history"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event} {os.getpid()} {time.time()}\n".encode())
    finally:
        os.close(fd)


@task
def inc(x: int) -> int:
    record("inc")
    return x + 1


@task
def neg(x: int) -> int:
    record("neg")
    return -x


@workflow
def signs(x: int = 1, y: int = 0) -> int:
    a = inc(x=x)
    return (
        conditional("sign")
        .if_((a > 2) & (y == 0))
        .then(inc(x=a))
        .elif_((a < 0) | (y > 100))
        .then(neg(x=y))
        .else_()
        .then(neg(x=a))
    )


@workflow
def twice(x: int) -> int:
    return inc(x=inc(x=x))


@workflow
def guarded(x: int = 1) -> int:
    positive = conditional("positive").if_(x > 0).then(twice(x=x)).else_().fail("x must be > 0")
    return neg(x=positive)


@task
def nap(seconds: float) -> float:
    record("nap-start")
    time.sleep(seconds)
    record("nap-end")
    return seconds


@workflow
def napping(seconds: float = 30.0) -> float:
    first = nap(seconds=0.0)
    return conditional("long").if_(seconds > first).then(nap(seconds=seconds)).else_().fail("no")
