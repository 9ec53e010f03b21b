"""Idempotency keys over one connection: claimed in the transaction that writes the execution
they name, so a key never exists without its execution, nor an execution without its key."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.store import schema
from sluice.store.sql import insert_ignore

_t = schema.idempotency_keys
_SWEEP = 100  # expired keys removed per new key: the table stays as large as the live ones


@dataclass(frozen=True)
class KeyRecord:
    project: str
    key: str
    request_hash: str
    execution_id: str
    created_at: float
    expires_at: float


class IdempotencyRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def claim(self, record: KeyRecord, now: float) -> KeyRecord | None:
        """Take `record.key` for `record.execution_id`: None when taken (it was free, or its
        holder had expired), else the live record holding it. Atomic: one INSERT ... ON
        CONFLICT DO NOTHING, then one UPDATE ... WHERE expired; a concurrent claim of the same
        key waits for this transaction (PostgreSQL) or runs after it (SQLite's one writer),
        then finds this one's record."""
        values = dataclasses.asdict(record)
        if await insert_ignore(self._conn, _t, [values]) == 1:
            await self._sweep(now)
            return None
        where = (_t.c.project == record.project, _t.c.key == record.key)
        taken = await self._conn.execute(
            sa.update(_t).where(*where, _t.c.expires_at <= now).values(**values)
        )
        if taken.rowcount == 1:
            return None
        row = (await self._conn.execute(sa.select(_t).where(*where))).one()
        return KeyRecord(**row._mapping)

    async def get(self, project: str, key: str) -> KeyRecord | None:
        row = (
            await self._conn.execute(sa.select(_t).where(_t.c.project == project, _t.c.key == key))
        ).first()
        return KeyRecord(**row._mapping) if row else None

    async def _sweep(self, now: float) -> None:
        expired = sa.select(_t.c.project, _t.c.key).where(_t.c.expires_at <= now).limit(_SWEEP)
        await self._conn.execute(
            sa.delete(_t).where(
                sa.tuple_(_t.c.project, _t.c.key).in_(expired), _t.c.expires_at <= now
            )
        )
