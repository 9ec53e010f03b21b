"""Signing in: on a server that needs API tokens, a browser keeps its token in the
`sluice_token` cookie (HttpOnly, SameSite=Strict), which the app's authorization reads like a
bearer header. The sign-in form checks the token before setting the cookie."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluice.http.auth import COOKIE
from sluice.http.ui import csrf
from sluice.http.ui.errors import PageRoute, local_path
from sluice.http.ui.templating import render
from sluice.service import Sluice

router = APIRouter(route_class=PageRoute)


@router.get("/sign-in", response_class=HTMLResponse, name="ui_sign_in")
async def sign_in_page(
    request: Request, then: Annotated[str, Query(alias="next")] = "/"
) -> Response:
    return _form(request, then, "")


@router.post("/sign-in", name="ui_sign_in_post")
async def sign_in(request: Request) -> Response:
    form = await csrf.checked_form(request)
    token, target = form.get("token", "").strip(), local_path(form.get("next", "/"))
    sluice: Sluice = request.app.state.sluice
    if not token or await sluice.tokens.authenticate(token) is None:
        return _form(request, target, "That token is not valid: unknown, revoked or mistyped.")
    response = RedirectResponse(target, status_code=303)
    secure = request.url.scheme == "https"
    response.set_cookie(COOKIE, token, httponly=True, samesite="strict", secure=secure, path="/")
    return response


@router.post("/sign-out", name="ui_sign_out")
async def sign_out(request: Request) -> Response:
    await csrf.checked_form(request)
    response = RedirectResponse(request.scope.get("root_path", "") + "/", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


def _form(request: Request, target: str, problem: str) -> Response:
    context = {"title": "Sign in", "next": local_path(target), "problem": problem, "live": False}
    return render(request, "sign_in", context, status_code=401 if problem else 200)
