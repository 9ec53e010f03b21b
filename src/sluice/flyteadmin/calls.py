"""What every RPC of the Flyte gRPC API goes through: the caller's scope from its credentials,
and sluice's errors as gRPC status codes (named once, here).

Credentials are the HTTP API's: a bearer token (`sluice tokens create --project P`) in the
`authorization` metadata, which flytekit sends once it has one (its ExternalCommand auth mode
runs a command that prints the token). Listening on loopback only, a call without a token acts
unscoped, as the HTTP API does; anywhere else it is refused with UNAUTHENTICATED, which makes
flytekit fetch a token and call again.

No error leaves as UNKNOWN: flytekit reads UNKNOWN (like UNAUTHENTICATED) as a reason to
authenticate again, which would start a browser login for a plain bug.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import grpc

from sluice.errors import (
    AlreadyExistsError,
    BackendUnavailableError,
    InvalidArgumentError,
    MissingDependencyError,
    NotFoundError,
    PermissionDeniedError,
    PluginError,
    SluiceError,
    StoreUnavailableError,
)
from sluice.service import Scope, Sluice

METADATA_KEY = "authorization"
_LOG = logging.getLogger("sluice.flyteadmin")
_CODES: tuple[tuple[type[SluiceError], grpc.StatusCode], ...] = (
    (AlreadyExistsError, grpc.StatusCode.ALREADY_EXISTS),
    (NotFoundError, grpc.StatusCode.NOT_FOUND),
    (PermissionDeniedError, grpc.StatusCode.PERMISSION_DENIED),
    (InvalidArgumentError, grpc.StatusCode.INVALID_ARGUMENT),
    (PluginError, grpc.StatusCode.FAILED_PRECONDITION),
    (MissingDependencyError, grpc.StatusCode.FAILED_PRECONDITION),
    (StoreUnavailableError, grpc.StatusCode.UNAVAILABLE),
    (BackendUnavailableError, grpc.StatusCode.UNAVAILABLE),
)

Request = TypeVar("Request")
Reply = TypeVar("Reply")


class Unauthenticated(Exception):
    pass


def code_of(error: SluiceError) -> grpc.StatusCode:
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.FAILED_PRECONDITION


class Caller:
    """Turns a call's metadata into the caller's scoped service."""

    def __init__(self, sluice: Sluice, *, token_required: bool) -> None:
        self.sluice = sluice
        self.token_required = token_required

    async def service(self, context: grpc.aio.ServicerContext) -> Sluice:
        token = _bearer(context.invocation_metadata() or ())
        if token:
            scope = await self.sluice.tokens.authenticate(token)
            if scope is None:
                raise Unauthenticated("the token is not valid: unknown, revoked or mistyped")
            return self.sluice.scoped(scope)
        if self.token_required:
            raise Unauthenticated(
                "this server needs a token in the 'authorization' metadata ('Bearer <token>'); "
                "an operator creates one with `sluice tokens create --project P`"
            )
        return self.sluice.scoped(Scope())


def _bearer(metadata: Any) -> str:
    for key, value in metadata:
        if key.lower() == METADATA_KEY and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else value.strip()
    return ""


Handler = Callable[[Any, Request, Sluice], Awaitable[Reply]]


def rpc(handler: Handler[Request, Reply]) -> Callable[..., Awaitable[Reply]]:
    """A servicer method from `handler(self, request, service)`: the caller's service, and
    every error as a status code with sluice's message."""

    @functools.wraps(handler)
    async def method(self: Any, request: Request, context: grpc.aio.ServicerContext) -> Reply:
        try:
            service = await self.caller.service(context)
            return await handler(self, request, service)
        except Unauthenticated as exc:
            await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))
        except SluiceError as exc:
            await context.abort(code_of(exc), str(exc))
        except grpc.aio.AbortError:
            raise
        except Exception as exc:  # a bug: INTERNAL, never UNKNOWN (see the module docstring)
            _LOG.exception("flyteadmin %s failed", handler.__name__)
            await context.abort(grpc.StatusCode.INTERNAL, f"{type(exc).__name__}: {exc}")
        raise AssertionError("unreachable: context.abort raises")

    return method
