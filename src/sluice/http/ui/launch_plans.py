"""The launch plans page: each name's versions (the ACTIVE one with its policy, schedule and
next firings), the queue of PENDING executions per launch plan with positions and reasons,
and the activate / deactivate form posts."""

from __future__ import annotations

from itertools import groupby
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluice.http.deps import service
from sluice.http.ui import csrf
from sluice.http.ui.errors import PageRoute
from sluice.http.ui.templating import render
from sluice.service import Sluice
from sluice.service import models as m

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]


@router.get("/launch-plans", response_class=HTMLResponse, name="ui_launch_plans")
async def launch_plans_page(
    request: Request, sluice: Service, project: str = "", domain: str = ""
) -> Response:
    versions = await sluice.launch_plans(project=project or None, domain=domain or None)
    pending = await sluice.pending()
    context = {
        "title": "Launch plans",
        "project": project or sluice.settings.project,
        "domain": domain or sluice.settings.domain,
        "plans": _by_name(versions),
        "queues": [(name, list(q)) for name, q in groupby(pending, lambda e: e.launch_plan)],
    }
    return render(request, "launch_plans", context)


def _by_name(versions: list[m.LaunchPlan]) -> list[tuple[str, list[m.LaunchPlan]]]:
    """Versions grouped by name, newest first within a name."""
    names = sorted({v.name for v in versions})
    return [(n, [v for v in reversed(versions) if v.name == n]) for n in names]


@router.post("/launch-plans/{name}/activate", name="ui_activate")
async def activate(request: Request, sluice: Service, name: str) -> Response:
    form = await csrf.checked_form(request)
    done = await sluice.activate_launch_plan(
        name, form.get("version") or None, project=form.get("project"), domain=form.get("domain")
    )
    return _back_to_plans(request, done.project, done.domain)


@router.post("/launch-plans/{name}/deactivate", name="ui_deactivate")
async def deactivate(request: Request, sluice: Service, name: str) -> Response:
    form = await csrf.checked_form(request)
    project, domain = form.get("project"), form.get("domain")
    await sluice.deactivate_launch_plan(name, project=project, domain=domain)
    return _back_to_plans(request, project or "", domain or "")


def _back_to_plans(request: Request, project: str, domain: str) -> Response:
    url = request.url_for("ui_launch_plans").include_query_params(project=project, domain=domain)
    return RedirectResponse(str(url.path) + "?" + str(url.query), status_code=303)
