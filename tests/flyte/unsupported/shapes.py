"""Flytekit definitions sluice does not run yet: the tests check each is refused by name."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Optional, Union

from flytekit import LaunchPlan, conditional, eager, map_task, sleep, task, workflow


@task
def inc(x: int) -> int:
    return x + 1


@dataclass
class Point:
    x: int
    y: int


@task
def takes_a_dataclass(point: Point) -> int:
    return point.x


@task
def takes_a_union(value: Union[int, str]) -> str:  # noqa: UP007 - read by flytekit
    return str(value)


@workflow
def gated(x: int = 1) -> int:
    waited = sleep(timedelta(seconds=1))
    done = inc(x=x)
    waited >> done
    return done


@eager
async def eagerly(x: int) -> int:
    return await inc(x=x)


@workflow
def one(x: int) -> int:
    return inc(x=x)


one_plan = LaunchPlan.get_or_create(one, name="one_plan")


@workflow
def map_over_plan(xs: list[int] = [1, 2]) -> list[int]:  # noqa: B006 - flytekit's default
    return map_task(one_plan)(x=xs)


@workflow
def on_none(v: Optional[int] = None) -> int:  # noqa: UP045 - read by flytekit
    return conditional("none").if_(v.is_none()).then(inc(x=1)).else_().then(inc(x=2))
