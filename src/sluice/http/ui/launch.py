"""Launching from the web UI: a form of the launch plan's inputs (typed, with defaults and
fixed inputs), errors shown next to their fields; the same form, filled with an execution's
inputs, relaunches it."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response

from sluice.errors import InputError
from sluice.http.deps import service
from sluice.http.ui import csrf
from sluice.http.ui.errors import PageRoute
from sluice.http.ui.templating import render
from sluice.service import Sluice
from sluice.service.launch_forms import FormErrors, LaunchForm

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]
FIELD_PREFIX = "input."
"""Form fields of inputs are `input.<name>`: no input name collides with the form's own."""


@router.get("/launch-plans/{name}/launch", name="ui_launch_form")
async def launch_form(
    request: Request, sluice: Service, name: str, project: str = "", domain: str = ""
) -> Response:
    form = await sluice.launch_form(name, project=project or None, domain=domain or None)
    return _page(request, form, f"Launch {name}")


@router.post("/launch-plans/{name}/launch", name="ui_launch")
async def launch(request: Request, sluice: Service, name: str) -> Response:
    posted = await csrf.checked_form(request)
    project, domain = posted.get("project") or None, posted.get("domain") or None
    texts = _inputs(posted)
    try:
        launched = await sluice.launch_from_form(
            texts, launch_plan=name, project=project, domain=domain
        )
    except InputError as exc:
        form = await sluice.launch_form(name, project=project, domain=domain)
        return _refused(request, form, f"Launch {name}", texts, exc)
    return _to_execution(request, launched.id)


@router.get("/executions/{execution_id}/relaunch", name="ui_relaunch_form")
async def relaunch_form(request: Request, sluice: Service, execution_id: str) -> Response:
    form = await sluice.relaunch_form(execution_id)
    return _page(request, form, f"Relaunch {form.relaunch_of}")


@router.post("/executions/{execution_id}/relaunch", name="ui_relaunch")
async def relaunch(request: Request, sluice: Service, execution_id: str) -> Response:
    posted = await csrf.checked_form(request)
    texts = _inputs(posted)
    try:
        launched = await sluice.launch_from_form(texts, relaunch_of=execution_id)
    except InputError as exc:
        form = await sluice.relaunch_form(execution_id)
        return _refused(request, form, f"Relaunch {form.relaunch_of}", texts, exc)
    return _to_execution(request, launched.id)


def _inputs(posted: csrf.PostedForm) -> dict[str, str]:
    return {
        k.removeprefix(FIELD_PREFIX): v for k, v in posted.items() if k.startswith(FIELD_PREFIX)
    }


def _page(request: Request, form: LaunchForm, title: str, status: int = 200) -> Response:
    context = {"title": title, "form": form, "prefix": FIELD_PREFIX, "live": False}
    return render(request, "launch", context, status_code=status)


def _refused(
    request: Request, form: LaunchForm, title: str, texts: dict[str, str], error: InputError
) -> Response:
    """The form again, as it was typed, each error next to its field (422)."""
    errors = error.fields if isinstance(error, FormErrors) else {}
    fields = [
        f.model_copy(update={"value": texts.get(f.name, f.value), "error": errors.get(f.name, "")})
        for f in form.fields
    ]
    problem = "" if errors else str(error)
    shown = form.model_copy(update={"fields": fields, "problem": problem})
    return _page(request, shown, title, 422)


def _to_execution(request: Request, execution_id: str) -> Response:
    target = request.url_for("ui_execution", execution_id=execution_id).path
    return RedirectResponse(target, status_code=303)
