"""CSRF protection of the UI's forms by a double-submit cookie: each page sets a random token
in a SameSite=Strict, HttpOnly cookie and renders the same token in every form; a POST is
accepted only when its form field equals its cookie. Another site can make a browser send the
cookie (it cannot, being Strict, but older browsers may) yet cannot read it to forge the field.
A request the browser marks cross-site (Sec-Fetch-Site) is refused outright."""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import parse_qs

from fastapi import Request, Response

from sluice.errors import PermissionDeniedError

COOKIE = "sluice_csrf"
FIELD = "csrf_token"
_TOKEN_BYTES = 32


class CsrfError(PermissionDeniedError):
    """A UI form post without the token of the page it came from."""


def token(request: Request) -> str:
    """The caller's token: the one its cookie carries, or a new one."""
    return request.cookies.get(COOKIE) or secrets.token_urlsafe(_TOKEN_BYTES)


def remember(request: Request, response: Response, value: str) -> None:
    if request.cookies.get(COOKIE) != value:
        response.set_cookie(COOKIE, value, httponly=True, samesite="strict", path="/")


class PostedForm(dict[str, str]):
    """A posted form: each field's first value, and every value of a repeated field."""

    def __init__(self, values: dict[str, list[str]]) -> None:
        super().__init__({k: v[0] for k, v in values.items() if v})
        self._all = values

    def get_all(self, name: str) -> list[str]:
        return list(self._all.get(name, []))


async def checked_form(request: Request, multi: tuple[str, ...] = ()) -> PostedForm:
    """The posted form's fields, once its CSRF token matches the cookie; else CsrfError."""
    if request.headers.get("sec-fetch-site") == "cross-site":
        raise CsrfError("a form posted from another site is refused")
    body = (await request.body()).decode(errors="replace")
    fields = PostedForm(parse_qs(body, keep_blank_values=True))
    cookie = request.cookies.get(COOKIE, "")
    sent = fields.get(FIELD, "")
    if not cookie or not hmac.compare_digest(cookie.encode(), sent.encode()):
        raise CsrfError("the form's CSRF token is missing or stale: reload the page and retry")
    return fields
