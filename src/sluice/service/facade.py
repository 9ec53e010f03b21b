"""`Sluice`: the product's verbs over one runtime. Every adapter (the CLI, the Python API, the
HTTP API and the web UI) parses its input, calls one of these, and renders what it returns.

A `Sluice` may be scoped to some projects (an API token's): reads outside them find nothing
(NotFoundError, as for an id that does not exist) and writes outside them are refused the
same way, so a caller cannot even learn that another project's execution exists.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import AsyncIterator, Awaitable, Collection
from typing import TYPE_CHECKING, Any

from sluice.clock import Clock
from sluice.concurrency.caps import CapsService
from sluice.config import Settings
from sluice.errors import (
    InvalidArgumentError,
    InvalidQuotaError,
    NotFoundError,
    StoreGoneError,
)
from sluice.executions.launch import request_abort
from sluice.executions.launch_plans import LaunchPlanService
from sluice.executions.policies import launch_plan_spec
from sluice.executions.schedules import next_firing
from sluice.runtime import Runtime
from sluice.service import convert, inventory, launching, payloads, serving, visibility, waits
from sluice.service import executions as ex
from sluice.service import models as m
from sluice.service.backfills import Backfills
from sluice.service.inputs import Inputs
from sluice.service.launch_verbs import Launching
from sluice.service.local import (
    LocalRun,
    drive_here,
    prepare_launch_plan,
    until_terminal,
)
from sluice.service.log_verbs import LogVerbs
from sluice.service.rate_limits import RateLimitService
from sluice.service.requests import RunRequest, Scope
from sluice.service.signals import signal_gate
from sluice.service.targets import launch_plan_of
from sluice.service.tokens import Tokens
from sluice.spec.names import check_entity_name
from sluice.spec.phases import ExecutionPhase
from sluice.spec.values import MAX_LIST_LIMIT, check_count
from sluice.store.records import ExecutionRecord, LaunchPlanRecord

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from sluice.service.flyte import FlyteAdmin

_NEXT_FIRINGS = 5
MAX_BULK = 500
"""Executions one bulk abort may name."""


class Sluice(Launching, LogVerbs):
    @classmethod
    async def open(
        cls, settings: Settings, *, role: str = "cli", clock: Clock | None = None
    ) -> Sluice:
        return cls(await Runtime.open(settings, role=role, clock=clock))

    def scoped(self, scope: Scope) -> Sluice:
        """The same runtime, seen by a caller limited to `scope`."""
        return Sluice(self.runtime, scope)

    async def close(self) -> None:
        await self.runtime.close()

    async def __aenter__(self) -> Sluice:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    # Executions: read.
    async def executions(
        self, where: ex.ExecutionFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> m.Page[m.ExecutionSummary]:
        """Executions newest first, a page at a time, PENDING ones with their queue position."""
        limit = check_count("limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
        where = self._within_scope(where or ex.ExecutionFilter())
        async with self.runtime.store.read() as repos:
            return await ex.page(repos, where, limit, cursor, self.now())

    async def execution(
        self, execution_id: str, *, events: bool = False, whole: bool = True
    ) -> m.Execution:
        """One execution (by id or unique prefix) with its nodes and their attempts; without
        `whole`, big inputs and outputs cut (`truncated` says which), as pages and the HTTP
        API show them."""
        async with self.runtime.store.read() as repos:
            record = await ex.by_id_or_prefix(repos, execution_id, self.scope.projects)
            found = await ex.detail(repos, record, self.now(), with_events=events)
        found = await waits.with_waits(self.runtime, found)
        if whole:
            return found
        return payloads.clipped(found, self.settings.payloads.shown_value_chars)

    async def value(
        self, execution_id: str, side: str, node_id: str | None = None
    ) -> dict[str, Any] | None:
        """The whole inputs or outputs (`side`) of an execution, or of one of its nodes."""
        if side not in payloads.SIDES:
            raise InvalidArgumentError(f"a value is inputs or outputs, got {side!r}")
        async with self.runtime.store.read() as repos:
            record = await ex.by_id_or_prefix(repos, execution_id, self.scope.projects)
            if node_id is None:
                whole: dict[str, Any] | None = getattr(record, side)
                return whole
            node = await repos.nodes.get(record.id, node_id)
        if node is None:
            raise NotFoundError(f"execution {record.id} has no node {node_id!r}")
        found: dict[str, Any] | None = getattr(node, side)
        return found

    async def events(self, execution_id: str, after: int = 0) -> list[m.Event]:
        """Events of one execution after the event id `after`, oldest first."""
        async with self.runtime.store.read() as repos:
            record = await ex.by_id_or_prefix(repos, execution_id, self.scope.projects)
            found = await repos.events.list(record.id, after_id=after)
        return [convert.event(e) for e in found]

    async def attempts(self, execution_id: str, node_id: str) -> list[m.Attempt]:
        found = await self.execution(execution_id)
        for node in found.nodes:
            if node.node == node_id:
                return node.attempts
        known = [n.node for n in found.nodes]
        raise NotFoundError(f"execution {found.id} has no node {node_id!r}; nodes are {known}")

    async def pending(self, launch_plan: str | None = None) -> list[m.ExecutionSummary]:
        """PENDING executions in promotion order per launch plan, with positions and reasons."""
        where = ex.ExecutionFilter(phases=[ExecutionPhase.PENDING], launch_plan=launch_plan)
        listed = await self.executions(where, limit=MAX_LIST_LIMIT)
        return sorted(listed.items, key=ex.queue_order)

    def _within_scope(self, where: ex.ExecutionFilter) -> ex.ExecutionFilter:
        if self.scope.projects is None:
            return where
        wanted = self.scope.projects
        if where.projects is not None:
            wanted = wanted & frozenset(where.projects)
        return dataclasses.replace(where, projects=wanted)

    # Executions: write.
    @contextlib.asynccontextmanager
    async def run(self, request: RunRequest) -> AsyncIterator[LocalRun]:
        """Launch a workflow, launch plan or task and drive it in this process for the block
        (registering a launch plan's version first, activating it if its name has none)."""
        self._may_write(self.settings.project)
        runtime = self.runtime
        await runtime.check_launch(request.target, request.values, request.options)
        await runtime.warm_up_plugins()  # workers start while the execution is written
        await prepare_launch_plan(runtime, request.target)
        record = await runtime.launch(
            request.target,
            request.values,
            options=request.options,
            idempotency_key=request.idempotency_key,
        )
        async with drive_here(runtime, record) as local:
            yield local

    async def run_to_end(self, request: RunRequest) -> ExecutionRecord:
        async with self.run(request) as local:
            return await local.wait()

    async def create(
        self, launch_plan: str, inputs: Inputs, **options: Unpack[launching.CreateOptions]
    ) -> m.ExecutionSummary:
        """`create_launched`'s execution."""
        return (await self.create_launched(launch_plan, inputs, **options)).execution

    async def create_launched(
        self,
        launch_plan: str,
        inputs: Inputs,
        *,
        project: str | None = None,
        domain: str | None = None,
        wait: bool = False,
        idempotency_key: str | None = None,
    ) -> m.Launched:
        """An execution of the ACTIVE version of `launch_plan` with the controller's decision
        (QUEUED, PENDING, SKIPPED); with `wait`, driven here to its end. An `idempotency_key`
        (HTTP `Idempotency-Key`, gRPC request id) that created one already gives it back."""
        project, domain = self._project_domain(project, domain)
        self._may_write(project)
        plans = self._launch_plans(project, domain)
        record, replayed = await launching.create(
            self.runtime, plans, launch_plan, inputs, wait=wait, idempotency_key=idempotency_key
        )
        return m.Launched(execution=await self._summary(record), replayed=replayed)

    async def abort(
        self,
        execution_id: str,
        reason: str | None = None,
        *,
        wait: bool = True,
        within: float = 60.0,
    ) -> m.ExecutionSummary:
        """Abort an execution (every active task is aborted and finalized). With `wait`,
        return once it is terminal, whichever process drives it, or after `within` s: with no
        live owner, an engine here takes it over once its lease runs out. The reason says
        who asked, for a caller the server knows (a token's name, a local user)."""
        if not within > 0:
            raise InvalidArgumentError(f"timeout {within}: must be a positive number of seconds")
        record = await self._get(execution_id)
        self._may_write(record.project)
        runtime = self.runtime
        record = await request_abort(
            runtime.store, runtime.notifier, runtime.clock, record.id, self._audited(reason)
        )
        if wait and not record.phase.is_terminal:
            engine = await runtime.engine(only=[record.id])
            await engine.start()
            try:
                record = await until_terminal(self.runtime, record.id, within)
            finally:
                await engine.stop()
        return await self._summary(record)

    async def signal(self, execution_id: str, node_id: str, value: Any) -> m.Event:
        """Answer a gate that waits (a `wait_for_input`'s value, an `approve`'s true or
        false): the value is checked against the gate's type and kept as its event."""
        record = await self._get(execution_id)
        self._may_write(record.project)
        runtime = self.runtime
        async with runtime.store.write() as repos:
            event = await signal_gate(
                repos, runtime.notifier, record, node_id, value, runtime.clock.now()
            )
        return convert.event(event)

    async def abort_many(
        self, execution_ids: Collection[str], reason: str | None = None
    ) -> list[m.ExecutionSummary]:
        """Ask for the abort of each execution (none is asked before all are found and may
        be written), returning at once; those already ended are left as they are."""
        if not execution_ids or len(execution_ids) > MAX_BULK:
            raise InvalidArgumentError(
                f"abort 1 to {MAX_BULK} executions, got {len(execution_ids)}"
            )
        records = [await self._get(i) for i in execution_ids]
        for record in records:
            self._may_write(record.project)
        return [await self.abort(r.id, reason, wait=False) for r in records]

    def _audited(self, reason: str | None) -> str:
        if not self.scope.who:
            return reason or "aborted by user"
        return f"{reason or 'aborted'} by {self.scope.who}"

    def whoami(self) -> m.Caller:
        """Who the caller is and what it may do."""
        scope = self.scope
        projects = sorted(scope.projects) if scope.projects is not None else None
        return m.Caller(who=scope.who, projects=projects, read_only=scope.read_only)

    # Launch plans.
    async def register_launch_plan(self, plan: Any, *, activate: bool = False) -> m.LaunchPlan:
        """Register a LaunchPlan (an SDK or a flytekit object) as a version of its name."""
        workflow, spec = launch_plan_of(plan)  # a bad policy or schedule raises here
        self._may_write(self.settings.project)
        if spec.schedule is not None:  # every firing would be refused: refuse the plan now
            await self.runtime.check_launch(plan, {})
        service = self._launch_plans(self.settings.project, self.settings.domain)
        return self._launch_plan(await service.register(spec, workflow, activate=activate))

    async def import_flyte(
        self, path: str, *, activate: bool = False, source_root: str = ""
    ) -> list[m.LaunchPlan]:
        """Register every launch plan (with its workflow and tasks) of a `pyflyte package`
        archive or a `pyflyte serialize` directory; task code imports from `source_root`."""
        from sluice.flyte.package import launch_plans_of, read_package

        found = launch_plans_of(read_package(path, source_root))  # every error before a write
        self._may_write(self.settings.project)
        for workflow, _ in found:
            await self.runtime.check_tasks(workflow, None)
        service = self._launch_plans(self.settings.project, self.settings.domain)
        registered = []
        for workflow, spec in found:
            record = await service.register(spec, workflow, activate=activate)
            registered.append(self._launch_plan(record))
        return registered

    async def launch_plans(
        self,
        name: str | None = None,
        *,
        active_only: bool = False,
        project: str | None = None,
        domain: str | None = None,
    ) -> list[m.LaunchPlan]:
        """Versions of the project's launch plans, oldest first per name; ACTIVE scheduled
        versions with their next firings."""
        project, domain = self._project_domain(project, domain)
        self._may_read(project)
        if name is not None:
            check_entity_name("launch plan name", name)
        records = await self._launch_plans(project, domain).find(name, active_only=active_only)
        return [self._launch_plan(r) for r in records]

    async def activate_launch_plan(
        self,
        name: str,
        version: str | None = None,
        *,
        project: str | None = None,
        domain: str | None = None,
    ) -> m.LaunchPlan:
        project, domain = self._project_domain(project, domain)
        self._may_write(project)
        check_entity_name("launch plan name", name)
        if version is not None:
            check_entity_name("version", version)
        return self._launch_plan(await self._launch_plans(project, domain).activate(name, version))

    async def deactivate_launch_plan(
        self, name: str, *, project: str | None = None, domain: str | None = None
    ) -> m.LaunchPlan | None:
        """Leave `name` with no ACTIVE version; the version that was ACTIVE, if any."""
        project, domain = self._project_domain(project, domain)
        self._may_write(project)
        check_entity_name("launch plan name", name)
        was = await self._launch_plans(project, domain).deactivate(name)
        return None if was is None else self._launch_plan(was)

    def _launch_plans(self, project: str, domain: str) -> LaunchPlanService:
        runtime = self.runtime
        return LaunchPlanService(runtime.store, runtime.notifier, runtime.clock, project, domain)

    def _launch_plan(self, record: LaunchPlanRecord) -> m.LaunchPlan:
        spec = launch_plan_spec(record.spec)
        firings: list[float] = []
        if record.state == "ACTIVE" and spec.schedule is not None:
            at = self.now()
            for _ in range(_NEXT_FIRINGS):
                at = next_firing(spec.schedule, record.updated_at, at)
                firings.append(at)
        return convert.launch_plan(record, spec.model_dump(mode="json"), firings)

    # Quotas, locks, cache, concurrency, plugins.
    async def quotas(self, namespace: str | None = None) -> list[m.Quota]:
        return visibility.quotas(await inventory.quotas(self.runtime, namespace), self._seen)

    async def set_quota(
        self, namespace: str, value: int, *, preempt: bool | None = None
    ) -> m.Quota:
        """Set a namespace's quota for every process (wins over config and plugins); lowering
        it never revokes held tokens. `preempt` turns priority preemption on or off there
        (None: unchanged)."""
        self._may_write(None)
        inventory.check_quota_namespace(namespace)
        check_count(f"quota of {namespace!r}", value, InvalidQuotaError, low=1)
        if preempt is not None and not isinstance(preempt, bool):
            raise InvalidArgumentError(
                f"preempt of {namespace!r} must be true or false, got {preempt!r}"
            )
        await self.runtime.resources.start()
        await self.runtime.resources.set_quota(namespace, value)
        if preempt is not None:
            await self.runtime.resources.set_preempt(namespace, preempt)
        return await inventory.quota(self.runtime, namespace)

    async def locks(self) -> list[m.Lock]:
        found = await inventory.locks(self.runtime)
        return await visibility.locks(self.runtime, found, self._seen)

    async def cache_entries(self, task: str | None = None, limit: int = 100) -> list[m.CacheEntry]:
        limit = check_count("limit", limit, InvalidArgumentError, low=1, high=MAX_LIST_LIMIT)
        if task is not None:
            check_entity_name("task", task)
        found = await inventory.cache_entries(self.runtime, task, limit)
        return await visibility.cache_entries(self.runtime, found, self._seen)

    async def remove_cache_entries(
        self, keys: Collection[str] = (), task: str | None = None
    ) -> int:
        self._may_write(None)
        if task is not None:
            check_entity_name("task", task)
        return await inventory.remove_cache_entries(self.runtime, tuple(keys), task)

    async def reservations(self) -> list[m.Reservation]:
        found = await inventory.reservations(self.runtime)
        return await visibility.reservations(self.runtime, found, self._seen)

    async def caps(self) -> list[m.Cap]:
        return visibility.caps(await inventory.caps(self.runtime), self._seen)

    async def set_cap(self, scope: str, value: int | None) -> None:
        """Cap the active executions of `PROJECT` or `PROJECT/DOMAIN` (None removes the
        operator cap; a config cap of the same scope applies again)."""
        self._may_write(None)
        project, domain = inventory.cap_scope(scope)
        caps = CapsService(self.runtime.store, self.runtime.notifier, self.runtime.clock)
        if value is None:
            await caps.unset(project, domain)
            return
        check_count(f"cap of {scope!r}", value, InvalidArgumentError, low=1)
        await caps.set(project, domain, value)

    async def controller_status(self) -> m.ControllerStatus:
        found = await inventory.controller_status(self.runtime)
        return visibility.controller_status(found, self._seen)

    async def plugins(self) -> list[m.Plugin]:
        return await inventory.plugins(self.runtime)

    # Long-running.
    async def run_engine(
        self,
        stop: Awaitable[object],
        ready: serving.Ready = serving.nothing,
        hurry: asyncio.Event | None = None,
    ) -> StoreGoneError | None:
        """Claim and drive executions until `stop` completes, then drain (running attempts
        end, or get `engine.drain_timeout`, or `hurry`); the store's error if it is gone for
        good (the caller exits 4). `ready` is called once the engine runs."""
        return await serving.run_engine(self.runtime, stop, ready, hurry)

    async def serve(
        self,
        stop: Awaitable[object],
        *,
        engine: bool = True,
        schedules: bool = True,
        ready: serving.Ready = serving.nothing,
        hurry: asyncio.Event | None = None,
    ) -> StoreGoneError | None:
        """The controller candidate, the schedules and (with `engine`) an engine, until `stop`
        completes (then the engine drains, see `run_engine`); the store's error if it is
        gone for good."""
        return await serving.serve(
            self.runtime, stop, engine=engine, schedules=schedules, ready=ready, hurry=hurry
        )

    @property
    def backfills(self) -> Backfills:
        return Backfills(self.runtime, self.scope)

    @property
    def rate_limits(self) -> RateLimitService:
        """Rate limits: listed by anyone (scoped), set and cleared by an unscoped caller."""
        return RateLimitService(self.runtime, self.scope)

    @property
    def flyte(self) -> FlyteAdmin:
        """flyteadmin's verbs for this caller: what the Flyte gRPC API of `sluice serve` calls."""
        from sluice.service.flyte import FlyteAdmin

        return FlyteAdmin(self)

    @property
    def tokens(self) -> Tokens:
        """API bearer tokens: created, listed and revoked by an unscoped caller."""
        return Tokens(self.runtime, self.scope)

    async def readiness(self) -> m.Health:
        """Whether the store answers a query now (ok False, with the reason, if not)."""
        return await inventory.readiness(self.runtime)
