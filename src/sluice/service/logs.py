"""Task logs as the service returns them: views of log lines (attempts numbered from 1, as
users count them), and the checks that turn a user's node and attempt into a reader query."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from datetime import datetime

from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.logs import AttemptKey, LogLine, TaskLogSink
from sluice.logs.lines import Position, check_stream
from sluice.logs.reader import LogEntry, LogReader
from sluice.service.models import View, utc
from sluice.store.records import ExecutionRecord
from sluice.store.store import Repos


class LogLineView(View):
    node: str
    attempt: int
    """1 for the first attempt."""
    position: str
    """`attempt:segment:line` in the store's numbering; pass it back as `after` to read on."""
    at: datetime
    stream: str
    text: str
    note: bool = False
    """A line sluice added to say what is missing (removed segments, dropped lines)."""


class LogPageView(View):
    lines: list[LogLineView]
    after: str | None = None
    more: bool = False


OutputListener = Callable[[str, int, str, str], None]
"""(node, attempt from 1, stream, text) of one line a task printed."""


def tap(sink: TaskLogSink, listener: OutputListener) -> Callable[[], None]:
    def on_line(key: AttemptKey, line: LogLine) -> None:
        listener(key.node_id, key.attempt + 1, line.stream, line.text)

    return sink.listen(on_line)


def view(entry: LogEntry) -> LogLineView:
    at = utc(entry.line.at)
    assert at is not None
    return LogLineView(
        node=entry.node_id,
        attempt=entry.position.attempt + 1,
        position=str(entry.position),
        at=at,
        stream=entry.line.stream,
        text=entry.line.text,
        note=entry.note,
    )


async def check_target(
    repos: Repos, record: ExecutionRecord, node_id: str | None, attempt: int | None
) -> int | None:
    """The store's attempt number (from 0) for a user's `attempt` (from 1); NotFoundError
    naming the nodes for a node the execution's workflow does not have (one that has not
    started yet is fine: its log is followed from its start)."""
    if attempt is not None and node_id is None:
        raise InvalidArgumentError(f"--attempt {attempt} needs a node: which node's attempt?")
    if attempt is not None and attempt < 1:
        raise InvalidArgumentError(f"attempt must be 1 or more, got {attempt}")
    if node_id is not None:
        nodes = {n.node_id for n in await repos.nodes.list(record.id)}
        workflow = await repos.specs.get_workflow(
            record.project, record.domain, record.workflow_name, record.workflow_version
        )
        nodes |= {n.id for n in workflow.nodes} if workflow is not None else set()
        if node_id not in nodes:
            known = ", ".join(sorted(nodes)) or "none"
            raise NotFoundError(f"execution {record.id} has no node {node_id!r}; nodes: {known}")
    return None if attempt is None else attempt - 1


async def lines(
    reader: LogReader,
    execution_id: str,
    node_id: str | None,
    attempt: int | None,
    stream: str | None,
    tail: int | None = None,
) -> list[LogLineView]:
    wanted = check_stream(stream)
    if tail is not None and node_id is not None:
        found = await reader.tail(execution_id, node_id, attempt, tail, wanted)
    else:
        found = await reader.lines(execution_id, node_id, attempt, wanted)
        found = found if tail is None else found[-tail:] if tail else []
    return [view(e) for e in found]


async def page(
    reader: LogReader,
    execution_id: str,
    node_id: str,
    attempt: int | None,
    *,
    after: str | None,
    limit: int,
    stream: str | None,
) -> LogPageView:
    position = None if after is None else Position.parse(after)
    found = await reader.page(
        execution_id, node_id, attempt, after=position, limit=limit, stream=check_stream(stream)
    )
    last = None if found.after is None else str(found.after)
    return LogPageView(lines=[view(e) for e in found.entries], after=last, more=found.more)


async def follow(
    reader: LogReader,
    execution_id: str,
    node_id: str | None,
    attempt: int | None,
    stream: str | None,
) -> AsyncIterator[LogLineView]:
    async for entry in reader.follow(execution_id, node_id, attempt, stream=check_stream(stream)):
        yield view(entry)
