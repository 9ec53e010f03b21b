"""Launch plans: versions (with next firings of ACTIVE scheduled ones), activate, deactivate."""

from __future__ import annotations

from pydantic import BaseModel

from sluice.http.api.base import Service, api_routes
from sluice.service import models as m

router = api_routes(tags=["launch plans"])


class Activation(BaseModel):
    version: str | None = None
    """Default: the newest version."""


@router.get("/launch-plans")
async def list_launch_plans(
    sluice: Service,
    name: str | None = None,
    active_only: bool = False,
    project: str | None = None,
    domain: str | None = None,
) -> list[m.LaunchPlan]:
    """Versions of the project's launch plans, oldest first per name."""
    return await sluice.launch_plans(name, active_only=active_only, project=project, domain=domain)


@router.get("/launch-plans/{name}")
async def get_launch_plan(
    sluice: Service, name: str, project: str | None = None, domain: str | None = None
) -> list[m.LaunchPlan]:
    """Every version of one launch plan, oldest first."""
    return await sluice.launch_plans(name, project=project, domain=domain)


@router.post("/launch-plans/{name}/activate")
async def activate_launch_plan(
    sluice: Service,
    name: str,
    body: Activation | None = None,
    project: str | None = None,
    domain: str | None = None,
) -> m.LaunchPlan:
    """Make a version ACTIVE (the one ACTIVE before, if another, is left INACTIVE)."""
    version = body.version if body is not None else None
    return await sluice.activate_launch_plan(name, version, project=project, domain=domain)


@router.post("/launch-plans/{name}/deactivate")
async def deactivate_launch_plan(
    sluice: Service, name: str, project: str | None = None, domain: str | None = None
) -> m.LaunchPlan | None:
    """Leave the name with no ACTIVE version; returns the version that was ACTIVE, if any."""
    return await sluice.deactivate_launch_plan(name, project=project, domain=domain)
