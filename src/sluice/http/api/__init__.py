"""The JSON API's routers, one module per resource, all under /api/v1."""

from __future__ import annotations

from fastapi import APIRouter

from sluice.http.api import (
    backfills,
    executions,
    health,
    inventory,
    launch_plans,
    logs,
    operate,
    rate_limits,
    signals,
    values,
)
from sluice.http.api.base import API_PREFIX
from sluice.http.problems import ERROR_RESPONSES


def api_router() -> APIRouter:
    router = APIRouter(responses=ERROR_RESPONSES)
    modules = (health, operate, executions, values, signals, logs, launch_plans, inventory)
    for module in (*modules, backfills, rate_limits):
        router.include_router(module.router)
    return router


__all__ = ["API_PREFIX", "api_router"]
