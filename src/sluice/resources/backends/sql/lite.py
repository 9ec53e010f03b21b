"""The SQL backend's hot paths on SQLite, through the store's direct sqlite3 path.

The same reads, writes and admission rule as `reads.py` and `writes.py`, in plain SQL on a
sqlite3 cursor, run inside one `SqliteDirect` transaction on the event loop's thread: an
allocation or a release is one BEGIN IMMEDIATE ... COMMIT of a few cached statements (the
sqlite3 module keeps them prepared), with no thread hop and no SQLAlchemy construct per call.
What each statement is for, and why it is needed, is in docs/performance.md.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sluice.resources.admission import NamespaceState, Plan, Usage, plan_allocation
from sluice.resources.backends._shared import WaiterRecord, resolve_quota
from sluice.resources.backends.base import NamespaceUsage, TimedRequest
from sluice.resources.backends.sql.reads import (
    Loaded,
    loaded_from,
    ready_usage,
    sources_of,
    usage_of,
    waiters_of,
)
from sluice.resources.backends.sql.tables import ALL, SOURCE_ORDER, WAITER_COLUMNS, ScopeKey
from sluice.resources.backends.sql.writes import defaults_to_store, waiter_row, waiters_to_write
from sluice.resources.models import Claim, QuotaSource

Cursor = sqlite3.Cursor
_QUOTA_COLUMNS = ", ".join(
    ["namespace", *(f"{source}_quota" for source in SOURCE_ORDER)]
)  # operator, config, plugin, default: SOURCE_ORDER
_WAITER_SELECT = ", ".join(WAITER_COLUMNS)


def _marks(values: Sequence[object]) -> str:
    return ", ".join("?" * len(values))


# Lapsed leases are found through the lease index (few: the sweep reclaims them); by the
# namespace's key, the planner's choice, every holder of a busy namespace was walked per call.


# Reads.
def load_sources(cur: Cursor, names: Sequence[str]) -> dict[str, dict[QuotaSource, int]]:
    rows = cur.execute(
        f"SELECT {_QUOTA_COLUMNS} FROM resource_quotas WHERE namespace IN ({_marks(names)})",
        tuple(names),
    ).fetchall()
    return sources_of(rows)


def load_usage(cur: Cursor, names: Sequence[str]) -> dict[str, Usage]:
    rows = cur.execute(
        "SELECT namespace, project, domain, in_use FROM resource_usage"
        f" WHERE namespace IN ({_marks(names)})",
        tuple(names),
    ).fetchall()
    return usage_of(names, rows)


def load_waiters(
    cur: Cursor, names: Sequence[str], live_at: float | None = None
) -> dict[str, list[WaiterRecord]]:
    query = f"SELECT {_WAITER_SELECT} FROM resource_waiters WHERE namespace IN ({_marks(names)})"
    params: tuple[object, ...] = tuple(names)
    if live_at is not None:
        query += " AND expires_at > ?"
        params += (live_at,)
    return waiters_of(cur.execute(query, params).fetchall())


def load_states(cur: Cursor, quotas: Mapping[str, int], token: str, now: float) -> Loaded:
    names = list(quotas)
    held = {
        row[0]
        for row in cur.execute(
            "SELECT namespace FROM resource_holders"
            f" WHERE token = ? AND namespace IN ({_marks(names)})",
            (token, *names),
        )
    }
    return loaded_from(quotas, token, now, held, load_usage(cur, names), load_waiters(cur, names))


def any_lapsed(cur: Cursor, names: Sequence[str], now: float) -> bool:
    row = cur.execute(
        "SELECT 1 FROM resource_holders INDEXED BY ix_resource_holders_lease"
        f" WHERE namespace IN ({_marks(names)}) AND lease_expires_at <= ? LIMIT 1",
        (*names, now),
    ).fetchone()
    return row is not None


def usage_with_ready(cur: Cursor, names: Sequence[str], now: float) -> tuple[NamespaceUsage, ...]:
    """In-use units, live waiters and the waiters now ready; the quotas are read only where
    someone waits (nobody to rank otherwise)."""
    waiters = load_waiters(cur, names, live_at=now)
    sources = load_sources(cur, names) if waiters else {}
    return ready_usage(names, sources, load_usage(cur, names), waiters, now)


# Writes.
def count_units(cur: Cursor, changes: Iterable[tuple[str, str, str, int]]) -> None:
    """Add each (namespace, project, domain, units) to its three scope counters; rows at
    zero go."""
    deltas: Counter[ScopeKey] = Counter()
    for ns, project, domain, units in changes:
        for key in ((ns, ALL, ALL), (ns, project, ALL), (ns, project, domain)):
            deltas[key] += units
    if not deltas:
        return
    rows = ", ".join(["(?, ?, ?, ?)"] * len(deltas))  # one statement for every counter
    cur.execute(
        f"INSERT INTO resource_usage (namespace, project, domain, in_use) VALUES {rows}"
        " ON CONFLICT (namespace, project, domain) DO UPDATE SET in_use = in_use + excluded.in_use",
        [value for (n, p, d), v in deltas.items() for value in (n, p, d, v)],
    )
    touched = sorted({key[0] for key, units in deltas.items() if units < 0})
    if touched:
        cur.execute(
            f"DELETE FROM resource_usage WHERE namespace IN ({_marks(touched)}) AND in_use <= 0",
            tuple(touched),
        )


def reclaim_holders(cur: Cursor, names: Sequence[str], now: float) -> set[str]:
    gone = cur.execute(
        "DELETE FROM resource_holders INDEXED BY ix_resource_holders_lease"
        f" WHERE namespace IN ({_marks(names)}) AND lease_expires_at <= ?"
        " RETURNING namespace, project, domain, units",
        (*names, now),
    ).fetchall()
    count_units(cur, [(ns, p, d, -units) for ns, p, d, units in gone])
    return {row[0] for row in gone}


def reclaim_waiters(cur: Cursor, names: Sequence[str], now: float) -> set[str]:
    gone = cur.execute(
        f"DELETE FROM resource_waiters WHERE namespace IN ({_marks(names)}) AND expires_at <= ?"
        " RETURNING namespace",
        (*names, now),
    ).fetchall()
    return {row[0] for row in gone}


def extend_leases(
    cur: Cursor, token: str, names: Sequence[str], now: float, lease: float
) -> set[str]:
    """Push the token's live leases (and waiter entries) to now + lease; where it holds."""
    if not names:
        return set()
    params = (now + lease, token, *names, now)
    where = f"token = ? AND namespace IN ({_marks(names)})"
    held = cur.execute(
        f"UPDATE resource_holders SET lease_expires_at = ? WHERE {where}"
        " AND lease_expires_at > ? AND NOT EXISTS (SELECT 1 FROM resource_holder_marks AS m"
        " WHERE m.namespace = resource_holders.namespace AND m.token = resource_holders.token"
        " AND m.granted_at = resource_holders.granted_at AND m.preempted_by IS NOT NULL)"
        " RETURNING namespace",
        params,
    ).fetchall()
    cur.execute(
        f"UPDATE resource_waiters SET expires_at = ? WHERE {where} AND expires_at > ?", params
    )
    return {row[0] for row in held}


def transfer(
    cur: Cursor, old: str, new: str, names: Sequence[str], now: float, lease: float
) -> set[str]:
    """ResourceBackend.transfer, in the caller's write transaction."""
    moved = cur.execute(
        "UPDATE resource_holders SET token = ?, lease_expires_at = ?"
        f" WHERE token = ? AND namespace IN ({_marks(names)}) AND lease_expires_at > ?"
        " AND NOT EXISTS (SELECT 1 FROM resource_holders AS h"
        " WHERE h.token = ? AND h.namespace = resource_holders.namespace)"
        " AND NOT EXISTS (SELECT 1 FROM resource_holder_marks AS m"  # preempted: it must stop
        " WHERE m.namespace = resource_holders.namespace AND m.token = resource_holders.token"
        " AND m.granted_at = resource_holders.granted_at AND m.preempted_by IS NOT NULL)"
        " RETURNING namespace",
        (new, now + lease, old, *names, now, new),
    ).fetchall()
    return {row[0] for row in moved}


def insert_holders(cur: Cursor, request: TimedRequest, claims: Sequence[Claim]) -> None:
    holder, expiry = request.holder, request.now + request.lease
    cur.executemany(
        "INSERT INTO resource_holders (namespace, token, project, domain, execution_id,"
        " node_id, units, granted_at, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                c.namespace,
                request.token,
                holder.project,
                holder.domain,
                holder.execution_id,
                holder.node_id,
                c.units,
                request.now,
                expiry,
            )
            for c in claims
        ],
    )


def drop_waiter_entries(cur: Cursor, token: str, names: Sequence[str]) -> set[str]:
    gone = cur.execute(
        f"DELETE FROM resource_waiters WHERE token = ? AND namespace IN ({_marks(names)})"
        " RETURNING namespace",
        (token, *names),
    ).fetchall()
    return {row[0] for row in gone}


def upsert_waiters(cur: Cursor, records: Sequence[tuple[str, WaiterRecord]]) -> None:
    if not records:
        return
    updated = ", ".join(f"{c} = excluded.{c}" for c in WAITER_COLUMNS[2:])
    cur.executemany(
        f"INSERT INTO resource_waiters ({_WAITER_SELECT}) VALUES ({_marks(WAITER_COLUMNS)})"
        f" ON CONFLICT (namespace, token) DO UPDATE SET {updated}",
        [tuple(waiter_row(ns, record)[c] for c in WAITER_COLUMNS) for ns, record in records],
    )


def store_defaults(cur: Cursor, quotas: Mapping[str, int | None], now: float) -> None:
    cur.executemany(
        "INSERT INTO resource_quotas (namespace, default_quota, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT (namespace) DO UPDATE SET default_quota = excluded.default_quota,"
        " updated_at = excluded.updated_at",
        [(ns, q, now) for ns, q in quotas.items()],
    )


def forget_empty(cur: Cursor, names: Sequence[str]) -> None:
    """Delete quota rows holding only a claim's default where nothing is held or waiting,
    then the counters at zero of those namespaces that keep no quota row."""
    marks = _marks(names)
    cur.execute(
        f"DELETE FROM resource_quotas AS q WHERE namespace IN ({marks})"
        " AND operator_quota IS NULL AND config_quota IS NULL AND plugin_quota IS NULL"
        " AND NOT EXISTS (SELECT 1 FROM resource_holders h WHERE h.namespace = q.namespace)"
        " AND NOT EXISTS (SELECT 1 FROM resource_waiters w WHERE w.namespace = q.namespace)",
        tuple(names),
    )
    cur.execute(
        f"DELETE FROM resource_usage AS u WHERE namespace IN ({marks}) AND in_use <= 0"
        " AND NOT EXISTS (SELECT 1 FROM resource_quotas q WHERE q.namespace = u.namespace)",
        tuple(names),
    )


# Operations.
@dataclass(frozen=True)
class Allocated:
    plan: Plan
    states: dict[str, NamespaceState]
    reclaimed: set[str]
    request: TimedRequest
    """The request as judged: its `now` the store's time read inside the transaction."""


def allocate(cur: Cursor, request: TimedRequest) -> Allocated:
    """Judge and record one allocation (see ResourceBackend.allocate), in the caller's write
    transaction; the caller publishes `reclaimed`."""
    names = [c.namespace for c in request.claims]
    sources = load_sources(cur, names)
    quotas = {c.namespace: resolve_quota(c, sources.get(c.namespace, {})) for c in request.claims}
    reclaimed = reclaim_holders(cur, names, request.now)
    loaded = load_states(cur, quotas, request.token, request.now)
    if loaded.lapsed_waiters:
        reclaimed |= reclaim_waiters(cur, names, request.now)
    states = loaded.states
    plan = plan_allocation(request.token, request.claims, request.holder, request.now, states)
    held = [ns for ns, state in states.items() if state.holding]
    extend_leases(cur, request.token, held, request.now, request.lease)
    if plan.granted:
        new = [c for c in request.claims if not states[c.namespace].holding]
        holder = request.holder
        if new:
            insert_holders(cur, request, new)
            count_units(cur, [(c.namespace, holder.project, holder.domain, c.units) for c in new])
        if any(state.asker_since is not None for state in states.values()):
            drop_waiter_entries(cur, request.token, list(states))
    else:
        upsert_waiters(cur, waiters_to_write(request, plan, loaded))
    defaults = defaults_to_store(request, sources)
    if defaults:
        store_defaults(cur, defaults, request.now)
    return Allocated(plan, states, reclaimed, request)


def read_for_refusal(cur: Cursor, request: TimedRequest) -> Loaded | None:
    """What `SqlBackend._refusal_without_writes` reads, in a read transaction; None when a
    write is needed anyway."""
    names = [c.namespace for c in request.claims]
    sources = load_sources(cur, names)
    quotas = {c.namespace: resolve_quota(c, sources.get(c.namespace, {})) for c in request.claims}
    if defaults_to_store(request, sources) or any_lapsed(cur, names, request.now):
        return None
    return load_states(cur, quotas, request.token, request.now)


def release(
    cur: Cursor, token: str, names: Sequence[str], now: float
) -> tuple[NamespaceUsage, ...]:
    """Drop the token's holders and waiter entries; the usage and ready waiters of every
    namespace that changed (the caller publishes them)."""
    gone = cur.execute(
        f"DELETE FROM resource_holders WHERE token = ? AND namespace IN ({_marks(names)})"
        " RETURNING namespace, project, domain, units",
        (token, *names),
    ).fetchall()
    count_units(cur, [(ns, p, d, -units) for ns, p, d, units in gone])
    changed = sorted({row[0] for row in gone} | drop_waiter_entries(cur, token, names))
    if not changed:
        return ()
    usage = usage_with_ready(cur, changed, now)
    idle = [u.namespace for u in usage if u.in_use == 0 and u.waiters == 0]
    if idle:
        forget_empty(cur, idle)
    return usage
