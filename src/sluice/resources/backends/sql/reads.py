"""Reads of the SQL resource backend, inside a transaction the caller holds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.resources.admission import (
    Ask,
    NamespaceState,
    Usage,
    effective_quota,
    next_in_line,
)
from sluice.resources.backends._shared import WaiterRecord, build_snapshot, stored_waiter
from sluice.resources.backends.base import NamespaceUsage
from sluice.resources.backends.sql.tables import (
    ALL,
    HOLDERS,
    QUOTAS,
    SOURCE_COLUMNS,
    SOURCE_ORDER,
    USAGE,
    WAITER_COLUMNS,
    WAITERS,
)
from sluice.resources.models import HolderInfo, NamespaceSnapshot, QuotaSource


async def load_sources(
    conn: AsyncConnection, namespaces: Sequence[str] | None
) -> dict[str, dict[QuotaSource, int]]:
    query = sa.select(QUOTAS)
    if namespaces is not None:
        query = query.where(QUOTAS.c.namespace.in_(namespaces))
    rows = (await conn.execute(query)).mappings()
    return {
        row["namespace"]: {s: row[c] for s, c in SOURCE_COLUMNS.items() if row[c] is not None}
        for row in rows
    }


def sources_of(rows: Iterable[Sequence[Any]]) -> dict[str, dict[QuotaSource, int]]:
    """Quota sources from (namespace, operator, config, plugin, default) rows."""
    return {
        row[0]: {s: q for s, q in zip(SOURCE_ORDER, row[1:], strict=True) if q is not None}
        for row in rows
    }


@dataclass
class Loaded:
    """One transaction's view of the claimed namespaces, for the admission rule."""

    states: dict[str, NamespaceState]
    mine: dict[str, WaiterRecord]
    """The asker's own live waiter entries."""
    lapsed_waiters: bool


async def load_states(
    conn: AsyncConnection, quotas: Mapping[str, int], token: str, now: float
) -> Loaded:
    names = list(quotas)
    held_query = sa.select(HOLDERS.c.namespace).where(
        HOLDERS.c.token == token, HOLDERS.c.namespace.in_(names)
    )
    held = set((await conn.execute(held_query)).scalars())
    usage = await _load_usage(conn, names)
    waiters = await load_waiters(conn, names)
    return loaded_from(quotas, token, now, held, usage, waiters)


def loaded_from(
    quotas: Mapping[str, int],
    token: str,
    now: float,
    held: Set[str],
    usage: Mapping[str, Usage],
    waiters: Mapping[str, Sequence[WaiterRecord]],
) -> Loaded:
    """The rule's view of the claimed namespaces from their rows (waiters lapsed or not)."""
    loaded = Loaded({}, {}, lapsed_waiters=False)
    for ns, quota in quotas.items():
        live = [w for w in waiters.get(ns, ()) if w.expires_at > now]
        loaded.lapsed_waiters |= len(live) < len(waiters.get(ns, ()))
        mine = next((w for w in live if w.ask.token == token), None)
        others = tuple(w.ask for w in live if w.ask.token != token)
        since = mine.ask.since if mine else None
        loaded.states[ns] = NamespaceState(ns, quota, usage[ns], others, ns in held, since)
        if mine is not None:
            loaded.mine[ns] = mine
    return loaded


async def any_lapsed(conn: AsyncConnection, names: Sequence[str], now: float) -> bool:
    """Whether a lease in these namespaces has lapsed (and awaits reclaiming)."""
    query = sa.select(HOLDERS.c.token).where(
        HOLDERS.c.namespace.in_(names), HOLDERS.c.lease_expires_at <= now
    )
    return (await conn.execute(query.limit(1))).first() is not None


async def _load_usage(conn: AsyncConnection, names: Sequence[str]) -> dict[str, Usage]:
    rows = await conn.execute(sa.select(USAGE).where(USAGE.c.namespace.in_(names)))
    return usage_of(names, rows)


def usage_of(names: Iterable[str], rows: Iterable[Sequence[Any]]) -> dict[str, Usage]:
    """Usage per namespace from (namespace, project, domain, in_use) counter rows."""
    usage = {ns: Usage() for ns in names}
    for ns, project, domain, in_use in rows:
        if project == ALL:
            usage[ns].total = in_use
        elif domain == ALL:
            usage[ns].by_project[project] = in_use
        else:
            usage[ns].by_domain[(project, domain)] = in_use
    return usage


async def load_waiters(
    conn: AsyncConnection, names: Sequence[str] | None, live_at: float | None = None
) -> dict[str, list[WaiterRecord]]:
    query = sa.select(WAITERS)
    if names is not None:
        query = query.where(WAITERS.c.namespace.in_(names))
    if live_at is not None:
        query = query.where(WAITERS.c.expires_at > live_at)
    rows = [[row[c] for c in WAITER_COLUMNS] for row in (await conn.execute(query)).mappings()]
    return waiters_of(rows)


def waiters_of(rows: Iterable[Sequence[Any]]) -> dict[str, list[WaiterRecord]]:
    """Waiter records per namespace from rows in WAITER_COLUMNS order."""
    waiters: dict[str, list[WaiterRecord]] = {}
    for (
        ns,
        token,
        project,
        domain,
        execution,
        node,
        units,
        priority,
        pc,
        dc,
        since,
        expiry,
        b,
    ) in rows:
        ask = Ask(token, project, domain, int(units), pc, dc, int(priority), float(since))
        waiters.setdefault(ns, []).append(stored_waiter(ask, execution, node, float(expiry), b))
    return waiters


async def lapsed_namespaces(conn: AsyncConnection, now: float) -> set[str]:
    """Namespaces with a lapsed lease or waiter (both found through their expiry index)."""
    holders = sa.select(HOLDERS.c.namespace).where(HOLDERS.c.lease_expires_at <= now)
    waiters = sa.select(WAITERS.c.namespace).where(WAITERS.c.expires_at <= now)
    return set((await conn.execute(sa.union(holders, waiters))).scalars())


async def usage_with_ready(
    conn: AsyncConnection, names: Sequence[str], now: float
) -> tuple[NamespaceUsage, ...]:
    """In-use units, live waiters, and the waiters now ready, of each namespace."""
    sources = await load_sources(conn, names)
    usage = await _load_usage(conn, names)
    waiters = await load_waiters(conn, names, live_at=now)
    return ready_usage(names, sources, usage, waiters, now)


def ready_usage(
    names: Iterable[str],
    sources: Mapping[str, Mapping[QuotaSource, int]],
    usage: Mapping[str, Usage],
    waiters: Mapping[str, Sequence[WaiterRecord]],
    now: float,
) -> tuple[NamespaceUsage, ...]:
    """In-use units, live waiters (`waiters` holds only live ones) and the waiters now
    ready, of each namespace."""
    result = []
    for ns in sorted(names):
        asks = [w.ask for w in waiters.get(ns, ())]
        quota = effective_quota(sources.get(ns, {}))[0]
        ready = next_in_line(quota, usage[ns], asks, now) if asks else None
        result.append(NamespaceUsage(ns, usage[ns].total, len(asks), ready))
    return tuple(result)


async def read_snapshot(
    conn: AsyncConnection, namespace: str | None, now: float
) -> list[NamespaceSnapshot]:
    names = None if namespace is None else [namespace]
    sources = await load_sources(conn, names)
    query = (
        sa.select(HOLDERS)
        if names is None
        else sa.select(HOLDERS).where(HOLDERS.c.namespace.in_(names))
    )
    holders: dict[str, list[HolderInfo]] = {}
    for row in (await conn.execute(query)).mappings():
        holders.setdefault(row["namespace"], []).append(
            HolderInfo(
                row["token"],
                row["project"],
                row["domain"],
                row["execution_id"],
                row["node_id"],
                row["units"],
                row["granted_at"],
                row["lease_expires_at"],
            )
        )
    waiters = await load_waiters(conn, names, live_at=now)
    every = sorted(set(sources) | set(holders) | set(waiters))
    return [
        build_snapshot(ns, sources.get(ns, {}), holders.get(ns, ()), waiters.get(ns, ()))
        for ns in every
    ]
