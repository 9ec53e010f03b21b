"""The controller's statements over one connection: the narrow view of executions it keeps in
memory, its decisions as compare-and-swaps, and its fencing token."""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.concurrency.queues import Tracked
from sluice.spec.phases import TERMINAL_EXECUTION_PHASES, ExecutionPhase, NodePhase
from sluice.store import schema
from sluice.store.sql import insert_ignore

_CHUNK = 500
_STREAM = 2000  # rows fetched at a time when reading every non-terminal execution
_LEADER = "controller"
_PENDING = ExecutionPhase.PENDING.value
_NON_TERMINAL = [p.value for p in ExecutionPhase if p not in TERMINAL_EXECUTION_PHASES]
_t = schema.executions
_VIEW = (
    _t.c.id,
    _t.c.project,
    _t.c.domain,
    _t.c.launch_plan,
    _t.c.launch_plan_version,
    _t.c.phase,
    _t.c.priority,
    _t.c.created_at,
    _t.c.ended_at,
    _t.c.reason,
    _t.c.concurrency_key,
)


def _tracked(row: Any) -> tuple[Tracked, float | None]:
    # Names repeat across thousands of rows: interned, each is stored once.
    key = (sys.intern(row.project), sys.intern(row.domain), sys.intern(row.launch_plan or ""))
    item = Tracked(
        id=row.id,
        key=key,
        version=sys.intern(row.launch_plan_version or ""),
        phase=ExecutionPhase(row.phase),
        priority=row.priority,
        created_at=row.created_at,
        reason=row.reason,
        concurrency_key=sys.intern(row.concurrency_key or ""),
    )
    return item, row.ended_at


class ConcurrencyRepository:
    def __init__(self, conn: AsyncConnection) -> None:
        self._conn = conn

    async def non_terminal(self) -> list[tuple[Tracked, float | None]]:
        """Every execution that is PENDING or active, as the controller tracks it."""
        query = sa.select(*_VIEW).where(_t.c.phase.in_(_NON_TERMINAL))
        rows = await self._conn.stream(query.execution_options(yield_per=_STREAM))
        return [_tracked(row) async for row in rows]

    async def by_ids(self, ids: Collection[str]) -> list[tuple[Tracked, float | None]]:
        found: list[tuple[Tracked, float | None]] = []
        listed = list(ids)
        for start in range(0, len(listed), _CHUNK):
            query = sa.select(*_VIEW).where(_t.c.id.in_(listed[start : start + _CHUNK]))
            found += [_tracked(row) for row in await self._conn.execute(query)]
        return found

    async def pending_of(self, key: tuple[str, str, str]) -> list[tuple[Tracked, float | None]]:
        """Every PENDING execution of one launch plan name ("" for none)."""
        project, domain, name = key
        lp = _t.c.launch_plan == name if name else _t.c.launch_plan.is_(None)
        query = sa.select(*_VIEW).where(
            _t.c.project == project, _t.c.domain == domain, lp, _t.c.phase == _PENDING
        )
        return [_tracked(row) for row in await self._conn.execute(query)]

    async def promote(self, ids: Sequence[str], now: float) -> set[str]:
        """PENDING -> QUEUED for each id still PENDING; returns the ids that moved."""
        moved: set[str] = set()
        for start in range(0, len(ids), _CHUNK):
            statement = (
                sa.update(_t)
                .where(_t.c.id.in_(ids[start : start + _CHUNK]), _t.c.phase == _PENDING)
                .values(
                    phase=ExecutionPhase.QUEUED.value,
                    reason="",
                    updated_at=now,
                    version=_t.c.version + 1,
                )
                .returning(_t.c.id)
            )
            moved.update(row.id for row in await self._conn.execute(statement))
        return moved

    async def set_reasons(self, reasons: Sequence[tuple[str, str]]) -> None:
        """Rewrite what PENDING executions wait for; ids no longer PENDING are left alone."""
        if not reasons:
            return
        if self._conn.dialect.name == "postgresql":
            await self._set_reasons_joined(reasons)
            return
        statement = (
            sa.update(_t)
            .where(_t.c.id == sa.bindparam("b_id"), _t.c.phase == _PENDING)
            .values(reason=sa.bindparam("b_reason"))
        )
        await self._conn.execute(statement, [{"b_id": i, "b_reason": r} for i, r in reasons])

    async def _set_reasons_joined(self, reasons: Sequence[tuple[str, str]]) -> None:
        # One UPDATE ... FROM (VALUES ...) per chunk: PostgreSQL pays a round trip per
        # statement of an executemany. (SQLite cannot name VALUES columns, and needs no trip.)
        for start in range(0, len(reasons), _CHUNK):
            rows = sa.values(
                sa.column("id", sa.String), sa.column("reason", sa.Text), name="new_reasons"
            ).data(list(reasons[start : start + _CHUNK]))
            await self._conn.execute(
                sa.update(_t)
                .where(_t.c.id == rows.c.id, _t.c.phase == _PENDING)
                .values(reason=rows.c.reason)
            )

    async def skip_nodes(self, ids: Sequence[str], now: float, reason: str) -> None:
        """Nodes of executions that ended before starting never run."""
        n = schema.node_executions
        for start in range(0, len(ids), _CHUNK):
            await self._conn.execute(
                sa.update(n)
                .where(n.c.execution_id.in_(ids[start : start + _CHUNK]))
                .values(phase=NodePhase.SKIPPED.value, ended_at=now, updated_at=now, reason=reason)
                .values(version=n.c.version + 1)
            )

    async def pending_order(
        self,
        project: str,
        domain: str,
        launch_plan: str | None,
        concurrency_key: str | None = None,
    ) -> list[str]:
        """PENDING ids of one launch plan name (of one key of it, when given) in promotion
        order (priority, creation)."""
        lp = _t.c.launch_plan == launch_plan if launch_plan else _t.c.launch_plan.is_(None)
        query = sa.select(_t.c.id).where(
            _t.c.project == project, _t.c.domain == domain, lp, _t.c.phase == _PENDING
        )
        if concurrency_key is not None:
            query = query.where(sa.func.coalesce(_t.c.concurrency_key, "") == concurrency_key)
        query = query.order_by(_t.c.priority.desc(), _t.c.created_at, _t.c.id)
        return [row.id for row in await self._conn.execute(query)]

    async def pending_counts(self) -> list[dict[str, Any]]:
        """How many executions are PENDING, per launch plan name."""
        key = (_t.c.project, _t.c.domain, _t.c.launch_plan)
        query = (
            sa.select(*key, sa.func.count().label("pending"))
            .where(_t.c.phase == _PENDING)
            .group_by(*key)
            .order_by(*key)
        )
        return [dict(row._mapping) for row in await self._conn.execute(query)]

    async def take_lead(self, holder: str, now: float) -> int:
        """Bump the fencing epoch for a new leader; returns the leader's epoch."""
        t = schema.concurrency_leader
        row = {"name": _LEADER, "epoch": 0, "holder": holder, "acquired_at": now}
        await insert_ignore(self._conn, t, [{**row, "heartbeat_at": now}])
        statement = (
            sa.update(t)
            .where(t.c.name == _LEADER)
            .values(epoch=t.c.epoch + 1, holder=holder, acquired_at=now, heartbeat_at=now)
            .returning(t.c.epoch)
        )
        return int((await self._conn.execute(statement)).scalar_one())

    async def fence(self, epoch: int, now: float) -> bool:
        """True if `epoch` is still the leader's; holds the leader row until commit, so a
        takeover waits for this transaction or makes it fail."""
        t = schema.concurrency_leader
        statement = (
            sa.update(t).where(t.c.name == _LEADER, t.c.epoch == epoch).values(heartbeat_at=now)
        )
        return (await self._conn.execute(statement)).rowcount == 1

    async def leader(self) -> dict[str, Any] | None:
        t = schema.concurrency_leader
        row = (await self._conn.execute(sa.select(t).where(t.c.name == _LEADER))).first()
        return dict(row._mapping) if row else None
