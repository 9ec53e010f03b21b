"""A node's log on a page of its own (the full view, taller, more lines kept) and as a text
file to download: every line with its time and stream, read a page at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse

from sluice.http.deps import service
from sluice.http.ui.errors import PageRoute
from sluice.http.ui.templating import render
from sluice.service import Sluice
from sluice.service.logs import LogLineView

router = APIRouter(route_class=PageRoute)
Service = Annotated[Sluice, Depends(service)]
FULL_VIEW_LINES = 50_000
"""Lines the full view keeps in the page."""
DOWNLOAD_PAGE = 5_000


@router.get("/executions/{execution_id}/logs", name="ui_log_page")
async def log_page(
    request: Request, sluice: Service, execution_id: str, node: str, attempt: int | None = None
) -> Response:
    found = await sluice.execution(execution_id, whole=False)
    selected = next((n for n in found.nodes if n.node == node), None)
    if selected is None:
        await sluice.attempts(found.id, node)  # its NotFoundError names the nodes
    context = {
        "title": f"Log of {node}",
        "execution": found,
        "selected": selected,
        "full_view": True,
        "max_log_lines": FULL_VIEW_LINES,
        "wanted_attempt": attempt,
        "live": False,
    }
    return render(request, "logs", context)


@router.get("/executions/{execution_id}/logs.txt", name="ui_log_text")
async def log_text(
    sluice: Service, execution_id: str, node: str, attempt: int | None = None
) -> Response:
    """Every stored line, `time stream text`, as a file named after the node and attempt."""
    first = await sluice.log_page(execution_id, node, attempt=attempt, limit=DOWNLOAD_PAGE)
    name = f"{execution_id}-{node}" + (f"-attempt{attempt}" if attempt else "") + ".log"
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    headers = {"Content-Disposition": f'attachment; filename="{safe}"'}
    lines = _lines(sluice, execution_id, node, attempt, first.lines, first.after, first.more)
    return StreamingResponse(lines, media_type="text/plain; charset=utf-8", headers=headers)


async def _lines(
    sluice: Sluice,
    execution_id: str,
    node: str,
    attempt: int | None,
    lines: list[LogLineView],
    after: str | None,
    more: bool,
) -> AsyncIterator[str]:
    while True:
        yield "".join(_line(line) for line in lines)
        if not more:
            return
        page = await sluice.log_page(
            execution_id, node, attempt=attempt, after=after, limit=DOWNLOAD_PAGE
        )
        lines, after, more = page.lines, page.after, page.more


def _line(line: LogLineView) -> str:
    at = line.at.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"{at} attempt {line.attempt} {line.stream} {line.text}\n"
