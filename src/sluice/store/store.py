"""The store facade: repositories bound to one transaction."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.store.database import Database
from sluice.store.repositories import (
    EventRepository,
    ExecutionRepository,
    LaunchPlanRepository,
    NodeRepository,
    SpecRepository,
)


@dataclass
class Repos:
    """Every repository, on one connection and so in one transaction."""

    conn: AsyncConnection
    executions: ExecutionRepository
    nodes: NodeRepository
    events: EventRepository
    specs: SpecRepository
    launch_plans: LaunchPlanRepository

    @classmethod
    def on(cls, conn: AsyncConnection) -> Repos:
        return cls(
            conn,
            ExecutionRepository(conn),
            NodeRepository(conn),
            EventRepository(conn),
            SpecRepository(conn),
            LaunchPlanRepository(conn),
        )


class Store:
    def __init__(self, db: Database) -> None:
        self.db = db

    @classmethod
    async def open(cls, url: str, *, upgrade: bool | None = None) -> Store:
        return cls(await Database.open(url, upgrade=upgrade))

    @contextlib.asynccontextmanager
    async def write(self) -> AsyncIterator[Repos]:
        """A write transaction; committed when the block ends without an exception."""
        async with self.db.begin() as conn:
            yield Repos.on(conn)

    @contextlib.asynccontextmanager
    async def read(self) -> AsyncIterator[Repos]:
        async with self.db.read() as conn:
            yield Repos.on(conn)

    async def close(self) -> None:
        await self.db.close()
