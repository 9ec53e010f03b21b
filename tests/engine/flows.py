"""Workflows the engine tests run. Loaded from this file by the tests and by worker
processes, so everything here must be importable on its own."""

from __future__ import annotations

import os
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
def square(x: int) -> int:
    return x * x


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


@sluice.workflow
def fan(width: int = 5) -> int:
    return total(values=[square(x=i) for i in range(5)])


@sluice.task(retries=2)
def flaky(directory: str) -> str:
    if bump(directory, "flaky") < 2:
        raise ValueError("first attempt fails on purpose")
    return "ok"


@sluice.workflow
def retried(directory: str) -> str:
    return flaky(directory=directory)


@sluice.task
def boom(message: str) -> int:
    raise RuntimeError(message)


@sluice.workflow
def failing(message: str = "kaboom") -> int:
    first = boom(message=message)
    return square(x=first)


@sluice.task
def die_once(directory: str) -> str:
    if bump(directory, "die") < 2:
        os._exit(7)  # the worker process dies mid-task
    return "survived"


@sluice.workflow
def dies(directory: str) -> str:
    return die_once(directory=directory)


@sluice.task(timeout=0.5)
def slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@sluice.workflow
def times_out(seconds: float = 30.0) -> float:
    return slow(seconds=seconds)


@sluice.task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@sluice.workflow
def long_nap(seconds: float = 60.0) -> float:
    first = nap(seconds=seconds)
    return nap(seconds=first)


@sluice.task
def not_json() -> int:
    return {1, 2}  # type: ignore[return-value]


@sluice.workflow
def bad_output() -> int:
    return not_json()


@sluice.task(type="shell", custom={"command": "echo hello {name}"})
def greet(name: str) -> str: ...


@sluice.task(type="shell", custom={"command": "sh -c 'exit 3'"})
def exit_three() -> None: ...


@sluice.workflow
def shell_flow(name: str = "world") -> str:
    return greet(name=name)


@sluice.workflow
def shell_fails() -> None:
    exit_three()


@sluice.workflow
def needs_input(x: int) -> int:
    return square(x=x)


# For the crash test: step 2 blocks while a file exists, so the test can kill the engine
# while step 1 is done and step 2 runs.
@sluice.task
def step_one(directory: str) -> int:
    return bump(directory, "one")


@sluice.task
def step_two(directory: str, previous: int) -> int:
    bump(directory, "two")
    while (Path(directory) / "block").exists():
        time.sleep(0.05)
    return previous + 1


@sluice.task
def step_three(directory: str, previous: int) -> int:
    bump(directory, "three")
    return previous + 1


@sluice.workflow
def resumable(directory: str) -> int:
    one = step_one(directory=directory)
    two = step_two(directory=directory, previous=one)
    return step_three(directory=directory, previous=two)


@sluice.task(cache=sluice.Cache(version="1"))
def cached_double(directory: str, x: int) -> int:
    bump(directory, "cached_double")
    return x * 2


@sluice.workflow
def cached(directory: str, x: int = 4) -> int:
    return cached_double(directory=directory, x=x)


@sluice.task(cache=sluice.Cache(version="1", serialize=True))
def expensive(directory: str, x: int) -> int:
    """Counts each run with the pid of the worker running it; holds while a file exists."""
    path = Path(directory) / "expensive.runs"
    with path.open("a") as f:
        f.write(f"{os.getpid()}\n")
    while (Path(directory) / "hold").exists():
        time.sleep(0.05)
    time.sleep(0.3)
    return x * 2


@sluice.workflow
def herd(directory: str, x: int = 21) -> int:
    return expensive(directory=directory, x=x)


def record_interval(directory: str, name: str, seconds: float) -> None:
    """Append "start end" (time.time()) of a critical section to `name`.intervals."""
    start = time.time()
    time.sleep(seconds)
    with (Path(directory) / f"{name}.intervals").open("a") as f:
        f.write(f"{start} {time.time()}\n")


@sluice.task(quotas=[sluice.Quota("warehouse")])
def load(directory: str, i: int) -> int:
    record_interval(directory, "warehouse", 0.3)
    return i


@sluice.workflow
def warehouse_fan(directory: str) -> None:
    for i in range(4):
        load(directory=directory, i=i)


@sluice.task(quotas=[sluice.Quota("nowhere")])
def unquoted() -> None:
    return None


@sluice.workflow
def unknown_quota() -> None:
    unquoted()


@sluice.task(locks=sluice.Locks("db/partition/{item}", for_each="partitions"))
def write_partitions(directory: str, name: str, partitions: list[int]) -> str:
    for p in partitions:
        start = time.time()
        with (Path(directory) / f"p{p}.holders").open("a") as f:
            f.write(f"{name} {start}\n")
    while (Path(directory) / "block").exists():  # lets a test look while locks are held
        time.sleep(0.05)
    time.sleep(0.2)
    for p in partitions:
        with (Path(directory) / f"p{p}.intervals").open("a") as f:
            f.write(f"{start} {time.time()}\n")
    return name


@sluice.workflow
def partition_writes(directory: str) -> None:
    write_partitions(directory=directory, name="a", partitions=[1, 2])
    write_partitions(directory=directory, name="b", partitions=[2, 3])
    write_partitions(directory=directory, name="c", partitions=[3, 1])
    write_partitions(directory=directory, name="d", partitions=[4])


def _partition_burst(offset: int) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    def burst(directory: str) -> None:
        for i in range(6):
            first, second = (i + offset) % 4, (i + offset + 1) % 4
            write_partitions(directory=directory, name=f"w{offset}-{i}", partitions=[first, second])

    return sluice.workflow(burst, name=f"flows.partition_burst_{offset}")


partition_burst_0, partition_burst_1, partition_burst_2, partition_burst_3 = (
    _partition_burst(k) for k in range(4)
)


@sluice.task
def join_strings(parts: list[str]) -> str:
    return ",".join(parts)


@sluice.task(type="shell", custom={"command": "true", "timeout": -1})
def bad_shell() -> None: ...


@sluice.workflow
def bad_plugin_config() -> None:
    bad_shell()


@sluice.task(type="no-such-type")
def unknown_type() -> None: ...


@sluice.workflow
def unknown_task_type() -> None:
    unknown_type()
