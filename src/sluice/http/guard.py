"""Refuse before any route: control characters in a request's path and query (no name, id or
filter has one, and PostgreSQL cannot even compare text holding a NUL, so such a value would
otherwise surface as a database error instead of a bad request), and bodies over the
configured size (a 50 MB body was read and parsed)."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from sluice.http.problems import problem


def _control_character(scope: Scope) -> str | None:
    raw = scope.get("path", "").encode("utf-8", "surrogateescape")
    raw += unquote_to_bytes(scope.get("query_string", b""))
    for byte in raw:
        if byte < 0x20 or byte == 0x7F:
            return f"\\x{byte:02x}"
    return None


class RefuseControlCharacters:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = _control_character(scope) if scope["type"] == "http" else None
        if found is None:
            await self.app(scope, receive, send)
            return
        detail = f"the request's path or query holds the control character {found}"
        await problem(422, detail, "invalid-argument")(scope, receive, send)


class LimitBodies:
    """413 for a body over `limit` bytes: at once when its Content-Length says so, else as
    soon as the bytes read pass it (a chunked body), through the app's error handlers."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if _declared_length(scope) > self.limit:
            await problem(413, _too_large(self.limit), "too-large")(scope, receive, send)
            return
        read = 0

        async def limited() -> Message:
            nonlocal read
            message = await receive()
            read += len(message.get("body", b""))
            if read > self.limit:
                raise HTTPException(413, _too_large(self.limit))
            return message

        await self.app(scope, limited, send)


def _declared_length(scope: Scope) -> int:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            return int(value) if value.isdigit() else 0
    return 0


def _too_large(limit: int) -> str:
    return f"the request body is larger than {limit:,} bytes (payloads.max_request_bytes)"
