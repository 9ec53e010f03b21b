"""Backfills: create one over a scheduled launch plan's past range, list them with their
progress, show one, pause, resume, cancel."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from sluice.executions.backfills import MAX_ACTIVE_LIMIT
from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import ENTITY, NO_CONTROL, SCOPE
from sluice.service.backfill_views import Backfill
from sluice.spec.names import ENTITY_MAX, SCOPE_MAX
from sluice.spec.values import MAX_LIST_LIMIT

router = api_routes(tags=["backfills"])


class CreateBackfill(BaseModel):
    """One execution per schedule slot of the ACTIVE version of `launch_plan` in [start, end]
    (a time without a zone is in the schedule's time zone)."""

    model_config = ConfigDict(extra="forbid")

    launch_plan: str = Field(min_length=1, max_length=ENTITY_MAX, pattern=ENTITY)
    start: datetime
    end: datetime
    reprocess: Literal["none", "failed", "all"] = "none"
    max_active: int | None = Field(default=None, ge=1, le=MAX_ACTIVE_LIMIT)
    """Default: the server's concurrency.backfill_max_active."""
    project: str | None = Field(default=None, min_length=1, max_length=SCOPE_MAX, pattern=SCOPE)
    domain: str | None = Field(default=None, min_length=1, max_length=SCOPE_MAX, pattern=SCOPE)


BackfillId = Annotated[str, Path(min_length=1, max_length=64, pattern=NO_CONTROL)]


@router.get("/backfills")
async def list_backfills(
    sluice: Service,
    state: Literal["RUNNING", "PAUSED", "CANCELLED", "DONE"] | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
) -> list[Backfill]:
    """Backfills newest first, each with its slots by the phase of their execution."""
    return await sluice.backfills.list(state, limit)


@router.post("/backfills", status_code=201)
async def create_backfill(sluice: Service, body: CreateBackfill) -> Backfill:
    """Plan the backfill (which slots run, by the reprocess rule); `sluice serve` then creates
    the slots' executions, at most `max_active` unfinished at once. Running the same
    backfill again creates no new execution (each slot's execution id is deterministic)."""
    return await sluice.backfills.create(
        body.launch_plan,
        body.start,
        body.end,
        reprocess=body.reprocess,
        max_active=body.max_active,
        project=body.project,
        domain=body.domain,
    )


@router.get("/backfills/{backfill_id}")
async def get_backfill(sluice: Service, backfill_id: BackfillId) -> Backfill:
    return await sluice.backfills.get(backfill_id)


@router.post("/backfills/{backfill_id}/pause")
async def pause_backfill(sluice: Service, backfill_id: BackfillId) -> Backfill:
    """No more executions are created; those that exist run on."""
    return await sluice.backfills.pause(backfill_id)


@router.post("/backfills/{backfill_id}/resume")
async def resume_backfill(sluice: Service, backfill_id: BackfillId) -> Backfill:
    return await sluice.backfills.resume(backfill_id)


@router.post("/backfills/{backfill_id}/cancel")
async def cancel_backfill(sluice: Service, backfill_id: BackfillId) -> Backfill:
    """Unfinished executions are aborted; no more are created."""
    return await sluice.backfills.cancel(backfill_id)
