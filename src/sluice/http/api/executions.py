"""Executions: list (filters, cursor pages), detail, nodes and attempts, events, the pending
queue, create from a launch plan, abort."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import Header, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from sluice.http.api.base import Service, api_routes
from sluice.http.api.links import execution_links
from sluice.http.api.params import (
    ENTITY,
    SCOPE,
    Cursor,
    EntityQuery,
    EventId,
    ExecutionId,
    NodeId,
    PhaseName,
    ScopeQuery,
    TextQuery,
)
from sluice.http.problems import Problem
from sluice.service import ExecutionFilter, parse_phases
from sluice.service import models as m
from sluice.spec.values import MAX_LIST_LIMIT

router = api_routes(tags=["executions"])
SEARCH_HELP = (
    "Case-insensitive: an id prefix, or part of the workflow's or launch plan's name or of "
    "the inputs as JSON"
)


class CreateExecution(BaseModel):
    """An execution of the ACTIVE version of a launch plan. A field the server does not know
    is refused (422), never ignored: `input` for `inputs` would launch with the defaults."""

    model_config = ConfigDict(extra="forbid")

    launch_plan: str = Field(min_length=1, max_length=200, pattern=ENTITY)
    inputs: dict[str, Any] = {}
    project: str | None = Field(default=None, min_length=1, max_length=63, pattern=SCOPE)
    """Default: the server's configured project."""
    domain: str | None = Field(default=None, min_length=1, max_length=63, pattern=SCOPE)


@router.get("/executions")
async def list_executions(
    sluice: Service,
    phase: Annotated[list[PhaseName], Query(description="Repeatable; any case")] = [],  # noqa: B006
    launch_plan: EntityQuery = None,
    project: ScopeQuery = None,
    domain: ScopeQuery = None,
    created_after: datetime | None = None,
    created_before: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 50,
    cursor: Cursor = None,
    launch_plan_prefix: EntityQuery = None,
    q: Annotated[TextQuery, Query(description=SEARCH_HELP)] = None,
) -> m.Page[m.ExecutionSummary]:
    """Executions newest first, a page at a time: `next_cursor` asks for the next (older)
    page, `prev_cursor` for the previous (newer) one; `total` counts the whole selection."""
    where = ExecutionFilter(
        phases=parse_phases(phase),
        projects=None if project is None else [project],
        domain=domain,
        launch_plan=launch_plan,
        created_after=created_after,
        created_before=created_before,
        launch_plan_prefix=launch_plan_prefix,
        text=q,
    )
    return await sluice.executions(where, limit=limit, cursor=cursor)


@router.post(
    "/executions",
    status_code=201,
    responses={
        **execution_links(201),
        200: {
            "model": m.ExecutionSummary,
            "description": "Replayed: the key's execution",
            **execution_links(200)[200],
        },
        409: {"model": Problem, "description": "The idempotency key names another request"},
    },
)
async def create_execution(
    sluice: Service,
    body: CreateExecution,
    response: Response,
    idempotency_key: Annotated[
        str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)
    ] = None,
) -> m.ExecutionSummary:
    """Launch the ACTIVE version of a launch plan; the answer carries the controller's
    decision: QUEUED, PENDING (with its position and reason) or SKIPPED. With an
    `Idempotency-Key` header, a retry within the retention window (24 h by default) answers
    200 with the execution the key created (as it is now) instead of creating another; the
    same key with a different request is a 409 naming the key."""
    launched = await sluice.create_launched(
        body.launch_plan,
        body.inputs,
        project=body.project,
        domain=body.domain,
        idempotency_key=idempotency_key,
    )
    if launched.replayed:
        response.status_code = 200
    return launched.execution


@router.get("/executions/{execution_id}")
async def get_execution(
    sluice: Service, execution_id: ExecutionId, events: bool = False
) -> m.Execution:
    """One execution (by id or unique prefix) with its nodes and their attempts."""
    return await sluice.execution(execution_id, events=events, whole=False)


@router.get("/executions/{execution_id}/nodes")
async def list_nodes(sluice: Service, execution_id: ExecutionId) -> list[m.NodeExecution]:
    """The execution's node executions in workflow order, each with its attempts."""
    return (await sluice.execution(execution_id, whole=False)).nodes


@router.get("/executions/{execution_id}/nodes/{node_id}/attempts")
async def list_attempts(
    sluice: Service, execution_id: ExecutionId, node_id: NodeId
) -> list[m.Attempt]:
    return await sluice.attempts(execution_id, node_id)


@router.get("/executions/{execution_id}/events")
async def list_events(
    sluice: Service, execution_id: ExecutionId, after: EventId = 0
) -> list[m.Event]:
    """Events after the event id `after`, oldest first: pass the last id seen to follow."""
    return await sluice.events(execution_id, after=after)


@router.post("/executions/{execution_id}/abort")
async def abort_execution(
    sluice: Service,
    execution_id: ExecutionId,
    wait: Annotated[float | None, Query(gt=0, le=3600)] = None,
) -> m.ExecutionSummary:
    """Ask for an abort and return at once (the execution is then ABORTING, or already
    terminal); with `wait`, return once it is terminal or after `wait` seconds."""
    if wait is None:
        return await sluice.abort(execution_id, wait=False)
    return await sluice.abort(execution_id, wait=True, within=wait)


@router.get("/pending")
async def list_pending(
    sluice: Service, launch_plan: EntityQuery = None
) -> list[m.ExecutionSummary]:
    """PENDING executions in promotion order per launch plan, with positions and reasons."""
    return await sluice.pending(launch_plan)
