"""Registered Flyte entities -> the sluice workflow (and launch plan) that runs them, with the
translation every other Flyte path uses (sluice.flyte), after gathering what they need from
the store (graph.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sluice.errors import DefinitionError
from sluice.flyte.launch_plans import default_inputs, launch_plan_spec
from sluice.flyte.tasks import task_spec
from sluice.flyte.workflows import task_workflow, workflow_spec
from sluice.service.flyte.code import FlyteFiles
from sluice.service.flyte.graph import FlyteId, Gatherer, launch_plan_message, parse
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec
from sluice.store.flyte_entities import LAUNCH_PLAN, TASK, WORKFLOW, FlyteEntityRepository


@dataclass(frozen=True)
class Translated:
    workflow: WorkflowSpec
    launch_plan: LaunchPlanSpec | None
    interface: Any
    """The Flyte TypedInterface of what runs (values cross the gRPC API as its literals)."""
    distributions: frozenset[str]
    """Code archives the tasks import from (unpacked before an execution starts)."""


async def translate(
    repo: FlyteEntityRepository, files: FlyteFiles, ident: FlyteId, spec: Any | None = None
) -> Translated:
    """The sluice specs of a registered entity (`spec`: the one being registered, not yet
    stored); DefinitionError naming what sluice cannot run, NotFoundError naming what is not
    registered."""
    gatherer = Gatherer(repo, files)
    try:
        return await _translate(gatherer, ident, spec)
    except DefinitionError as exc:
        raise DefinitionError(f"{ident}: {exc}") from None


async def _translate(gatherer: Gatherer, ident: FlyteId, spec: Any | None) -> Translated:
    if spec is None:
        spec = parse(ident.kind, (await gatherer.record(ident)).spec)
    entities = gatherer.entities
    if ident.kind == TASK:
        gatherer.task(spec)
        runnable = entities.tasks[spec.template.id.name].template
        task = task_spec(runnable, entities.root_of(runnable.id.name))
        return _done(gatherer, task_workflow(task), None, spec.template.interface)
    if ident.kind == WORKFLOW:
        await gatherer.workflow(ident, spec)
        default = await _default_launch_plan(gatherer, ident)
        defaults = default_inputs(default) if default is not None else {}
        workflow = workflow_spec(entities, ident.name, defaults)
        return _done(gatherer, workflow, None, spec.template.interface)
    plan = await gatherer.launch_plan(ident, spec)
    workflow, launch_plan = launch_plan_spec(entities, plan)
    interface = entities.workflow(spec.workflow_id.name).template.interface
    return _done(gatherer, workflow, launch_plan, interface)


async def _default_launch_plan(gatherer: Gatherer, ident: FlyteId) -> Any | None:
    """The workflow's default launch plan (flytekit names it after the workflow) at the same
    version, if registered: its defaults are the workflow inputs' defaults."""
    named = FlyteId(LAUNCH_PLAN, ident.project, ident.domain, ident.name, ident.version)
    found = await gatherer.repo.get(*named.key)
    return None if found is None else launch_plan_message(named, parse(LAUNCH_PLAN, found.spec))


def _done(
    gatherer: Gatherer, workflow: WorkflowSpec, plan: LaunchPlanSpec | None, interface: Any
) -> Translated:
    return Translated(workflow, plan, interface, frozenset(gatherer.distributions))
