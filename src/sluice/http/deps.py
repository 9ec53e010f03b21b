"""What every HTTP route depends on: the caller's service, scoped to what its credentials allow.

`app.state.sluice` holds the process's unscoped `Sluice`; `app.state.authorize` turns a
request into the caller's `Scope` (raising `Unauthorized` when a token is required and
missing or wrong, `Forbidden` for a cross-site write; see auth.py). A route never touches
the runtime itself.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request

from sluice.service import Scope, Sluice

Authorize = Callable[[Request], Awaitable[Scope]]


async def open_scope(_: Request) -> Scope:
    """No authentication: what a server listening on loopback only allows (tests use it)."""
    return Scope()


async def service(request: Request) -> Sluice:
    """The caller's view of the service (a FastAPI dependency)."""
    sluice: Sluice = request.app.state.sluice
    authorize: Authorize = getattr(request.app.state, "authorize", open_scope)
    scoped = sluice.scoped(await authorize(request))
    request.state.sluice = scoped  # the UI's header says who is signed in
    return scoped
