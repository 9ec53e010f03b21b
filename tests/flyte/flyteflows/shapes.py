"""Flytekit definitions whose translation the tests check: types, metadata, node kinds."""

from __future__ import annotations

import enum
from datetime import datetime, timedelta
from typing import Optional

from flytekit import CronSchedule, LaunchPlan, task, workflow
from flytekit.types.directory import FlyteDirectory
from flytekit.types.file import FlyteFile


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


@task(
    retries=3,
    timeout=timedelta(seconds=90),
    interruptible=True,
    cache=True,
    cache_version="7",
    cache_serialize=True,
    cache_ignore_input_vars=("note",),
)
def typed(
    n: int,
    ratio: float,
    note: str,
    flag: bool,
    at: datetime,
    span: timedelta,
    maybe: Optional[int],  # noqa: UP045 - flytekit reads the annotation at definition
    names: list[str],
    counts: dict[str, list[int]],
    color: Color,
    doc: FlyteFile,
    folder: FlyteDirectory,
) -> int:
    return n


@task
def inc(x: int) -> int:
    return x + 1


@workflow
def constants() -> int:
    return inc(x=41)


nightly = LaunchPlan.get_or_create(
    constants,
    name="nightly",
    schedule=CronSchedule(schedule="0 3 * * *"),
)


@workflow
def summing(a: int, b: int = 2) -> int:
    return inc(x=inc(x=a))


fixed = LaunchPlan.get_or_create(
    summing, name="fixed_a", fixed_inputs={"a": 5}, default_inputs={"b": 3}
)
