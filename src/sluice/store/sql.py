"""Small dialect helpers shared by repositories and SQL backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection


def insert_ignoring_conflicts(conn: AsyncConnection, table: sa.Table) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING for the connection's dialect."""
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


async def insert_ignore(
    conn: AsyncConnection, table: sa.Table, rows: Sequence[dict[str, Any]]
) -> int:
    """Insert rows, skipping those whose key exists; returns how many were inserted."""
    if not rows:
        return 0
    result = await conn.execute(insert_ignoring_conflicts(conn, table), list(rows))
    return max(result.rowcount or 0, 0)
