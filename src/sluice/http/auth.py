"""Who may call: bearer tokens, the loopback exception, and writes only from this site.

- A server listening on loopback only (127.0.0.0/8, ::1, localhost) lets callers without a
  token act unscoped: they are this machine's users. It answers only requests whose Host
  names loopback, so a web page cannot reach it through a DNS name rebound to 127.0.0.1.
- Listening anywhere else, every request needs a token (401 otherwise).
- A token (`Authorization: Bearer <token>`, or the `sluice_token` cookie a browser keeps)
  limits the caller to its projects, read-only or not (see service/tokens.py).
- A write (POST, PUT, PATCH, DELETE) not authorized by an Authorization header, so one a
  browser may send on its own (a cookie, or no credential on loopback), is refused when it
  comes from another site (Sec-Fetch-Site, else Origin against Host): cross-site request
  forgery cannot abort an execution. A bearer header is never sent by a browser on its own.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from fastapi import Request

from sluice.http.deps import Authorize
from sluice.http.problems import Forbidden, Unauthorized
from sluice.service import Scope, Sluice

COOKIE = "sluice_token"
LOCAL_USER = "a local user"
"""Who a caller without a token on a loopback server is, in the audit trail."""
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
_NEEDS_TOKEN = (
    "this server needs a token: send 'Authorization: Bearer <token>' "
    "(an operator creates one with `sluice tokens create --project P`)"
)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost (a name or an address, with no port)."""
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def authorization(sluice: Sluice, *, bind_host: str) -> Authorize:
    """The authorize function for a server listening on `bind_host` (its `needs_token` says
    whether a request without one is refused)."""
    return token_auth(sluice, required=not is_loopback(bind_host))


def token_auth(sluice: Sluice, *, required: bool) -> Authorize:
    """Tokens always count when given; without one, `required` decides (401 or unscoped)."""

    async def authorize(request: Request) -> Scope:
        header = request.headers.get("authorization")
        token = _bearer(header) if header is not None else request.cookies.get(COOKIE)
        if header is None:
            _refuse_cross_site_write(request)
        if token:
            scope = await sluice.tokens.authenticate(token)
            if scope is None:
                raise Unauthorized("the token is not valid: unknown, revoked or mistyped")
            return scope
        if required:
            raise Unauthorized(_NEEDS_TOKEN)
        _require_loopback_host(request)
        return Scope(who=LOCAL_USER)

    authorize.needs_token = required  # type: ignore[attr-defined]
    return authorize


def needs_token(authorize: Authorize) -> bool:
    """Whether this server refuses a request without a token (False on loopback)."""
    return bool(getattr(authorize, "needs_token", False))


def _bearer(header: str) -> str:
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("the Authorization header must read 'Bearer <token>'")
    return token.strip()


def _refuse_cross_site_write(request: Request) -> None:
    if request.method in _SAFE_METHODS:
        return
    site = request.headers.get("sec-fetch-site")
    if site is not None:
        if site not in ("same-origin", "none"):
            raise Forbidden(f"a {request.method} from another site ({site}) is refused")
        return
    origin = request.headers.get("origin")
    if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
        raise Forbidden(f"a {request.method} from {origin} is refused: not this site")


def _require_loopback_host(request: Request) -> None:
    host = urlsplit(f"//{request.headers.get('host', '')}").hostname or ""
    if not is_loopback(host):
        raise Forbidden(
            f"Host {host!r} is not a loopback name: without a token this server answers "
            "only requests to localhost, 127.0.0.1 or [::1]"
        )
