"""Errors as pages: a route of the UI that raises a SluiceError answers with a page saying
what went wrong (the error's own message names the bad value) and the matching status."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any
from urllib.parse import urlencode

from fastapi import Request, Response
from fastapi.responses import RedirectResponse
from fastapi.routing import APIRoute

from sluice.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError, SluiceError
from sluice.http.problems import Unauthorized
from sluice.http.ui.templating import render

_STATUS: list[tuple[type[SluiceError], int]] = [
    (NotFoundError, 404),
    (PermissionDeniedError, 403),
    (InvalidArgumentError, 422),  # as the API answers it
]


def status_of(error: SluiceError) -> int:
    return next((code for kind, code in _STATUS if isinstance(error, kind)), 500)


class PageRoute(APIRoute):
    """An APIRoute whose SluiceErrors become error pages, and whose pages send a browser
    without a valid token (on a server that needs one) to the sign-in page."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_as_page(request: Request) -> Response:
            try:
                return await handle(request)
            except SluiceError as error:
                return _error_page(request, str(error), status_of(error))
            except Unauthorized as error:
                if request.method == "GET":
                    return RedirectResponse(_sign_in_url(request), status_code=303)
                return _error_page(request, str(error), 401)

        return handle_as_page


def _error_page(request: Request, message: str, status: int) -> Response:
    context = {"title": "Error", "message": message, "status": status, "live": False}
    return render(request, "error", context, status_code=status)


def _sign_in_url(request: Request) -> str:
    """The sign-in page, coming back to this page afterwards."""
    root = request.scope.get("root_path", "")
    here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return f"{root}/sign-in?{urlencode({'next': here})}"


def local_path(target: str) -> str:
    """Only a path on this server: a form cannot send the browser elsewhere."""
    return target if target.startswith("/") and not target.startswith(("//", "/\\")) else "/"
