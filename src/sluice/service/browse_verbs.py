"""The service's verbs for browsing definitions: the catalogue of a project's workflows and
tasks, and one workflow with its graph, its inputs and the tasks it runs."""

from __future__ import annotations

from sluice.errors import NotFoundError
from sluice.service import models as m
from sluice.service.base import ServiceBase
from sluice.spec.models import TaskSpec, WorkflowSpec
from sluice.spec.names import check_entity_name
from sluice.spec.validate import dependencies


class Browsing(ServiceBase):
    async def catalogue(
        self, *, project: str | None = None, domain: str | None = None
    ) -> m.Catalogue:
        """Every registered workflow and task of project/domain, each with its versions."""
        project, domain = self._project_domain(project, domain)
        self._may_read(project)
        async with self.runtime.store.read() as repos:
            workflows = await repos.specs.catalogue(project, domain)
            tasks = await repos.specs.catalogue(project, domain, tasks=True)
        return m.Catalogue(
            project=project, domain=domain, workflows=_entries(workflows), tasks=_entries(tasks)
        )

    async def workflow(
        self,
        name: str,
        version: str | None = None,
        *,
        project: str | None = None,
        domain: str | None = None,
    ) -> m.WorkflowView:
        """One workflow version (default: the newest) with its graph and its tasks."""
        project, domain = self._project_domain(project, domain)
        self._may_read(project)
        check_entity_name("workflow name", name)
        async with self.runtime.store.read() as repos:
            versions = [v for v in await repos.specs.catalogue(project, domain) if v[0] == name]
            if not versions:
                raise NotFoundError(f"workflow {name!r} is not registered in {project}/{domain}")
            chosen = version or versions[0][1]
            spec = await repos.specs.get_workflow(project, domain, name, chosen)
            plans = await repos.launch_plans.find(project, domain, None)
        if spec is None:
            known = ", ".join(v[1] for v in versions)
            raise NotFoundError(f"workflow {name!r} has no version {chosen!r}; it has {known}")
        using = sorted({p.name for p in plans if p.workflow == f"{name}@{chosen}"})
        return _workflow_view(spec, project, domain, _entries(versions)[0].versions, using)


def _entries(rows: list[tuple[str, str, float]]) -> list[m.CatalogueEntry]:
    entries: dict[str, list[m.Version]] = {}
    for name, version, at in rows:
        entries.setdefault(name, []).append(m.Version(version=version, registered_at=m.utc(at)))
    return [m.CatalogueEntry(name=n, versions=v) for n, v in entries.items()]


def _workflow_view(
    spec: WorkflowSpec, project: str, domain: str, versions: list[m.Version], plans: list[str]
) -> m.WorkflowView:
    inputs = spec.interface.inputs
    return m.WorkflowView(
        project=project,
        domain=domain,
        name=spec.name,
        version=spec.version,
        versions=versions,
        inputs={k: str(v.type) for k, v in inputs.items()},
        defaults={k: v.default for k, v in inputs.items() if v.has_default},
        outputs={k: str(v) for k, v in spec.interface.outputs.items()},
        nodes=[
            m.NodeExecution(
                node=node.id,
                task=spec.tasks[node.task].name if node.task in spec.tasks else node.task,
                phase="NOT_STARTED",
                task_phase="NOT_STARTED",
                attempt=1,
                cache_status="DISABLED",
                reservation_status="DISABLED",
                depends_on=sorted(dependencies(node)),
            )
            for node in spec.nodes
        ],
        tasks=[_task_view(t) for t in spec.tasks.values()],
        launch_plans=plans,
    )


def _task_view(task: TaskSpec) -> m.TaskView:
    cache = task.metadata.cache
    cached = f"version {cache.version}" + (", serialized" if cache.serialize else "")
    return m.TaskView(
        name=task.name,
        version=task.version,
        type=task.type,
        inputs={k: str(v.type) for k, v in task.interface.inputs.items()},
        outputs={k: str(v) for k, v in task.interface.outputs.items()},
        retries=task.metadata.retries,
        timeout=task.metadata.timeout,
        cache=cached if cache.enabled else "off",
        quotas=[
            q.namespace if q.units == 1 else f"{q.namespace} x {q.units}"
            for q in task.claims.quotas
        ],
        locks=[lock.template or lock.function for lock in task.claims.locks],
    )


def _claim(namespace: str, units: int) -> str:
    return namespace if units == 1 else f"{namespace} x {units}"
