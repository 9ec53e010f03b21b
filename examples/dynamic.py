"""Dynamic workflows: a `@sluice.dynamic` task builds a workflow from its real inputs when it
runs (loops and ifs over values are fine there), and its nodes then run, are recorded and
shown like a static workflow's: `sluice executions show ID` lists `shards:build` (the body
that built it) and `shards.split`, `shards.split-2`, ..., `shards.total`.

    python examples/dynamic.py
    sluice run examples/dynamic.py:report --input 'sizes=[3, 5]'
"""

from __future__ import annotations

import sluice


@sluice.task
def split(size: int) -> list[int]:
    return list(range(size))


@sluice.task
def total(parts: list[list[int]]) -> int:
    return sum(sum(part) for part in parts)


@sluice.dynamic
def shards(sizes: list[int]) -> int:
    # Runs in a worker with the real list: one `split` node per size, then one `total`.
    parts = [split(size=size) for size in sizes if size > 0]
    return total(parts=parts)


@sluice.task
def describe(count: int, sizes: list[int]) -> str:
    return f"{len(sizes)} shards, total {count}"


@sluice.workflow
def report(sizes: list[int] = [2, 3, 4]) -> str:  # noqa: B006 - a JSON default, never mutated
    return describe(count=shards(sizes=sizes), sizes=sizes)


if __name__ == "__main__":
    raise SystemExit(sluice.main(["run", f"{__file__}:report"]))
