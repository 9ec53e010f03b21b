"""The registered Flyte entities one workflow or launch plan needs, gathered from the store
into a `FlyteEntities` for the translation (sluice.flyte): the workflow, the tasks its nodes
run (in sub-workflows, maps and branches too), and the launch plans its nodes call with their
own workflows and tasks, each by the exact version the nodes reference.

Fast-registered tasks are handed to the translation as their own `pyflyte-execute` command
(code.runnable_template), importing from the directory their code archive unpacks to.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sluice.errors import DefinitionError, NotFoundError
from sluice.flyte.entities import FlyteEntities
from sluice.service.flyte.code import FlyteFiles, distribution_of, runnable_template
from sluice.store.flyte_entities import (
    LAUNCH_PLAN,
    TASK,
    WORKFLOW,
    FlyteEntityRecord,
    FlyteEntityRepository,
)

KINDS = {1: TASK, 2: WORKFLOW, 3: LAUNCH_PLAN}
"""flyteidl ResourceType values -> the store's kinds."""


@dataclass(frozen=True)
class FlyteId:
    kind: str
    project: str
    domain: str
    name: str
    version: str

    @classmethod
    def of(cls, kind: str, identifier: Any) -> FlyteId:
        return cls(kind, identifier.project, identifier.domain, identifier.name, identifier.version)

    @property
    def key(self) -> tuple[str, str, str, str, str]:
        return self.kind, self.project, self.domain, self.name, self.version

    def __str__(self) -> str:
        return f"{self.kind} {self.project}/{self.domain}/{self.name}@{self.version}"


def parse(kind: str, data: bytes) -> Any:
    """The stored spec of a kind: an admin TaskSpec, WorkflowSpec or LaunchPlanSpec."""
    from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2

    types: dict[str, Any] = {
        TASK: task_pb2.TaskSpec,
        WORKFLOW: workflow_pb2.WorkflowSpec,
        LAUNCH_PLAN: launch_plan_pb2.LaunchPlanSpec,
    }
    return types[kind].FromString(data)


def launch_plan_message(ident: FlyteId, spec: Any) -> Any:
    """An admin LaunchPlan (id and spec), the form the translation reads."""
    from flyteidl.admin import launch_plan_pb2
    from flyteidl.core import identifier_pb2

    identifier = identifier_pb2.Identifier(
        resource_type=identifier_pb2.LAUNCH_PLAN,
        project=ident.project,
        domain=ident.domain,
        name=ident.name,
        version=ident.version,
    )
    return launch_plan_pb2.LaunchPlan(id=identifier, spec=spec)


def task_references(template: Any) -> Iterator[tuple[str, Any]]:
    """(kind, Identifier) of every task and launch plan a workflow template's nodes use."""
    for node in template.nodes:
        yield from _node_references(node)


def _node_references(node: Any) -> Iterator[tuple[str, Any]]:
    target = node.WhichOneof("target")
    if target == "task_node":
        yield TASK, node.task_node.reference_id
    elif target == "array_node":
        yield from _node_references(node.array_node.node)
    elif target == "workflow_node" and node.workflow_node.HasField("launchplan_ref"):
        yield LAUNCH_PLAN, node.workflow_node.launchplan_ref
    elif target == "branch_node":
        branch = node.branch_node.if_else
        for case in [branch.case, *branch.other]:
            yield from _node_references(case.then_node)
        if branch.HasField("else_node"):
            yield from _node_references(branch.else_node)


@dataclass
class Gatherer:
    """Reads what a workflow needs, once each, refusing two versions of one name."""

    repo: FlyteEntityRepository
    files: FlyteFiles
    entities: FlyteEntities = field(default_factory=FlyteEntities)
    versions: dict[tuple[str, str], str] = field(default_factory=dict)
    seen: set[FlyteId] = field(default_factory=set)
    distributions: set[str] = field(default_factory=set)

    async def record(self, ident: FlyteId) -> FlyteEntityRecord:
        found = await self.repo.get(*ident.key)
        if found is None:
            raise NotFoundError(f"{ident} is not registered")
        return found

    def _first_time(self, ident: FlyteId) -> bool:
        seen = self.versions.setdefault((ident.kind, ident.name), ident.version)
        if seen != ident.version:
            raise DefinitionError(
                f"{ident.kind} {ident.name!r} is used at two versions, {seen!r} and "
                f"{ident.version!r}: sluice translates one version of a name per workflow"
            )
        if ident in self.seen:
            return False
        self.seen.add(ident)
        return True

    async def workflow(self, ident: FlyteId, spec: Any | None = None) -> Any:
        """Add a workflow (its stored spec unless given) and all it references."""
        if not self._first_time(ident) and spec is None:
            return self.entities.workflow(ident.name)
        if spec is None:
            spec = parse(WORKFLOW, (await self.record(ident)).spec)
        self.entities.add(spec)
        for template in [spec.template, *(w for w in spec.sub_workflows)]:
            for kind, reference in task_references(template):
                await self.reference(FlyteId.of(kind, reference))
        return spec

    async def reference(self, ident: FlyteId) -> None:
        if not self._first_time(ident):
            return
        if ident.kind == TASK:
            self.task(parse(TASK, (await self.record(ident)).spec))
        else:
            await self.launch_plan(ident, parse(LAUNCH_PLAN, (await self.record(ident)).spec))

    def task(self, spec: Any) -> None:
        """Add a task spec, as sluice runs it (see the module's docstring)."""
        from flyteidl.admin import task_pb2

        template = spec.template
        distribution = distribution_of(template)
        if distribution is not None:
            self.distributions.add(distribution)
            self.entities.roots[template.id.name] = self.files.code_dir(distribution)
        runnable = task_pb2.TaskSpec()
        runnable.CopyFrom(spec)
        runnable.template.CopyFrom(runnable_template(template))
        self.entities.add(runnable)

    async def launch_plan(self, ident: FlyteId, spec: Any) -> Any:
        """Add a launch plan (given its spec) and its workflow."""
        plan = launch_plan_message(ident, spec)
        self.entities.add(plan)
        await self.workflow(FlyteId.of(WORKFLOW, spec.workflow_id))
        return plan
