"""Errors as pages: a route of the UI that raises a SluiceError answers with a page saying
what went wrong (the error's own message names the bad value) and the matching status."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from sluice.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError, SluiceError
from sluice.http.ui.templating import render

_STATUS: list[tuple[type[SluiceError], int]] = [
    (NotFoundError, 404),
    (PermissionDeniedError, 403),
    (InvalidArgumentError, 422),  # as the API answers it
]


def status_of(error: SluiceError) -> int:
    return next((code for kind, code in _STATUS if isinstance(error, kind)), 500)


class PageRoute(APIRoute):
    """An APIRoute whose SluiceErrors become error pages."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handle = super().get_route_handler()

        async def handle_as_page(request: Request) -> Response:
            try:
                return await handle(request)
            except SluiceError as error:
                context = {"title": "Error", "message": str(error), "status": status_of(error)}
                return render(request, "error", context, status_code=status_of(error))

        return handle_as_page
