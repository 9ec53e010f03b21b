"""Task logs: an execution's lines merged by time, and a node's lines a page at a time (resume
after a line's `position`), optionally of one attempt and one stream."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Query

from sluice.http.api.base import Service, api_routes
from sluice.service.logs import LogLineView, LogPageView

router = api_routes(tags=["logs"])

StreamName = Literal["stdout", "stderr"]


@router.get("/executions/{execution_id}/logs")
async def execution_logs(
    sluice: Service,
    execution_id: str,
    stream: StreamName | None = None,
    tail: Annotated[int | None, Query(ge=0, le=100_000)] = None,
) -> list[LogLineView]:
    """Every node's lines, merged by time (the last `tail` ones if given)."""
    return await sluice.logs(execution_id, stream=stream, tail=tail)


@router.get("/executions/{execution_id}/nodes/{node_id}/logs")
async def node_logs(
    sluice: Service,
    execution_id: str,
    node_id: str,
    attempt: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    stream: StreamName | None = None,
    after: Annotated[str | None, Query(max_length=64, description="attempt:segment:line")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
) -> LogPageView:
    """One node's lines in order (attempt by attempt, or one `attempt`), a page at a time:
    pass the page's `after` back to read on; `more` says whether more lines are stored."""
    return await sluice.log_page(
        execution_id, node_id, attempt=attempt, after=after, limit=limit, stream=stream
    )
