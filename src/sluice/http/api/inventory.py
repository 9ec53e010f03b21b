"""What the deployment holds: quotas (holders, waiters, set), locks, cache entries and
reservations, concurrency caps and the controller, plugins."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response
from pydantic import BaseModel, ConfigDict, Field, field_validator

from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import (
    NO_CONTROL,
    SCOPE,
    EntityQuery,
    JsonInt,
    QuotaNamespace,
    a_json_number,
)
from sluice.service import models as m
from sluice.spec.values import MAX_LIST_LIMIT

router = api_routes()


class QuotaValue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    quota: JsonInt = Field(ge=1)
    """At most `resources.max_quota`: the schema states the server's value (app.py)."""
    preempt: bool | None = None
    """Priority preemption on or off in this namespace; absent: unchanged."""


class CapValue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    scope: str = Field(
        min_length=1,
        max_length=127,
        pattern=f"{SCOPE[:-1]}(/{SCOPE[1:-1]})?$",
        description="PROJECT or PROJECT/DOMAIN",
    )
    max: int | None = Field(default=None, ge=1, le=1_000_000_000)
    """None removes the operator's cap (a configured cap of the scope applies again)."""

    _a_number = field_validator("max", mode="before")(a_json_number)


CacheKey = Annotated[str, Field(min_length=1, max_length=200, pattern=NO_CONTROL)]
NamespaceQuery = Annotated[str | None, Query(min_length=1, max_length=205, pattern=NO_CONTROL)]


class Removed(BaseModel):
    removed: int


@router.get("/quotas", tags=["quotas"])
async def list_quotas(
    sluice: Service,
    namespace: Annotated[
        str | None, Query(min_length=1, max_length=205, pattern=NO_CONTROL)
    ] = None,
) -> list[m.Quota]:
    """Quotas with tokens in use, holders and waiters (in grant order)."""
    return await sluice.quotas(namespace)


@router.put("/quotas/{namespace:path}", tags=["quotas"])
async def set_quota(sluice: Service, namespace: QuotaNamespace, body: QuotaValue) -> m.Quota:
    """Set a namespace's quota for every process; lowering it never revokes held tokens."""
    return await sluice.set_quota(namespace, body.quota, preempt=body.preempt)


@router.get("/locks", tags=["locks"])
async def list_locks(sluice: Service) -> list[m.Lock]:
    """Held locks, and the tasks waiting for each with the scheduler's reason."""
    return await sluice.locks()


@router.get("/cache", tags=["cache"])
async def list_cache_entries(
    sluice: Service,
    task: EntityQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)] = 100,
) -> list[m.CacheEntry]:
    return await sluice.cache_entries(task, limit)


@router.delete("/cache", tags=["cache"])
async def remove_cache_entries(
    sluice: Service,
    key: Annotated[list[CacheKey], Query(description="Repeatable; a key or unique prefix")] = [],  # noqa: B006
    task: EntityQuery = None,
) -> Removed:
    """Remove entries by key or task name; 404 when nothing matched."""
    return Removed(removed=await sluice.remove_cache_entries(key, task))


@router.get("/reservations", tags=["cache"])
async def list_reservations(sluice: Service) -> list[m.Reservation]:
    """Who computes what others wait for, and when each reservation expires."""
    return await sluice.reservations()


@router.get("/concurrency/caps", tags=["concurrency"])
async def list_caps(sluice: Service) -> list[m.Cap]:
    return await sluice.caps()


@router.put("/concurrency/caps", tags=["concurrency"], status_code=204)
async def set_cap(sluice: Service, body: CapValue) -> Response:
    """Cap the active executions of a project or project/domain (null removes the cap)."""
    await sluice.set_cap(body.scope, body.max)
    return Response(status_code=204)


@router.get("/concurrency/controller", tags=["concurrency"])
async def controller_status(sluice: Service) -> m.ControllerStatus:
    """Whether a controller is live, who leads, and what waits PENDING per launch plan."""
    return await sluice.controller_status()


@router.get("/plugins", tags=["plugins"])
async def list_plugins(sluice: Service) -> list[m.Plugin]:
    return await sluice.plugins()
