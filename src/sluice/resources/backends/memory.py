"""The in-process backend: all state in dicts behind one lock.

A real backend (leases, waiters, per-scope counters, the fair admission rule) for tests and
single-process use. Nothing is shared with other processes, so `listen` never fires.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sluice.resources.admission import (
    NamespaceState,
    Plan,
    Usage,
    effective_quota,
    next_in_line,
    plan_allocation,
    waiter_scope,
)
from sluice.resources.backends._shared import (
    WaiterRecord,
    build_snapshot,
    resolve_quota,
    usage_after,
    waiter_records,
)
from sluice.resources.backends.base import (
    AllocationOutcome,
    AllocationRequest,
    NamespaceUsage,
    ResourceBackend,
    TimedRequest,
    WakeCallback,
    host_now,
)
from sluice.resources.models import HolderInfo, NamespaceSnapshot, QuotaSource
from sluice.resources.preemption import HeldUnits, Victim, choose_victims, queue_ahead


@dataclass
class _Namespace:
    quotas: dict[QuotaSource, int] = field(default_factory=dict)
    holders: dict[str, HolderInfo] = field(default_factory=dict)
    waiters: dict[str, WaiterRecord] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    priorities: dict[str, int] = field(default_factory=dict)
    marks: dict[str, Victim] = field(default_factory=dict)
    """Holders marked for preemption, by token."""
    preempt: bool = False

    def forgettable(self) -> bool:
        """Nothing held, nobody waiting, and no quota but a claim's default."""
        quiet = not self.holders and not self.waiters and not self.preempt
        return quiet and set(self.quotas) <= {"default"}

    def reclaim(self, now: float) -> bool:
        """Drop lapsed leases and waiters; True if any was dropped."""
        lapsed = [t for t, h in self.holders.items() if h.lease_expires_at <= now]
        for token in lapsed:
            self.drop_holder(token)
        gone = [t for t, w in self.waiters.items() if w.expires_at <= now]
        for token in gone:
            del self.waiters[token]
        return bool(lapsed or gone)

    def drop_holder(self, token: str) -> bool:
        holder = self.holders.pop(token, None)
        self.priorities.pop(token, None)
        self.marks.pop(token, None)
        if holder is not None:
            self.usage.add(holder.project, holder.domain, -holder.units)
        return holder is not None

    def usage_now(self, namespace: str, now: float) -> NamespaceUsage:
        live = [w.ask for w in self.waiters.values() if w.expires_at > now]
        quota = effective_quota(self.quotas)[0]
        ready = next_in_line(quota, self.usage, live, now) if live else None
        return NamespaceUsage(namespace, self.usage.total, len(live), ready)


class MemoryBackend(ResourceBackend):
    """Resource bookkeeping in this process's memory (`memory://`)."""

    def __init__(self) -> None:
        self._namespaces: dict[str, _Namespace] = {}
        # Operations never await inside, so asyncio alone would serialise them; the lock
        # keeps the backend safe when it is shared with other threads.
        self._lock = threading.Lock()

    async def allocate(self, request: AllocationRequest) -> AllocationOutcome:
        with self._lock:
            return self._allocate(request.at(host_now(request.now)))

    def _allocate(self, request: TimedRequest) -> AllocationOutcome:
        quotas = {
            c.namespace: resolve_quota(c, self._quotas_of(c.namespace)) for c in request.claims
        }
        reclaimed = tuple(ns for ns in quotas if self._entry(ns).reclaim(request.now))
        states = {ns: self._state(ns, quota, request.token) for ns, quota in quotas.items()}
        plan = plan_allocation(request.token, request.claims, request.holder, request.now, states)
        usage = usage_after(request, plan, states)
        if plan.granted:
            self._grant(request)
        else:
            self._wait(request, plan, states)
        waited = plan.waited_since if plan.granted else None
        return AllocationOutcome(plan.result, waited, usage, reclaimed, request.now)

    def _quotas_of(self, namespace: str) -> Mapping[QuotaSource, int]:
        entry = self._namespaces.get(namespace)
        return entry.quotas if entry is not None else {}

    def _entry(self, namespace: str) -> _Namespace:
        return self._namespaces.setdefault(namespace, _Namespace())

    def _state(self, namespace: str, quota: int, token: str) -> NamespaceState:
        entry = self._entry(namespace)
        mine = entry.waiters.get(token)
        return NamespaceState(
            namespace,
            quota,
            entry.usage,
            tuple(w.ask for t, w in entry.waiters.items() if t != token),
            holding=token in entry.holders,
            asker_since=mine.ask.since if mine else None,
        )

    def _grant(self, request: TimedRequest) -> None:
        holder, expiry = request.holder, request.now + request.lease
        for claim in request.claims:
            entry = self._entry(claim.namespace)
            entry.waiters.pop(request.token, None)
            self._remember_default(entry, claim.default_quota)
            held = entry.holders.get(request.token)
            if held is not None:
                entry.holders[request.token] = dataclasses.replace(held, lease_expires_at=expiry)
                continue
            entry.holders[request.token] = HolderInfo(
                request.token,
                holder.project,
                holder.domain,
                holder.execution_id,
                holder.node_id,
                claim.units,
                request.now,
                expiry,
            )
            entry.usage.add(holder.project, holder.domain, claim.units)

    def _wait(
        self, request: TimedRequest, plan: Plan, states: Mapping[str, NamespaceState]
    ) -> None:
        scopes = {ns: waiter_scope(plan, ns) for ns in states}
        for namespace, record in waiter_records(request, plan, states, scopes):
            self._entry(namespace).waiters[request.token] = record
        for claim in request.claims:
            entry = self._entry(claim.namespace)
            self._remember_default(entry, claim.default_quota)
            self._extend(entry, request.token, request.now, request.lease)

    @staticmethod
    def _remember_default(entry: _Namespace, default: int | None) -> None:
        if default is not None:
            entry.quotas["default"] = default

    @staticmethod
    def _extend(entry: _Namespace, token: str, now: float, lease: float) -> bool:
        held = entry.holders.get(token)
        if held is None or held.lease_expires_at <= now or token in entry.marks:
            return False
        entry.holders[token] = dataclasses.replace(held, lease_expires_at=now + lease)
        return True

    async def release(
        self, token: str, namespaces: Sequence[str], now: float | None
    ) -> tuple[NamespaceUsage, ...]:
        with self._lock:
            now = host_now(now)
            changed = []
            for namespace in dict.fromkeys(namespaces):
                entry = self._namespaces.get(namespace)
                if entry is None:
                    continue
                freed = entry.drop_holder(token)
                if entry.waiters.pop(token, None) is not None or freed:
                    changed.append(entry.usage_now(namespace, now))
                self._forget_if_empty(namespace)
            return tuple(changed)

    async def renew(
        self, token: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        with self._lock:
            now = host_now(now)
            held = set()
            for namespace in namespaces:
                entry = self._namespaces.get(namespace)
                if entry is None:
                    continue
                if self._extend(entry, token, now, lease):
                    held.add(namespace)
                waiter = entry.waiters.get(token)
                if waiter is not None and waiter.expires_at > now:
                    entry.waiters[token] = dataclasses.replace(waiter, expires_at=now + lease)
            return frozenset(held)

    async def transfer(
        self, old: str, new: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        with self._lock:
            now = host_now(now)
            moved = set()
            for namespace in namespaces:
                entry = self._namespaces.get(namespace)
                held = None if entry is None else entry.holders.get(old)
                if entry is None or held is None or held.lease_expires_at <= now:
                    continue
                if new in entry.holders:
                    continue
                if old in entry.marks:
                    continue  # a preempted holding is not handed on: its attempt must stop
                del entry.holders[old]
                if old in entry.priorities:
                    entry.priorities[new] = entry.priorities.pop(old)
                entry.holders[new] = dataclasses.replace(
                    held, token=new, lease_expires_at=now + lease
                )
                moved.add(namespace)
            return frozenset(moved)

    async def sweep(self, now: float | None) -> tuple[NamespaceUsage, ...]:
        with self._lock:
            now = host_now(now)
            changed = []
            for namespace, entry in list(self._namespaces.items()):
                if entry.reclaim(now):
                    changed.append(entry.usage_now(namespace, now))
                self._forget_if_empty(namespace)
            return tuple(changed)

    def _forget_if_empty(self, namespace: str) -> None:
        entry = self._namespaces.get(namespace)
        if entry is not None and entry.forgettable():
            del self._namespaces[namespace]

    async def set_quotas(
        self, source: QuotaSource, quotas: Mapping[str, int | None], now: float | None
    ) -> None:
        with self._lock:
            for namespace, quota in quotas.items():
                entry = self._entry(namespace)
                if quota is None:
                    entry.quotas.pop(source, None)
                    self._forget_if_empty(namespace)
                else:
                    entry.quotas[source] = quota

    async def snapshot(self, namespace: str | None, now: float | None) -> list[NamespaceSnapshot]:
        with self._lock:
            now = host_now(now)
            names = sorted(self._namespaces) if namespace is None else [namespace]
            return [self._snapshot(name, now) for name in names if name in self._namespaces]

    def _snapshot(self, namespace: str, now: float) -> NamespaceSnapshot:
        entry = self._namespaces[namespace]
        live = [w for w in entry.waiters.values() if w.expires_at > now]
        return build_snapshot(namespace, entry.quotas, entry.holders.values(), live)

    def listen(self, callback: WakeCallback) -> Callable[[], None]:
        return lambda: None

    # Preemption.
    supports_preemption = True

    async def preempt(
        self, request: AllocationRequest, namespaces: Sequence[str]
    ) -> tuple[Victim, ...]:
        with self._lock:
            timed = request.at(host_now(request.now))
            for claim in request.claims:
                if claim.namespace in namespaces and claim.namespace in self._namespaces:
                    self._mark(timed, claim.namespace, claim.units)
            victims = self._marked_by(request.token, [c.namespace for c in request.claims])
            if victims:
                self._queue_ahead(timed)
            return victims

    def _mark(self, request: TimedRequest, namespace: str, units: int) -> None:
        entry = self._namespaces[namespace]
        entry.reclaim(request.now)
        if request.token in entry.holders:
            return
        quota = effective_quota(entry.quotas)[0] or 0
        held = [
            HeldUnits(
                t,
                h.units,
                entry.priorities.get(t),
                h.since,
                entry.marks[t].preempter if t in entry.marks else None,
                h.execution_id,
                h.node_id,
            )
            for t, h in entry.holders.items()
        ]
        priority = request.holder.priority
        for chosen in choose_victims(request.token, priority, units, quota, held):
            entry.marks[chosen.token] = Victim(
                namespace,
                chosen.token,
                chosen.execution_id,
                chosen.node_id,
                chosen.priority or 0,
                request.token,
                request.holder.execution_id,
                request.holder.node_id,
                priority,
            )

    def _marked_by(self, token: str, namespaces: Sequence[str]) -> tuple[Victim, ...]:
        return tuple(
            mark
            for ns in namespaces
            if ns in self._namespaces
            for mark in self._namespaces[ns].marks.values()
            if mark.preempter == token
        )

    def _queue_ahead(self, request: TimedRequest) -> None:
        mine = [
            self._namespaces[c.namespace].waiters.get(request.token)
            for c in request.claims
            if c.namespace in self._namespaces
        ]
        records = [w for w in mine if w is not None]
        if not records:
            return
        others = {
            t: w.ask
            for c in request.claims
            for t, w in self._entry(c.namespace).waiters.items()
            if t != request.token and w.expires_at > request.now
        }
        since = queue_ahead(records[0].ask, others.values())
        if since is None:
            return
        for c in request.claims:
            entry = self._entry(c.namespace)
            record = entry.waiters.get(request.token)
            if record is not None:
                ask = dataclasses.replace(record.ask, since=since)
                entry.waiters[request.token] = dataclasses.replace(record, ask=ask)

    async def record_priority(self, token: str, namespaces: Sequence[str], priority: int) -> None:
        with self._lock:
            for namespace in namespaces:
                entry = self._namespaces.get(namespace)
                if entry is not None and token in entry.holders:
                    entry.priorities[token] = priority

    async def preempted(self, token: str, namespaces: Sequence[str]) -> tuple[Victim, ...]:
        with self._lock:
            return tuple(
                self._namespaces[ns].marks[token]
                for ns in namespaces
                if ns in self._namespaces and token in self._namespaces[ns].marks
            )

    async def set_preempt(self, namespace: str, on: bool) -> None:
        with self._lock:
            self._entry(namespace).preempt = on
            self._forget_if_empty(namespace)

    async def preempt_namespaces(self) -> frozenset[str]:
        with self._lock:
            return frozenset(ns for ns, entry in self._namespaces.items() if entry.preempt)
