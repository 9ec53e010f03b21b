"""The catalogue: a project's workflows and tasks with their versions, and one workflow's page
(its inputs and defaults, its graph, the tasks it runs, the launch plans that run it)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from sluice.http.deps import service
from sluice.http.ui import graph
from sluice.http.ui.errors import PageRoute
from sluice.http.ui.templating import render
from sluice.service import Sluice

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]


@router.get("/workflows", name="ui_catalogue")
async def catalogue_page(
    request: Request, sluice: Service, project: str = "", domain: str = ""
) -> Response:
    found = await sluice.catalogue(project=project or None, domain=domain or None)
    context = {"title": "Workflows and tasks", "catalogue": found, "live": False}
    return render(request, "catalogue", context)


@router.get("/workflows/{name}", name="ui_workflow")
async def workflow_page(
    request: Request,
    sluice: Service,
    name: str,
    version: str = "",
    project: str = "",
    domain: str = "",
) -> Response:
    found = await sluice.workflow(
        name, version or None, project=project or None, domain=domain or None
    )
    context = {
        "title": f"Workflow {name}",
        "workflow": found,
        "graph": graph.layout(found.nodes),
        "live": False,
    }
    return render(request, "workflow", context)
