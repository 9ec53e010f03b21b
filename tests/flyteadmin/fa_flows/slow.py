"""A task that sleeps (terminated by the tests), a cached task, and launch plans with a
concurrency policy and a schedule."""

import time
from datetime import timedelta

from flytekit import FixedRate, LaunchPlan, task, workflow
from flytekit.models.concurrency import ConcurrencyLimitBehavior, ConcurrencyPolicy


@task
def nap(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


@workflow
def sleepy(seconds: float = 60.0) -> float:
    return nap(seconds=seconds)


one_at_a_time = LaunchPlan.get_or_create(
    sleepy,
    name="fa_flows.slow.one_at_a_time",
    concurrency=ConcurrencyPolicy(max_concurrency=1, behavior=ConcurrencyLimitBehavior.SKIP),
)

hourly = LaunchPlan.get_or_create(
    sleepy,
    name="fa_flows.slow.hourly",
    default_inputs={"seconds": 0.1},
    schedule=FixedRate(duration=timedelta(hours=1)),
)


@task(cache=True, cache_version="1")
def square(x: int) -> int:
    print(f"squaring {x}")
    return x * x


@workflow
def cached(x: int = 4) -> int:
    return square(x=x)
