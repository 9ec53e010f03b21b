"""flytekit map tasks, sub-workflows and launch plans called as nodes, as Flyte users write
them; bodies record each run (chain.record) so tests count what really ran."""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path
from typing import Optional

from flytekit import LaunchPlan, dynamic, map_task, task, workflow


def record(event: str) -> None:
    """One O_APPEND line in $SLUICE_FLYTE_TEST_DIR/history (as chain.record; this module is
    loaded from its file, outside its package, so it does not import chain)."""
    where = os.environ.get("SLUICE_FLYTE_TEST_DIR")
    if not where:
        return
    fd = os.open(Path(where, "history"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event} {os.getpid()} {time.time()}\n".encode())
    finally:
        os.close(fd)


@task(cache=True, cache_version="1")
def scale(x: int, factor: int) -> int:
    record(f"scale-{x}")
    return x * factor


@workflow
def mapped(xs: list[int] = [1, 2, 3, 4, 5, 6]) -> list[int]:  # noqa: B006 - flytekit's default
    return map_task(functools.partial(scale, factor=10), concurrency=2)(x=xs)


@task
def picky(x: int) -> int:
    record(f"picky-{x}")
    if x == 3:
        raise ValueError(f"picky refuses {x}")
    return -x


@workflow
def tolerant(xs: list[int] = [1, 2, 3, 4, 5]) -> list[Optional[int]]:  # noqa: B006, UP045
    return map_task(picky, min_success_ratio=0.6)(x=xs)


@workflow
def strict(xs: list[int] = [1, 2, 3, 4, 5]) -> list[int]:  # noqa: B006
    return map_task(picky)(x=xs)


@task
def pair(a: int, b: str) -> str:
    return f"{b}{a}"


@workflow
def zipped(a: list[int] = [1, 2], b: list[str] = ["x", "y"]) -> list[str]:  # noqa: B006
    return map_task(pair)(a=a, b=b)


@task
def slow_item(x: int, delay: float) -> int:
    record(f"start-{x}")
    time.sleep(delay)
    record(f"end-{x}")
    return x * x


@workflow
def slow_map(xs: list[int], delay: float = 0.5) -> list[int]:
    return map_task(functools.partial(slow_item, delay=delay), concurrency=2)(x=xs)


@task
def add_one(x: int) -> int:
    return x + 1


@workflow
def inner(x: int, y: int = 100) -> int:
    return add_one(x=add_one(x=x))


inner_plan = LaunchPlan.get_or_create(inner, name="inner_plan", fixed_inputs={"y": 7})


@workflow
def outer(x: int = 1) -> int:
    once = inner(x=x)
    return inner_plan(x=once)


@workflow
def middle(x: int) -> int:
    return inner(x=add_one(x=x))


@workflow
def nested(x: int = 1) -> int:
    return middle(x=x)


@dynamic
def fan_out(n: int, factor: int) -> list[int]:
    """Built when it runs: n nodes (a loop over a real value), then one more reading them."""
    record(f"fan_out-{n}")
    parts = [scale(x=i, factor=factor) for i in range(n)]
    return map_task(functools.partial(scale, factor=1))(x=parts)


@workflow
def dynamic_fan(n: int = 3) -> list[int]:
    return fan_out(n=n, factor=add_one(x=n))


@dynamic
def no_nodes(n: int) -> int:
    return n * 2


@workflow
def direct(n: int = 4) -> int:
    return add_one(x=no_nodes(n=n))


@dynamic
def slow_fan(n: int, delay: float) -> list[int]:
    record(f"slow_fan-{n}")
    return [slow_item(x=i, delay=delay) for i in range(n)]


@workflow
def slow_dynamic(n: int = 6, delay: float = 0.5) -> list[int]:
    return slow_fan(n=n, delay=delay)
