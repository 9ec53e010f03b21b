"""Rate limit rules: what "100/min" means as the two parameters of the GCRA every backend runs.

A rule is an emission interval T (seconds per unit) and a burst B (units that may go at once
from idle). An admission of n units at time t is allowed when max(tat, t) + n*T - t <= B*T,
and moves the key's theoretical arrival time `tat` to max(tat, t) + n*T (docs/resources.md).

`RateLimitRule.parse("100/min")` promises the operator's number: no window of the period ever
holds more than 100 admitted units. With a burst B that needs T = period / (count - B + 1): B
units may go at once, and the sustained pace is (count - B + 1) per period. The default burst
is 1: one unit every period / count, evenly spaced.

`RateLimitRule.token_bucket(qps, burst)` is the web-API plugin's classic bucket: T = 1 / qps,
so any T seconds hold at most burst + qps * T calls.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from sluice.errors import InvalidRateLimitError
from sluice.spec.names import shown

LARGEST_COUNT = 1_000_000_000
PERIODS: dict[str, float] = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "min": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "day": 86400.0,
    "days": 86400.0,
}
_CANONICAL = {1.0: "s", 60.0: "min", 3600.0: "hour", 86400.0: "day"}
_RATE = re.compile(r"\s*(\d+)\s*/\s*([A-Za-z]+)\s*(?:,?\s*burst\s+(\d+))?\s*")
_PERIOD_NAMES = "s, min, hour or day"


@dataclass(frozen=True)
class RateLimitRule:
    """One limit's GCRA parameters, and how an operator wrote it (`rate`, shown by `ls`)."""

    rate: str
    interval: float
    """Seconds per unit at the sustained pace (the GCRA's emission interval T)."""
    burst: int
    """Units that may be admitted at once from idle (B: the bucket's depth)."""

    @classmethod
    def parse(cls, text: object, burst: int | None = None) -> RateLimitRule:
        """ "100/min", "5/s", "1000/hour, burst 50" (or `burst`); InvalidRateLimitError naming
        the value for anything else: "0/min", "5/fortnight", a burst above the count."""
        if not isinstance(text, str):
            raise InvalidRateLimitError(
                f"a rate limit must be a string such as '100/min', got {shown(text)}"
            )
        match = _RATE.fullmatch(text)
        if match is None:
            raise InvalidRateLimitError(
                f"rate limit {text!r} is not COUNT/PERIOD (such as '100/min' or "
                f"'10/s, burst 5'); PERIOD is {_PERIOD_NAMES}"
            )
        count_text, unit, burst_text = match.groups()
        period = PERIODS.get(unit.lower())
        if period is None:
            raise InvalidRateLimitError(
                f"rate limit {text!r}: unknown period {unit!r}; use {_PERIOD_NAMES}"
            )
        if burst_text is not None and burst is not None and int(burst_text) != burst:
            raise InvalidRateLimitError(
                f"rate limit {text!r} names burst {burst_text} but burst {burst} was given too"
            )
        chosen = int(burst_text) if burst_text is not None else burst
        return cls.of(int(count_text), period, 1 if chosen is None else chosen, text)

    @classmethod
    def of(cls, count: int, period: float, burst: int = 1, text: str = "") -> RateLimitRule:
        """At most `count` units in any `period` seconds, `burst` of them at once."""
        where = f"rate limit {text!r}" if text else f"rate limit {count}/{period:g}s"
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidRateLimitError(f"{where}: the count must be at least 1, got {count!r}")
        if count > LARGEST_COUNT:
            raise InvalidRateLimitError(
                f"{where}: the count must be at most {LARGEST_COUNT:_}, got {count}"
            )
        if not (math.isfinite(period) and period > 0):
            raise InvalidRateLimitError(f"{where}: the period must be > 0 seconds, got {period!r}")
        check_burst(where, burst, count)
        unit = _CANONICAL.get(period, f"{period:g}s")
        rate = f"{count}/{unit}" + (f", burst {burst}" if burst > 1 else "")
        return cls(rate, period / (count - burst + 1), burst)

    @classmethod
    def token_bucket(cls, qps: float, burst: int) -> RateLimitRule:
        """`qps` units a second, `burst` saved up: any T seconds hold at most burst + qps*T."""
        if isinstance(qps, bool) or not isinstance(qps, int | float) or not qps > 0:
            raise InvalidRateLimitError(f"a token bucket needs qps > 0, got {qps!r}")
        if not math.isfinite(qps):
            raise InvalidRateLimitError(f"a token bucket needs a finite qps, got {qps!r}")
        check_burst(f"token bucket of {qps:g} qps", burst, LARGEST_COUNT)
        return cls(f"qps {qps:g}, burst {burst}", 1.0 / qps, burst)


def check_burst(where: str, burst: object, count: int) -> int:
    if isinstance(burst, bool) or not isinstance(burst, int) or not 1 <= burst <= count:
        raise InvalidRateLimitError(
            f"{where}: the burst must be an int from 1 to the count ({count}), got {burst!r}"
        )
    return burst


def check_units(name: str, units: object) -> int:
    if isinstance(units, bool) or not isinstance(units, int) or not 1 <= units <= LARGEST_COUNT:
        raise InvalidRateLimitError(
            f"rate limit {name!r}: units must be an int from 1 to {LARGEST_COUNT:_}, "
            f"got {shown(units)}"
        )
    return units
