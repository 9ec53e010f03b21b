"""Pages of what the deployment holds: quotas with their holders and waiters, locks, cache
entries and reservations (who computes what others wait for)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from sluice.http.deps import service
from sluice.http.ui.errors import PageRoute
from sluice.http.ui.templating import render
from sluice.service import Sluice

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]
CACHE_ENTRIES_SHOWN = 100


@router.get("/quotas", response_class=HTMLResponse, name="ui_quotas")
async def quotas_page(request: Request, sluice: Service) -> Response:
    return render(request, "quotas", {"title": "Quotas", "quotas": await sluice.quotas()})


@router.get("/locks", response_class=HTMLResponse, name="ui_locks")
async def locks_page(request: Request, sluice: Service) -> Response:
    return render(request, "locks", {"title": "Locks", "locks": await sluice.locks()})


@router.get("/cache", response_class=HTMLResponse, name="ui_cache")
async def cache_page(request: Request, sluice: Service, task: str = "") -> Response:
    context = {
        "title": "Cache",
        "task": task,
        "entries": await sluice.cache_entries(task or None, limit=CACHE_ENTRIES_SHOWN),
        "reservations": await sluice.reservations(),
    }
    return render(request, "cache", context)
