"""Launch plans: versions (with next firings of ACTIVE scheduled ones), activate, deactivate."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import ENTITY, EntityQuery, LaunchPlanName, ScopeQuery
from sluice.service import models as m

router = api_routes(tags=["launch plans"])


class Activation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    version: str | None = Field(default=None, min_length=1, max_length=200, pattern=ENTITY)
    """Default: the newest version."""


@router.get("/launch-plans")
async def list_launch_plans(
    sluice: Service,
    name: EntityQuery = None,
    active_only: bool = False,
    project: ScopeQuery = None,
    domain: ScopeQuery = None,
) -> list[m.LaunchPlan]:
    """Versions of the project's launch plans, oldest first per name."""
    return await sluice.launch_plans(name, active_only=active_only, project=project, domain=domain)


@router.get("/launch-plans/{name}")
async def get_launch_plan(
    sluice: Service, name: LaunchPlanName, project: ScopeQuery = None, domain: ScopeQuery = None
) -> list[m.LaunchPlan]:
    """Every version of one launch plan, oldest first."""
    return await sluice.launch_plans(name, project=project, domain=domain)


@router.post("/launch-plans/{name}/activate")
async def activate_launch_plan(
    sluice: Service,
    name: LaunchPlanName,
    body: Activation | None = None,
    project: ScopeQuery = None,
    domain: ScopeQuery = None,
) -> m.LaunchPlan:
    """Make a version ACTIVE (the one ACTIVE before, if another, is left INACTIVE)."""
    version = body.version if body is not None else None
    return await sluice.activate_launch_plan(name, version, project=project, domain=domain)


@router.post("/launch-plans/{name}/deactivate")
async def deactivate_launch_plan(
    sluice: Service, name: LaunchPlanName, project: ScopeQuery = None, domain: ScopeQuery = None
) -> m.LaunchPlan | None:
    """Leave the name with no ACTIVE version; returns the version that was ACTIVE, if any."""
    return await sluice.deactivate_launch_plan(name, project=project, domain=domain)
