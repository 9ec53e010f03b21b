"""The web UI: server-rendered pages over `sluice.service.Sluice`, live through htmx (vendored
in `static/`) polling each page's fragment every second; no asset comes from the internet.

`create_app` includes `ui_router()` (pages under `/`) and calls `mount_static(app)` (the
stylesheet and htmx under `/static/ui`). Form posts (abort, activate, deactivate) carry a
CSRF token checked against a cookie: see `csrf`.
"""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.staticfiles import StaticFiles

from sluice.http.ui import executions, inventory, launch_plans, sign_in
from sluice.http.ui.templating import STATIC_DIR, STATIC_PATH

STATIC_NAME = "ui_static"


def ui_router() -> APIRouter:
    router = APIRouter()
    for part in (executions.router, inventory.router, launch_plans.router, sign_in.router):
        router.include_router(part)
    return router


def mount_static(app: FastAPI) -> None:
    app.mount(STATIC_PATH, StaticFiles(directory=str(STATIC_DIR)), name=STATIC_NAME)


__all__ = ["STATIC_PATH", "mount_static", "ui_router"]
