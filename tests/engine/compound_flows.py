"""Map tasks and dynamic workflows the engine tests run. Loaded from this file by the tests
and by worker processes, so everything here must be importable on its own."""

from __future__ import annotations

import time
from pathlib import Path

import sluice


def bump(directory: str, name: str) -> int:
    """Count a side effect outside the store: one line per call."""
    path = Path(directory) / f"{name}.count"
    with path.open("a") as f:
        f.write("x\n")
    return len(path.read_text().splitlines())


@sluice.task
def work(x: int, directory: str, delay: float = 0.0) -> int:
    bump(directory, f"item{x}")
    time.sleep(delay)
    if x < 0:
        raise ValueError(f"negative item {x}")
    return x * x


@sluice.task(cache=sluice.Cache(version="1", ignored_inputs=("directory",)))
def cached_work(x: int, directory: str) -> int:
    bump(directory, f"cached{x}")
    return x + 100


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


@sluice.task
def count_present(values: list[int | None]) -> int:
    return sum(1 for v in values if v is not None)


@sluice.workflow
def mapped(xs: list[int], directory: str, delay: float = 0.0, width: int = 3) -> list[int]:
    # `width` is a workflow input only to show the bound is per map node, not per engine
    return sluice.map(work, concurrency=3)(items=xs, fixed={"directory": directory, "delay": delay})


@sluice.workflow
def mapped_then_total(xs: list[int], directory: str) -> int:
    squares = sluice.map(work, concurrency=2)(items=xs, fixed={"directory": directory})
    return total(values=squares)


@sluice.workflow
def tolerant(xs: list[int], directory: str) -> int:
    squares = sluice.map(work, concurrency=2, min_success_ratio=0.5)(
        items=xs, fixed={"directory": directory}
    )
    return count_present(values=squares)


@sluice.workflow
def tolerant_raw(xs: list[int], directory: str) -> list[int | None]:
    return sluice.map(work, min_success_ratio=0.5)(items=xs, fixed={"directory": directory})


@sluice.workflow
def cached_map(xs: list[int], directory: str) -> list[int]:
    return sluice.map(cached_work, concurrency=4)(items=xs, fixed={"directory": directory})


@sluice.dynamic
def fan(n: int, directory: str, delay: float = 0.0) -> int:
    bump(directory, "build")
    return total(values=[work(x=i, directory=directory, delay=delay) for i in range(n)])


@sluice.workflow
def dynamic_fan(n: int, directory: str, delay: float = 0.0) -> int:
    return fan(n=n, directory=directory, delay=delay)


@sluice.dynamic
def nested(xs: list[int], directory: str) -> list[int]:
    shifted = [x + 1 for x in xs]
    return sluice.map(work, concurrency=2)(items=shifted, fixed={"directory": directory})


@sluice.workflow
def dynamic_map(xs: list[int], directory: str) -> int:
    return total(values=nested(xs=xs, directory=directory))


@sluice.task
def nap(x: int, directory: str, seconds: float) -> int:
    bump(directory, f"nap{x}")
    time.sleep(seconds)
    return x * 10


@sluice.workflow
def napping(x: int, directory: str, seconds: float = 0.0) -> int:
    return nap(x=x, directory=directory, seconds=seconds)


ONE_AT_A_TIME = sluice.LaunchPlan(
    "compound_flows.one_at_a_time",
    napping,
    default_inputs={"seconds": 0.5},
    concurrency=sluice.ConcurrencyPolicy(max=1),
)


@sluice.workflow
def calls_launch_plans(directory: str) -> int:
    first = ONE_AT_A_TIME(x=1, directory=directory)
    second = ONE_AT_A_TIME(x=2, directory=directory)
    return total(values=[first, second])


FAILING_PLAN = sluice.LaunchPlan("compound_flows.failing_plan", mapped, fixed_inputs={"delay": 0.0})


@sluice.workflow
def calls_a_failing_plan(directory: str) -> list[int]:
    return FAILING_PLAN(xs=[1, -1], directory=directory)  # type: ignore[no-any-return]


SLOW_PLAN = sluice.LaunchPlan("compound_flows.slow_plan", napping, default_inputs={"seconds": 1.5})


@sluice.workflow
def calls_a_slow_plan(directory: str) -> int:
    return total(values=[SLOW_PLAN(x=3, directory=directory)])


@sluice.task(quotas=[sluice.Quota("compound-api")], locks="row/{key}")
def guarded(key: int, directory: str) -> int:
    bump(directory, f"guarded{key}")
    time.sleep(0.1)
    return key


@sluice.workflow
def guarded_map(keys: list[int], directory: str) -> list[int]:
    return sluice.map(guarded, concurrency=3)(items=keys, fixed={"directory": directory})
