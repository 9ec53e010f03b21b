"""Quickstart: a fan-out/fan-in workflow on the embedded default (SQLite, local processes).

python examples/quickstart.py
sluice run examples/quickstart.py:quickstart --input scale=3
"""

from __future__ import annotations

import sluice


@sluice.task(retries=1)
def square(x: int, scale: int = 1) -> int:
    return scale * x * x


@sluice.task
def total(values: list[int]) -> int:
    return sum(values)


@sluice.workflow
def quickstart(scale: int = 1) -> int:
    squares = [square(x=i, scale=scale) for i in range(8)]
    return total(values=squares)


if __name__ == "__main__":
    raise SystemExit(sluice.main(["run", f"{__file__}:quickstart"]))
