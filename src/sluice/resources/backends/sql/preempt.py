"""Priority preemption in SQL (SQLite and PostgreSQL alike), one transaction per operation.

Run by `SqlBackend` inside its transaction, after the namespaces are locked (the same
advisory locks as every allocation on PostgreSQL; SQLite's write lock): the victim choice
and the queueing rule of `sluice.resources.preemption`, on rows read in that transaction.
A mark counts only while the holding it was written for lives: same token and granted_at.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.resources.backends.base import TimedRequest
from sluice.resources.backends.sql import reads
from sluice.resources.backends.sql.tables import HOLDERS, WAITERS
from sluice.resources.models import Victim
from sluice.resources.preemption import HeldUnits, choose_victims, queue_ahead
from sluice.store import schema

MARKS = schema.resource_holder_marks
FLAGS = schema.resource_preempt_flags
_LIVE_MARK = sa.and_(
    MARKS.c.namespace == HOLDERS.c.namespace,
    MARKS.c.token == HOLDERS.c.token,
    MARKS.c.granted_at == HOLDERS.c.granted_at,
)


async def mark_victims(
    conn: AsyncConnection, request: TimedRequest, names: Sequence[str]
) -> tuple[Victim, ...]:
    """ResourceBackend.preempt, in the caller's transaction."""
    for claim in request.claims:
        if claim.namespace in names:
            await _mark(conn, request, claim.namespace, claim.units)
    victims = await marked_by(conn, request.token, [c.namespace for c in request.claims])
    if victims:
        await _queue_ahead(conn, request)
    return victims


async def _mark(conn: AsyncConnection, request: TimedRequest, namespace: str, units: int) -> None:
    query = (
        sa.select(HOLDERS, MARKS.c.priority.label("mark_priority"), MARKS.c.preempted_by)
        .select_from(HOLDERS.outerjoin(MARKS, _LIVE_MARK))
        .where(HOLDERS.c.namespace == namespace, HOLDERS.c.lease_expires_at > request.now)
    )
    rows = (await conn.execute(query)).mappings().all()
    if any(row["token"] == request.token for row in rows):
        return
    sources = (await reads.load_sources(conn, [namespace])).get(namespace, {})
    quota = next(
        (sources[s] for s in ("operator", "config", "plugin", "default") if s in sources), 0
    )
    held = [
        HeldUnits(
            row["token"],
            int(row["units"]),
            row["mark_priority"],
            float(row["granted_at"]),
            row["preempted_by"],
            row["execution_id"],
            row["node_id"],
        )
        for row in rows
    ]
    holder = request.holder
    for chosen in choose_victims(request.token, holder.priority, units, quota, held):
        await conn.execute(
            MARKS.update()
            .where(MARKS.c.namespace == namespace, MARKS.c.token == chosen.token)
            .values(
                preempted_by=request.token,
                preempter_execution=holder.execution_id,
                preempter_node=holder.node_id,
                preempter_priority=holder.priority,
            )
        )


async def marked_by(conn: AsyncConnection, token: str, names: Sequence[str]) -> tuple[Victim, ...]:
    """The live holdings marked by `token` there."""
    return await _victims(
        conn, sa.and_(MARKS.c.preempted_by == token, MARKS.c.namespace.in_(names))
    )


async def marks_on(conn: AsyncConnection, token: str, names: Sequence[str]) -> tuple[Victim, ...]:
    """The marks on the live holdings of `token` there."""
    where = sa.and_(
        MARKS.c.token == token, MARKS.c.namespace.in_(names), MARKS.c.preempted_by.is_not(None)
    )
    return await _victims(conn, where)


async def _victims(conn: AsyncConnection, where: sa.ColumnElement[bool]) -> tuple[Victim, ...]:
    query = (
        sa.select(HOLDERS.c.execution_id, HOLDERS.c.node_id, MARKS)
        .select_from(MARKS.join(HOLDERS, _LIVE_MARK))
        .where(where)
        .order_by(MARKS.c.namespace, MARKS.c.token)
    )
    return tuple(
        Victim(
            row["namespace"],
            row["token"],
            row["execution_id"],
            row["node_id"],
            int(row["priority"]),
            row["preempted_by"],
            row["preempter_execution"],
            row["preempter_node"],
            int(row["preempter_priority"]),
        )
        for row in (await conn.execute(query)).mappings()
    )


async def _queue_ahead(conn: AsyncConnection, request: TimedRequest) -> None:
    names = [c.namespace for c in request.claims]
    waiters = await reads.load_waiters(conn, names, live_at=request.now)
    mine = [w.ask for ws in waiters.values() for w in ws if w.ask.token == request.token]
    if not mine:
        return
    others = {
        w.ask.token: w.ask for ws in waiters.values() for w in ws if w.ask.token != request.token
    }
    since = queue_ahead(mine[0], others.values())
    if since is not None:
        await conn.execute(
            WAITERS.update()
            .where(WAITERS.c.token == request.token, WAITERS.c.namespace.in_(names))
            .values(first_requested_at=since)
        )


async def record_priority(
    conn: AsyncConnection, token: str, names: Sequence[str], priority: int
) -> None:
    """Upsert the priority of the token's holdings there; a mark written for an earlier
    holding of the same token (another granted_at) is dropped, one for this holding kept."""
    rows = (
        await conn.execute(
            sa.select(HOLDERS.c.namespace, HOLDERS.c.granted_at).where(
                HOLDERS.c.token == token, HOLDERS.c.namespace.in_(names)
            )
        )
    ).all()
    for namespace, granted_at in rows:
        where = sa.and_(MARKS.c.namespace == namespace, MARKS.c.token == token)
        stored = (await conn.execute(sa.select(MARKS.c.granted_at).where(where))).scalar()
        if stored is None:
            await conn.execute(
                MARKS.insert().values(
                    namespace=namespace, token=token, granted_at=granted_at, priority=priority
                )
            )
        elif stored == granted_at:
            await conn.execute(MARKS.update().where(where).values(priority=priority))
        else:
            await conn.execute(
                MARKS.update()
                .where(where)
                .values(granted_at=granted_at, priority=priority, preempted_by=None)
            )


async def forget_orphans(conn: AsyncConnection) -> None:
    """Drop the marks of holdings that are gone (the sweep)."""
    live = sa.select(HOLDERS.c.token).where(_LIVE_MARK).exists()
    await conn.execute(MARKS.delete().where(~live))


async def set_flag(conn: AsyncConnection, namespace: str, on: bool) -> None:
    await conn.execute(FLAGS.delete().where(FLAGS.c.namespace == namespace))
    if on:
        await conn.execute(FLAGS.insert().values(namespace=namespace))


async def flags(conn: AsyncConnection) -> frozenset[str]:
    return frozenset((await conn.execute(sa.select(FLAGS.c.namespace))).scalars())
