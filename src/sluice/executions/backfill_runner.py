"""The backfill runner: creates each RUNNING backfill's next slot executions as its cap allows.

One step of one backfill is one transaction: the backfill's row is held (only while it is
RUNNING: a pause or cancel waits for the step or comes after it), its unfinished executions
are counted, and the earliest planned slots get their executions, up to `max_active`
unfinished. Each execution has the slot's deterministic id, so a step that a crash cut short
is simply taken again, and two runners (two `sluice serve`) never create a slot twice or
exceed the cap. A backfill whose every slot's execution has ended becomes DONE.

The runner wakes when a backfill changes or an execution is created or ends (notifications),
and rescans every `rescan_interval` as a safety net.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from sluice.cancellation import reraise_cancellation, wait_event
from sluice.clock import Clock
from sluice.executions.backfills import BACKFILLS_CHANNEL, DONE, RUNNING
from sluice.executions.launch import prepare_execution, write_execution
from sluice.executions.policies import launch_plan_spec
from sluice.faults import crash_point
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec
from sluice.store.backfills import BackfillRecord, BackfillRepository, SlotRecord
from sluice.store.notify import EXECUTIONS_CHANNEL, Notifier
from sluice.store.store import Repos, Store

log = logging.getLogger(__name__)
Definitions = tuple[LaunchPlanSpec, WorkflowSpec]


class BackfillRunner:
    def __init__(
        self,
        store: Store,
        notifier: Notifier | None,
        clock: Clock,
        *,
        rescan_interval: float = 5.0,
        settle: float = 0.05,
    ) -> None:
        self.store, self.notifier, self.clock = store, notifier, clock
        self.rescan_interval, self.settle = rescan_interval, settle
        self._wake = asyncio.Event()
        self._definitions: dict[tuple[str, str, str, str], Definitions] = {}

    async def run(self) -> None:
        """Step every RUNNING backfill whenever something changes, until cancelled."""
        unsubscribe = self._subscribe()
        try:
            while True:
                try:
                    await self.step_all()
                except Exception:
                    reraise_cancellation()
                    log.exception("stepping backfills failed; retrying")
                await wait_event(self._wake, self.rescan_interval)
                self._wake.clear()
                await asyncio.sleep(self.settle)  # a burst of endings: one step
        finally:
            for stop in unsubscribe:
                stop()

    def _subscribe(self) -> list[Callable[[], None]]:
        if self.notifier is None:
            return []
        wake: Callable[[str], None] = lambda _: self._wake.set()  # noqa: E731
        return [
            self.notifier.subscribe(BACKFILLS_CHANNEL, wake),
            self.notifier.subscribe(EXECUTIONS_CHANNEL, wake),
        ]

    async def step_all(self) -> int:
        """One step of every RUNNING backfill; how many executions were created."""
        async with self.store.read() as repos:
            running = await BackfillRepository(repos.conn).find(states=[RUNNING], limit=None)
        created = 0
        for backfill in running:
            created += await self.step(backfill)
        return created

    async def step(self, backfill: BackfillRecord) -> int:
        """Create what the backfill's cap allows now (see the module docstring)."""
        spec, workflow = await self._load(backfill)
        created = 0
        async with self.store.write() as repos:
            repo = BackfillRepository(repos.conn)
            now = self.clock.now()
            if not await repo.lock_running(backfill.id, now):
                return 0
            unfinished = await repo.unfinished(backfill.id)
            room = backfill.max_active - len(unfinished)
            if room <= 0:
                return 0
            slots = await repo.planned(backfill.id, room)
            if not slots and not unfinished:
                await repo.set_state(backfill.id, [RUNNING], DONE, now)
                if self.notifier is not None:
                    await self.notifier.publish(repos.conn, BACKFILLS_CHANNEL, backfill.id)
                return 0
            for slot in slots:
                created += await self._create(repos, repo, backfill, slot, spec, workflow)
                crash_point("backfill.mid_create")
        crash_point("backfill.after_create")
        return created

    async def _create(
        self,
        repos: Repos,
        repo: BackfillRepository,
        backfill: BackfillRecord,
        slot: SlotRecord,
        spec: LaunchPlanSpec,
        workflow: WorkflowSpec,
    ) -> int:
        record = await prepare_execution(
            backfill.project, backfill.domain, workflow, {}, spec, None, self.clock.now()
        )
        record.id, record.scheduled_at = slot.execution_id, slot.slot_at
        record.slot_generation, record.backfill_id = slot.generation, backfill.id
        if await write_execution(repos, self.notifier, record, workflow, spec):
            return 1
        existing = await repo.firing(
            backfill.project, backfill.domain, backfill.launch_plan, slot.slot_at, slot.generation
        )
        if existing is not None:  # the schedule fired this slot first: that is its run
            await repo.repoint(slot, existing)
        return 0

    async def _load(self, backfill: BackfillRecord) -> Definitions:
        key = (
            backfill.project,
            backfill.domain,
            backfill.launch_plan,
            backfill.launch_plan_version,
        )
        if key not in self._definitions:
            async with self.store.read() as repos:
                record = await repos.launch_plans.get(*key)
                assert record is not None, "a backfill's version is registered"
                spec = launch_plan_spec(record.spec)
                name, _, version = spec.workflow.rpartition("@")
                workflow = await repos.specs.get_workflow(key[0], key[1], name, version)
                assert workflow is not None, "a launch plan's workflow is registered"
            self._definitions[key] = (spec, workflow)
        return self._definitions[key]
