"""Tasks and workflows the foundation tests (SDK, store) build specs from.

Importable by name so that specs built from them carry stable module names.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from typing import NamedTuple

from sluice import Cache, Locks, Quota, task, workflow


@dataclasses.dataclass
class Point:
    x: int
    y: float = 0.0


class Stats(NamedTuple):
    total: int
    mean: float


@task
def add(a: int, b: int = 2) -> int:
    return a + b


@task(
    retries=3,
    timeout=12.5,
    cache=Cache(version="1", serialize=True, ignored_inputs=("b",)),
    quotas=[Quota("hive", 2)],
    locks=Locks("db/{a}"),
    interruptible=True,
    priority=4,
    custom={"image": "python:3.11"},
)
async def async_add(a: int, b: int = 1) -> int:
    await asyncio.sleep(0)
    return a + b


@task
def split(a: int) -> tuple[int, str]:
    return a, str(a)


@task
def stats(xs: list[int]) -> Stats:
    return Stats(sum(xs), sum(xs) / max(1, len(xs)))


@task
def shift(p: Point, by: int) -> Point:
    return Point(p.x + by, p.y)


@task
def describe(day: dt.date, when: dt.datetime | None = None) -> str:
    return f"{day.isoformat()} {when.isoformat() if when else '-'}"


@task
def shout(s: str) -> str:
    return s.upper()


@task
def fmt(value: float) -> str:
    return f"{value:.1f}"


@task
def total(values: dict[str, int]) -> int:
    return sum(values.values())


@task
def noop(a: int) -> None:
    return None


@workflow
def pipeline(x: int, y: int = 5) -> int:
    """add(x) -> add(that, y) -> stats([both, 3]) -> add(total, 7)."""
    first = add(a=x)
    second = add(a=first, b=y)
    summary = stats(xs=[first, second, 3])
    return add(a=summary[0], b=7)


@workflow
def fan(x: int) -> int:
    parts = [add(a=x, b=i) for i in range(3)]
    return stats(xs=parts)[0]


@workflow
def outer(z: int) -> int:
    inner = pipeline(x=z)
    return add(a=inner)


@workflow
def twice(z: int) -> tuple[int, int]:
    return pipeline(x=z, y=1), pipeline(x=z)


@workflow
def keyed(x: int) -> int:
    return total(values={"one": add(a=x), "two": add(a=x, b=3), "three": 3})


@workflow
def unannotated(x: int):  # type: ignore[no-untyped-def]
    return split(a=x)


@workflow
def named_outputs(x: int) -> float:
    summary = stats(xs=[add(a=x), x])
    return summary.mean


@workflow
def floats(x: int) -> str:
    return fmt(value=add(a=x))
