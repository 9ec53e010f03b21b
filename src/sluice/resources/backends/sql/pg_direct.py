"""The SQL backend's hot paths on PostgreSQL, on the store's direct psycopg connections.

One call of a server function (migration 0002) per step instead of a statement per row set;
the functions do bookkeeping only, the admission rule runs here in Python on what they
return, inside the same transaction. With the rarer writes (waiter entries, lease renewals,
claim defaults) they are plain psycopg statements inside one pipelined transaction
(`PgDirect.transaction`): an allocation is two round trips (BEGIN + the load, then the writes
+ COMMIT), a release two (BEGIN + the release, then the wake-up + COMMIT), with no SQLAlchemy
construct, pool pre-ping or greenlet switch per call. Before them, the one-call functions of
migrations 0005 and 0006 take the uncontended grant and release and a woken waiter's grant
(one round trip each). Releases commit without waiting for their WAL flush; grants and
renewals wait for it (migration 0006 states why).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sluice.resources.admission import Usage, plan_allocation
from sluice.resources.backends._shared import WaiterRecord, resolve_quota
from sluice.resources.backends.base import AllocationRequest, NamespaceUsage
from sluice.resources.backends.sql.lite import Allocated
from sluice.resources.backends.sql.reads import (
    loaded_from,
    ready_usage,
    sources_of,
    usage_of,
    waiters_of,
)
from sluice.resources.backends.sql.tables import WAITER_COLUMNS
from sluice.resources.backends.sql.writes import (
    defaults_to_store,
    lock_keys,
    waiter_row,
    waiters_to_write,
)
from sluice.resources.models import QuotaSource
from sluice.store.notify import pg_notification
from sluice.store.servertime import pg_now_or

Conn = Any  # a psycopg AsyncConnection in pipeline mode

_CLOCK = f"(SELECT {pg_now_or('%s')} AS t) AS c"
"""The store's time as `c.t` (a test clock's when its placeholder is not NULL): every lease a
statement judges or writes is judged on the server's clock, read inside the statement."""
_LOAD = f"SELECT sluice_resources_load(%s::integer[], %s::text[], %s, c.t), c.t FROM {_CLOCK}"
_GRANT = (
    "SELECT sluice_resources_grant(%s, %s, %s, %s, %s, %s::text[], %s::integer[], %s, %s,"
    " %s::text[])"
)
_RELEASE = f"SELECT sluice_resources_release(%s::integer[], %s, %s::text[], c.t), c.t FROM {_CLOCK}"
_EXTEND_HOLDERS = (
    f"UPDATE resource_holders SET lease_expires_at = c.t + %s FROM {_CLOCK}"
    " WHERE token = %s AND namespace = ANY(%s::text[]) AND lease_expires_at > c.t"
    " AND NOT EXISTS (SELECT 1 FROM resource_holder_marks AS m"  # preempted: not renewed
    " WHERE m.namespace = resource_holders.namespace AND m.token = resource_holders.token"
    " AND m.granted_at = resource_holders.granted_at AND m.preempted_by IS NOT NULL)"
    " RETURNING namespace"
)
_EXTEND_WAITERS = (
    f"UPDATE resource_waiters SET expires_at = c.t + %s FROM {_CLOCK}"
    " WHERE token = %s AND namespace = ANY(%s::text[]) AND expires_at > c.t"
)
_TRANSFER = (
    f"UPDATE resource_holders AS r SET token = %s, lease_expires_at = c.t + %s FROM {_CLOCK}"
    " WHERE r.token = %s AND r.namespace = ANY(%s::text[]) AND r.lease_expires_at > c.t"
    " AND NOT EXISTS (SELECT 1 FROM resource_holders AS h"
    " WHERE h.token = %s AND h.namespace = r.namespace)"
    " AND NOT EXISTS (SELECT 1 FROM resource_holder_marks AS m"  # preempted: it must stop
    " WHERE m.namespace = r.namespace AND m.token = r.token"
    " AND m.granted_at = r.granted_at AND m.preempted_by IS NOT NULL) RETURNING r.namespace"
)
_UPSERT_WAITER = (
    f"INSERT INTO resource_waiters ({', '.join(WAITER_COLUMNS)})"
    f" VALUES ({', '.join(['%s'] * len(WAITER_COLUMNS))})"
    " ON CONFLICT (namespace, token) DO UPDATE SET "
    + ", ".join(f"{c} = EXCLUDED.{c}" for c in WAITER_COLUMNS[2:])
)
_STORE_DEFAULT = (
    "INSERT INTO resource_quotas (namespace, default_quota, updated_at) VALUES (%s, %s, %s)"
    " ON CONFLICT (namespace) DO UPDATE SET default_quota = EXCLUDED.default_quota,"
    " updated_at = EXCLUDED.updated_at"
)
_NOTIFY = "SELECT pg_notify(%s, %s)"
_TRY_GRANT = (
    "SELECT sluice_resources_try_grant(%s::integer[], %s::text[], %s::integer[],"
    " %s::integer[], %s::integer[], %s::integer[], %s, %s, %s, %s, %s, c.t, c.t + %s)"
    f" FROM {_CLOCK}"
)
_TRY_GRANT_WAITER = (
    f"SELECT totals, waiting, since, c.t FROM {_CLOCK}, sluice_resources_try_grant_waiter("
    "%s::integer[], %s::text[], %s::integer[], %s::integer[], %s::integer[], %s::integer[],"
    " %s, %s, %s, %s, %s, %s, c.t, c.t + %s)"
)
_TRY_RELEASE = "SELECT sluice_resources_try_release(%s::integer[], %s, %s::text[], %s, %s, %s)"
_ASYNC_COMMIT = "SET LOCAL synchronous_commit = off"
"""A release's commit need not wait for its WAL flush: a crash that loses it withholds the
units until the lease lapses, and any grant of the freed units (a synchronous commit, later
in the WAL) flushes the release first. Migration 0006 states the argument; grants and lease
renewals stay synchronous."""


@dataclass(frozen=True)
class Rows:
    """What an allocation reads of its namespaces, lapsed leases and waiters reclaimed."""

    now: float
    """The store's time in the transaction (the server's clock, or a test clock's)."""
    sources: dict[str, dict[QuotaSource, int]]
    held: set[str]
    usage: dict[str, Usage]
    waiters: dict[str, list[WaiterRecord]]
    reclaimed: set[str]


async def load(conn: Conn, names: Sequence[str], token: str, now: float | None) -> Rows:
    """Lock the namespaces, reclaim what lapsed there, and read them (waits for the answer),
    with the store's time the judgement uses."""
    cursor = await conn.execute(_LOAD, (lock_keys(names), list(names), token, now))
    row = await cursor.fetchone()
    answer: Mapping[str, Any] = row[0]
    return Rows(
        float(row[1]),
        sources_of(answer["sources"]),
        set(answer["held"]),
        usage_of(names, answer["usage"]),
        waiters_of(answer["waiters"]),
        set(answer["reclaimed"]),
    )


async def allocate(conn: Conn, request: AllocationRequest) -> Allocated:
    """Judge and record one allocation (see ResourceBackend.allocate) in the caller's
    transaction; the caller publishes `reclaimed`. Only the load waits for its answer."""
    names = [c.namespace for c in request.claims]
    read = await load(conn, names, request.token, request.now)
    request = request.at(read.now)
    quotas = {
        c.namespace: resolve_quota(c, read.sources.get(c.namespace, {})) for c in request.claims
    }
    loaded = loaded_from(quotas, request.token, request.now, read.held, read.usage, read.waiters)
    states = loaded.states
    plan = plan_allocation(request.token, request.claims, request.holder, request.now, states)
    held = [ns for ns, state in states.items() if state.holding]
    if held:
        await extend_leases(conn, request.token, held, request.now, request.lease, wait=False)
    if plan.granted:
        new = [c for c in request.claims if not states[c.namespace].holding]
        waited = any(state.asker_since is not None for state in states.values())
        holder = request.holder
        await conn.execute(
            _GRANT,
            (
                request.token,
                holder.project,
                holder.domain,
                holder.execution_id,
                holder.node_id,
                [c.namespace for c in new],
                [c.units for c in new],
                request.now,
                request.now + request.lease,
                list(states) if waited else [],
            ),
        )
    else:
        await upsert_waiters(conn, waiters_to_write(request, plan, loaded))
    defaults = defaults_to_store(request, read.sources)
    if defaults:
        await conn.cursor().executemany(
            _STORE_DEFAULT, [(ns, q, request.now) for ns, q in defaults.items()]
        )
    return Allocated(plan, states, read.reclaimed, request)


async def extend_leases(
    conn: Conn,
    token: str,
    names: Sequence[str],
    now: float | None,
    lease: float,
    *,
    wait: bool = True,
) -> set[str]:
    """Push the token's live leases (and waiter entries) to now + lease, `now` the store's
    time (None: the server's clock); where it holds (an empty set, not waited for, with
    `wait=False`)."""
    if not names:
        return set()
    params = (lease, now, token, list(names))
    cursor = await conn.execute(_EXTEND_HOLDERS, params)
    await conn.execute(_EXTEND_WAITERS, params)
    if not wait:
        return set()
    return {row[0] for row in await cursor.fetchall()}


async def transfer(
    conn: Conn, old: str, new: str, names: Sequence[str], now: float | None, lease: float
) -> set[str]:
    """ResourceBackend.transfer as one statement, on the store's clock when `now` is None.
    The rows' locks order it against a concurrent reclaim, which re-checks the expiry."""
    cursor = await conn.execute(_TRANSFER, (new, lease, now, old, list(names), new))
    return {row[0] for row in await cursor.fetchall()}


async def upsert_waiters(conn: Conn, records: Sequence[tuple[str, WaiterRecord]]) -> None:
    if records:
        rows = [tuple(waiter_row(ns, record)[c] for c in WAITER_COLUMNS) for ns, record in records]
        await conn.cursor().executemany(_UPSERT_WAITER, rows)


async def release(
    conn: Conn, token: str, names: Sequence[str], now: float | None
) -> tuple[NamespaceUsage, ...]:
    """Lock, drop the token's holders and waiter entries, forget idle namespaces; the usage
    and ready waiters of every namespace that changed (waits for the answer). The caller's
    transaction commits without waiting for its WAL flush (`_ASYNC_COMMIT`)."""
    await conn.execute(_ASYNC_COMMIT)
    cursor = await conn.execute(_RELEASE, (lock_keys(names), token, list(names), now))
    row = await cursor.fetchone()
    answer: Mapping[str, Any] = row[0]
    now = float(row[1])
    changed = sorted(set(answer["changed"]))
    if not changed:
        return ()
    return ready_usage(
        changed,
        sources_of(answer["sources"]),
        usage_of(changed, answer["usage"]),
        waiters_of(answer["waiters"]),
        now,
    )


def array_literal(values: Iterable[str | int | None]) -> str:
    """A PostgreSQL array literal of `values`: the hot calls pass their arrays as text, cast
    in the statement, because psycopg's list adaptation (element type lookup per list) was a
    third of a call's client CPU."""
    return "{" + ",".join(_element(v) for v in values) + "}"


def _element(value: str | int | None) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int):
        return str(value)
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _claim_arguments(request: AllocationRequest) -> list[Any]:
    """The claims' and holder's arguments of the one-call grants, in their order."""
    claims, holder = request.claims, request.holder
    caps = [c.constraints for c in claims]
    return [
        array_literal(lock_keys(c.namespace for c in claims)),
        array_literal([c.namespace for c in claims]),
        array_literal([c.units for c in claims]),
        array_literal([c.default_quota for c in claims]),
        array_literal([None if cap is None else cap.project_scope for cap in caps]),
        array_literal([None if cap is None else cap.namespace_scope for cap in caps]),
        request.token,
        holder.project,
        holder.domain,
        holder.execution_id,
        holder.node_id,
    ]


async def try_grant(conn: Conn, request: AllocationRequest) -> tuple[NamespaceUsage, ...] | None:
    """The uncontended grant of migration 0005, as one autocommit statement (one round trip,
    one commit): the usage after it, or None (nothing written) for the general path."""
    arguments = [*_claim_arguments(request), request.lease, request.now]
    cursor = await conn.execute(_TRY_GRANT, arguments)
    row = await cursor.fetchone()
    totals = row[0] if row is not None else None
    if totals is None:
        return None
    claims = request.claims
    return tuple(NamespaceUsage(c.namespace, n, 0) for c, n in zip(claims, totals, strict=True))


async def try_grant_waiter(
    conn: Conn, request: AllocationRequest
) -> tuple[float, tuple[NamespaceUsage, ...], float] | None:
    """The grant of a waiter first in line everywhere (migration 0006), as one autocommit
    statement: its first refusal time, the usage after it and the store's time of the grant,
    or None (nothing written) for the general path."""
    arguments = [request.now, *_claim_arguments(request), request.holder.priority, request.lease]
    cursor = await conn.execute(_TRY_GRANT_WAITER, arguments)
    row = await cursor.fetchone()
    if row is None or row[0] is None:
        return None
    totals, waiting, since, now = row
    usage = zip(request.claims, totals, waiting, strict=True)
    return since, tuple(NamespaceUsage(c.namespace, n, w) for c, n, w in usage), float(now)


def release_arguments(
    token: str, names: Sequence[str], channel: str, origin: str | None
) -> tuple[Any, ...]:
    """The one-call release's arguments, in their order."""
    pg_channel, prefix = pg_notification(channel, "")
    keys = array_literal(lock_keys(names))
    return (keys, token, array_literal(names), pg_channel, prefix, origin)


async def try_release(
    conn: Conn, token: str, names: Sequence[str], channel: str, origin: str | None
) -> tuple[NamespaceUsage, ...] | None:
    """The release of migration 0005 where nobody waits, as one autocommit statement that
    also NOTIFYs (with `origin`; payload {"origin", "wake": [[namespace, null], ...]}, as the
    general path's): the usage after it, or None (nothing written) for the general path."""
    cursor = await conn.execute(_TRY_RELEASE, release_arguments(token, names, channel, origin))
    row = await cursor.fetchone()
    freed = row[0] if row is not None else None
    if freed is None:
        return None
    return tuple(NamespaceUsage(ns, in_use, 0) for ns, in_use in sorted(freed))


async def notify(conn: Conn, channel: str, payload: str) -> None:
    """Queue a NOTIFY, delivered when the transaction commits."""
    await conn.execute(_NOTIFY, pg_notification(channel, payload))
