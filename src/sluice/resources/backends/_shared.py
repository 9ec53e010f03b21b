"""Row shapes and bookkeeping shared by the backends that run the admission rule in Python
(memory and SQL); the Redis backend does the same in Lua."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import get_args

from sluice.errors import ClaimExceedsQuotaError, UnknownNamespaceError
from sluice.resources.admission import (
    Ask,
    NamespaceState,
    Plan,
    ask_for,
    effective_quota,
    refused_elsewhere,
)
from sluice.resources.backends.base import AllocationRequest, NamespaceUsage, TimedRequest
from sluice.resources.models import (
    QUOTA_SOURCES,
    Claim,
    HolderInfo,
    NamespaceSnapshot,
    QuotaSource,
    Scope,
    WaiterInfo,
)


@dataclass(frozen=True)
class WaiterRecord:
    """A stored waiter: its claim as the rule sees it, and what `quota ls` shows."""

    ask: Ask
    execution_id: str
    node_id: str
    expires_at: float
    blocking_scope: Scope

    def stored_scope(self) -> str:
        """The blocking scope as stored (SQL column, Redis entry, read by the Lua rule too):
        the scope, with ALSO_ELSEWHERE appended when another namespace refused it as well."""
        if self.ask.blocked_elsewhere and self.blocking_scope != "other":
            return self.blocking_scope + ALSO_ELSEWHERE
        return self.blocking_scope


ALSO_ELSEWHERE = "+other"
"""Suffix of a stored blocking scope: this namespace and another of the claim refused it."""


_SCOPES: dict[str, Scope] = {scope: scope for scope in get_args(Scope)}


def read_scope(stored: str) -> tuple[Scope, bool, bool]:
    """(blocking scope, blocked elsewhere, refused here) of a stored blocking scope. An entry
    stored before ALSO_ELSEWHERE existed reads as refused here only."""
    if stored == "other":
        return "other", True, False
    here = stored.removesuffix(ALSO_ELSEWHERE)
    return _SCOPES[here], here != stored, True


def stored_waiter(
    ask: Ask, execution_id: str, node_id: str, expires_at: float, stored: str
) -> WaiterRecord:
    """A waiter record from a stored entry (`ask` without the flags of its blocking scope)."""
    scope, elsewhere, here = read_scope(stored)
    flagged = dataclasses.replace(ask, blocked_elsewhere=elsewhere, refused_here=here)
    return WaiterRecord(flagged, execution_id, node_id, expires_at, scope)


def resolve_quota(claim: Claim, sources: Mapping[QuotaSource, int]) -> int:
    """The claim's effective quota; raises UnknownNamespaceError without one, and
    ClaimExceedsQuotaError when the claim could never fit in it."""
    quota, _ = effective_quota(sources, claim.default_quota)
    if quota is None:
        raise UnknownNamespaceError(
            f"unknown resource namespace {claim.namespace!r}: no quota registered, configured "
            "or set, and the claim brings no default"
        )
    if claim.units > quota:
        raise ClaimExceedsQuotaError(claim.namespace, claim.units, quota)
    return quota


def waiter_records(
    request: TimedRequest,
    plan: Plan,
    states: Mapping[str, NamespaceState],
    scopes: Mapping[str, Scope],
) -> list[tuple[str, WaiterRecord]]:
    """The waiter entries a refused request leaves, one per namespace it does not hold."""
    holder = request.holder
    return [
        (
            claim.namespace,
            WaiterRecord(
                dataclasses.replace(
                    ask_for(claim, request.token, holder, plan.since),
                    blocked_elsewhere=refused_elsewhere(plan, claim.namespace),
                    refused_here=scopes[claim.namespace] != "other",
                ),
                holder.execution_id,
                holder.node_id,
                request.now + request.lease,
                scopes[claim.namespace],
            ),
        )
        for claim in request.claims
        if not states[claim.namespace].holding
    ]


def usage_after(
    request: AllocationRequest, plan: Plan, states: Mapping[str, NamespaceState]
) -> tuple[NamespaceUsage, ...]:
    """In-use units and waiter counts of the claimed namespaces once the plan is applied."""
    usage = []
    for claim in request.claims:
        state = states[claim.namespace]
        added = claim.units if plan.granted and not state.holding else 0
        waiting = 0 if plan.granted or state.holding else 1
        usage.append(
            NamespaceUsage(claim.namespace, state.usage.total + added, len(state.waiters) + waiting)
        )
    return tuple(usage)


def build_snapshot(
    namespace: str,
    sources: Mapping[QuotaSource, int],
    holders: Iterable[HolderInfo],
    waiters: Iterable[WaiterRecord],
) -> NamespaceSnapshot:
    quota, source = effective_quota(sources)
    held = tuple(sorted(holders, key=lambda h: (h.since, h.token)))
    ranked = sorted(waiters, key=lambda w: w.ask.rank())
    return NamespaceSnapshot(
        namespace=namespace,
        quota=quota,
        quota_source=source,
        in_use=sum(h.units for h in held),
        holders=held,
        waiters=tuple(_waiter_info(i, w) for i, w in enumerate(ranked, 1)),
        quotas=tuple((s, sources[s]) for s in QUOTA_SOURCES if s in sources),
    )


def _waiter_info(position: int, record: WaiterRecord) -> WaiterInfo:
    ask = record.ask
    return WaiterInfo(
        position=position,
        token=ask.token,
        project=ask.project,
        domain=ask.domain,
        execution_id=record.execution_id,
        node_id=record.node_id,
        units=ask.units,
        priority=ask.priority,
        project_cap=ask.project_cap,
        domain_cap=ask.domain_cap,
        since=ask.since,
        expires_at=record.expires_at,
        blocking_scope=record.blocking_scope,
    )
