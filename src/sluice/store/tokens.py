"""The API token repository: rows of `api_tokens`, on one connection (see store.Store)."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.store import schema


@dataclass(frozen=True)
class TokenRecord:
    id: str
    name: str
    secret_hash: str
    projects: list[str]
    read_only: bool
    created_at: float
    revoked_at: float | None = None


class TokenRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.api_tokens

    async def insert(self, record: TokenRecord) -> None:
        await self._conn.execute(sa.insert(self._t).values(**record.__dict__))

    async def get(self, token_id: str) -> TokenRecord | None:
        row = (await self._conn.execute(sa.select(self._t).where(self._t.c.id == token_id))).first()
        return None if row is None else TokenRecord(**row._mapping)

    async def list(self) -> list[TokenRecord]:
        rows = await self._conn.execute(sa.select(self._t).order_by(self._t.c.created_at))
        return [TokenRecord(**row._mapping) for row in rows]

    async def revoke(self, token_id: str, now: float) -> bool:
        """Mark a live token revoked; False if there is none by that id or it already was."""
        result = await self._conn.execute(
            sa.update(self._t)
            .where(self._t.c.id == token_id, self._t.c.revoked_at.is_(None))
            .values(revoked_at=now)
        )
        return result.rowcount == 1
