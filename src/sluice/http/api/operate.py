"""Operating on executions and reading definitions: who the caller is, relaunch and retry an
execution, abort many at once, a launch plan's input form, the catalogue of workflows and
tasks, one workflow with its graph."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from sluice.http.api.base import Service, api_routes
from sluice.http.api.links import execution_links
from sluice.http.api.params import (
    NO_CONTROL,
    EntityQuery,
    ExecutionId,
    LaunchPlanName,
    ScopeQuery,
)
from sluice.service import models as m
from sluice.service.facade import MAX_BULK
from sluice.service.launch_forms import LaunchForm

router = api_routes()
CREATED = execution_links(201)


IdText = Annotated[str, Field(min_length=1, max_length=64, pattern=NO_CONTROL)]


class Relaunch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    inputs: dict[str, Any] = {}
    """Inputs to change; the others are the original execution's."""


class BulkAbort(BaseModel):
    model_config = ConfigDict(extra="forbid")

    ids: list[IdText] = Field(min_length=1, max_length=MAX_BULK)
    reason: str | None = Field(default=None, min_length=1, max_length=500, pattern=NO_CONTROL)


@router.get("/whoami", tags=["auth"])
async def whoami(sluice: Service) -> m.Caller:
    """Who the server takes the caller for, the projects it sees and whether it may write."""
    return sluice.whoami()


@router.post(
    "/executions/{execution_id}/relaunch",
    tags=["executions"],
    status_code=201,
    responses=CREATED,
)
async def relaunch_execution(
    sluice: Service, execution_id: ExecutionId, body: Relaunch | None = None
) -> m.ExecutionSummary:
    """A new execution of the same workflow and launch plan versions with the same inputs
    (those in `inputs` replaced); it names the original in `relaunch_of`."""
    return await sluice.relaunch(execution_id, body.inputs if body else None)


@router.post(
    "/executions/{execution_id}/retry",
    tags=["executions"],
    status_code=201,
    responses=CREATED,
)
async def retry_execution(sluice: Service, execution_id: ExecutionId) -> m.ExecutionSummary:
    """Retry a FAILED (ABORTED, TIMED_OUT) execution from its failed nodes: a new execution
    (naming the old in `retry_of`) whose succeeded nodes are reused with their recorded
    outputs, so only the others run."""
    return await sluice.retry(execution_id)


@router.post("/executions/bulk-abort", tags=["executions"])
async def abort_executions(sluice: Service, body: BulkAbort) -> list[m.ExecutionSummary]:
    """Ask for the abort of each execution at once (none if any is unknown or not yours)."""
    return await sluice.abort_many(body.ids, body.reason)


@router.get("/launch-plans/{name}/form", tags=["launch plans"])
async def launch_plan_form(
    sluice: Service, name: LaunchPlanName, project: ScopeQuery = None, domain: ScopeQuery = None
) -> LaunchForm:
    """The inputs of the ACTIVE version's workflow, typed, with defaults and fixed inputs."""
    return await sluice.launch_form(name, project=project, domain=domain)


@router.get("/catalogue", tags=["definitions"])
async def catalogue(
    sluice: Service, project: ScopeQuery = None, domain: ScopeQuery = None
) -> m.Catalogue:
    """Every registered workflow and task of the project/domain with its versions."""
    return await sluice.catalogue(project=project, domain=domain)


@router.get("/workflows/{name}", tags=["definitions"])
async def get_workflow(
    sluice: Service,
    name: LaunchPlanName,
    version: EntityQuery = None,
    project: ScopeQuery = None,
    domain: ScopeQuery = None,
) -> m.WorkflowView:
    """One workflow version (the newest unless `version`): inputs, graph, tasks."""
    return await sluice.workflow(name, version, project=project, domain=domain)
