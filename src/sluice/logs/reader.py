"""Reading task logs: one attempt page by page, a node's attempts, an execution's nodes merged
by time, and following a log while it is written.

`follow` polls the index every `poll` seconds (0.25 by default) rather than listening to the
store's notifier: lines reach the store in flushes (every logs.flush_interval), so a
notification per flush would only say what the next poll finds, and a poll works the same
on every backend and across machines. It stops once what it follows has ended (the attempt
moved on, the node or the execution is terminal; a node not started yet is waited for),
`grace` seconds have passed for the last flush to land, and every segment is closed; or
`settle` seconds after the end if a writer died before closing its segment.
"""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import AsyncIterator
from dataclasses import dataclass

import sqlalchemy as sa

from sluice.clock import Clock, SystemClock
from sluice.logs import index
from sluice.logs.files import LogFiles
from sluice.logs.index import Segment
from sluice.logs.lines import LogLine, Position, Stream
from sluice.spec.phases import ExecutionPhase, NodePhase
from sluice.store.database import Database
from sluice.store.schema import executions, node_executions


@dataclass(frozen=True)
class LogEntry:
    node_id: str
    position: Position
    line: LogLine
    note: bool = False
    """A line sluice adds to say what is missing (segments removed, lines dropped)."""


@dataclass(frozen=True)
class LogPage:
    entries: list[LogEntry]
    after: Position | None
    """Pass it as `after` to read on; None when nothing was read."""
    more: bool
    """More lines are stored past this page now."""


def _note(segment: Segment, line: int, text: str) -> LogEntry:
    at = segment.last_at if segment.last_at is not None else segment.first_at or 0.0
    position = Position(segment.key.attempt, segment.segment, line)
    return LogEntry(segment.key.node_id, position, LogLine(at, "stderr", text), note=True)


def parse_segment(segment: Segment, data: bytes, first_line: int = 0) -> list[LogEntry]:
    """The complete lines in `data` (a torn last line, still being written, is left out)."""
    raw_lines = data.split(b"\n")[:-1]
    entries = []
    for offset, raw in enumerate(raw_lines):
        line = LogLine.decode(raw)
        if line is not None:
            position = Position(segment.key.attempt, segment.segment, first_line + offset)
            entries.append(LogEntry(segment.key.node_id, position, line))
    return entries


def _wanted(entry: LogEntry, stream: Stream | None) -> bool:
    return entry.note or stream is None or entry.line.stream == stream


class LogReader:
    def __init__(self, db: Database, files: LogFiles, clock: Clock | None = None) -> None:
        self._db = db
        self.files = files
        self._clock = clock or SystemClock()

    async def segments(
        self, execution_id: str, node_id: str | None = None, attempt: int | None = None
    ) -> list[Segment]:
        async with self._db.read() as conn:
            return await index.segments(conn, execution_id, node_id, attempt)

    async def _entries(self, segment: Segment) -> list[LogEntry]:
        if segment.removed:
            text = f"[sluice: {segment.lines} lines ({segment.bytes} bytes) removed here: "
            return [_note(segment, 0, text + "past logs.max_bytes_per_attempt]")]
        data = await asyncio.to_thread(self.files.read, segment.uri)
        entries = parse_segment(segment, data)
        if segment.dropped_lines:
            text = f"[sluice: {segment.dropped_lines} lines dropped: the log store fell behind]"
            entries.append(_note(segment, len(entries), text))
        return entries

    async def page(
        self,
        execution_id: str,
        node_id: str,
        attempt: int | None = None,
        *,
        after: Position | None = None,
        limit: int = 1000,
        stream: Stream | None = None,
    ) -> LogPage:
        """Up to `limit` lines of a node (one attempt, or all in order) after `after`."""
        found: list[LogEntry] = []
        more = False
        for segment in await self.segments(execution_id, node_id, attempt):
            if after is not None and (segment.key.attempt, segment.segment) < (
                after.attempt,
                after.segment,
            ):
                continue
            for entry in await self._entries(segment):
                if (after is not None and entry.position <= after) or not _wanted(entry, stream):
                    continue
                if len(found) == limit:
                    more = True
                    break
                found.append(entry)
            if more:
                break
        last = found[-1].position if found else after
        return LogPage(found, last, more)

    async def lines(
        self,
        execution_id: str,
        node_id: str | None = None,
        attempt: int | None = None,
        stream: Stream | None = None,
    ) -> list[LogEntry]:
        """Every line of an attempt, a node (attempt by attempt) or an execution (all nodes
        merged by time)."""
        by_attempt: dict[tuple[str, int], list[LogEntry]] = {}
        for segment in await self.segments(execution_id, node_id, attempt):
            key = (segment.key.node_id, segment.key.attempt)
            entries = [e for e in await self._entries(segment) if _wanted(e, stream)]
            by_attempt.setdefault(key, []).extend(entries)
        if node_id is not None:
            return [e for _, entries in sorted(by_attempt.items()) for e in entries]
        return list(heapq.merge(*by_attempt.values(), key=lambda e: e.line.at))

    async def tail(
        self,
        execution_id: str,
        node_id: str,
        attempt: int | None,
        count: int,
        stream: Stream | None = None,
    ) -> list[LogEntry]:
        """The last `count` lines of a node (or one attempt), reading only the segments
        they are in: a live view of a long log does not read all of it."""
        found: list[LogEntry] = []
        for segment in reversed(await self.segments(execution_id, node_id, attempt)):
            found = [e for e in await self._entries(segment) if _wanted(e, stream)] + found
            if len(found) >= count:
                break
        return found[-count:] if count else []

    async def follow(
        self,
        execution_id: str,
        node_id: str | None = None,
        attempt: int | None = None,
        *,
        stream: Stream | None = None,
        poll: float = 0.25,
        grace: float = 1.0,
        settle: float = 5.0,
    ) -> AsyncIterator[LogEntry]:
        """Lines as they are stored, until what is followed has ended (see the module doc)."""
        offsets: dict[tuple[str, int, int], tuple[int, int]] = {}
        ended_at: float | None = None
        while True:
            finished = await self._finished(execution_id, node_id, attempt)
            segments = await self.segments(execution_id, node_id, attempt)
            for entry in await self._new_entries(segments, offsets):
                if _wanted(entry, stream):
                    yield entry
            if finished:
                ended_at = ended_at if ended_at is not None else self._clock.now()
                waited = self._clock.now() - ended_at
                closed = all(s.closed_at is not None for s in segments)
                if (closed and waited >= grace) or waited >= settle:
                    return
            await asyncio.sleep(poll)

    async def _new_entries(
        self, segments: list[Segment], offsets: dict[tuple[str, int, int], tuple[int, int]]
    ) -> list[LogEntry]:
        """Lines stored since the last call, by time; `offsets` keeps (bytes, lines) read."""
        fresh: list[LogEntry] = []
        for segment in segments:
            where = (segment.key.node_id, segment.key.attempt, segment.segment)
            done, count = offsets.get(where, (0, 0))
            if segment.removed:
                if where not in offsets:
                    fresh.extend(await self._entries(segment))
                    offsets[where] = (0, 0)
                continue
            data = await asyncio.to_thread(self.files.read, segment.uri, done)
            complete = data[: data.rfind(b"\n") + 1]
            fresh.extend(parse_segment(segment, complete, count))
            offsets[where] = (done + len(complete), count + complete.count(b"\n"))
        return sorted(fresh, key=lambda e: e.line.at)

    async def _finished(self, execution_id: str, node_id: str | None, attempt: int | None) -> bool:
        async with self._db.read() as conn:
            query = sa.select(executions.c.phase).where(executions.c.id == execution_id)
            phase = (await conn.execute(query)).scalar()
            if phase is None or ExecutionPhase(phase).is_terminal or node_id is None:
                return phase is None or ExecutionPhase(phase).is_terminal
            table = node_executions
            query = sa.select(table.c.phase, table.c.attempt).where(
                table.c.execution_id == execution_id, table.c.node_id == node_id
            )
            row = (await conn.execute(query)).first()
        if row is None:  # not started yet: followed from its start
            return False
        return NodePhase(row.phase).is_terminal or (attempt is not None and row.attempt > attempt)
