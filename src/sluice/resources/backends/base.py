"""The storage seam of the resource manager: a few atomic primitives, no policy.

A backend stores quotas, holders (with leases), waiters and per-scope usage counters, and
decides allocations by the rule in `sluice.resources.admission`, atomically. Times are
seconds since the epoch as float. Every `now` is the STORE's time: None (production) means
the backend reads its store's clock inside the atomic operation (PostgreSQL
`clock_timestamp()`, Redis `TIME`, the host's clock for SQLite and memory: `host_now`), so
no engine's clock ever judges a lease; a float is a test clock's time, used as the store's.
Driver errors leave a backend only as BackendUnavailableError (or StoreError from the
store's database), translated once at its boundary.
"""

from __future__ import annotations

import abc
import dataclasses
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from sluice.resources.models import (
    AllocationResult,
    Claim,
    Holder,
    NamespaceSnapshot,
    QuotaSource,
)
from sluice.resources.preemption import Victim
from sluice.store.health import StoreHealth

WakeCallback = Callable[[str, tuple[str, ...] | None], None]
"""callback(namespace, ready): room may have appeared in `namespace`; `ready` lists the
waiting tokens that would now be granted, in rank order (None: nobody waits there, or it is
not known, so anyone may ask)."""
WAKE_CHANNEL = "resources"
"""Name of the cross-process wake-up channel (prefixed per backend)."""


@dataclass(frozen=True)
class AllocationRequest:
    """One token claiming several namespaces at once; validated by the policy."""

    token: str
    claims: tuple[Claim, ...]
    holder: Holder
    now: float | None
    """The store's time (None: the backend reads its store's clock, see the module)."""
    lease: float
    asked_before: bool = False
    """A hint: this process saw the token refused, and no wake-up named it ready since, so
    it most likely waits on. A backend may use it to answer a repeated refusal cheaply."""
    waiting: bool = False
    """A hint: this process saw the token refused and has not seen it granted or released
    since, so it most likely has a waiter entry (woken or not). A backend may use it to skip
    a fast path meant for claims nobody waits on."""

    def at(self, now: float) -> TimedRequest:
        """This request judged at `now`, the store's time read inside the operation."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        return TimedRequest(**{**values, "now": now})


@dataclass(frozen=True)
class TimedRequest(AllocationRequest):
    """An AllocationRequest whose `now` is the store's time, read inside the operation."""

    now: float


def host_now(now: float | None) -> float:
    """The store's time for the backends whose store is on this host (memory, SQLite): the
    host's clock unless a test clock's time was given."""
    return time.time() if now is None else now


@dataclass(frozen=True)
class NamespaceUsage:
    """Units in use and number of waiters of a namespace right after an operation."""

    namespace: str
    in_use: int
    waiters: int
    ready: tuple[str, ...] | None = None
    """After a release or a sweep: the waiters that would now be granted (see WakeCallback)."""


@dataclass(frozen=True)
class AllocationOutcome:
    result: AllocationResult
    waited_since: float | None = None
    """On a grant after refusals: when the token was first refused."""
    usage: tuple[NamespaceUsage, ...] = ()
    reclaimed: tuple[str, ...] = ()
    """Namespaces where lapsed leases were reclaimed on the way (their waiters may now fit)."""
    judged_at: float | None = dataclasses.field(default=None, compare=False)
    """The store's time the allocation was judged at, where the backend read it (for the
    wait metric, `judged_at - waited_since`)."""


class ResourceBackend(abc.ABC):
    """Atomic token bookkeeping for the resource manager."""

    health: StoreHealth | None = None
    """Where the manager reports this backend's outages (one line lost, one line back); a
    backend that notices a failure on its own (a lost wake-up channel) reports it there."""

    async def open(self) -> None:  # noqa: B027 - optional hook
        """Connect; called once before any other method."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Disconnect and stop listening; idempotent."""

    @abc.abstractmethod
    async def allocate(self, request: AllocationRequest) -> AllocationOutcome:
        """Claim every namespace of the request, all or nothing, in one atomic step.

        First, with nothing written yet: a namespace with no stored quota and no
        `default_quota` raises UnknownNamespaceError, and a claim needing more units than its
        namespace's effective quota raises ClaimExceedsQuotaError (it could never be
        granted). Then, per namespace, lapsed leases and waiters are reclaimed, and the claim
        is judged by `admission.plan_allocation`. A waiter entry records, per namespace, the
        scope that refused it there, "other" where it fitted but another namespace refused
        it: the rule reads that as "cannot take the room now" (see admission.py).

        Granted: a holder is written for each namespace not yet held (units counted once per
        scope), every lease of the token in these namespaces becomes `now + lease`, and the
        token's waiter entries there are removed. A token already holding all the namespaces
        is granted again without counting twice (idempotent). Refused: nothing new is held
        (live leases the token already holds there are extended); the token is recorded as a
        waiter in every namespace it does not hold, with the same first-refusal time
        everywhere, and drops out about a lease after it stops asking (an unchanged entry
        with over half its lease left need not be rewritten). The result names the first
        refusing namespace in claim order, and the token's rank among its waiters.
        """

    @abc.abstractmethod
    async def release(
        self, token: str, namespaces: Sequence[str], now: float | None
    ) -> tuple[NamespaceUsage, ...]:
        """Drop the token's holders and waiter entries in `namespaces`, atomically: a token
        that only waits there is withdrawn at once, so it holds no room back.

        Idempotent: an unknown token or namespace is a no-op. Returns every namespace where
        units were freed or a waiter left, with the waiters now ready
        (`admission.next_in_line`); other processes are woken with the same.
        """

    supports_preemption: bool = False
    """Whether the preemption primitives below are implemented (docs/resources.md)."""

    async def preempt(
        self, request: AllocationRequest, namespaces: Sequence[str]
    ) -> tuple[Victim, ...]:
        """For a refused request, mark victims for it in `namespaces` (those of its claim
        where preemption is on), atomically, by `sluice.resources.preemption`: the fewest
        live holders of strictly lower recorded priority, lowest then most recent, that free
        its units; none where even all of them would not. Then, if it has victims, move its
        waiter entries ahead of the lower-priority waiters ranked before it. Idempotent.
        Returns every victim marked for the token, new or not. A marked holder keeps its
        units until released (or its lease lapses); `renew` no longer reports it held."""
        raise NotImplementedError(f"{type(self).__name__} does not support preemption")

    async def record_priority(self, token: str, namespaces: Sequence[str], priority: int) -> None:
        """Remember the priority of the token's holdings there (a holding without one is
        never preempted). Idempotent; keeps any mark."""
        raise NotImplementedError(f"{type(self).__name__} does not support preemption")

    async def preempted(self, token: str, namespaces: Sequence[str]) -> tuple[Victim, ...]:
        """The marks on the token's live holdings there: who preempts it, where."""
        raise NotImplementedError(f"{type(self).__name__} does not support preemption")

    async def set_preempt(self, namespace: str, on: bool) -> None:
        """The operator's preemption flag of a namespace, stored for every process."""
        raise NotImplementedError(f"{type(self).__name__} does not support preemption")

    async def preempt_namespaces(self) -> frozenset[str]:
        """The namespaces whose operator flag turns preemption on."""
        return frozenset()

    @abc.abstractmethod
    async def renew(
        self, token: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        """Extend to `now + lease` the token's live leases (and waiter entries) there.

        A lease that lapsed (expiry <= now) is not revived, even before it is reclaimed:
        another claim may already count on that room. A holding marked for preemption is not
        extended either (its engine must stop and release it). Returns only the namespaces where the
        token holds a live grant, never one where it merely waits. Idempotent.
        """

    @abc.abstractmethod
    async def transfer(
        self, old: str, new: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        """Re-key `old`'s live grants there to `new`, atomically, with `new`'s lease ending at
        `now + lease`: the same holder in a later ownership epoch takes over what its earlier
        epoch holds, without giving the room back, and whatever the earlier epoch still sends
        in `old`'s name (a renewal, a release) then touches nothing. A lapsed lease is not
        moved, nor one where `new` already holds. Units are counted once, as before. Returns
        the namespaces where `new` now holds `old`'s grant. Idempotent; waiter entries of
        `old` are left for the caller to release."""

    @abc.abstractmethod
    async def sweep(self, now: float | None) -> tuple[NamespaceUsage, ...]:
        """Reclaim every lapsed lease and drop every lapsed waiter, atomically per namespace.

        Returns (and wakes other processes for) the namespaces where anything lapsed, with
        their ready waiters. Also forgets namespaces left with nothing but a claim's default.
        """

    @abc.abstractmethod
    async def set_quotas(
        self, source: QuotaSource, quotas: Mapping[str, int | None], now: float | None
    ) -> None:
        """Store (or with None, clear) the `source` quota of each namespace; values are
        validated by the policy. Held tokens are never revoked, even above a lower quota.
        Other processes are woken for the namespaces whose quota changed (a higher quota
        may make room); storing the same value again (every process start) wakes nobody."""

    @abc.abstractmethod
    async def snapshot(self, namespace: str | None, now: float | None) -> list[NamespaceSnapshot]:
        """Read quotas, holders and ranked waiters of one namespace (or all), consistently.
        Lapsed holders not yet reclaimed are shown; lapsed waiters are not."""

    @abc.abstractmethod
    def listen(self, callback: WakeCallback) -> Callable[[], None]:
        """Call `callback(namespace, ready)` when another backend instance (another process)
        frees room in a namespace. Events caused through this instance are not delivered: the
        policy wakes its own subscribers. Returns a function that stops the delivery."""
