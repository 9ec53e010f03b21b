"""Errors as RFC 9457 problem details, translated in this one place.

Every error response is `application/problem+json` with `type`, `title`, `status` and
`detail`; `detail` is the message the CLI prints for the same error. The mapping:

| error | status |
| --- | --- |
| InvalidArgumentError (bad value, ambiguous id prefix, bad inputs) and request validation | 422 |
| Unauthorized (missing or bad token) | 401 |
| PermissionDeniedError (read-only token, another project's write), Forbidden (cross-site) | 403 |
| NotFoundError (and anything of another project) | 404 |
| ConflictError (an idempotency key used for another request) | 409 |
| StoreError (unreachable, gone, behind), BackendUnavailableError, MissingDependencyError | 503 |
| anything else | 500, with a fixed detail: never a traceback, a URL or a secret |

422 rather than 400 for bad values, so a value the schema rejects and one the service
rejects read the same to a client.
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from sluice.errors import (
    BackendUnavailableError,
    ConflictError,
    InvalidArgumentError,
    MissingDependencyError,
    NotFoundError,
    PermissionDeniedError,
    SluiceError,
    StoreError,
)
from sluice.service.launch_forms import FormErrors
from sluice.spec.names import shown

log = logging.getLogger(__name__)
PROBLEM_JSON = "application/problem+json"
_TYPES = "https://sluice.dev/problems/"


class Problem(BaseModel):
    """An error response (RFC 9457)."""

    type: str
    title: str
    status: int
    detail: str
    errors: dict[str, str] | None = None
    """For inputs refused field by field: each bad input's name and what is wrong."""


class Unauthorized(Exception):
    """No valid credentials where the server needs them (401)."""


class Forbidden(Exception):
    """Credentials fine, request refused (403): a write from another site."""


_STATUS: list[tuple[type[BaseException], int, str]] = [
    (Unauthorized, 401, "unauthorized"),
    (Forbidden, 403, "forbidden"),
    (PermissionDeniedError, 403, "forbidden"),
    (NotFoundError, 404, "not-found"),
    (ConflictError, 409, "conflict"),
    (InvalidArgumentError, 422, "invalid-argument"),
    (StoreError, 503, "unavailable"),  # unreachable, gone, not a database, schema behind
    (BackendUnavailableError, 503, "unavailable"),
    (MissingDependencyError, 503, "unavailable"),  # the server lacks a driver
]

BAD_BODY = "the request body is not JSON this server can read (malformed, or nested too deeply)"
_TITLES = {
    413: "Content Too Large",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    422: "Invalid argument",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


def _problem(status: int, detail: str, kind: str | None = None) -> Problem:
    return Problem(
        type=_TYPES + (kind or str(status)),
        title=_TITLES.get(status, "Error"),
        status=status,
        detail=detail,
    )


def problem(
    status: int, detail: str, kind: str | None = None, errors: dict[str, str] | None = None
) -> JSONResponse:
    body = _problem(status, detail, kind).model_copy(update={"errors": errors})
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse(
        body.model_dump(exclude_none=True),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def problem_body(exc: Exception) -> Problem:
    """The problem an expected error (a SluiceError, Unauthorized, Forbidden) is."""
    for kind, status, name in _STATUS:
        if isinstance(exc, kind):
            found = _problem(status, str(exc), name)
            if isinstance(exc, FormErrors):
                found = found.model_copy(update={"errors": exc.fields})
            return found
    return _problem(422, str(exc), "invalid-argument")  # any other SluiceError: bad input


def _known(_: Request, exc: Exception) -> JSONResponse:
    if not isinstance(exc, SluiceError | Unauthorized | Forbidden):
        return _unexpected(_, exc)
    body = problem_body(exc)
    return problem(body.status, body.detail, body.type.removeprefix(_TYPES), body.errors)


def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.error("unexpected error serving a request", exc_info=exc)
    return problem(500, "the server failed to handle this request; see its log", "internal")


def http_problem(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 400:  # FastAPI could not read the body: a bad value, as any other
        return problem(422, BAD_BODY, "invalid-argument")
    if exc.status_code == 413:
        return problem(413, str(exc.detail), "too-large")
    return problem(exc.status_code, str(exc.detail))


def _validation(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return problem(422, _validation_detail(exc.errors()), "invalid-argument")


def _validation_detail(errors: Any) -> str:
    """One line naming each bad field and why, e.g. `query.limit: Input should be ...`."""
    parts = []
    for error in errors:
        where = ".".join(str(p) for p in error.get("loc", ()))
        given = error.get("input")
        got = "" if given is None or isinstance(given, dict) else f", got {shown(given)}"
        parts.append(f"{where}: {error.get('msg', 'invalid')}{got}")
    return "; ".join(parts) or "invalid request"


def install(app: FastAPI) -> None:
    """Route every error through one of the handlers above."""
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(HTTPException, http_problem)
    for kind in (SluiceError, Unauthorized, Forbidden):
        app.add_exception_handler(kind, _known)
    app.add_exception_handler(Exception, _unexpected)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": Problem, "description": _TITLES[status]}
    for status in (401, 403, 404, 413, 422, 503)
}
"""Documented on every API route, so clients and the schema tests know the error shape."""
