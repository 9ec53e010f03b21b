"""The store's clock: every lease, expiry and takeover is judged on it (docs/invariants.md,
"One clock").

PostgreSQL reads `clock_timestamp()` inside the statement that judges; a SQLite file is shared
by the processes of one host, whose clock it is (read here, inside the transaction). A `now`
given by the caller is a test clock's time and is used as the store's.
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

PG_NOW = "extract(epoch FROM clock_timestamp())::double precision"
"""The PostgreSQL server's time in epoch seconds, as SQL text for the direct statements."""


def pg_now_or(placeholder: str) -> str:
    """SQL text: the caller's time in `placeholder` if not NULL, else the server's."""
    return f"COALESCE({placeholder}::double precision, {PG_NOW})"


def now_expression(dialect: str, now: float | None) -> Any:
    """A Core expression of the store's time for a statement on `dialect`."""
    if now is not None:
        return sa.literal(now, sa.Double)
    if dialect == "postgresql":
        return sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Double)
    return sa.literal(time.time(), sa.Double)


async def read_now(conn: AsyncConnection, now: float | None) -> float:
    """The store's time as seen inside `conn`'s transaction (one round trip on PostgreSQL)."""
    if now is not None:
        return now
    if conn.dialect.name != "postgresql":
        return time.time()
    return float((await conn.execute(sa.select(now_expression("postgresql", None)))).scalar_one())
