"""Workflows the concurrency tests run. Loaded from this file by the tests, by the processes
they spawn and by the engine's worker processes, so it must be importable on its own."""

from __future__ import annotations

import time

import sluice


@sluice.task
def nap(seconds: float, tag: str = "") -> str:
    time.sleep(seconds)
    return tag


@sluice.workflow
def napping(seconds: float = 0.2, tag: str = "") -> str:
    return nap(seconds=seconds, tag=tag)


def plan(
    name: str,
    max_active: int,
    behavior: str = "WAIT",
    *,
    max_pending: int | None = None,
    priority: int = 0,
    schedule: sluice.Schedule | None = None,
) -> sluice.LaunchPlan:
    return sluice.LaunchPlan(
        name,
        napping,
        concurrency=sluice.ConcurrencyPolicy(max_active, behavior, max_pending),  # type: ignore[arg-type]
        priority=priority,
        schedule=schedule,
    )


waiting = plan("waiting", 2)
skipping = plan("skipping", 1, "SKIP")
replacing = plan("replacing", 1, "REPLACE")
bounded = plan("bounded", 1, max_pending=1)
roomy = plan("roomy", 5)
loose = sluice.LaunchPlan("waiting", napping, default_inputs={"tag": "loose"})
ticking = sluice.LaunchPlan(
    "ticking",
    napping,
    default_inputs={"seconds": 3.0},
    concurrency=sluice.ConcurrencyPolicy(1, sluice.ConcurrencyBehavior.SKIP),
    schedule=sluice.Schedule(fixed_rate=1.0),
)


@sluice.workflow
def needs_input(seconds: float) -> str:
    return nap(seconds=seconds)


@sluice.workflow
def per_customer(customer: str, seconds: float = 0.2, tag: str = "") -> str:
    return nap(seconds=seconds, tag=tag)


KEY_LIMITS = {"premium": 2}
TOTAL = 3
keyed = sluice.LaunchPlan(
    "keyed",
    per_customer,
    concurrency=sluice.ConcurrencyPolicy(1, key="{customer}", key_max=KEY_LIMITS, total_max=TOTAL),
)


hourly = sluice.LaunchPlan(
    "hourly",
    napping,
    default_inputs={"seconds": 0.05},
    schedule=sluice.Schedule(cron="0 * * * *", timezone="Europe/Paris"),
    concurrency=sluice.ConcurrencyPolicy(2),
)
