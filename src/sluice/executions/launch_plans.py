"""Launch plans as a service: register versions, activate one, deactivate, list.

One ACTIVE version per (project, domain, name), switched in one transaction (the store's
partial unique index refuses a second one). Each change is announced on the
`launch_plans` channel, so the controller and the schedules see it at once.
"""

from __future__ import annotations

from sluice.clock import Clock
from sluice.errors import DefinitionError, NotFoundError
from sluice.executions.launch import check_definitions, merge_inputs
from sluice.executions.policies import LAUNCH_PLANS_CHANNEL, launch_plan_spec
from sluice.executions.schedules import firing_inputs
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec
from sluice.store.notify import Notifier
from sluice.store.records import LaunchPlanRecord
from sluice.store.store import Repos, Store


class LaunchPlanService:
    def __init__(
        self, store: Store, notifier: Notifier | None, clock: Clock, project: str, domain: str
    ) -> None:
        self.store, self.notifier, self.clock = store, notifier, clock
        self.project, self.domain = project, domain

    async def register(
        self, spec: LaunchPlanSpec, workflow: WorkflowSpec, *, activate: bool = False
    ) -> LaunchPlanRecord:
        """Register `spec` (and its workflow); re-registering an identical version is a no-op,
        a different spec under an existing version is refused. With `activate`, the version
        becomes the ACTIVE one in the same transaction."""
        self._check(spec, workflow)
        async with self.store.write() as repos:
            await self._put(repos, spec, workflow)
            if activate:
                await self._set_active(repos, spec.name, spec.version)
            return await self._get(repos, spec.name, spec.version)

    async def register_within(
        self, repos: Repos, spec: LaunchPlanSpec, workflow: WorkflowSpec, *, activate: bool
    ) -> None:
        """`register` inside the caller's transaction (which writes more of its own)."""
        self._check(spec, workflow)
        await self._put(repos, spec, workflow)
        if activate:
            await self._set_active(repos, spec.name, spec.version)

    async def deactivate_within(self, repos: Repos, name: str) -> None:
        """`deactivate` inside the caller's transaction; a name with no ACTIVE version is
        left as it is."""
        if await repos.launch_plans.active(self.project, self.domain, name) is not None:
            await self._set_active(repos, name, None)

    async def ensure_registered(
        self, spec: LaunchPlanSpec, workflow: WorkflowSpec
    ) -> LaunchPlanRecord:
        """Register `spec`, activating it only if its name has no ACTIVE version (what an
        embedded `sluice run FILE:LAUNCH_PLAN` needs)."""
        self._check(spec, workflow)
        async with self.store.write() as repos:
            await self._put(repos, spec, workflow)
            if await repos.launch_plans.active(self.project, self.domain, spec.name) is None:
                await self._set_active(repos, spec.name, spec.version)
            return await self._get(repos, spec.name, spec.version)

    async def activate(self, name: str, version: str | None = None) -> LaunchPlanRecord:
        """Make `version` (default: the latest registered) the one ACTIVE version of `name`."""
        async with self.store.write() as repos:
            versions = await self._versions(repos, name)
            chosen = version if version is not None else versions[-1].version
            await self._set_active(repos, name, chosen)
            return await self._get(repos, name, chosen)

    async def deactivate(self, name: str) -> LaunchPlanRecord | None:
        """Leave `name` with no ACTIVE version; the version that was ACTIVE, if any. Its
        schedule stops; its executions are then governed by their own versions' policies."""
        async with self.store.write() as repos:
            await self._versions(repos, name)
            was = await repos.launch_plans.active(self.project, self.domain, name)
            if was is not None:
                await self._set_active(repos, name, None)
            return was

    async def find(
        self, name: str | None = None, *, active_only: bool = False
    ) -> list[LaunchPlanRecord]:
        async with self.store.read() as repos:
            return await repos.launch_plans.find(
                self.project, self.domain, name, active_only=active_only
            )

    async def active(self, name: str) -> tuple[LaunchPlanSpec, WorkflowSpec]:
        """The ACTIVE version of `name` and its workflow; NotFoundError naming what is missing."""
        async with self.store.read() as repos:
            await self._versions(repos, name)
            record = await repos.launch_plans.active(self.project, self.domain, name)
            if record is None:
                raise NotFoundError(
                    f"launch plan {name!r} has no ACTIVE version in {self.project}/"
                    f"{self.domain}; activate one with `sluice launchplan activate {name}`"
                )
            spec = launch_plan_spec(record.spec)
            return spec, await self._workflow(repos, spec)

    def _check(self, spec: LaunchPlanSpec, workflow: WorkflowSpec) -> None:
        """Everything checkable without inputs, before anything is written."""
        _check_workflow(spec, workflow)
        check_definitions(workflow, self.project, self.domain, spec)
        if spec.schedule is not None:
            # a schedule fires with no inputs of its own but its kickoff time, if it names one
            merge_inputs(workflow, firing_inputs(spec.schedule, self.clock.now()), spec)

    async def _put(self, repos: Repos, spec: LaunchPlanSpec, workflow: WorkflowSpec) -> None:
        now = self.clock.now()
        await repos.specs.put_workflow(self.project, self.domain, workflow, now)
        if await repos.launch_plans.put(self.project, self.domain, spec, now):
            await self._announce(repos, spec.name)
            return
        stored = await self._get(repos, spec.name, spec.version)
        if launch_plan_spec(stored.spec) != spec:
            raise DefinitionError(
                f"launch plan {spec.name!r} version {spec.version!r} is registered already "
                "with a different spec; versions are immutable, register a new version"
            )

    async def _set_active(self, repos: Repos, name: str, version: str | None) -> None:
        await repos.launch_plans.set_active(
            self.project, self.domain, name, version, self.clock.now()
        )
        await self._announce(repos, name)

    async def _announce(self, repos: Repos, name: str) -> None:
        if self.notifier is not None:
            payload = f"{self.project}/{self.domain}/{name}"
            await self.notifier.publish(repos.conn, LAUNCH_PLANS_CHANNEL, payload)

    async def _versions(self, repos: Repos, name: str) -> list[LaunchPlanRecord]:
        versions = await repos.launch_plans.find(self.project, self.domain, name)
        if not versions:
            known = sorted(
                {r.name for r in await repos.launch_plans.find(self.project, self.domain)}
            )
            raise NotFoundError(
                f"no launch plan {name!r} in {self.project}/{self.domain}; "
                f"registered launch plans are {known}"
            )
        return versions

    async def _get(self, repos: Repos, name: str, version: str) -> LaunchPlanRecord:
        record = await repos.launch_plans.get(self.project, self.domain, name, version)
        if record is None:
            raise NotFoundError(f"launch plan {name!r} has no version {version!r}")
        return record

    async def _workflow(self, repos: Repos, spec: LaunchPlanSpec) -> WorkflowSpec:
        name, _, version = spec.workflow.rpartition("@")
        workflow = await repos.specs.get_workflow(self.project, self.domain, name, version)
        if workflow is None:
            raise NotFoundError(
                f"workflow {spec.workflow!r} of launch plan {spec.name!r} is not registered"
            )
        return workflow


def _check_workflow(spec: LaunchPlanSpec, workflow: WorkflowSpec) -> None:
    if spec.workflow != f"{workflow.name}@{workflow.version}":
        raise DefinitionError(
            f"launch plan {spec.name!r} names workflow {spec.workflow!r}, "
            f"not {workflow.name}@{workflow.version}"
        )
