"""Workflows whose tasks take rate limits (test_rate_limits.py, test_rate_limit_engines.py)."""

from __future__ import annotations

import sluice


@sluice.task(rate_limits=[sluice.RateLimit("api", key="{customer}")])
def call_api(customer: str, n: int) -> int:
    return n


@sluice.workflow
def two_customers() -> None:
    for n in range(4):
        call_api(customer="acme", n=n)
    for n in range(2):
        call_api(customer="globex", n=n)


@sluice.workflow
def six_calls(customer: str) -> None:
    for n in range(6):
        call_api(customer=customer, n=n)


@sluice.task(cache=sluice.Cache(version="1"), rate_limits=[sluice.RateLimit("api")])
def cached_call(n: int) -> int:
    return n * 2


@sluice.workflow
def cached(n: int) -> int:
    return cached_call(n=n)


@sluice.task(retries=1, rate_limits=[sluice.RateLimit("api")])
def fails_once(marker: str) -> None:
    from pathlib import Path

    path = Path(marker)
    if not path.exists():
        path.touch()
        raise RuntimeError("first attempt fails")


@sluice.workflow
def flaky(marker: str) -> None:
    fails_once(marker=marker)


@sluice.task(rate_limits=[sluice.RateLimit("nowhere")])
def unlimited() -> None:
    return None


@sluice.workflow
def unknown_limit() -> None:
    unlimited()
