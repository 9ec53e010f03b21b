"""The resource manager's policy over a storage backend.

QuotaManager owns what is not bookkeeping: names and validation, where quotas come from
(effective = operator ?? config ?? plugin ?? a lock claim's default), leases and the sweeper,
wake-ups and metrics. The backend (`backends/`) does the atomic bookkeeping and applies the
admission rule of `admission.py`. docs/resources.md states the rule, its starvation bound,
the errors and the renewal contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fnmatch
import logging
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from prometheus_client import CollectorRegistry

from sluice.cancellation import reraise_cancellation
from sluice.clock import Clock, store_now
from sluice.config import ResourcesConfig
from sluice.errors import (
    BackendUnavailableError,
    InvalidArgumentError,
    InvalidQuotaError,
    UnknownNamespaceError,
)
from sluice.resources import validation as check
from sluice.resources.backends import from_url
from sluice.resources.backends._shared import resolve_quota
from sluice.resources.backends.base import (
    AllocationOutcome,
    AllocationRequest,
    ResourceBackend,
)
from sluice.resources.metrics import ResourceMetrics
from sluice.resources.models import (
    AllocationResult,
    Claim,
    Holder,
    NamespaceSnapshot,
    ResourceManager,
    ResourceRegistrar,
    Victim,
)
from sluice.resources.proxy import PluginHoldings, PluginRegistrar, TaskResourceManager
from sluice.resources.wakeups import PreemptedSubscriber, ReadySubscriber, Subscriber, WakeUps
from sluice.store.database import Database
from sluice.store.health import StoreHealth
from sluice.store.notify import Notifier

log = logging.getLogger(__name__)


class QuotaManager:
    """Token quotas shared by every process that uses the same backend."""

    def __init__(
        self,
        backend: ResourceBackend,
        *,
        clock: Clock,
        max_quota: int = 1000,
        lease: float = 30.0,
        config_quotas: Mapping[str, int] | None = None,
        metrics: CollectorRegistry | None = None,
        sweep_interval: float | None = None,
        health: StoreHealth | None = None,
        preempt: Sequence[str] = (),
    ) -> None:
        if lease <= 0:
            raise InvalidArgumentError(f"resources.lease must be > 0 seconds, got {lease!r}")
        self._backend = backend
        self.health = health or StoreHealth(type(backend).__name__, noun="resource store")
        """Outages of the token store: one line when lost, one when back (the store's own
        health when the tokens live in the store's database)."""
        backend.health = self.health
        self._clock = clock
        self._max_quota = max_quota
        self._lease = float(lease)
        # A lapsed lease is reclaimed at most a quarter lease late, even with no traffic.
        self._sweep_interval = sweep_interval if sweep_interval is not None else lease / 4
        self._config_quotas = check.check_quotas(config_quotas or {}, max_quota)
        self._plugin_quotas: dict[str, int] = {}
        self._metrics = ResourceMetrics(metrics)
        self._wakeups = WakeUps()
        self._pending: set[asyncio.Task[None]] = set()
        self._sweeper: asyncio.Task[None] | None = None
        self._sweeping: asyncio.Future[None] | None = None
        self._unlisten: Callable[[], None] | None = None
        self._started = False
        self._quotas_stored = 0
        """How many times the declared quotas were stored (a restored store counts)."""
        self._restoring: asyncio.Future[None] | None = None
        self._preempt_patterns = tuple(check.check_namespace(p) for p in preempt)
        if self._preempt_patterns:
            self._require_preemption()
        self._preempt_stored: frozenset[str] = frozenset()
        """The operator's preemption flags, as last read (at start and every sweep)."""

    @classmethod
    def from_config(
        cls,
        config: ResourcesConfig,
        *,
        store_db: Database | None,
        clock: Clock,
        metrics: CollectorRegistry | None = None,
        notifier: Notifier | None = None,
    ) -> QuotaManager:
        """The manager for `config.url`; with no URL, the store's database (and notifier)."""
        backend = from_url(
            config.url, key_prefix=config.key_prefix, store_db=store_db, notifier=notifier
        )
        if config.url is None and store_db is not None:
            health = store_db.health  # the store's outages are reported there already
        else:
            health = StoreHealth(_display(config.url or "memory://"), noun="resource store")
        return cls(
            backend,
            clock=clock,
            max_quota=config.max_quota,
            lease=config.lease,
            config_quotas=config.quotas,
            metrics=metrics,
            health=health,
            preempt=config.preempt,
        )

    @property
    def lease(self) -> float:
        return self._lease

    @contextlib.contextmanager
    def _reported(self) -> Iterator[None]:
        """Report the token store's outage (once) and its return to `health`."""
        try:
            yield
        except BackendUnavailableError as exc:
            self.health.lost(exc)
            raise
        self.health.ok()

    def _store_now(self) -> float | None:
        """The time leases are judged at: None, the store's own clock (clock.store_now)."""
        return store_now(self._clock)

    # Lifecycle.
    async def start(self) -> None:
        """Connect, store registered and configured quotas, start the sweeper and listener."""
        if self._started:
            return
        await self._backend.open()
        try:
            await self._store_quotas()
        except BaseException:
            await self._backend.close()
            raise
        await self._read_preempt_flags()
        self._unlisten = self._backend.listen(self._wakeups.on_ready)
        self._sweeper = asyncio.create_task(
            self._sweep_forever(self._clock.now() + self._sweep_interval),
            name="sluice-resources-sweep",
        )
        self._started = True

    async def _store_quotas(self) -> None:
        now = self._store_now()
        if self._plugin_quotas:
            await self._backend.set_quotas("plugin", dict(self._plugin_quotas), now)
        if self._config_quotas:
            await self._backend.set_quotas("config", self._config_quotas, now)
        self._quotas_stored += 1

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
            self._sweeper = None
        if self._sweeping is not None:
            await self._sweeping
            self._sweeping = None
        await self._settle()
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        await self._backend.close()
        self._started = False

    async def __aenter__(self) -> QuotaManager:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # Quotas.
    def registrar(self, plugin_id: str) -> ResourceRegistrar:
        """The registrar a plugin gets at load: it declares `<plugin_id>:<namespace>`."""
        return PluginRegistrar(self, check.check_namespace(plugin_id))

    def register_plugin_quota(self, namespace: str, quota: int) -> None:
        """Declare a plugin's quota (config and operator quotas win over it)."""
        quota = check.check_quota(check.check_namespace(namespace), quota, self._max_quota)
        known = self._plugin_quotas.get(namespace)
        if known is not None and known != quota:
            raise InvalidQuotaError(
                f"namespace {namespace!r} is already registered with quota {known}, not {quota}"
            )
        self._plugin_quotas[namespace] = quota
        if self._started:  # a plugin loaded late: store it before the next allocation
            self._spawn(self._backend.set_quotas("plugin", {namespace: quota}, self._store_now()))

    async def set_quota(self, namespace: str, quota: int) -> None:
        """The operator's quota, stored in the backend so every process uses it. Lowering it
        never revokes held tokens: they run out, and only then do new claims fit."""
        quota = check.check_quota(check.check_namespace(namespace), quota, self._max_quota)
        await self._backend.set_quotas("operator", {namespace: quota}, self._store_now())
        self._wakeups.wake([namespace])

    async def set_preempt(self, namespace: str, on: bool) -> None:
        """The operator's preemption flag of `namespace`, stored for every process (each
        reads the flags at start and every sweep, a quarter lease)."""
        name = check.check_namespace(namespace)
        self._require_preemption()
        await self._backend.set_preempt(name, on)
        await self._read_preempt_flags()

    def preempts(self, namespace: str) -> bool:
        """Whether a higher-priority claim may preempt holders of `namespace`."""
        if namespace in self._preempt_stored:
            return True
        return any(fnmatch.fnmatchcase(namespace, p) for p in self._preempt_patterns)

    async def preempted(self, token: str, namespaces: Sequence[str]) -> tuple[Victim, ...]:
        """The marks on the token's holdings there: who preempts it (empty: nobody)."""
        names = [ns for ns in check.check_namespaces(namespaces) if self.preempts(ns)]
        if not names or not self._backend.supports_preemption:
            return ()
        with self._reported():
            return await self._backend.preempted(check.check_token(token), names)

    def _require_preemption(self) -> None:
        if not self._backend.supports_preemption:
            raise InvalidArgumentError(
                f"the resource backend {type(self._backend).__name__} does not support"
                " preemption (memory, SQLite and PostgreSQL do)"
            )

    async def _read_preempt_flags(self) -> None:
        if self._backend.supports_preemption:
            self._preempt_stored = await self._backend.preempt_namespaces()

    async def _after_allocation(
        self, request: AllocationRequest, result: AllocationResult
    ) -> AllocationResult:
        """Where preemption is on: remember a grant's priority, or let a claim refused by
        room mark lower-priority holders for it (preemption.py)."""
        if not self._backend.supports_preemption:
            return result
        names = [c.namespace for c in request.claims if self.preempts(c.namespace)]
        if not names:
            return result
        with self._reported():
            if result.granted:
                await self._backend.record_priority(request.token, names, request.holder.priority)
                return result
            if result.scope != "global":
                return result  # its own cap refuses it: others' room would not help
            victims = await self._backend.preempt(request, names)
        if victims:
            self._wakeups.preempting(victims)
        return dataclasses.replace(result, preempting=victims)

    async def clear_quota(self, namespace: str) -> None:
        """Drop the operator's quota; the configured or registered one applies again."""
        await self._backend.set_quotas(
            "operator", {check.check_namespace(namespace): None}, self._store_now()
        )
        self._wakeups.wake([namespace])

    # Tokens.
    async def allocate(
        self, token: str, claims: Sequence[Claim], holder: Holder
    ) -> AllocationResult:
        """Claim every namespace for `token` (already fully composed), all or nothing. A
        claim larger than its quota raises ClaimExceedsQuotaError, with nothing written."""
        request = AllocationRequest(
            check.check_token(token),
            check.check_claims(claims, self._max_quota),
            check.check_holder(holder),
            self._store_now(),
            self._lease,
            asked_before=self._wakeups.expects_refusal(token),
            waiting=self._wakeups.waiting(token),
        )
        await self._settle()
        outcome = await self._allocate(request)
        self._metrics.allocated(request, outcome)
        if outcome.result.granted:
            self._wakeups.settled(request.token)
        else:
            self._wakeups.refused(request.token, self._clock.now() + self._lease)
        self._wakeups.wake(outcome.reclaimed)
        return await self._after_allocation(request, outcome.result)

    async def _allocate(self, request: AllocationRequest) -> AllocationOutcome:
        """The backend's allocation. A namespace it does not know although this process
        declares its quota (a token store restarted empty, or flushed) gets the declared
        quotas stored again (once for all the claims that found them missing), and the
        claim is asked once more."""
        stored = self._quotas_stored
        try:
            with self._reported():
                return await self._backend.allocate(request)
        except UnknownNamespaceError:
            declared = {**self._plugin_quotas, **self._config_quotas}
            if not any(c.namespace in declared for c in request.claims):
                raise
        if stored == self._quotas_stored:  # nobody stored them since this claim was sent
            if self._restoring is None or self._restoring.done():
                log.warning("the resource store forgot the declared quotas; storing them again")
                self._restoring = asyncio.ensure_future(self._store_quotas())
            with self._reported():
                await asyncio.shield(self._restoring)
        with self._reported():
            return await self._backend.allocate(request)

    async def check_fits(self, claims: Sequence[Claim]) -> None:
        """Raise ClaimExceedsQuotaError (an InputError) if a claim needs more units than its
        namespace's effective quota, or its lock a capacity below 1: such a claim could never
        be granted, so a task making it is refused before it runs. Allocates and writes
        nothing; a namespace with no quota yet is left for the allocation to report."""
        for claim in check.check_claims(claims, self._max_quota):
            snapshots = await self.describe(claim.namespace)
            with contextlib.suppress(UnknownNamespaceError):
                resolve_quota(claim, dict(snapshots[0].quotas) if snapshots else {})

    async def release(self, token: str, namespaces: Sequence[str]) -> None:
        """Give back the token's units (or stop waiting) there; unknown tokens are a no-op."""
        names = check.check_namespaces(namespaces)
        with self._reported():
            usage = await self._backend.release(check.check_token(token), names, self._store_now())
        self._wakeups.settled(token)
        self._metrics.observe(usage)
        self._wakeups.ready(usage)

    async def renew(self, token: str, namespaces: Sequence[str]) -> frozenset[str]:
        """Extend the token's live leases there by a lease; returns where it still holds a
        live grant. A lapsed or reclaimed lease is not revived and a waiter entry never
        counts: a namespace missing from the answer is lost to the caller."""
        names = check.check_namespaces(namespaces)
        with self._reported():
            return await self._backend.renew(
                check.check_token(token), names, self._store_now(), self._lease
            )

    async def transfer(self, old: str, new: str, namespaces: Sequence[str]) -> frozenset[str]:
        """Hand `old`'s live grants there to `new` (the same holder in a later ownership
        epoch), keeping the room, with a fresh lease; returns where `new` now holds them. What
        the earlier epoch still sends in `old`'s name then touches nothing (fencing)."""
        names = check.check_namespaces(namespaces)
        old, new = check.check_token(old), check.check_token(new)
        with self._reported():
            return await self._backend.transfer(old, new, names, self._store_now(), self._lease)

    async def sweep(self) -> tuple[str, ...]:
        """Reclaim lapsed leases and waiters everywhere now; returns the namespaces touched."""
        with self._reported():
            usage = await self._backend.sweep(self._store_now())
            await self._read_preempt_flags()
        self._metrics.observe(usage)
        self._wakeups.ready(usage)
        self._wakeups.forget_lapsed(self._clock.now())  # this process's own hints
        return tuple(u.namespace for u in usage)

    def for_task(
        self,
        plugin_id: str,
        holder: Holder,
        holdings: PluginHoldings | None = None,
        on_refused: Callable[[str, str], None] | None = None,
        epoch: int | None = None,
    ) -> ResourceManager:
        """The plugin-facing manager of one task execution, recording what the plugin holds
        in `holdings` and telling `on_refused` of each refusal (see TaskResourceManager); its
        tokens are named for ownership `epoch` (proxy.with_epoch)."""
        plugin, checked = check.check_namespace(plugin_id), check.check_holder(holder)
        return TaskResourceManager(self, plugin, checked, holdings, on_refused, epoch)

    # Visibility.
    async def describe(self, namespace: str | None = None) -> list[NamespaceSnapshot]:
        """Quota and its source, units in use, holders and ranked waiters, per namespace."""
        name = None if namespace is None else check.check_namespace(namespace)
        return await self._backend.snapshot(name, self._store_now())

    async def explain(self, namespace: str, token: str) -> str:
        """Why `token` waits in `namespace`, as a task's reason; "" if it does not wait."""
        for snapshot in await self.describe(namespace):
            waiter = next((w for w in snapshot.waiters if w.token == token), None)
            if waiter is not None:
                return AllocationResult.of_waiter(snapshot, waiter).reason()
        return ""

    # Wake-ups.
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call `callback(namespace)` when room may appear there for a claim of this process:
        a release, a reclaimed lease or a raised quota, here or in another process. Where
        waiters queue, only the processes whose waiters would now be granted are called;
        where nobody queues, every process is. A hint: it may come more than once, and the
        claim must still be asked for."""
        return self._wakeups.subscribe(callback)

    def subscribe_preempted(self, callback: PreemptedSubscriber) -> Callable[[], None]:
        """Call `callback(label, tokens)` when a claim of this process marks holders for
        preemption (in-process only: another process's engine learns it at its next token
        renewal, a third of a lease at most)."""
        return self._wakeups.subscribe_preempted(callback)

    def subscribe_ready(self, callback: ReadySubscriber) -> Callable[[], None]:
        """Like `subscribe`, with the tokens of this process that may now be granted (None
        when anyone may try), so a caller with many waiters wakes only those."""
        return self._wakeups.subscribe_ready(callback)

    # Background work.
    async def _sweep_forever(self, due: float) -> None:
        # Due times count from start(), so a sweep is never skipped because this task began
        # late or a sweep took long.
        while True:
            await self._clock.sleep(due - self._clock.now())
            due = max(due + self._sweep_interval, self._clock.now())
            # Shielded: close() cancels the loop, never a sweep halfway through its transaction.
            self._sweeping = asyncio.ensure_future(self._sweep_once())
            await asyncio.shield(self._sweeping)

    async def _sweep_once(self) -> None:
        try:
            await self.sweep()
        except Exception as exc:
            reraise_cancellation()
            if self.health.expected(exc):
                self.health.lost(exc)  # one line per outage
            else:
                log.warning("resource sweep failed; retrying next interval", exc_info=True)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _settle(self) -> None:
        if self._pending:
            await asyncio.gather(*self._pending)


def _display(url: str) -> str:
    """`url` without its password, for log lines."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return parts._replace(netloc=netloc).geturl()
