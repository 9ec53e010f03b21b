"""Launch plan pages: every name with its ACTIVE version, and one name's page (its versions,
policy, schedule with next firings, pending queue and executions); activate and deactivate."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from sluice.errors import NotFoundError
from sluice.http.deps import service
from sluice.http.ui import csrf
from sluice.http.ui.errors import PageRoute
from sluice.http.ui.templating import render
from sluice.service import ExecutionFilter, Sluice
from sluice.service import models as m

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]
RECENT = 20
"""Executions a launch plan's page lists (the executions page has them all)."""


@router.get("/launch-plans", name="ui_launch_plans")
async def launch_plans_page(
    request: Request, sluice: Service, project: str = "", domain: str = ""
) -> Response:
    versions = await sluice.launch_plans(project=project or None, domain=domain or None)
    pending = await sluice.pending()
    context = {
        "title": "Launch plans",
        "project": project or _project(sluice, versions),
        "domain": domain or sluice.settings.domain,
        "plans": _by_name(versions),
        "queues": _queues(pending),
    }
    return render(request, "launch_plans", context)


@router.get("/launch-plans/{name}", name="ui_launch_plan")
async def launch_plan_page(
    request: Request, sluice: Service, name: str, project: str = "", domain: str = ""
) -> Response:
    versions = await sluice.launch_plans(name, project=project or None, domain=domain or None)
    if not versions:
        scope = f"{project or sluice.settings.project}/{domain or sluice.settings.domain}"
        raise NotFoundError(f"launch plan {name!r} is not registered in {scope}")
    first = versions[0]
    where = ExecutionFilter(launch_plan=name, projects=[first.project], domain=first.domain)
    recent = await sluice.executions(where, limit=RECENT)
    pending = [e for e in await sluice.pending(name) if e.project == first.project]
    context = {
        "title": f"Launch plan {name}",
        "name": name,
        "project": first.project,
        "domain": first.domain,
        "versions": list(reversed(versions)),
        "active": next((v for v in versions if v.state == "ACTIVE"), None),
        "pending": pending,
        "recent": recent,
    }
    return render(request, "launch_plan", context)


def _project(sluice: Sluice, versions: list[m.LaunchPlan]) -> str:
    return versions[0].project if versions else sluice.settings.project


def _by_name(versions: list[m.LaunchPlan]) -> list[tuple[str, list[m.LaunchPlan]]]:
    """Versions grouped by name, newest first within a name."""
    names = sorted({v.name for v in versions})
    return [(n, [v for v in reversed(versions) if v.name == n]) for n in names]


def _queues(pending: list[m.ExecutionSummary]) -> list[tuple[str, list[m.ExecutionSummary]]]:
    queues: dict[str, list[m.ExecutionSummary]] = {}
    for execution in pending:
        queues.setdefault(execution.launch_plan or "", []).append(execution)
    return list(queues.items())


@router.post("/launch-plans/{name}/activate", name="ui_activate")
async def activate(request: Request, sluice: Service, name: str) -> Response:
    form = await csrf.checked_form(request)
    done = await sluice.activate_launch_plan(
        name, form.get("version") or None, project=form.get("project"), domain=form.get("domain")
    )
    return _back(request, form.get("next"), done.project, done.domain)


@router.post("/launch-plans/{name}/deactivate", name="ui_deactivate")
async def deactivate(request: Request, sluice: Service, name: str) -> Response:
    form = await csrf.checked_form(request)
    project, domain = form.get("project"), form.get("domain")
    await sluice.deactivate_launch_plan(name, project=project, domain=domain)
    return _back(request, form.get("next"), project or "", domain or "")


def _back(request: Request, wanted: str | None, project: str, domain: str) -> Response:
    if wanted and wanted.startswith("/") and not wanted.startswith("//"):
        return RedirectResponse(wanted, status_code=303)
    url = request.url_for("ui_launch_plans").include_query_params(project=project, domain=domain)
    return RedirectResponse(str(url.path) + "?" + str(url.query), status_code=303)
