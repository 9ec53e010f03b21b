"""Changes made by the SQL resource backend, inside a transaction the caller holds (and, on
PostgreSQL, after it locked the namespaces involved)."""

from __future__ import annotations

import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.resources.admission import Plan, waiter_scope
from sluice.resources.backends._shared import WaiterRecord, waiter_records
from sluice.resources.backends.base import AllocationRequest, TimedRequest
from sluice.resources.backends.sql.reads import Loaded
from sluice.resources.backends.sql.tables import (
    ALL,
    HOLDERS,
    QUOTAS,
    SOURCE_COLUMNS,
    USAGE,
    WAITERS,
    ScopeKey,
    upsert_into,
)
from sluice.resources.models import QuotaSource

_LOCK_CLASS = 0x5175  # first key of our advisory locks (and of migration 0002's functions)


async def lock_namespaces(conn: AsyncConnection, namespaces: Iterable[str]) -> None:
    """Serialise transactions on the same namespaces. SQLite needs nothing: every write
    transaction is BEGIN IMMEDIATE. PostgreSQL takes transaction advisory locks in one global
    order (by key), so two multi-namespace claims never deadlock."""
    if conn.dialect.name != "postgresql":
        return
    for key in lock_keys(namespaces):
        await conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_LOCK_CLASS, key)))


def lock_keys(namespaces: Iterable[str]) -> list[int]:
    """The second keys of the namespaces' advisory locks, in the order they are taken."""
    return sorted({zlib.crc32(ns.encode()) - 2**31 for ns in namespaces})


async def reclaim_holders(conn: AsyncConnection, namespaces: Sequence[str], now: float) -> set[str]:
    """Drop lapsed holders, uncounting their units; where any was."""
    gone = await conn.execute(
        sa.delete(HOLDERS)
        .where(HOLDERS.c.namespace.in_(namespaces), HOLDERS.c.lease_expires_at <= now)
        .returning(HOLDERS.c.namespace, HOLDERS.c.project, HOLDERS.c.domain, HOLDERS.c.units)
    )
    lapsed = [(ns, p, d, -units) for ns, p, d, units in gone]
    await count_units(conn, lapsed)
    return {row[0] for row in lapsed}


async def reclaim_waiters(conn: AsyncConnection, namespaces: Sequence[str], now: float) -> set[str]:
    """Drop lapsed waiter entries; where any was."""
    gone = await conn.execute(
        sa.delete(WAITERS)
        .where(WAITERS.c.namespace.in_(namespaces), WAITERS.c.expires_at <= now)
        .returning(WAITERS.c.namespace)
    )
    return set(gone.scalars())


async def reclaim(conn: AsyncConnection, namespaces: Sequence[str], now: float) -> set[str]:
    """Drop lapsed holders and waiters; where any was."""
    return await reclaim_holders(conn, namespaces, now) | await reclaim_waiters(
        conn, namespaces, now
    )


async def count_units(conn: AsyncConnection, changes: Iterable[tuple[str, str, str, int]]) -> None:
    """Add each (namespace, project, domain, units) to its three scope counters."""
    deltas: Counter[ScopeKey] = Counter()
    for ns, project, domain, units in changes:
        for key in ((ns, ALL, ALL), (ns, project, ALL), (ns, project, domain)):
            deltas[key] += units
    if not deltas:
        return
    insert = upsert_into(conn, USAGE)
    await conn.execute(
        insert.on_conflict_do_update(
            index_elements=[USAGE.c.namespace, USAGE.c.project, USAGE.c.domain],
            set_={"in_use": USAGE.c.in_use + insert.excluded.in_use},
        ),
        [
            {"namespace": n, "project": p, "domain": d, "in_use": v}
            for (n, p, d), v in deltas.items()
        ],
    )
    # Rows at zero go, so thousands of short-lived lock names leave nothing behind.
    touched = sorted({key[0] for key, units in deltas.items() if units < 0})
    if touched:
        await conn.execute(
            sa.delete(USAGE).where(USAGE.c.namespace.in_(touched), USAGE.c.in_use <= 0)
        )


def waiter_row(namespace: str, record: WaiterRecord) -> dict[str, Any]:
    ask = record.ask
    return {
        "namespace": namespace,
        "token": ask.token,
        "project": ask.project,
        "domain": ask.domain,
        "execution_id": record.execution_id,
        "node_id": record.node_id,
        "units": ask.units,
        "priority": ask.priority,
        "project_cap": ask.project_cap,
        "domain_cap": ask.domain_cap,
        "first_requested_at": ask.since,
        "expires_at": record.expires_at,
        "blocking_scope": record.stored_scope(),
    }


async def forget_empty(conn: AsyncConnection, namespaces: Sequence[str]) -> None:
    """Delete quota rows holding only a claim's default where nothing is held or waiting,
    then the counters at zero (which SQLite's fast release keeps while a quota is stored) of
    those namespaces that keep no quota row."""
    await conn.execute(
        sa.delete(QUOTAS).where(
            QUOTAS.c.namespace.in_(namespaces),
            QUOTAS.c.operator_quota.is_(None),
            QUOTAS.c.config_quota.is_(None),
            QUOTAS.c.plugin_quota.is_(None),
            ~sa.exists().where(HOLDERS.c.namespace == QUOTAS.c.namespace),
            ~sa.exists().where(WAITERS.c.namespace == QUOTAS.c.namespace),
        )
    )
    await conn.execute(
        sa.delete(USAGE).where(
            USAGE.c.namespace.in_(namespaces),
            USAGE.c.in_use <= 0,
            ~sa.exists().where(QUOTAS.c.namespace == USAGE.c.namespace),
        )
    )


async def store_quotas(
    conn: AsyncConnection, source: QuotaSource, quotas: Mapping[str, int | None], now: float
) -> None:
    column = SOURCE_COLUMNS[source]
    rows = [{"namespace": ns, column: q, "updated_at": now} for ns, q in quotas.items()]
    if not rows:
        return
    insert = upsert_into(conn, QUOTAS)
    await conn.execute(
        insert.on_conflict_do_update(
            index_elements=[QUOTAS.c.namespace],
            set_={
                column: getattr(insert.excluded, column),
                "updated_at": insert.excluded.updated_at,
            },
        ),
        rows,
    )


def defaults_to_store(
    request: AllocationRequest, sources: Mapping[str, Mapping[QuotaSource, int]]
) -> dict[str, int | None]:
    return {
        c.namespace: c.default_quota
        for c in request.claims
        if c.default_quota is not None
        and sources.get(c.namespace, {}).get("default") != c.default_quota
    }


def waiters_to_write(
    request: TimedRequest, plan: Plan, loaded: Loaded
) -> list[tuple[str, WaiterRecord]]:
    """The waiter entries a refusal must write. An unchanged entry with half its lease left
    is kept as it is, so a waiter asking again and again writes nothing."""
    scopes = {ns: waiter_scope(plan, ns) for ns in loaded.states}
    fresh_until = request.now + request.lease / 2
    return [
        (ns, record)
        for ns, record in waiter_records(request, plan, loaded.states, scopes)
        if not same_waiter(loaded.mine.get(ns), record, fresh_until)
    ]


def same_waiter(stored: WaiterRecord | None, wanted: WaiterRecord, fresh_until: float) -> bool:
    if stored is None or stored.expires_at < fresh_until:
        return False
    return (stored.ask, stored.stored_scope(), stored.execution_id, stored.node_id) == (
        wanted.ask,
        wanted.stored_scope(),
        wanted.execution_id,
        wanted.node_id,
    )
