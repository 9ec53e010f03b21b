"""Schedules: cron expressions (in a time zone) and fixed rates on ACTIVE launch plans.

Each firing goes through `create_execution` with `scheduled_at` set to its nominal time, so
the launch plan's concurrency policy applies and the store's unique index on (launch plan,
scheduled time) makes a firing happen once, however many schedulers run or restart. The
last firing is read from the store, never kept in memory, and catch-up after downtime is
bounded (upstream launched whole backlogs at once, flyteorg/flyte#4538):

- "none": missed firings are dropped; only a firing at most `grace` seconds old is launched;
- "latest": only the most recent missed firing is launched;
- "all": the `catch_up_max` most recent missed firings are launched, oldest first.

Fixed rates count from the activation of the ACTIVE version (its first firing is one period
after it); cron firings before the activation never run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock
from sluice.config import ConcurrencyConfig
from sluice.executions.launch import create_execution
from sluice.executions.policies import LAUNCH_PLANS_CHANNEL, launch_plan_spec
from sluice.spec.models import LaunchPlanSpec, Schedule
from sluice.store.notify import Notifier
from sluice.store.records import ExecutionRecord, LaunchPlanRecord
from sluice.store.store import Store

log = logging.getLogger(__name__)


def firing_times(
    schedule: Schedule, anchor: float, after: float, now: float, limit: int
) -> list[float]:
    """Up to `limit` of the latest nominal firing times t with after < t <= now, oldest
    first. Counts back from `now`, so a long downtime costs `limit` steps, not the backlog.
    A fixed rate fires at anchor + k * rate, k >= 1."""
    if schedule.fixed_rate is not None:
        rate = schedule.fixed_rate
        # The epsilon keeps a stored firing (anchor + k * rate, rounded) from firing again.
        last_k = math.floor((now - anchor) / rate + 1e-9)
        first_k = max(1, math.floor((after - anchor) / rate + 1e-9) + 1, last_k - limit + 1)
        return [anchor + k * rate for k in range(first_k, last_k + 1)]
    assert schedule.cron is not None
    # get_prev is strictly before its start; cron has whole seconds, so start 1 s later.
    from croniter import croniter  # ~50 ms at import (it runs `file` on the interpreter)

    zone = ZoneInfo(schedule.timezone)
    it = croniter(schedule.cron, datetime.fromtimestamp(now + 1.0, zone))
    times: list[float] = []
    while len(times) < limit:
        t = float(it.get_prev(float))
        if t <= after:
            break
        if t <= now:
            times.append(t)
    return sorted(times)


def slots_between(
    schedule: Schedule, anchor: float, start: float, end: float, limit: int
) -> list[float]:
    """Every nominal firing time t with start <= t <= end, oldest first, on the same grid as
    `firing_times` (a fixed rate's slots are anchor + k * rate for any integer k, before the
    anchor too). ValueError naming the count when there are more than `limit`."""
    if schedule.fixed_rate is not None:
        rate = schedule.fixed_rate
        first_k = math.ceil((start - anchor) / rate - 1e-9)
        last_k = math.floor((end - anchor) / rate + 1e-9)
        if last_k - first_k + 1 > limit:
            raise ValueError(f"{last_k - first_k + 1} slots, more than {limit}")
        return [anchor + k * rate for k in range(first_k, last_k + 1)]
    assert schedule.cron is not None
    from croniter import croniter

    it = croniter(schedule.cron, datetime.fromtimestamp(start - 1.0, ZoneInfo(schedule.timezone)))
    slots: list[float] = []
    while (t := float(it.get_next(float))) <= end:
        if t >= start:
            slots.append(t)
        if len(slots) > limit:
            raise ValueError(f"more than {limit} slots")
    return slots


def firing_inputs(schedule: Schedule, at: float) -> dict[str, Any]:
    """The inputs a firing at `at` gives its execution: its nominal time (ISO, UTC) as the
    schedule's kickoff input, if it names one; nothing else."""
    if schedule.kickoff_input is None:
        return {}
    return {schedule.kickoff_input: datetime.fromtimestamp(at, UTC).isoformat()}


def next_firing(schedule: Schedule, anchor: float, now: float) -> float:
    """The first nominal firing time after `now`."""
    if schedule.fixed_rate is not None:
        rate = schedule.fixed_rate
        return anchor + (math.floor((now - anchor) / rate + 1e-9) + 1) * rate
    assert schedule.cron is not None
    from croniter import croniter

    zone = ZoneInfo(schedule.timezone)
    return float(croniter(schedule.cron, datetime.fromtimestamp(now, zone)).get_next(float))


def due_firings(
    schedule: Schedule,
    activated_at: float,
    last: float | None,
    now: float,
    config: ConcurrencyConfig,
    grace: float,
) -> list[float]:
    """The firings to launch now, by the schedule's catch-up rule (or the config's)."""
    mode = schedule.catch_up or config.catch_up
    limit = (schedule.catch_up_max or config.catch_up_max) if mode == "all" else 1
    after = activated_at if last is None else max(activated_at, last)
    times = firing_times(schedule, activated_at, after, now, limit)
    if mode == "none":
        return [t for t in times if now - t <= grace]
    return times


class ScheduleRunner:
    """Fires the schedules of every ACTIVE launch plan, waking at the next firing or when a
    launch plan changes. Any number may run: each firing is created once."""

    def __init__(
        self,
        store: Store,
        notifier: Notifier | None,
        clock: Clock,
        config: ConcurrencyConfig,
        *,
        grace: float = 5.0,
        max_sleep: float = 60.0,
    ) -> None:
        self.store, self.notifier, self.clock, self.config = store, notifier, clock, config
        self.grace, self.max_sleep = grace, max_sleep
        self._changed = asyncio.Event()

    async def run(self) -> None:
        """Fire what is due, sleep until the next firing, until cancelled."""
        unsubscribe = None
        if self.notifier is not None:
            unsubscribe = self.notifier.subscribe(LAUNCH_PLANS_CHANNEL, self._on_change)
        try:
            while True:
                try:
                    await self.fire_due()
                    wait = await self._until_next()
                except Exception:
                    reraise_cancellation()
                    log.exception("firing schedules failed; retrying")
                    wait = 1.0
                await self._sleep(wait)
        finally:
            if unsubscribe is not None:
                unsubscribe()

    def _on_change(self, _: str) -> None:
        self._changed.set()

    async def fire_due(self) -> list[ExecutionRecord]:
        """Create every firing that is due now; the executions created (not those that a
        concurrent scheduler created first)."""
        fired: list[ExecutionRecord] = []
        for record, spec in await self._scheduled():
            try:
                fired += await self._fire(record, spec)
            except Exception:
                reraise_cancellation()
                log.exception("schedule of launch plan %s failed", spec.name)
        return fired

    async def _scheduled(self) -> list[tuple[LaunchPlanRecord, LaunchPlanSpec]]:
        async with self.store.read() as repos:
            records = await repos.launch_plans.find(active_only=True)
        specs = [(r, launch_plan_spec(r.spec)) for r in records]
        return [(r, s) for r, s in specs if s.schedule is not None]

    async def _fire(self, record: LaunchPlanRecord, spec: LaunchPlanSpec) -> list[ExecutionRecord]:
        assert spec.schedule is not None
        name, _, version = spec.workflow.rpartition("@")
        async with self.store.read() as repos:
            last = await repos.executions.last_scheduled_at(
                record.project, record.domain, spec.name
            )
            workflow = await repos.specs.get_workflow(record.project, record.domain, name, version)
        if workflow is None:
            raise LookupError(f"workflow {spec.workflow!r} is not registered")
        now = self.clock.now()
        due = due_firings(spec.schedule, record.updated_at, last, now, self.config, self.grace)
        fired = []
        for at in due:
            made = await create_execution(
                self.store,
                self.notifier,
                self.clock,
                project=record.project,
                domain=record.domain,
                workflow=workflow,
                inputs=firing_inputs(spec.schedule, at),
                launch_plan=spec,
                scheduled_at=at,
            )
            fired += [made] if made is not None else []
        return fired

    async def _until_next(self) -> float:
        now = self.clock.now()
        waits = [
            next_firing(spec.schedule, record.updated_at, now) - now
            for record, spec in await self._scheduled()
            if spec.schedule is not None
        ]
        return min([self.max_sleep, *waits])

    async def _sleep(self, seconds: float) -> None:
        self._changed.clear()
        sleeper = asyncio.ensure_future(self.clock.sleep(max(seconds, 0.0)))
        changed = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait([sleeper, changed], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (sleeper, changed):
                waiter.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await waiter
