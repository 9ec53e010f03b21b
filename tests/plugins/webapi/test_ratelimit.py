"""The token bucket on a fake clock: never more than burst + qps * T calls in T seconds,
served first come first served, paused by a Retry-After."""

from __future__ import annotations

import asyncio

from tests.plugins.webapi.fakes import settle

from sluice.clock import FakeClock
from sluice.plugins.webapi import RateLimiter


def assert_within_bucket(times: list[float], qps: float, burst: int) -> None:
    """For every window [times[i], times[j]]: j - i + 1 <= burst + qps * (t_j - t_i)."""
    for i in range(len(times)):
        for j in range(i, len(times)):
            allowed = burst + qps * (times[j] - times[i]) + 1e-6
            assert j - i + 1 <= allowed, (i, j, times[i], times[j])


async def run_contended(
    clock: FakeClock, limiter: RateLimiter, callers: int, step: float
) -> tuple[list[float], list[int]]:
    times: list[float] = []
    order: list[int] = []

    async def caller(n: int) -> None:
        await limiter.acquire()
        times.append(clock.now())
        order.append(n)

    tasks = []
    for n in range(callers):
        tasks.append(asyncio.create_task(caller(n)))
        await asyncio.sleep(0)  # callers arrive in order n = 0, 1, 2, ...
    while len(times) < callers:
        await settle()
        clock.advance(step)
    await asyncio.gather(*tasks)
    return times, order


async def test_bursts_then_paces_at_qps() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=10, burst=5, clock=clock)
    times, _ = await run_contended(clock, limiter, 40, step=0.013)
    assert times[:5] == [times[0]] * 5  # the burst goes at once
    assert times[5] > times[0]
    assert_within_bucket(times, qps=10, burst=5)
    # ... and the limiter is not needlessly slow: 35 more calls at 10 qps take about 3.5 s
    assert times[-1] - times[0] < 3.5 + 0.2


async def test_callers_are_served_in_arrival_order() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=2, burst=5, clock=clock)
    _, order = await run_contended(clock, limiter, 30, step=0.1)
    assert order == list(range(30))


async def test_newcomers_do_not_overtake_a_waiter() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=1, burst=5, clock=clock)
    for _ in range(5):
        await limiter.acquire()
    served: list[str] = []

    async def take(name: str) -> None:
        await limiter.acquire()
        served.append(name)

    first = asyncio.create_task(take("first"))
    await settle()
    clock.advance(1.0)  # one token is back; "first" is waiting for it
    late = asyncio.create_task(take("late"))
    await settle()
    clock.advance(1.0)
    await settle()
    await asyncio.gather(first, late)
    assert served == ["first", "late"]


async def test_idle_time_refills_at_most_burst() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=1, burst=5, clock=clock)
    clock.advance(1000)
    times, _ = await run_contended(clock, limiter, 8, step=0.25)
    assert times[:5] == [times[0]] * 5
    assert_within_bucket(times, qps=1, burst=5)


async def test_pause_until_holds_everyone() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=100, burst=50, clock=clock)
    start = clock.now()
    limiter.pause_until(start + 10)
    times, _ = await run_contended(clock, limiter, 3, step=1.0)
    assert min(times) >= start + 10


async def test_a_cancelled_waiter_takes_no_token() -> None:
    clock = FakeClock()
    limiter = RateLimiter(qps=1, burst=5, clock=clock)
    for _ in range(5):
        await limiter.acquire()
    waiter = asyncio.create_task(limiter.acquire())
    await settle()
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    clock.advance(1.0)
    await asyncio.wait_for(limiter.acquire(), 1.0)  # the token is still there
