"""Dataclasses, pydantic models and untyped dicts in and out of flytekit tasks, and attribute
access on promises (`out.field`, `out[0]`, `out["k"]`) in workflows."""

from __future__ import annotations

from dataclasses import dataclass, field

from flytekit import task, workflow
from pydantic import BaseModel


@dataclass
class Box:
    label: str
    sizes: list[int]
    extra: dict[str, float] = field(default_factory=dict)


class Order(BaseModel):
    item: str
    count: int = 1
    notes: list[str] = []


@task
def pack(label: str, n: int) -> Box:
    return Box(label=label, sizes=list(range(1, n + 1)), extra={"w": 0.5 * n})


@task
def weigh(box: Box) -> float:
    return sum(box.sizes) + box.extra.get("w", 0.0)


@task
def order_of(box: Box) -> Order:
    return Order(item=box.label.upper(), count=len(box.sizes), notes=[box.label])


@task
def bill(order: Order, unit: float) -> str:
    return f"{order.count} x {order.item} at {unit}"


@task
def tally(counts: dict) -> dict:  # an untyped dict: flytekit carries it as msgpack
    return {**counts, "total": sum(v for v in counts.values() if isinstance(v, int))}


@task
def pairs(n: int) -> list[int]:
    return [n * 10 + i for i in range(3)]


@task
def keyed(n: int) -> dict[str, int]:
    return {"low": n, "high": n * 100}


@task
def add(a: float, b: float) -> float:
    return a + b


@task
def say(text: str, times: int) -> str:
    return " ".join([text] * times)


@workflow
def boxes(label: str = "cube", n: int = 3) -> tuple[float, str, Box]:
    box = pack(label=label, n=n)
    order = order_of(box=box)
    return weigh(box=box), bill(order=order, unit=box.extra["w"]), box


@workflow
def attributes(n: int = 4) -> tuple[float, str, int]:
    box = pack(label="ring", n=n)
    listed = pairs(n=n)
    table = keyed(n=n)
    order = order_of(box=box)
    total = add(a=listed[1], b=table["high"])
    return total, say(text=order.item, times=order.count), box.sizes[2]


@workflow
def untyped(counts: dict) -> dict:
    return tally(counts=counts)


@workflow
def attribute_of_input(box: Box) -> str:
    return say(text=box.label, times=box.sizes[0])
