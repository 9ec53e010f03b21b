"""Backfills: run a scheduled launch plan over a past range, one execution per schedule slot.

A backfill is planned once, when it is created, in one transaction: the slots of the ACTIVE
version's schedule in [start, end] (schedules.slots_between: cron in its time zone, or a
fixed rate on the schedule's own grid) and, per slot, which run to make by the reprocess
rule, judged from the executions the slot has (schedule firings and earlier backfills):

- "none": a slot with any execution is left alone; the others get their first run;
- "failed": also a slot whose latest run ended without succeeding (FAILED, TIMED_OUT,
  ABORTED, SKIPPED) gets a new run;
- "all": also a slot whose latest run ended, whatever its phase, gets a new run.

A slot still running is never given a second run. Each run has a deterministic id, a hash of
(project, domain, launch plan, slot, generation), where the generation counts the slot's runs
(0 for the first, as a schedule firing's), so the same backfill run twice, or two runners
racing, create nothing new. The executions go through the launch plan's concurrency policy,
and the backfill's own cap (`max_active` unfinished executions) is kept by the runner
(backfill_runner.py), which creates the next slots' executions as earlier ones end.

States: RUNNING, PAUSED (the runner creates nothing more; what exists runs on), CANCELLED
(unfinished executions aborted, nothing more created), DONE (every slot's execution ended).
All of it is in the store, so a backfill survives restarts.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable

from sluice.clock import Clock
from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.executions.launch import abort_in, merge_inputs
from sluice.executions.launch_plans import LaunchPlanService
from sluice.executions.schedules import slots_between
from sluice.spec.canonical import digest
from sluice.spec.phases import TERMINAL_EXECUTION_PHASES, ExecutionPhase
from sluice.store.backfills import BackfillRecord, BackfillRepository, SlotRecord, SlotRun
from sluice.store.notify import Notifier
from sluice.store.store import Repos, Store

BACKFILLS_CHANNEL = "backfills"
"""Published when a backfill is created, paused, resumed or cancelled; payload: its id."""
REPROCESS = ("none", "failed", "all")
RUNNING, PAUSED, CANCELLED, DONE = "RUNNING", "PAUSED", "CANCELLED", "DONE"
MAX_ACTIVE_LIMIT = 10_000
_TERMINAL = {p.value for p in TERMINAL_EXECUTION_PHASES}


def slot_execution_id(
    project: str, domain: str, launch_plan: str, slot_at: float, generation: int
) -> str:
    """The id of a slot's run: the same (launch plan, slot, generation) gives the same id."""
    return "b" + digest("backfill", project, domain, launch_plan, slot_at, generation)[:19]


def plan_slots(
    backfill: BackfillRecord, slots: Iterable[float], runs: Iterable[SlotRun]
) -> list[SlotRecord]:
    """The slots to run and their generation, by the reprocess rule (module docstring)."""
    latest: dict[float, SlotRun] = {}
    for run in runs:
        if run.slot_at not in latest or run.generation > latest[run.slot_at].generation:
            latest[run.slot_at] = run
    planned = []
    for slot_at in slots:
        generation = _generation(latest.get(slot_at), backfill.reprocess)
        if generation is not None:
            run_id = slot_execution_id(
                backfill.project, backfill.domain, backfill.launch_plan, slot_at, generation
            )
            planned.append(SlotRecord(backfill.id, slot_at, generation, run_id))
    return planned


def _generation(latest: SlotRun | None, reprocess: str) -> int | None:
    if latest is None:
        return 0
    if reprocess == "none" or latest.phase not in _TERMINAL:
        return None
    if reprocess == "failed" and latest.phase == ExecutionPhase.SUCCEEDED.value:
        return None
    return latest.generation + 1


class BackfillService:
    def __init__(
        self, store: Store, notifier: Notifier | None, clock: Clock, project: str, domain: str
    ) -> None:
        self.store, self.notifier, self.clock = store, notifier, clock
        self.project, self.domain = project, domain

    async def create(
        self,
        launch_plan: str,
        start: float,
        end: float,
        *,
        reprocess: str,
        max_active: int,
        max_slots: int,
    ) -> BackfillRecord:
        """Plan and record a backfill of the ACTIVE version of `launch_plan` over [start,
        end] (see the module docstring); DONE at once when no slot needs a run."""
        now = self.clock.now()
        _check(start, end, now, reprocess, max_active)
        plans = LaunchPlanService(self.store, None, self.clock, self.project, self.domain)
        spec, workflow = await plans.active(launch_plan)
        if spec.schedule is None:
            raise InvalidArgumentError(f"launch plan {launch_plan!r} has no schedule to backfill")
        merge_inputs(workflow, {}, spec)  # a slot runs with no inputs of its own
        async with self.store.write() as repos:
            active = await repos.launch_plans.active(self.project, self.domain, launch_plan)
            assert active is not None
            try:
                slots = slots_between(spec.schedule, active.updated_at, start, end, max_slots)
            except ValueError as exc:
                raise InvalidArgumentError(
                    f"backfill of {launch_plan!r}: the range holds {exc} "
                    "(concurrency.backfill_max_slots): split it"
                ) from None
            record = BackfillRecord(
                "bf" + secrets.token_hex(9),
                self.project,
                self.domain,
                launch_plan,
                spec.version,
                start,
                end,
                reprocess,
                max_active,
                RUNNING,
                0,
                now,
                now,
            )
            repo = BackfillRepository(repos.conn)
            planned = plan_slots(
                record, slots, await repo.runs(self.project, self.domain, launch_plan, slots)
            )
            record.slots = len(planned)
            if not planned:
                record.state = DONE
                record.reason = f"nothing to run: {len(slots)} slot(s), reprocess {reprocess}"
            await repo.insert(record, planned)
            await self._announce(repos, record.id)
        return record

    async def get(self, backfill_id: str) -> tuple[BackfillRecord, dict[str, int]]:
        """The backfill and its slots by the phase of their execution (PLANNED: not yet)."""
        async with self.store.read() as repos:
            repo = BackfillRepository(repos.conn)
            record = await self._get(repo, backfill_id)
            return record, await repo.progress(record.id)

    async def pause(self, backfill_id: str) -> BackfillRecord:
        return await self._move(backfill_id, [RUNNING], PAUSED, "paused by user")

    async def resume(self, backfill_id: str) -> BackfillRecord:
        return await self._move(backfill_id, [PAUSED], RUNNING, "")

    async def cancel(self, backfill_id: str) -> BackfillRecord:
        """CANCELLED: nothing more is created, and its unfinished executions are aborted."""
        return await self._move(backfill_id, [RUNNING, PAUSED], CANCELLED, "cancelled by user")

    async def _move(
        self, backfill_id: str, expected: list[str], state: str, reason: str
    ) -> BackfillRecord:
        now = self.clock.now()
        async with self.store.write() as repos:
            repo = BackfillRepository(repos.conn)
            record = await self._get(repo, backfill_id)
            if not await repo.set_state(record.id, expected, state, now, reason):
                raise InvalidArgumentError(
                    f"backfill {record.id} is {record.state}: only a {' or '.join(expected)} "
                    f"backfill can become {state}"
                )
            if state == CANCELLED:
                for execution_id in await repo.unfinished(record.id):
                    await abort_in(repos, self.notifier, now, execution_id, "backfill cancelled")
            await self._announce(repos, record.id)
            return await self._get(repo, record.id)

    async def _get(self, repo: BackfillRepository, backfill_id: str) -> BackfillRecord:
        record = await repo.get(backfill_id)
        if record is None:
            raise NotFoundError(f"backfill {backfill_id!r} does not exist")
        return record

    async def _announce(self, repos: Repos, backfill_id: str) -> None:
        if self.notifier is not None:
            await self.notifier.publish(repos.conn, BACKFILLS_CHANNEL, backfill_id)


def _check(start: float, end: float, now: float, reprocess: str, max_active: int) -> None:
    if reprocess not in REPROCESS:
        raise InvalidArgumentError(f"reprocess {reprocess!r}: expected one of {REPROCESS}")
    if isinstance(max_active, bool) or not isinstance(max_active, int):
        raise InvalidArgumentError(f"max_active must be an int, got {max_active!r}")
    if not 1 <= max_active <= MAX_ACTIVE_LIMIT:
        raise InvalidArgumentError(f"max_active {max_active}: must be 1 to {MAX_ACTIVE_LIMIT}")
    if not start <= end:
        raise InvalidArgumentError("a backfill's start must not be after its end")
    if end > now:
        raise InvalidArgumentError(
            "a backfill covers past slots: its end is in the future (the schedule fires those)"
        )
