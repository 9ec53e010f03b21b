"""The index of log segments in the database (table `task_logs`): which segments an attempt
wrote, where they are, how big, and when. Readers find lines through it; writers upsert one
row per segment they touched, in one transaction per flush."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.store.schema import task_logs


@dataclass(frozen=True)
class AttemptKey:
    execution_id: str
    node_id: str
    attempt: int


@dataclass(frozen=True)
class Segment:
    key: AttemptKey
    segment: int
    uri: str
    writer: str = ""
    bytes: int = 0
    lines: int = 0
    dropped_lines: int = 0
    removed: bool = False
    first_at: float | None = None
    last_at: float | None = None
    closed_at: float | None = None

    def grown(self, size: int, count: int, first: float, last: float) -> Segment:
        return replace(
            self,
            bytes=self.bytes + size,
            lines=self.lines + count,
            first_at=self.first_at if self.first_at is not None else first,
            last_at=last,
        )

    def row(self) -> dict[str, Any]:
        return {
            "execution_id": self.key.execution_id,
            "node_id": self.key.node_id,
            "attempt": self.key.attempt,
            "segment": self.segment,
            "uri": self.uri,
            "writer": self.writer,
            "bytes": self.bytes,
            "lines": self.lines,
            "dropped_lines": self.dropped_lines,
            "removed": int(self.removed),
            "first_at": self.first_at,
            "last_at": self.last_at,
            "closed_at": self.closed_at,
        }

    @classmethod
    def from_row(cls, row: Any) -> Segment:
        key = AttemptKey(row.execution_id, row.node_id, row.attempt)
        return cls(
            key,
            row.segment,
            row.uri,
            row.writer,
            row.bytes,
            row.lines,
            row.dropped_lines,
            bool(row.removed),
            row.first_at,
            row.last_at,
            row.closed_at,
        )


async def save(conn: AsyncConnection, segments: list[Segment]) -> None:
    """Insert or replace these segments' rows (idempotent: a row is the writer's whole view)."""
    if not segments:
        return
    dialect: Any = sqlite
    if conn.dialect.name == "postgresql":  # imported here: a SQLite store never loads it
        from sqlalchemy.dialects import postgresql

        dialect = postgresql
    statement = dialect.insert(task_logs)
    keys = ("execution_id", "node_id", "attempt", "segment")
    updated = {c.name: statement.excluded[c.name] for c in task_logs.columns if c.name not in keys}
    upsert = statement.on_conflict_do_update(index_elements=list(keys), set_=updated)
    await conn.execute(upsert, [segment.row() for segment in segments])


async def segments(
    conn: AsyncConnection,
    execution_id: str,
    node_id: str | None = None,
    attempt: int | None = None,
) -> list[Segment]:
    """Segments of an execution, a node or one attempt, ordered by node, attempt, segment."""
    query = sa.select(task_logs).where(task_logs.c.execution_id == execution_id)
    if node_id is not None:
        query = query.where(task_logs.c.node_id == node_id)
    if attempt is not None:
        query = query.where(task_logs.c.attempt == attempt)
    query = query.order_by(task_logs.c.node_id, task_logs.c.attempt, task_logs.c.segment)
    return [Segment.from_row(row) for row in (await conn.execute(query)).all()]
