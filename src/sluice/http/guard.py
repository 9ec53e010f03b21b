"""Refuse control characters in a request's path and query before any route sees them: no
name, id or filter has one, and PostgreSQL cannot even compare text holding a NUL, so such a
value would otherwise surface as a database error instead of a bad request."""

from __future__ import annotations

from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Receive, Scope, Send

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
