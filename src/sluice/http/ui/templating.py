"""The Jinja environment of the web UI, the filters its templates use to show values the way
a reader wants them (times as `<time>` the page shows relative, durations down to the
millisecond, errors as text), and `render`: a whole page, or its live fragment when the page's
script polls it (with an ETag, so an unchanged fragment is a 304)."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request, Response
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup

from sluice.http.auth import COOKIE as TOKEN_COOKIE
from sluice.http.auth import needs_token
from sluice.http.ui import csrf
from sluice.http.ui.gantt import seconds
from sluice.http.ui.graph import state_of
from sluice.service import models as m
from sluice.spec.phases import ExecutionPhase

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
STATIC_PATH = "/static/ui"
TERMINAL_PHASES = frozenset(p.value for p in ExecutionPhase if p.is_terminal)
FRAGMENT_HEADER = "x-sluice-fragment"
"""The page's script sends it when it polls: the answer is the live fragment only."""
FINAL_HEADER = "X-Sluice-Final"
"""On a fragment: the page will not change any more (an ended execution); stop polling."""
ABSOLUTE = "%Y-%m-%d %H:%M:%S UTC"


def when(value: datetime | None) -> str:
    return "" if value is None else value.strftime(ABSOLUTE)


def time_tag(value: datetime | None) -> Markup:
    """A `<time>` the page's script shows as "3 min ago", the absolute time on hover (and as
    its text without the script)."""
    if value is None:
        return Markup("")
    absolute = when(value)
    return Markup('<time data-rel datetime="{}" data-abs="{}" title="{}">{}</time>').format(
        value.isoformat(), absolute, absolute, absolute
    )


def clock_time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%H:%M:%S.") + f"{value.microsecond // 1000:03d}"


def duration(value: float | None) -> str:
    return seconds(value)


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def error_head(error: dict[str, Any] | None) -> str:
    """An error's one line: what failed, whose fault, and the message's last line."""
    if not error:
        return ""
    code = error.get("code") or error.get("type") or ""
    kind = error.get("kind") or ""
    head = f"{code} ({kind})" if code and kind else str(code or kind)
    lines = [line for line in str(error.get("message") or "").strip().splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    return f"{head}: {last}" if head and last and last != head else head or last


def error_text(error: dict[str, Any] | None) -> str:
    """An error as a reader wants it: what failed and whose fault (USER or SYSTEM), then the
    message (a task's traceback, for a Python task) with its line breaks as they are; a
    traceback the message already holds is not repeated."""
    if not error:
        return ""
    code = error.get("code") or error.get("type") or ""
    kind = error.get("kind") or ""
    head = f"{code} ({kind})" if code and kind else str(code or kind)
    message = str(error.get("message") or "")
    trace = str(error.get("traceback") or "")
    if trace.strip() and trace.strip() in message:
        trace = ""
    parts = [head, message, trace]
    text = "\n".join(p.rstrip() for p in parts if p.strip())
    return text or pretty(error)


def policy_text(policy: dict[str, Any] | None) -> str:
    """A concurrency policy in words: "WAIT, at most 1 active, 5 pending"."""
    if not policy:
        return "none"
    text = f"{policy.get('behavior')}, at most {policy.get('max')} active"
    pending = policy.get("max_pending")
    return text + (f", {pending} pending" if pending is not None else "")


def schedule_text(schedule: dict[str, Any] | None) -> str:
    """A schedule in words: "cron 0 3 * * * (UTC)" or "every 30.0 s"."""
    if not schedule:
        return "none"
    if schedule.get("cron"):
        text = f"cron {schedule['cron']} ({schedule.get('timezone') or 'UTC'})"
    else:
        text = f"every {duration(schedule.get('fixed_rate'))}"
    catch_up = schedule.get("catch_up")
    return text + (f", catch-up: {catch_up}" if catch_up else "")


def phase_class(phase: str | None) -> str:
    return (phase or "unknown").lower().replace("_", "-")


def words(phase: str | None) -> str:
    return (phase or "").lower().replace("_", " ")


def _environment() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    filters = templates.env.filters
    filters.update(when=when, time=time_tag, clock=clock_time, duration=duration, pretty=pretty)
    filters.update(error_text=error_text, error_head=error_head, words=words, state=state_of)
    filters.update(phase_class=phase_class, policy=policy_text, schedule=schedule_text)
    return templates


TEMPLATES = _environment()


def render(
    request: Request,
    page: str,
    context: dict[str, Any],
    status_code: int = 200,
    *,
    final: bool = False,
) -> Response:
    """`page`.html, or its live fragment `_page`.html when the page's script polls it (a 304
    when it is what the script has; `final` tells the script to stop polling)."""
    fragment = bool(request.headers.get(FRAGMENT_HEADER))
    name = f"_{page}.html" if fragment else f"{page}.html"
    token = csrf.token(request)
    full = {**_page_context(request, page, token), **context, "final": final}
    response = TEMPLATES.TemplateResponse(request, name, full, status_code=status_code)
    csrf.remember(request, response, token)
    if fragment:
        return _fragment(request, response, final)
    return response


def _fragment(request: Request, response: HTMLResponse, final: bool) -> Response:
    tag = '"' + hashlib.sha256(bytes(response.body)).hexdigest()[:32] + '"'
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    if final:
        headers[FINAL_HEADER] = "1"
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    response.headers.update(headers)
    return response


def caller_of(request: Request) -> m.Caller | None:
    """Who the page is for, when its route asked the service (deps.service keeps it)."""
    sluice = getattr(request.state, "sluice", None)
    return None if sluice is None else sluice.whoami()


def _page_context(request: Request, page: str, token: str) -> dict[str, Any]:
    root = request.scope.get("root_path", "")
    path = request.url.path.removeprefix(root) or "/"
    query = request.url.query
    caller = caller_of(request)
    return {
        "root": root,
        "static": root + STATIC_PATH,
        "api": root + "/api/v1",
        "section": "/" if path.startswith("/executions") else "/" + path.strip("/").split("/")[0],
        "live_url": request.url.path + (f"?{query}" if query else ""),
        "fragment": f"_{page}.html",
        "csrf_field": csrf.FIELD,
        "csrf_token": token,
        "terminal_phases": TERMINAL_PHASES,
        "live": True,
        "poll": 1,
        "caller": caller,
        "may_write": caller is not None and caller.may_write,
        "needs_token": needs_token(request.app.state.authorize)
        if hasattr(request.app.state, "authorize")
        else False,
        "signed_in": TOKEN_COOKIE in request.cookies,
    }
