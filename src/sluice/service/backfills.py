"""The backfill verbs (create, list, show, pause, resume, cancel, drive here) for a caller's
scope; the rules are in executions/backfills.py."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime
from zoneinfo import ZoneInfo

from sluice.cancellation import wait_event
from sluice.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError
from sluice.executions.backfill_runner import BackfillRunner
from sluice.executions.backfills import (
    BACKFILLS_CHANNEL,
    CANCELLED,
    DONE,
    REPROCESS,
    BackfillService,
)
from sluice.executions.launch_plans import LaunchPlanService
from sluice.runtime import Runtime
from sluice.service.backfill_views import Backfill, backfill_view
from sluice.service.local import run_controller_candidate
from sluice.service.requests import Scope
from sluice.spec.names import check_entity_name, check_scope_name
from sluice.spec.values import MAX_LIST_LIMIT, check_count
from sluice.store.backfills import BackfillRecord, BackfillRepository

STATES = ("RUNNING", "PAUSED", "CANCELLED", "DONE")


class Backfills:
    def __init__(self, runtime: Runtime, scope: Scope) -> None:
        self.runtime, self.scope = runtime, scope

    async def create(
        self,
        launch_plan: str,
        start: datetime,
        end: datetime,
        *,
        reprocess: str = "none",
        max_active: int | None = None,
        project: str | None = None,
        domain: str | None = None,
    ) -> Backfill:
        """Backfill the ACTIVE version of `launch_plan` over [start, end]: one execution per
        schedule slot. A time without a zone is read in the schedule's time zone (UTC for a
        fixed rate)."""
        project, domain = self._where(project, domain)
        self._may_write(project)
        check_entity_name("launch plan name", launch_plan)
        if reprocess not in REPROCESS:
            raise InvalidArgumentError(f"reprocess {reprocess!r}: expected one of {REPROCESS}")
        settings = self.runtime.settings.concurrency
        limit = settings.backfill_max_active if max_active is None else max_active
        rt = self.runtime
        plans = LaunchPlanService(rt.store, rt.notifier, rt.clock, project, domain)
        spec, _ = await plans.active(launch_plan)
        zone = ZoneInfo(spec.schedule.timezone if spec.schedule is not None else "UTC")
        service = BackfillService(rt.store, rt.notifier, rt.clock, project, domain)
        record = await service.create(
            launch_plan,
            _seconds(start, zone),
            _seconds(end, zone),
            reprocess=reprocess,
            max_active=limit,
            max_slots=settings.backfill_max_slots,
        )
        return await self.get(record.id)

    async def list(self, state: str | None = None, limit: int = 100) -> list[Backfill]:
        """Backfills newest first, with their progress."""
        limit = check_count("limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
        if state is not None and state.upper() not in STATES:
            raise InvalidArgumentError(f"state {state!r}: states are {', '.join(STATES)}")
        projects = None if self.scope.projects is None else sorted(self.scope.projects)
        async with self.runtime.store.read() as repos:
            repo = BackfillRepository(repos.conn)
            states = None if state is None else [state.upper()]
            found = await repo.find(projects=projects, states=states, limit=limit)
            return [backfill_view(r, await repo.progress(r.id)) for r in found]

    async def get(self, backfill_id: str) -> Backfill:
        record, progress = await self._service(await self._record(backfill_id)).get(backfill_id)
        return backfill_view(record, progress)

    async def pause(self, backfill_id: str) -> Backfill:
        """PAUSED: no more executions are created; those that exist run on."""
        record = await self._writable(backfill_id)
        await self._service(record).pause(record.id)
        return await self.get(record.id)

    async def resume(self, backfill_id: str) -> Backfill:
        record = await self._writable(backfill_id)
        await self._service(record).resume(record.id)
        return await self.get(record.id)

    async def cancel(self, backfill_id: str) -> Backfill:
        """CANCELLED: unfinished executions are aborted, no more are created."""
        record = await self._writable(backfill_id)
        await self._service(record).cancel(record.id)
        return await self.get(record.id)

    async def drive(self, backfill_id: str, poll: float = 2.0) -> Backfill:
        """Run the backfill here (a runner, a controller candidate, an engine) until it is
        DONE or CANCELLED; with `sluice serve` running too, they share the work."""
        record = await self._writable(backfill_id)
        rt = self.runtime
        changed = asyncio.Event()
        stop = rt.notifier.subscribe(BACKFILLS_CHANNEL, lambda _: changed.set())
        engine = await rt.engine()
        await engine.start()
        stepping = asyncio.create_task(BackfillRunner(rt.store, rt.notifier, rt.clock).run())
        try:
            async with run_controller_candidate(rt):
                while (found := await self.get(record.id)).state not in (DONE, CANCELLED):
                    await wait_event(changed, poll)  # the poll: a safety net
                    changed.clear()
                return found
        finally:
            stop()
            stepping.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stepping
            await engine.stop()

    async def _record(self, backfill_id: str) -> BackfillRecord:
        async with self.runtime.store.read() as repos:
            record = await BackfillRepository(repos.conn).get(backfill_id)
        if record is None or not self.scope.sees(record.project):
            raise NotFoundError(f"backfill {backfill_id!r} does not exist")
        return record

    async def _writable(self, backfill_id: str) -> BackfillRecord:
        record = await self._record(backfill_id)
        self._may_write(record.project)
        return record

    def _service(self, record: BackfillRecord) -> BackfillService:
        rt = self.runtime
        return BackfillService(rt.store, rt.notifier, rt.clock, record.project, record.domain)

    def _where(self, project: str | None, domain: str | None) -> tuple[str, str]:
        projects = self.scope.projects
        default = next(iter(projects)) if projects is not None and len(projects) == 1 else None
        project = project or default or self.runtime.settings.project
        domain = domain or self.runtime.settings.domain
        check_scope_name("project", project)
        check_scope_name("domain", domain)
        return project, domain

    def _may_write(self, project: str) -> None:
        if self.scope.read_only:
            raise PermissionDeniedError("this token is read-only")
        if not self.scope.sees(project):
            raise NotFoundError(f"project {project!r} does not exist")


def _seconds(when: datetime, zone: ZoneInfo) -> float:
    return (when if when.tzinfo is not None else when.replace(tzinfo=zone)).timestamp()
