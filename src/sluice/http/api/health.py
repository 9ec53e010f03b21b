"""Liveness and readiness: answered without credentials, so probes need no token."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from sluice.http.api.base import api_routes
from sluice.http.problems import problem
from sluice.service import Sluice
from sluice.service import models as m

router = api_routes(tags=["health"])


class Alive(BaseModel):
    ok: bool = True


@router.get("/health")
async def health() -> Alive:
    """The process answers (liveness); says nothing of the store."""
    return Alive()


@router.get("/ready", response_model=m.Health)
async def ready(request: Request) -> m.Health | JSONResponse:
    """The store answers a query (readiness); 503 with the reason when it does not."""
    sluice: Sluice = request.app.state.sluice
    found = await sluice.readiness()
    if not found.ok:
        return problem(503, found.detail, "unavailable")
    return found
