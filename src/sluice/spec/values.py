"""Numbers users give sluice (retries, timeouts, priorities, caps): checked in one place.

A bool is never a number here, NaN and infinity are never seconds (a timeout of NaN never
fires, one of inf is no timeout: say None), and counts stop at LARGEST_COUNT, beyond which a
value is a typo and overflows the database's integers.
"""

from __future__ import annotations

import math

from sluice.errors import InvalidArgumentError

LARGEST_COUNT = 1_000_000_000
PRIORITY_RANGE = (-1_000_000, 1_000_000)
MAX_LIST_LIMIT = 10_000
"""The most rows one listing (`--limit`) returns."""


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_count(
    what: str,
    value: object,
    error: type[InvalidArgumentError],
    *,
    low: int = 0,
    high: int = LARGEST_COUNT,
) -> int:
    """An int in low..high; `what` names the value, e.g. "task 'x': retries"."""
    if is_int(value) and low <= value <= high:  # type: ignore[operator]
        return value  # type: ignore[return-value]
    raise error(f"{what} must be an int from {low} to {high:_}, got {value!r}")


def check_seconds(what: str, value: object, error: type[InvalidArgumentError]) -> float:
    """A finite number of seconds > 0."""
    if (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 < value <= LARGEST_COUNT
    ):
        return float(value)
    raise error(f"{what} must be a finite number of seconds > 0, got {value!r}")


def check_priority(what: str, value: object, error: type[InvalidArgumentError]) -> int:
    low, high = PRIORITY_RANGE
    return check_count(what, value, error, low=low, high=high)
