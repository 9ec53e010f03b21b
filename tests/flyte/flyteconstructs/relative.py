"""A module that imports its neighbours relatively, as a package's modules do."""

from __future__ import annotations

from flytekit import workflow

from .shapes import add, pairs


@workflow
def first_plus_last(n: int = 2) -> float:
    listed = pairs(n=n)
    return add(a=listed[0], b=listed[2])
