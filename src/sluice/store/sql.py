"""Small dialect helpers shared by repositories and SQL backends."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

_CHUNK = 500  # rows per statement: far below SQLite's limit on bound variables


def insert_ignoring_conflicts(conn: AsyncConnection, table: sa.Table) -> Any:
    """INSERT ... ON CONFLICT DO NOTHING for the connection's dialect."""
    if conn.dialect.name == "postgresql":  # imported here: a SQLite store never loads it
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(table).on_conflict_do_nothing()
    return sqlite.insert(table).on_conflict_do_nothing()


async def insert_ignore(
    conn: AsyncConnection, table: sa.Table, rows: Sequence[dict[str, Any]]
) -> int:
    """Insert rows, skipping those whose key exists; returns how many were inserted.

    Counted with RETURNING, because drivers do not all report a row count for
    INSERT ... ON CONFLICT DO NOTHING (psycopg through SQLAlchemy reports -1).
    """
    key = next(iter(table.primary_key.columns))
    inserted = 0
    for start in range(0, len(rows), _CHUNK):
        chunk = list(rows[start : start + _CHUNK])
        statement = insert_ignoring_conflicts(conn, table).values(chunk).returning(key)
        inserted += len((await conn.execute(statement)).all())
    return inserted
