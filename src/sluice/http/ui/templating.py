"""The Jinja environment of the web UI and the filters its templates use to show values the
way a reader wants them: times in UTC, durations in seconds or minutes, errors as text."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from sluice.http.auth import COOKIE as TOKEN_COOKIE
from sluice.http.ui import csrf
from sluice.spec.phases import ExecutionPhase

HERE = Path(__file__).parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
STATIC_PATH = "/static/ui"
TERMINAL_PHASES = frozenset(p.value for p in ExecutionPhase if p.is_terminal)
FRAGMENT_HEADER = "hx-request"
"""htmx sends it on its requests: a polled page answers with its live fragment only."""


def when(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%Y-%m-%d %H:%M:%S UTC")


def clock_time(value: datetime | None) -> str:
    return "" if value is None else value.strftime("%H:%M:%S")


def duration(seconds: float | None) -> str:
    if seconds is None:
        return ""
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, rest = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{rest:02d}s"


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def error_text(error: dict[str, Any] | None) -> str:
    """An error as a reader wants it: what failed and whose fault (USER or SYSTEM), then the
    message (a task's traceback, for a Python task) with its line breaks as they are."""
    if not error:
        return ""
    code = error.get("code") or error.get("type") or ""
    kind = error.get("kind") or ""
    head = f"{code} ({kind})" if code and kind else str(code or kind)
    parts = [head, str(error.get("message") or ""), str(error.get("traceback") or "")]
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
    """A schedule in words: "cron 0 3 * * * (UTC)" or "every 30.0s"."""
    if not schedule:
        return "none"
    if schedule.get("cron"):
        text = f"cron {schedule['cron']} ({schedule.get('timezone') or 'UTC'})"
    else:
        text = f"every {duration(schedule.get('fixed_rate'))}"
    catch_up = schedule.get("catch_up")
    return text + (f", catch-up: {catch_up}" if catch_up else "")


def phase_class(phase: str | None) -> str:
    return (phase or "").lower().replace("_", "-")


def _environment() -> Jinja2Templates:
    templates = Jinja2Templates(directory=str(TEMPLATES_DIR))
    filters = templates.env.filters
    filters.update(
        when=when, clock=clock_time, duration=duration, pretty=pretty, error_text=error_text
    )
    filters.update(phase_class=phase_class, policy=policy_text, schedule=schedule_text)
    return templates


TEMPLATES = _environment()


def render(
    request: Request, page: str, context: dict[str, Any], status_code: int = 200
) -> HTMLResponse:
    """`page`.html, or its live fragment `_page`.html when htmx polls it (`status_code`
    applies to the fragment only: a whole page is always 200 unless it is an error)."""
    fragment = bool(request.headers.get(FRAGMENT_HEADER))
    name = f"_{page}.html" if fragment else f"{page}.html"
    if not fragment and 200 < status_code < 300:
        status_code = 200
    token = csrf.token(request)
    response = TEMPLATES.TemplateResponse(
        request, name, {**_page_context(request, page, token), **context}, status_code=status_code
    )
    csrf.remember(request, response, token)
    return response


def _page_context(request: Request, page: str, token: str) -> dict[str, Any]:
    root = request.scope.get("root_path", "")
    path = request.url.path.removeprefix(root) or "/"
    query = request.url.query
    return {
        "root": root,
        "static": root + STATIC_PATH,
        "section": "/" if path.startswith("/executions") else "/" + path.strip("/").split("/")[0],
        "live_url": request.url.path + (f"?{query}" if query else ""),
        "fragment": f"_{page}.html",
        "csrf_field": csrf.FIELD,
        "csrf_token": token,
        "terminal_phases": TERMINAL_PHASES,
        "live": True,
        "poll": 1,
        "signed_in": TOKEN_COOKIE in request.cookies,
    }
