"""Schedules: firing times, bounded catch-up, once-only firings, and no overlap under SKIP."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

import sluice
from concurrency.cc_support import (
    execution_events,
    fast_options,
    fast_settings,
    intervals,
    load_flows,
    open_runtime,
    register,
    replay_max_active,
    service,
    wait_terminal,
)
from sluice.clock import FakeClock
from sluice.config import ConcurrencyConfig
from sluice.errors import InvalidArgumentError, InvalidPolicyError
from sluice.executions.schedules import ScheduleRunner, due_firings, firing_times, next_firing
from sluice.runtime import Runtime
from sluice.service.local import run_controller_candidate
from sluice.spec.models import Schedule

flows = load_flows()
T0 = 1_700_000_000.0  # 2023-11-14 22:13:20 UTC
DAY = 86_400.0


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_fixed_rate_fires_one_period_after_activation_and_every_period() -> None:
    every = Schedule(fixed_rate=60.0)
    assert firing_times(every, T0, T0, T0 + 59, 10) == []
    assert firing_times(every, T0, T0, T0 + 185, 10) == [T0 + 60, T0 + 120, T0 + 180]
    assert firing_times(every, T0, T0 + 120, T0 + 185, 10) == [T0 + 180]
    assert next_firing(every, T0, T0 + 185) == T0 + 240


def test_cron_fires_in_its_time_zone() -> None:
    nightly = Schedule(cron="0 3 * * *", timezone="Europe/Paris")  # 02:00 UTC in winter
    now = utc("2024-01-10T12:00:00")
    assert firing_times(nightly, 0.0, now - DAY, now, 5) == [utc("2024-01-10T02:00:00")]
    assert next_firing(nightly, 0.0, now) == utc("2024-01-11T02:00:00")
    summer = utc("2024-07-10T12:00:00")
    assert firing_times(nightly, 0.0, summer - DAY, summer, 5) == [utc("2024-07-10T01:00:00")]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("none", []),
        ("latest", [T0 + DAY]),
        ("all", [T0 + DAY - 3, T0 + DAY - 2, T0 + DAY - 1, T0 + DAY]),
    ],
)
def test_catch_up_after_a_day_down_is_bounded(mode: str, expected: list[float]) -> None:
    every_second = Schedule(fixed_rate=1.0, catch_up=mode, catch_up_max=4)  # type: ignore[arg-type]
    config = ConcurrencyConfig()
    assert due_firings(every_second, T0, T0 + 5, T0 + DAY + 0.5, config, grace=0.2) == expected


def test_catch_up_comes_from_config_unless_the_schedule_says() -> None:
    config = ConcurrencyConfig(catch_up="all", catch_up_max=2)
    hourly = Schedule(cron="0 * * * *")
    now = utc("2024-01-10T12:30:00")
    assert due_firings(hourly, 0.0, now - DAY, now, config, grace=5.0) == [
        utc("2024-01-10T11:00:00"),
        utc("2024-01-10T12:00:00"),
    ]
    on_time = Schedule(cron="0 * * * *", catch_up="none")
    assert due_firings(on_time, 0.0, now - DAY, utc("2024-01-10T12:00:03"), config, 5.0) == [
        utc("2024-01-10T12:00:00")
    ]


@pytest.mark.parametrize(
    ("make", "culprit"),
    [
        (lambda: Schedule(cron="61 * * * *"), "61 * * * *"),
        (lambda: Schedule(cron="0 3 * * *", timezone="Mars/Olympus"), "Mars/Olympus"),
        (lambda: Schedule(fixed_rate=0), "0"),
        (lambda: Schedule(fixed_rate=1, catch_up="some"), "some"),  # type: ignore[arg-type]
        (lambda: sluice.ConcurrencyPolicy(0), "0"),
        (lambda: sluice.ConcurrencyPolicy(1, "QUEUE"), "QUEUE"),  # type: ignore[arg-type]
    ],
)
def test_bad_schedules_and_policies_name_the_value(make: object, culprit: str) -> None:
    with pytest.raises(InvalidPolicyError) as raised:
        make()  # type: ignore[operator]
    assert repr(culprit) in str(raised.value) or culprit in str(raised.value)


async def test_a_schedule_needs_every_input_without_a_default(sqlite_url: str) -> None:
    needs = sluice.LaunchPlan("needs", flows.needs_input, schedule=Schedule(fixed_rate=5.0))
    async with open_runtime(sqlite_url) as rt:
        with pytest.raises(InvalidArgumentError, match="'seconds'"):
            await register(rt, needs)
        assert await service(rt).find() == []


@pytest.fixture
async def faked(sqlite_url: str) -> AsyncIterator[tuple[Runtime, FakeClock]]:
    clock = FakeClock(T0)
    rt = await Runtime.open(fast_settings(sqlite_url), clock=clock)
    yield rt, clock
    await rt.close()


def runner(rt: Runtime, **config: object) -> ScheduleRunner:
    return ScheduleRunner(rt.store, rt.notifier, rt.clock, ConcurrencyConfig(**config))  # type: ignore[arg-type]


async def test_each_firing_is_created_once_across_schedulers(
    faked: tuple[Runtime, FakeClock],
) -> None:
    rt, clock = faked
    minutely = sluice.LaunchPlan("minutely", flows.napping, schedule=Schedule(fixed_rate=60.0))
    await register(rt, minutely)
    clock.advance(30)
    assert await runner(rt).fire_due() == []
    clock.advance(30)
    fired = await asyncio.gather(*(runner(rt).fire_due() for _ in range(3)))
    assert [r.scheduled_at for batch in fired for r in batch] == [T0 + 60]
    assert await runner(rt).fire_due() == [], "a restarted scheduler does not fire it again"
    await service(rt).deactivate("minutely")
    clock.advance(600)
    assert await runner(rt).fire_due() == []


async def test_downtime_is_caught_up_within_bounds(faked: tuple[Runtime, FakeClock]) -> None:
    rt, clock = faked
    minutely = sluice.LaunchPlan("minutely", flows.napping, schedule=Schedule(fixed_rate=60.0))
    await register(rt, minutely)
    clock.advance(60)
    await runner(rt).fire_due()
    clock.advance(3_600)  # an hour down: 60 missed firings
    latest = await runner(rt, catch_up="latest").fire_due()
    assert [r.scheduled_at for r in latest] == [T0 + 3_660]
    clock.advance(3_600)
    several = await runner(rt, catch_up="all", catch_up_max=3).fire_due()
    assert [r.scheduled_at for r in several] == [T0 + 7_140, T0 + 7_200, T0 + 7_260]
    clock.advance(3_630)  # "none": missed ones are dropped, an on-time one still fires
    assert await runner(rt, catch_up="none").fire_due() == []
    clock.advance(30)
    on_time = await runner(rt, catch_up="none").fire_due()
    assert [r.scheduled_at for r in on_time] == [T0 + 10_920]


async def test_every_second_on_a_three_second_workflow_under_skip_never_overlaps(
    sqlite_url: str,
) -> None:
    async with open_runtime(sqlite_url) as rt:
        await register(rt, flows.ticking)
        engine = await rt.engine()
        await engine.start()
        schedules = asyncio.create_task(runner(rt).run())
        async with run_controller_candidate(rt, fast_options()):
            await asyncio.sleep(7.5)
            schedules.cancel()
            async with rt.store.read() as repos:
                fired = await repos.executions.find(launch_plan="ticking", limit=None)
            final = await wait_terminal(rt, [r.id for r in fired])
        await engine.stop()
        events = await execution_events(rt, [r.id for r in fired])
    phases = sorted(r.phase.value for r in final.values())
    assert "SUCCEEDED" in phases and "SKIPPED" in phases
    assert replay_max_active(events) == 1
    ran = sorted(intervals(events).values())
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ran)), "two runs overlapped"
    assert len({r.scheduled_at for r in fired}) == len(fired)
