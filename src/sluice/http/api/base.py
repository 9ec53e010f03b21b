"""What every API router shares: the version prefix and the caller's service parameter."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from sluice.http.deps import service
from sluice.service import Sluice

API_PREFIX = "/api/v1"

Service = Annotated[Sluice, Depends(service)]
"""A route's `sluice: Service` parameter: the caller's Sluice, scoped by its token."""


def api_routes(**options: Any) -> APIRouter:
    """A router whose routes carry the full /api/v1 path themselves, so the route template
    a request matched (the metrics' label) is the path a client sees."""
    return APIRouter(prefix=API_PREFIX, **options)
