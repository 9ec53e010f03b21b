"""Pages of executions: the list with its filters, one execution with its graph, timeline
and selected node, and the abort button's form post."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from sluice.errors import NotFoundError
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
PAGE_SIZE = 50
NODES_PER_SECOND = 100
POLL_MAX = 10
STOP_POLLING = 286
"""htmx stops polling on this status (after swapping in the final state): an ended
execution's page no longer changes."""
LOG_TAIL = 200
"""Last lines of a node's log shown (re-read at each poll, so the panel follows the log)."""


@router.get("/", response_class=HTMLResponse, name="ui_executions")
async def executions_page(
    request: Request,
    sluice: Service,
    phase: Annotated[list[str], Query()] = [],  # noqa: B006 (FastAPI copies defaults)
    launch_plan: str = "",
    project: str = "",
    cursor: str | None = None,
) -> Response:
    where = ExecutionFilter(
        phases=parse_phases(phase),
        projects=[project] if project else None,
        launch_plan=launch_plan or None,
    )
    listed = await sluice.executions(where, limit=PAGE_SIZE, cursor=cursor or None)
    context = {
        "title": "Executions",
        "page": listed,
        "phases": [p.value for p in ExecutionPhase],
        "chosen": {p.upper() for p in phase},
        "launch_plan": launch_plan,
        "project": project,
        "next_query": _with_cursor(request, listed.next_cursor),
    }
    return render(request, "executions", context)


def _with_cursor(request: Request, cursor: str | None) -> str:
    kept = [(k, v) for k, v in request.query_params.multi_items() if k != "cursor"]
    return urlencode([*kept, ("cursor", cursor or "")])


@router.get("/executions/{execution_id}", response_class=HTMLResponse, name="ui_execution")
async def execution_page(
    request: Request, sluice: Service, execution_id: str, node: str = ""
) -> Response:
    found = await sluice.execution(execution_id, events=True)
    selected = _selected(found, node)
    context = {
        "title": f"Execution {found.id}",
        "execution": found,
        "graph": graph.layout(found.nodes),
        "timeline": gantt.timeline(found.nodes, datetime.now(UTC)),
        "selected": selected,
        "reservation": await _reservation_of(sluice, found, selected),
        "quota_waits": await _quota_waits(sluice, found, selected),
        "log": await _log_tail(sluice, found, selected),
        "node_param": node,
        "poll": poll_seconds(len(found.nodes)),
    }
    ended = found.phase in TERMINAL_PHASES
    return render(request, "execution", context, status_code=STOP_POLLING if ended else 200)


def poll_seconds(nodes: int) -> int:
    """Every second; a second more per hundred nodes past the first hundred, as a big
    execution's page costs more to build (up to POLL_MAX)."""
    return min(1 + max(nodes - 1, 0) // NODES_PER_SECOND, POLL_MAX)


@router.post("/executions/{execution_id}/abort", name="ui_abort")
async def abort(request: Request, sluice: Service, execution_id: str) -> Response:
    form = await csrf.checked_form(request)
    aborted = await sluice.abort(
        execution_id, form.get("reason") or "aborted from the web UI", wait=False
    )
    target = form.get("next") or request.url_for("ui_execution", execution_id=aborted.id).path
    return RedirectResponse(local_path(target), status_code=303)


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


async def _quota_waits(
    sluice: Sluice, execution: m.Execution, node: m.NodeExecution | None
) -> list[tuple[m.Quota, m.Waiter]]:
    """Each quota the node waits in, with its place in the queue (holders are in the quota)."""
    if node is None or node.task_phase != "WAITING_FOR_RESOURCES":
        return []
    return [
        (quota, waiter)
        for quota in await sluice.quotas()
        for waiter in quota.waiters
        if waiter.execution_id == execution.id and waiter.node_id == node.node
    ]


async def _log_tail(
    sluice: Sluice, execution: m.Execution, node: m.NodeExecution | None
) -> str | None:
    """The last lines of the node's current attempt; None when the service keeps no logs."""
    read = getattr(sluice, "logs", None)  # the task logs verb
    if node is None or read is None or node.phase == "NOT_STARTED":
        return None
    try:
        lines = await read(execution.id, node.node, attempt=node.attempt, tail=LOG_TAIL)
    except NotFoundError:  # the attempt has printed nothing yet
        return ""
    return "\n".join(line.text for line in lines[-LOG_TAIL:])
