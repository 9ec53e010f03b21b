"""Ray tasks of the tests: they run on the test cluster through the plugin's configured
address (`plugins.config.ray.address`)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import sluice
from sluice.plugins.ray import RayJobConfig

FAST = RayJobConfig(poll_interval=0.2)


@sluice.task(type="ray", custom=FAST)
def square(x: int) -> int:
    print(f"squaring {x} in pid {os.getpid()}")
    return x * x


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


@sluice.workflow
def squares() -> int:
    return total(values=[square(x=i) for i in range(1, 3)])


@sluice.task(type="ray", custom=FAST, retries=1)
def broken(x: int) -> int:
    raise ValueError(f"no square for {x} today")


@sluice.workflow
def broken_flow() -> int:
    return broken(x=7)


@sluice.task(type="ray", custom=FAST)
def chatty(lines: int) -> int:
    for i in range(lines):
        print(f"line {i}", flush=True)
    return lines


@sluice.task(type="ray", custom=FAST)
def wait_for(path: str, timeout: float) -> str:
    """Run until `path` exists (the test's signal), then return its text."""
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.1)
    return Path(path).read_text()


@sluice.task(type="ray", custom=FAST, quotas=[sluice.Quota("ray:shared")])
def hold(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@sluice.workflow
def held() -> None:
    for _ in range(2):
        hold(seconds=1.0)


@sluice.workflow
def waiting(path: str) -> str:
    return wait_for(path=path, timeout=120.0)


@sluice.task(type="ray", custom=RayJobConfig(head_cpus=1, shutdown_after_job=True))
def on_own_cluster(x: int) -> int:
    import ray

    @ray.remote
    def double(y: int) -> int:
        return 2 * y

    return int(ray.get(double.remote(x)))


# Task mode: Ray tasks owned by the plugin's task host actor (no job per task).
TASK = RayJobConfig(mode="task", poll_interval=0.2)


@sluice.task(type="ray", custom=TASK)
def t_square(x: int) -> int:
    print(f"t-squaring {x}")
    return x * x


@sluice.workflow
def t_fanout() -> int:
    return total(values=[t_square(x=i) for i in range(20)])


@sluice.task(type="ray", custom=TASK, retries=1)
def t_broken(x: int) -> int:
    raise ValueError(f"no square for {x} in task mode")


@sluice.task(type="ray", custom=TASK)
def t_not_a_pair(x: int) -> tuple[int, int]:
    return x  # type: ignore[return-value]


@sluice.task(type="ray", custom=TASK)
def t_worker_dies(x: int) -> int:
    os._exit(3)


@sluice.task(type="ray", custom=TASK)
def t_wait_for(path: str, started: str, timeout: float) -> str:
    """Note this run (a line with its pid in `started`), then run until `path` exists."""
    with open(started, "a") as runs:
        runs.write(f"{os.getpid()}\n")
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.1)
    return Path(path).read_text()


@sluice.workflow
def t_waiting(path: str, started: str) -> str:
    return t_wait_for(path=path, started=started, timeout=120.0)
