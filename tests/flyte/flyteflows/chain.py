"""Flytekit workflows sluice runs in its tests, written as any Flyte user writes them.

Bodies record each run (one O_APPEND line with their pid) in the directory named by the
SLUICE_FLYTE_TEST_DIR environment variable, so tests count what really ran; `cached`'s first
task holds while a `hold` file exists there, so a herd of runs can be made to overlap.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from pathlib import Path
from typing import Optional

from flytekit import (
    ConcurrencyLimitBehavior,
    ConcurrencyPolicy,
    FixedRate,
    LaunchPlan,
    task,
    workflow,
)
from flytekit.exceptions.user import FlyteRecoverableException
from flytekit.types.file import FlyteFile


def record(event: str) -> None:
    where = os.environ.get("SLUICE_FLYTE_TEST_DIR")
    if not where:
        return
    fd = os.open(Path(where, "history"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{event} {os.getpid()} {time.time()}\n".encode())
    finally:
        os.close(fd)


def hold() -> None:
    where = os.environ.get("SLUICE_FLYTE_TEST_DIR")
    while where and Path(where, "hold").exists():
        time.sleep(0.05)


@task(cache=True, cache_version="1", cache_serialize=True)
def double(x: int) -> int:
    record("double")
    hold()
    return 2 * x


@task(cache=True, cache_version="1", cache_serialize=True)
def describe(n: int, label: str) -> str:
    record("describe")
    return f"{label}={n}"


@task(cache=True, cache_version="1", cache_serialize=True)
def shout(text: str, times: list[int]) -> dict[str, int]:
    record("shout")
    return {text.upper(): sum(times)}


@workflow
def cached(x: int = 3, label: str = "n") -> dict[str, int]:
    doubled = double(x=x)
    text = describe(n=doubled, label=label)
    return shout(text=text, times=[doubled, 1])


@task
def add(a: int, b: float) -> float:
    return a + b


@workflow
def plain(a: int, b: float = 0.5) -> float:
    return add(a=a, b=add(a=a, b=b))


@task(retries=2)
def flaky(x: int) -> int:
    record("flaky")
    if x > 0:
        raise FlyteRecoverableException(f"flaky failed on {x}")
    return x


@task(retries=2)
def broken(x: int) -> int:
    record("broken")
    if x > 0:
        raise ValueError(f"broken on {x}")
    return x


@workflow
def failing(x: int = 1) -> int:
    return flaky(x=x)


@workflow
def failing_at_once(x: int = 1) -> int:
    return broken(x=x)


@task
def slow(seconds: float) -> float:
    record("slow-start")
    time.sleep(seconds)
    record("slow-end")
    return seconds


@workflow
def sleeper(seconds: float = 3.0) -> float:
    return slow(seconds=seconds)


every_minute = LaunchPlan.get_or_create(
    sleeper,
    name="every_minute",
    schedule=FixedRate(duration=timedelta(minutes=1)),
    concurrency=ConcurrencyPolicy(max_concurrency=1, behavior=ConcurrencyLimitBehavior.SKIP),
)


@task
def write(text: str) -> FlyteFile:
    path = Path(flytekit_sandbox(), "note.txt")
    path.write_text(text)
    return FlyteFile(str(path))


@task
def read(note: FlyteFile, suffix: Optional[str]) -> str:  # noqa: UP045 - read by flytekit
    return Path(note.download()).read_text() + (suffix or "")


@workflow
def files(text: str = "hello") -> str:
    return read(note=write(text=text), suffix=None)


def flytekit_sandbox() -> str:
    from flytekit import current_context

    return str(current_context().working_directory)
