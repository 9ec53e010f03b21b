"""What every HTTP route depends on: the caller's service, scoped to what its token allows.

`app.state.sluice` holds the process's unscoped `Sluice`; `app.state.authorize` turns a
request into the caller's `Scope` (raising `Unauthorized` when a token is required and
missing or wrong). A route never touches the runtime itself.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import Request

from sluice.service import Scope, Sluice

Authorize = Callable[[Request], Scope]


def open_scope(_: Request) -> Scope:
    """No authentication: what a server listening on loopback only allows."""
    return Scope()


def service(request: Request) -> Sluice:
    """The caller's view of the service (a FastAPI dependency)."""
    sluice: Sluice = request.app.state.sluice
    authorize: Authorize = getattr(request.app.state, "authorize", open_scope)
    return sluice.scoped(authorize(request))
