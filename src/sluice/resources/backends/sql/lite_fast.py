"""Uncontended fast paths of the SQLite hot paths (`lite.py`), same semantics, fewer steps.

An allocation where nobody waits in any claimed namespace, no lease there has lapsed and the
token holds none of them needs none of the admission rule's data structures: with no waiter
ranked ahead, `admission.admit` reduces to three comparisons (global room, project cap,
project/domain cap) on three counters. `grant` reads everything that decision needs in one
statement per namespace, and when every claim fits, writes the holders and their counters:
three statements instead of seven, no waiter rows decoded, no plan built. Anything else
(someone waits, a lapsed lease to reclaim, the token already holds or waits, a claim that
does not fit) returns None with nothing written, and the caller runs the general path
(`lite.allocate`) in the same transaction, which judges again from scratch.

A release whose token held every namespace named takes the freed totals from the counter
upsert's RETURNING instead of reading the counters again, skips the waiter delete (a token
never waits where it holds), and asks in one statement per namespace whether anyone waits
there and whether the namespace's quota is only a claim's default. Where nobody waits, no
waiter is ranked. Counters at zero stay where a quota is stored (plugin, config, operator):
deleting them only for the next grant to insert them again wrote the counters' key index on
every commit. Where the quota is only a default (a lock name, thousands of them short-lived),
an idle namespace's quota row and counters go (`lite.forget_empty`), so nothing is left
behind. Otherwise it is the general `lite.release`'s work.

Statements are fixed strings (one per number of namespaces where a list is needed), so the
sqlite3 module's statement cache keeps them prepared.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import cache

from sluice.resources.backends._shared import resolve_quota
from sluice.resources.backends.base import NamespaceUsage, TimedRequest
from sluice.resources.backends.sql import lite
from sluice.resources.backends.sql.tables import SOURCE_ORDER
from sluice.resources.models import Claim, QuotaSource

Cursor = sqlite3.Cursor

# One row per claimed namespace, even without a quota row: the quota sources, whether anyone
# waits (lapsed or not: a lapsed waiter must be reclaimed by the general path), whether the
# token holds there or a lease lapsed, and the three counters the caps are judged on. Lapsed
# leases are found through the lease index (few: the sweep reclaims them), not by walking
# every holder of the namespace, which the planner would otherwise pick.
_PROBE = (
    "SELECT q.operator_quota, q.config_quota, q.plugin_quota, q.default_quota,"
    " EXISTS (SELECT 1 FROM resource_waiters WHERE namespace = ?1),"
    " EXISTS (SELECT 1 FROM resource_holders WHERE namespace = ?1 AND token = ?2),"
    " EXISTS (SELECT 1 FROM resource_holders INDEXED BY ix_resource_holders_lease"
    " WHERE lease_expires_at <= ?3 AND namespace = ?1),"
    " (SELECT in_use FROM resource_usage WHERE namespace = ?1 AND project = '' AND domain = ''),"
    " (SELECT in_use FROM resource_usage WHERE namespace = ?1 AND project = ?4 AND domain = ''),"
    " (SELECT in_use FROM resource_usage WHERE namespace = ?1 AND project = ?4 AND domain = ?5)"
    " FROM (SELECT 1) LEFT JOIN resource_quotas AS q ON q.namespace = ?1"
)
_HOLD = (
    "INSERT INTO resource_holders (namespace, token, project, domain, execution_id, node_id,"
    " units, granted_at, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
# A holder's units (?4, negative to free them) added to its three scope counters.
_COUNT = (
    "INSERT INTO resource_usage (namespace, project, domain, in_use)"
    " VALUES (?1, '', '', ?4), (?1, ?2, '', ?4), (?1, ?2, ?3, ?4)"
    " ON CONFLICT (namespace, project, domain) DO UPDATE SET in_use = in_use + excluded.in_use"
)
_UNCOUNT = _COUNT + " RETURNING project, in_use"
# Per namespace a token released: does a live waiter remain, and is its quota only a
# claim's default (1), or is there no quota row (NULL)? Then an idle namespace is forgotten.
_AFTER_RELEASE = (
    "SELECT EXISTS (SELECT 1 FROM resource_waiters WHERE namespace = ?1 AND expires_at > ?2),"
    " (SELECT operator_quota IS NULL AND config_quota IS NULL AND plugin_quota IS NULL"
    " FROM resource_quotas WHERE namespace = ?1)"
)


@cache
def _drop_holders(count: int) -> str:
    return (
        "DELETE FROM resource_holders WHERE token = ? AND namespace IN"
        f" ({', '.join('?' * count)}) RETURNING namespace, project, domain, units"
    )


def grant(cur: Cursor, request: TimedRequest) -> tuple[NamespaceUsage, ...] | None:
    """Grant an uncontended request (see the module's docstring) and return the usage after
    it; None, with nothing written, when the general path must judge. Raises like the general
    path for an unknown namespace or a claim larger than its quota."""
    holder, now, usage, defaults = request.holder, request.now, [], {}
    project, domain = holder.project, holder.domain
    for claim in request.claims:
        row = cur.execute(_PROBE, (claim.namespace, request.token, now, project, domain)).fetchone()
        sources: dict[QuotaSource, int] = {
            s: q for s, q in zip(SOURCE_ORDER, row[:4], strict=True) if q is not None
        }
        quota = resolve_quota(claim, sources)
        if row[4] or row[5] or row[6] or not _fits(claim, quota, row[7:]):
            return None  # someone waits, the token holds, a lease lapsed, or no room
        if claim.default_quota is not None and sources.get("default") != claim.default_quota:
            defaults[claim.namespace] = claim.default_quota
        usage.append(NamespaceUsage(claim.namespace, (row[7] or 0) + claim.units, 0))
    expiry, who = now + request.lease, (holder.execution_id, holder.node_id)
    for claim in request.claims:
        ns, units = claim.namespace, claim.units
        cur.execute(_HOLD, (ns, request.token, project, domain, *who, units, now, expiry))
        cur.execute(_COUNT, (ns, project, domain, units))
    if defaults:
        lite.store_defaults(cur, defaults, now)
    return tuple(usage)


def _fits(claim: Claim, quota: int, counters: Sequence[int | None]) -> bool:
    """`admission.admit` with nobody waiting: global room, then the two caps."""
    total, by_project, by_domain = (count or 0 for count in counters)
    if total + claim.units > quota:
        return False
    caps = claim.constraints
    if caps is None:
        return True
    if caps.project_scope is not None and by_project + claim.units > caps.project_scope:
        return False
    return caps.namespace_scope is None or by_domain + claim.units <= caps.namespace_scope


def release(
    cur: Cursor, token: str, names: Sequence[str], now: float
) -> tuple[NamespaceUsage, ...]:
    """`lite.release`, with the fast path of the module's docstring where it applies."""
    gone = cur.execute(_drop_holders(len(names)), (token, *names)).fetchall()
    totals = {ns: _uncount(cur, ns, project, domain, units) for ns, project, domain, units in gone}
    left = [ns for ns in names if ns not in totals]
    if left:
        changed = sorted(totals.keys() | lite.drop_waiter_entries(cur, token, left))
        if not changed:
            return ()
        usage = lite.usage_with_ready(cur, changed, now)
        _forget_idle(cur, usage)
        return usage
    changed = sorted(totals)
    after = {ns: cur.execute(_AFTER_RELEASE, (ns, now)).fetchone() for ns in changed}
    if any(waits for waits, _ in after.values()):
        usage = lite.usage_with_ready(cur, changed, now)
        _forget_idle(cur, usage)
        return usage
    forget = [ns for ns in changed if totals[ns] == 0 and after[ns][1] != 0]
    if forget:
        lite.forget_empty(cur, forget)
    return tuple(NamespaceUsage(ns, totals[ns], 0) for ns in changed)


def _uncount(cur: Cursor, namespace: str, project: str, domain: str, units: int) -> int:
    """Free a holder's units from its three counters; the namespace's total after it. Rows
    at zero stay (see the module's docstring)."""
    rows = cur.execute(_UNCOUNT, (namespace, project, domain, -units)).fetchall()
    return max(0, int(next(in_use for scope, in_use in rows if scope == "")))


def _forget_idle(cur: Cursor, usage: Sequence[NamespaceUsage]) -> None:
    idle = [u.namespace for u in usage if u.in_use == 0 and u.waiters == 0]
    if idle:
        lite.forget_empty(cur, idle)
