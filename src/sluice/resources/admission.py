"""The admission rule: is a claim granted now, and if not, what blocks it.

Pure functions over a snapshot of one or more namespaces. The memory and SQL backends call
them inside their lock or transaction; the Redis backend runs the same rule in
`backends/lua/_admission.lua` and `allocate.lua` (STARVATION_BOUND is written into the
scripts from here). Keep the two in step: the contract suite runs the same scenarios on
every backend. docs/resources.md states the rule for users.

Fair order. Waiters are ranked by (first refusal time, higher priority, token); the same token
has the same first refusal time in every namespace of its claim, so the rank is one total
order and two multi-namespace claims can never block each other. Before judging a claim, the
waiters ranked ahead of it set room aside, oldest first, but only those that could use it:

- one blocked only by room in this namespace (its caps here fit, counting what older waiters
  set aside, and no other namespace of its claim refused it at its last ask, see
  `Ask.blocked_elsewhere`) sets aside its units in the global pool whether or not they fit
  yet, and in its project and project/domain where they fit: it takes them as soon as they
  are all free. So room freeing goes to it, and a later claim gets only room it does not
  need: it waits for the holders and older waiters of its first refusal, about one turnover;
- one that another namespace of its claim refused at its last ask sets room aside here only
  if it could take it now: it was refused here too (so the room it waited for here may have
  freed with the other's, as when one holder releases both) and fits now, in full. Otherwise
  it sets aside nothing, so it never holds back room it could not use;
- once a waiter has waited STARVATION_BOUND seconds it is overdue: it sets aside its units
  in the global pool of every namespace of its claim even when another namespace blocks it
  (and in its project and project/domain where it fits), so from then on no newcomer is
  granted ahead of it anywhere. This bounds how long a multi-namespace claim whose
  namespaces are busy in turn can be overtaken;
- one blocked by its own project or project/domain cap, or needing more than the quota, sets
  aside nothing, overdue or not: it could not use the room and must not hold back others.

The claim is then judged on in-use plus set-aside units: global room first (EXHAUSTED), then
the project cap, then the project/domain cap (both NAMESPACE_QUOTA_EXCEEDED).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sluice.resources.models import (
    QUOTA_SOURCES,
    AllocationResult,
    AllocationStatus,
    Claim,
    Holder,
    QuotaSource,
    Scope,
)

STARVATION_BOUND = 60.0
"""Seconds after its first refusal from which a waiter is overdue: it then sets aside room in
every namespace of its claim, as a strict first-come-first-served queue would, even where
another namespace blocks it. Until then a claim blocked by several of its namespaces in turn
may be overtaken by claims that can use the room; after it, by nobody."""


@dataclass(frozen=True)
class Ask:
    """One token's claim on one namespace, as the rule sees it (asker or waiter)."""

    token: str
    project: str
    domain: str
    units: int
    project_cap: int | None
    domain_cap: int | None
    priority: int
    since: float
    blocked_elsewhere: bool = field(default=False, compare=False)
    """A waiter that another namespace of its claim refused at its last ask: it sets room
    aside here only if it could take it now (`refused_here` and it fits), until overdue."""
    refused_here: bool = field(default=True, compare=False)
    """Whether this namespace refused it too at its last ask (False: recorded blocking scope
    "other", it fitted here)."""

    def rank(self) -> tuple[float, int, str]:
        return (self.since, -self.priority, self.token)

    def overdue(self, now: float) -> bool:
        return now - self.since >= STARVATION_BOUND


@dataclass
class Usage:
    """Units in use in one namespace, per scope."""

    total: int = 0
    by_project: Counter[str] = field(default_factory=Counter)
    by_domain: Counter[tuple[str, str]] = field(default_factory=Counter)

    def add(self, project: str, domain: str, units: int) -> None:
        """Count `units` more (or fewer, if negative) for a holder of this scope."""
        self.total += units
        self.by_project[project] += units
        self.by_domain[(project, domain)] += units


@dataclass(frozen=True)
class Verdict:
    scope: Scope
    """"" when the claim fits."""
    in_use: int = 0
    limit: int = 0
    position: int = 0


class _Room:
    """In-use units plus what the waiters walked so far have reserved."""

    def __init__(self, quota: int, usage: Usage) -> None:
        self.quota = quota
        self.usage = usage
        self.reserved = 0
        self.by_project: Counter[str] = Counter()
        self.by_domain: Counter[tuple[str, str]] = Counter()

    def full(self) -> bool:
        return self.usage.total + self.reserved >= self.quota

    def global_blocks(self, ask: Ask) -> bool:
        return self.usage.total + self.reserved + ask.units > self.quota

    def cap_blocks(self, ask: Ask) -> Verdict | None:
        used = self.usage.by_project[ask.project]
        if ask.project_cap is not None and (
            used + self.by_project[ask.project] + ask.units > ask.project_cap
        ):
            return Verdict("project", used, ask.project_cap)
        key = (ask.project, ask.domain)
        used = self.usage.by_domain[key]
        if ask.domain_cap is not None and used + self.by_domain[key] + ask.units > ask.domain_cap:
            return Verdict("namespace", used, ask.domain_cap)
        return None

    def reserve(self, waiter: Ask, now: float) -> None:
        if waiter.units > self.quota or self.cap_blocks(waiter) is not None:
            return
        fits = not self.global_blocks(waiter)
        could_take_it = fits and waiter.refused_here
        if waiter.blocked_elsewhere and not could_take_it and not waiter.overdue(now):
            return  # room here would not let it go now: it holds none back
        self.reserved += waiter.units
        if fits:
            self.by_project[waiter.project] += waiter.units
            self.by_domain[(waiter.project, waiter.domain)] += waiter.units

    def judge(self, ask: Ask, position: int) -> Verdict:
        if self.global_blocks(ask):
            return Verdict("global", self.usage.total, self.quota, position)
        blocked = self.cap_blocks(ask)
        if blocked is not None:
            return Verdict(blocked.scope, blocked.in_use, blocked.limit, position)
        return Verdict("")


def admit(quota: int, usage: Usage, waiters: Iterable[Ask], ask: Ask, now: float) -> Verdict:
    """Judge `ask` on one namespace, after the waiters ranked ahead of it set room aside."""
    ahead = sorted((w for w in waiters if w.rank() < ask.rank()), key=Ask.rank)
    room = _Room(quota, usage)
    for waiter in ahead:
        if room.full():
            break  # nothing more can fit, so nothing more can be set aside
        room.reserve(waiter, now)
    return room.judge(ask, position=len(ahead) + 1)


def next_in_line(
    quota: int | None, usage: Usage, waiters: Iterable[Ask], now: float
) -> tuple[str, ...]:
    """The waiters that would be granted if they asked now, in rank order: whom a release
    needs to wake. (With several namespaces per claim, each must also fit elsewhere.)"""
    if quota is None:
        return ()
    room, ready = _Room(quota, usage), []
    for waiter in sorted(waiters, key=Ask.rank):
        if room.full():
            break
        if not room.judge(waiter, position=0).scope:
            ready.append(waiter.token)
        room.reserve(waiter, now)
    return tuple(ready)


@dataclass(frozen=True)
class NamespaceState:
    """What the rule needs of one namespace; waiters are live ones other than the asker."""

    namespace: str
    quota: int
    usage: Usage
    waiters: tuple[Ask, ...]
    holding: bool = False
    asker_since: float | None = None


@dataclass(frozen=True)
class Plan:
    """The decision for a whole multi-namespace claim: all granted, or every one waits."""

    granted: bool
    since: float
    """The asker's first refusal time in these namespaces (now when it is new)."""
    waited_since: float | None
    verdicts: Mapping[str, Verdict]
    result: AllocationResult


def ask_for(claim: Claim, token: str, holder: Holder, since: float) -> Ask:
    caps = claim.constraints
    return Ask(
        token=token,
        project=holder.project,
        domain=holder.domain,
        units=claim.units,
        project_cap=caps.project_scope if caps else None,
        domain_cap=caps.namespace_scope if caps else None,
        priority=holder.priority,
        since=since,
    )


def plan_allocation(
    token: str,
    claims: Sequence[Claim],
    holder: Holder,
    now: float,
    states: Mapping[str, NamespaceState],
) -> Plan:
    """Judge every claim not already held; grant all or none."""
    known = [s.asker_since for s in states.values() if s.asker_since is not None]
    since = min(known, default=now)
    verdicts = {
        c.namespace: admit(
            states[c.namespace].quota,
            states[c.namespace].usage,
            states[c.namespace].waiters,
            ask_for(c, token, holder, since),
            now,
        )
        for c in claims
        if not states[c.namespace].holding
    }
    refused = next((ns for ns, v in verdicts.items() if v.scope), None)
    waited_since = min(known) if known else None
    if refused is None:
        return Plan(True, since, waited_since, verdicts, AllocationResult(AllocationStatus.GRANTED))
    return Plan(False, since, waited_since, verdicts, _refusal(refused, verdicts[refused]))


def _refusal(namespace: str, verdict: Verdict) -> AllocationResult:
    status = (
        AllocationStatus.EXHAUSTED
        if verdict.scope == "global"
        else AllocationStatus.NAMESPACE_QUOTA_EXCEEDED
    )
    return AllocationResult(
        status, namespace, verdict.scope, verdict.in_use, verdict.limit, verdict.position
    )


def waiter_scope(plan: Plan, namespace: str) -> Scope:
    """What a waiter is recorded as waiting for in `namespace`."""
    verdict = plan.verdicts.get(namespace)
    return verdict.scope if verdict is not None and verdict.scope else "other"


def refused_elsewhere(plan: Plan, namespace: str) -> bool:
    """Whether a namespace of the claim other than `namespace` refused it."""
    return any(v.scope for ns, v in plan.verdicts.items() if ns != namespace)


def effective_quota(
    sources: Mapping[QuotaSource, int], claim_default: int | None = None
) -> tuple[int | None, QuotaSource | None]:
    """operator ?? config ?? plugin ?? the claim's default ?? a stored default."""
    for source in QUOTA_SOURCES[:3]:
        if source in sources:
            return sources[source], source
    if claim_default is not None:
        return claim_default, "default"
    if "default" in sources:
        return sources["default"], "default"
    return None, None
