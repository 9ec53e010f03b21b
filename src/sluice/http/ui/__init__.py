"""The web UI: server-rendered pages over `sluice.service.Sluice`, kept live by its own small
script (static/ui.js: re-reads a page's live fragment and merges what changed, never while the
reader selects, scrolls or has paused it), task logs followed over the API's server-sent events
(static/log.js); no asset comes from the internet.

`create_app` includes `ui_router()` (pages under `/`), calls `mount_static(app)` (the
stylesheet, scripts and icon under `/static/ui`) and `install(app)` (an HTML page, not JSON,
for a browser asking for a path that does not exist). Form posts carry a CSRF token checked
against a cookie: see `csrf`.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException

from sluice.http import problems
from sluice.http.api import API_PREFIX
from sluice.http.ui import definitions, executions, inventory, launch, launch_plans, logs, sign_in
from sluice.http.ui.templating import STATIC_DIR, STATIC_PATH, render

STATIC_NAME = "ui_static"


def ui_router() -> APIRouter:
    router = APIRouter()
    parts = (executions, launch, logs, launch_plans, definitions, inventory, sign_in)
    for part in parts:
        router.include_router(part.router)
    return router


def mount_static(app: FastAPI) -> None:
    app.mount(STATIC_PATH, StaticFiles(directory=str(STATIC_DIR)), name=STATIC_NAME)


def install(app: FastAPI) -> None:
    """A browser asking for a page that does not exist gets a page saying so (404), not the
    API's problem JSON; API paths and other clients still get problem details."""

    async def not_found(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404 and _wants_a_page(request):
            message = f"there is no page at {request.url.path}"
            context = {"title": "Not found", "message": message, "status": 404, "live": False}
            return render(request, "error", context, status_code=404)
        return await _problem(request, exc)

    app.add_exception_handler(HTTPException, not_found)


async def _problem(request: Request, exc: HTTPException) -> Response:
    return problems.http_problem(request, exc)


def _wants_a_page(request: Request) -> bool:
    path = request.url.path.removeprefix(request.scope.get("root_path", ""))
    if path.startswith((API_PREFIX, STATIC_PATH)) or request.method not in ("GET", "HEAD"):
        return False
    return "text/html" in request.headers.get("accept", "")


__all__ = ["STATIC_PATH", "install", "mount_static", "ui_router"]
