"""Task logs: an execution's lines merged by time (or its last ones), a node's lines a page at a
time, and an execution's, a node's or an attempt's lines followed live as server-sent events
until it ends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import Query
from fastapi.responses import StreamingResponse

from sluice.errors import SluiceError
from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import (
    AttemptNumber,
    ExecutionId,
    LogPosition,
    NodeId,
    Stream,
    TextQuery,
)
from sluice.http.problems import problem_body
from sluice.service.logs import LogLineView, LogPageView

router = api_routes(tags=["logs"])
EVENT_STREAM = "text/event-stream"


@router.get("/executions/{execution_id}/logs")
async def execution_logs(
    sluice: Service,
    execution_id: ExecutionId,
    stream: Stream = None,
    tail: Annotated[int | None, Query(ge=0, le=100_000, description="only the last N")] = None,
) -> list[LogLineView]:
    """Every node's stored lines, merged by time (the last `tail` ones if given)."""
    return await sluice.logs(execution_id, stream=stream, tail=tail)


@router.get("/executions/{execution_id}/nodes/{node_id}/logs")
async def log_page(
    sluice: Service,
    execution_id: ExecutionId,
    node_id: NodeId,
    attempt: AttemptNumber = None,
    after: LogPosition = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 1000,
    stream: Stream = None,
) -> LogPageView:
    """Up to `limit` lines after the position `after` (a previous page's `after`); `more`
    says whether stored lines remain."""
    return await sluice.log_page(
        execution_id, node_id, attempt=attempt, after=after, limit=limit, stream=stream
    )


@router.get(
    "/executions/{execution_id}/logs/follow",
    response_class=StreamingResponse,
    responses={200: {"content": {EVENT_STREAM: {}}, "description": "Server-sent events"}},
)
async def follow_logs(
    sluice: Service,
    execution_id: ExecutionId,
    node: TextQuery = None,
    attempt: AttemptNumber = None,
    stream: Stream = None,
) -> StreamingResponse:
    """Every stored line, then each new one as it is stored, as server-sent events (`line`,
    its data a LogLineView as JSON, its id the line's position) until the execution (or
    node, or attempt) has ended, then one `end` event. An execution that does not exist (or
    is another project's) is a 404 before any event; a bad node, attempt or stream is one
    `error` event carrying the problem, then the stream ends."""
    await sluice.execution(execution_id)  # its 404 while a status can still be sent
    lines = sluice.follow_logs(execution_id, node, attempt=attempt, stream=stream)
    return StreamingResponse(_events(lines), media_type=EVENT_STREAM)


async def _events(lines: AsyncIterator[LogLineView]) -> AsyncIterator[str]:
    try:
        async for line in lines:
            yield _event("line", line.model_dump_json(), line.position)
    except SluiceError as exc:
        yield _event("error", problem_body(exc).model_dump_json())
        return
    yield _event("end", "{}")


def _event(name: str, data: str, event_id: str | None = None) -> str:
    identity = f"id: {event_id}\n" if event_id else ""
    return f"event: {name}\n{identity}data: {data}\n\n"
