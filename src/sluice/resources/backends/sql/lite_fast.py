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

A release whose token held every namespace named, where nobody waits once it is gone, takes
the freed totals from the counter upsert's RETURNING instead of reading the counters again,
and skips the waiter delete (a token never waits where it holds). Otherwise it is the general
`lite.release`.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Sequence

from sluice.resources.backends._shared import resolve_quota
from sluice.resources.backends.base import AllocationRequest, NamespaceUsage
from sluice.resources.backends.sql import lite
from sluice.resources.backends.sql.reads import ready_usage
from sluice.resources.backends.sql.tables import ALL, SOURCE_ORDER, ScopeKey
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


def grant(cur: Cursor, request: AllocationRequest) -> tuple[NamespaceUsage, ...] | None:
    """Grant an uncontended request (see the module's docstring) and return the usage after
    it; None, with nothing written, when the general path must judge. Raises like the general
    path for an unknown namespace or a claim larger than its quota."""
    holder, usage, defaults = request.holder, [], {}
    for claim in request.claims:
        row = cur.execute(
            _PROBE, (claim.namespace, request.token, request.now, holder.project, holder.domain)
        ).fetchone()
        sources: dict[QuotaSource, int] = {
            s: q for s, q in zip(SOURCE_ORDER, row[:4], strict=True) if q is not None
        }
        quota = resolve_quota(claim, sources)
        waiting, holding, lapsed = row[4], row[5], row[6]
        if waiting or holding or lapsed or not _fits(claim, quota, row[7:]):
            return None
        if claim.default_quota is not None and sources.get("default") != claim.default_quota:
            defaults[claim.namespace] = claim.default_quota
        usage.append(NamespaceUsage(claim.namespace, (row[7] or 0) + claim.units, 0))
    lite.insert_holders(cur, request, request.claims)
    lite.count_units(
        cur, [(c.namespace, holder.project, holder.domain, c.units) for c in request.claims]
    )
    if defaults:
        lite.store_defaults(cur, defaults, request.now)
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
    marks = ", ".join("?" * len(names))
    gone = cur.execute(
        f"DELETE FROM resource_holders WHERE token = ? AND namespace IN ({marks})"
        " RETURNING namespace, project, domain, units",
        (token, *names),
    ).fetchall()
    freed = {row[0] for row in gone}
    totals = _uncount(cur, [(ns, p, d, -units) for ns, p, d, units in gone])
    left = [ns for ns in names if ns not in freed]
    changed = sorted(freed | (lite.drop_waiter_entries(cur, token, left) if left else set()))
    if not changed:
        return ()
    if left:
        usage = lite.usage_with_ready(cur, changed, now)
    else:
        waiters = lite.load_waiters(cur, changed, live_at=now)
        if waiters:
            sources = lite.load_sources(cur, changed)
            usage = ready_usage(changed, sources, lite.load_usage(cur, changed), waiters, now)
        else:
            usage = tuple(NamespaceUsage(ns, totals.get(ns, 0), 0) for ns in changed)
    idle = [u.namespace for u in usage if u.in_use == 0 and u.waiters == 0]
    if idle:
        lite.forget_empty(cur, idle)
    return usage


def _uncount(cur: Cursor, changes: Sequence[tuple[str, str, str, int]]) -> dict[str, int]:
    """`lite.count_units` for freed units; returns each namespace's total after it (0 where
    its counter went)."""
    deltas: Counter[ScopeKey] = Counter()
    for ns, project, domain, units in changes:
        for key in ((ns, ALL, ALL), (ns, project, ALL), (ns, project, domain)):
            deltas[key] += units
    if not deltas:
        return {}
    rows = ", ".join(["(?, ?, ?, ?)"] * len(deltas))
    after = cur.execute(
        f"INSERT INTO resource_usage (namespace, project, domain, in_use) VALUES {rows}"
        " ON CONFLICT (namespace, project, domain) DO UPDATE SET in_use = in_use + excluded.in_use"
        " RETURNING namespace, project, domain, in_use",
        [value for (n, p, d), v in deltas.items() for value in (n, p, d, v)],
    ).fetchall()
    spent = sorted({ns for ns, _, _, in_use in after if in_use <= 0})
    if spent:
        marks = ", ".join("?" * len(spent))
        cur.execute(
            f"DELETE FROM resource_usage WHERE namespace IN ({marks}) AND in_use <= 0",
            tuple(spent),
        )
    return {ns: max(n, 0) for ns, project, domain, n in after if (project, domain) == (ALL, ALL)}
