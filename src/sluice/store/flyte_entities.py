"""The Flyte entity repository: rows of `flyte_entities`, on one connection (see store.Store).

A row is one version of a Flyte task, workflow or launch plan as a client registered it
(flyteidl protobuf bytes). Versions are immutable: `put` inserts or, when the version exists,
returns the stored row for the caller to compare digests.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.store import schema
from sluice.store.sql import insert_ignore

TASK, WORKFLOW, LAUNCH_PLAN = "task", "workflow", "launch_plan"
ACTIVE, INACTIVE = "ACTIVE", "INACTIVE"


@dataclass(frozen=True)
class FlyteEntityRecord:
    resource_type: str
    project: str
    domain: str
    name: str
    version: str
    digest: str
    spec: bytes
    created_at: float
    updated_at: float
    state: str | None = None


class FlyteEntityRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn
        self._t = schema.flyte_entities

    async def put(self, record: FlyteEntityRecord) -> FlyteEntityRecord | None:
        """Insert `record`; None if inserted, else the row already stored under its id."""
        if await insert_ignore(self._conn, self._t, [record.__dict__]) == 1:
            return None
        found = await self.get(
            record.resource_type, record.project, record.domain, record.name, record.version
        )
        assert found is not None
        return found

    async def get(
        self, resource_type: str, project: str, domain: str, name: str, version: str
    ) -> FlyteEntityRecord | None:
        row = (
            await self._conn.execute(
                sa.select(self._t).where(
                    *self._named(resource_type, project, domain, name),
                    self._t.c.version == version,
                )
            )
        ).first()
        return None if row is None else FlyteEntityRecord(**row._mapping)

    async def latest(
        self, resource_type: str, project: str, domain: str, name: str
    ) -> FlyteEntityRecord | None:
        """The most recently registered version of a name."""
        found = await self.list(resource_type, project, domain, name, limit=1)
        return found[0] if found else None

    async def list(
        self,
        resource_type: str,
        project: str,
        domain: str,
        name: str | None = None,
        *,
        state: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> builtins.list[FlyteEntityRecord]:
        """Versions newest first (creation time, then version)."""
        t = self._t
        where = [t.c.resource_type == resource_type, t.c.project == project, t.c.domain == domain]
        if name is not None:
            where.append(t.c.name == name)
        if state is not None:
            where.append(t.c.state == state)
        rows = await self._conn.execute(
            sa.select(t)
            .where(*where)
            .order_by(t.c.created_at.desc(), t.c.name, t.c.version.desc())
            .limit(limit)
            .offset(offset)
        )
        return [FlyteEntityRecord(**row._mapping) for row in rows]

    async def names(
        self, resource_type: str, project: str, domain: str, *, limit: int = 100, offset: int = 0
    ) -> builtins.list[str]:
        t = self._t
        rows = await self._conn.execute(
            sa.select(t.c.name)
            .where(t.c.resource_type == resource_type, t.c.project == project, t.c.domain == domain)
            .group_by(t.c.name)
            .order_by(t.c.name)
            .limit(limit)
            .offset(offset)
        )
        return [row.name for row in rows]

    async def projects(self) -> builtins.list[tuple[str, str]]:
        """Every (project, domain) that holds an entity."""
        t = self._t
        rows = await self._conn.execute(
            sa.select(t.c.project, t.c.domain).group_by(t.c.project, t.c.domain)
        )
        return [(row.project, row.domain) for row in rows]

    async def set_active(
        self, project: str, domain: str, name: str, version: str | None, now: float
    ) -> None:
        """Make `version` the one ACTIVE launch plan version of `name` (None: none is)."""
        t = self._t
        named = self._named(LAUNCH_PLAN, project, domain, name)
        await self._conn.execute(
            sa.update(t).where(*named, t.c.state == ACTIVE).values(state=INACTIVE, updated_at=now)
        )
        if version is not None:
            await self._conn.execute(
                sa.update(t)
                .where(*named, t.c.version == version)
                .values(state=ACTIVE, updated_at=now)
            )

    def _named(
        self, resource_type: str, project: str, domain: str, name: str
    ) -> Sequence[sa.ColumnElement[bool]]:
        t = self._t
        return (
            t.c.resource_type == resource_type,
            t.c.project == project,
            t.c.domain == domain,
            t.c.name == name,
        )
