"""Pages of executions: the list (search, filters, pages both ways, bulk abort), one execution
with its graph, timeline, nodes and the selected node (attempts, values, log), and the form
posts that abort or retry."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from sluice.errors import InvalidArgumentError
from sluice.http.deps import service
from sluice.http.ui import csrf, gantt, graph
from sluice.http.ui.errors import PageRoute, local_path
from sluice.http.ui.templating import TERMINAL_PHASES, render
from sluice.service import Sluice
from sluice.service import models as m
from sluice.service.executions import ExecutionFilter, parse_phases
from sluice.spec.phases import ExecutionPhase

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]
PAGE_SIZES = (25, 50, 100, 200)
NODES_PER_SECOND = 100
POLL_MAX = 10
MAX_LOG_LINES = 5000
"""Lines a log panel keeps in the page (the oldest go first; the download has them all)."""
UI_ABORT = "aborted from the web UI"


@router.get("/", name="ui_executions")
async def executions_page(
    request: Request,
    sluice: Service,
    q: str = "",
    phase: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI copies defaults)
    launch_plan: str = "",
    project: str = "",
    domain: str = "",
    created_after: str = "",
    created_before: str = "",
    cursor: str | None = None,
    limit: int = 50,
) -> Response:
    where = ExecutionFilter(
        phases=parse_phases(phase),
        projects=[project] if project else None,
        domain=domain or None,
        launch_plan_prefix=launch_plan or None,
        created_after=_utc_field("created after", created_after),
        created_before=_utc_field("created before", created_before),
        text=q.strip() or None,
    )
    size = min(max(limit, 1), PAGE_SIZES[-1])
    listed = await sluice.executions(where, limit=size, cursor=cursor or None)
    context = {
        "title": "Executions",
        "page": listed,
        "phases": [p.value for p in ExecutionPhase],
        "chosen": {p.upper() for p in phase},
        "q": q,
        "launch_plan": launch_plan,
        "project": project,
        "domain": domain,
        "created_after": created_after,
        "created_before": created_before,
        "limit": size,
        "filtered": bool(q or phase or launch_plan or project or domain)
        or bool(created_after or created_before),
        "next_query": _with_cursor(request, listed.next_cursor),
        "prev_query": _with_cursor(request, listed.prev_cursor),
    }
    return render(request, "executions", context)


def _utc_field(what: str, text: str) -> datetime | None:
    """A `datetime-local` field's value, read as UTC."""
    if not text:
        return None
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgumentError(f"{what}: {text!r} is not a date and time") from None
    return found.replace(tzinfo=UTC) if found.tzinfo is None else found


def _with_cursor(request: Request, cursor: str | None) -> str:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    return urlencode([*kept, ("cursor", cursor or "")])


@router.get("/executions/{execution_id}", name="ui_execution")
async def execution_page(
    request: Request, sluice: Service, execution_id: str, node: str = ""
) -> Response:
    found = await sluice.execution(execution_id, whole=False)
    selected = _selected(found, node)
    context = {
        "title": f"Execution {found.id}",
        "execution": found,
        "graph": graph.layout(found.nodes),
        "timeline": gantt.timeline(found.nodes, datetime.now(UTC)),
        "selected": selected,
        "reservation": await _reservation_of(sluice, found, selected),
        "logs_kept": sluice.settings.logs.enabled,
        "max_log_lines": MAX_LOG_LINES,
        "wanted_attempt": None,
        "poll": poll_seconds(len(found.nodes)),
    }
    return render(request, "execution", context, final=found.phase in TERMINAL_PHASES)


def poll_seconds(nodes: int) -> int:
    """Every second; a second more per hundred nodes past the first hundred, as a big
    execution's page costs more to build (up to POLL_MAX)."""
    return min(1 + max(nodes - 1, 0) // NODES_PER_SECOND, POLL_MAX)


@router.post("/executions/{execution_id}/abort", name="ui_abort")
async def abort(request: Request, sluice: Service, execution_id: str) -> Response:
    form = await csrf.checked_form(request)
    aborted = await sluice.abort(execution_id, form.get("reason") or UI_ABORT, wait=False)
    target = form.get("next") or request.url_for("ui_execution", execution_id=aborted.id).path
    return RedirectResponse(local_path(target), status_code=303)


@router.post("/executions/bulk-abort", name="ui_bulk_abort")
async def bulk_abort(request: Request, sluice: Service) -> Response:
    form = await csrf.checked_form(request)
    ids = form.get_all("execution")
    if not ids:
        raise InvalidArgumentError("select at least one execution to abort")
    await sluice.abort_many(ids, UI_ABORT)
    return RedirectResponse(local_path(form.get("next") or "/"), status_code=303)


@router.post("/executions/{execution_id}/retry", name="ui_retry")
async def retry(request: Request, sluice: Service, execution_id: str) -> Response:
    await csrf.checked_form(request)
    retried = await sluice.retry(execution_id)
    target = request.url_for("ui_execution", execution_id=retried.id).path
    return RedirectResponse(target, status_code=303)


def _selected(execution: m.Execution, wanted: str) -> m.NodeExecution | None:
    """The node asked for; else the first one running, else failed, else simply the first."""
    nodes = execution.nodes
    if wanted:
        return next((n for n in nodes if n.node == wanted), None)
    for phase in ("RUNNING", "FAILED"):
        found = next((n for n in nodes if n.phase == phase), None)
        if found:
            return found
    return nodes[0] if nodes else None


async def _reservation_of(
    sluice: Sluice, execution: m.Execution, node: m.NodeExecution | None
) -> m.Reservation | None:
    """The cache reservation the node holds or waits for, if any."""
    if node is None or node.reservation_status == "DISABLED" or node.phase != "RUNNING":
        return None
    me = f"{execution.id}/{node.node}"
    return next(
        (r for r in await sluice.reservations() if r.owner.startswith(me) or me in r.waiters),
        None,
    )
