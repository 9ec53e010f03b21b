"""`create_app`: the HTTP API under /api/v1 (and the web UI when it is installed) over one
`Sluice`, with errors as problem details, request metrics and an access log line each.

The app is a thin adapter: every route parses its input, calls one service verb with the
caller's scoped `Sluice` (deps.service) and returns the verb's model, which FastAPI also
turns into the OpenAPI 3.1 schema at /api/v1/openapi.json.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from fastapi import FastAPI

from sluice.http import problems
from sluice.http.api import API_PREFIX, api_router
from sluice.http.deps import Authorize
from sluice.http.flyte_routes import flyte_router
from sluice.http.guard import LimitBodies, RefuseControlCharacters
from sluice.http.observe import RequestMetrics, observe_requests, prometheus_route
from sluice.service import Sluice


def create_app(sluice: Sluice, *, authorize: Authorize) -> FastAPI:
    """The ASGI app serving `sluice` to callers that `authorize` admits (see auth.py)."""
    app = FastAPI(
        title="sluice",
        version="1",
        summary="Workflow executions, launch plans, quotas, locks, cache and concurrency.",
        openapi_url=f"{API_PREFIX}/openapi.json",
        docs_url=f"{API_PREFIX}/docs",
        redoc_url=None,
    )
    app.state.sluice = sluice
    app.state.authorize = authorize
    problems.install(app)
    app.include_router(api_router())
    app.include_router(flyte_router(), include_in_schema=False)
    app.add_route("/metrics", prometheus_route(sluice.runtime.metrics), include_in_schema=False)
    _mount_ui(app)
    app.openapi = lambda: _openapi(app)  # type: ignore[method-assign]
    app.add_middleware(RefuseControlCharacters)
    app.add_middleware(LimitBodies, limit=sluice.settings.payloads.max_request_bytes)
    observe_requests(app, RequestMetrics(sluice.runtime.metrics))  # outermost: counts all
    return app


def _mount_ui(app: FastAPI) -> None:
    """The web UI lives in sluice.http.ui (its own package: `ui_router()` for the pages,
    `mount_static(app)` for its assets); the API serves without it."""
    if importlib.util.find_spec("sluice.http.ui") is None:
        return
    ui = importlib.import_module("sluice.http.ui")
    app.include_router(ui.ui_router(), include_in_schema=False)
    for hook in ("mount_static", "install"):
        found = getattr(ui, hook, None)
        if found is not None:
            found(app)


def _openapi(app: FastAPI) -> dict[str, Any]:
    """FastAPI's schema, with error bodies documented as problem+json (what they are)."""
    if app.openapi_schema is None:
        from fastapi.openapi.utils import get_openapi

        schema = get_openapi(
            title=app.title,
            version=app.version,
            summary=app.summary,
            routes=app.routes,
        )
        for operation in _operations(schema):
            for status, response in operation.get("responses", {}).items():
                content = response.get("content", {})
                if int(status) >= 400 and "application/json" in content:
                    content[problems.PROBLEM_JSON] = content.pop("application/json")
        _document_auth(schema)
        _document_limits(schema, app.state.sluice)
        app.openapi_schema = schema
    return app.openapi_schema


def _operations(schema: dict[str, Any]) -> list[dict[str, Any]]:
    return [op for path in schema.get("paths", {}).values() for op in path.values()]


def _document_auth(schema: dict[str, Any]) -> None:
    """Bearer tokens, optional: a loopback server answers without one (see auth.py)."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})["bearer"] = {
        "type": "http",
        "scheme": "bearer",
        "description": "`sluice tokens create --project P`; not needed on a loopback server",
    }
    schema["security"] = [{"bearer": []}, {}]


def _document_limits(schema: dict[str, Any], sluice: Sluice) -> None:
    """Limits that come from the server's configuration, stated as the server applies them."""
    found = schema.get("components", {}).get("schemas", {})
    quota = found.get("QuotaValue", {}).get("properties", {}).get("quota")
    if quota is not None:
        quota["maximum"] = sluice.settings.resources.max_quota
