"""The engine: owns executions (leased in the store), reconciles them when something they
wait on changes, admits tasks under its parallelism cap in the scheduler's order, and resyncs
now and then as a safety net. Several engines share one store; an execution has one owner at
a time, and a crashed owner's executions are taken over after its lease lapses (at once if
the owner was a process on this host that no longer exists).

Rules of the outer loops:
- Sharing work: an engine claims executions in batches bounded by its free capacity
  (`parallelism` minus the executions it already drives), oldest first, and claims again as
  executions end; so N engines on one store share a backlog. A live engine's executions are
  never taken: only an expired lease, or an owner that was a process on this host which no
  longer exists.
- Failing reconciles: a reconcile that raises is retried with back-off (backoff_base doubling,
  capped by backoff_max); after `max_reconcile_failures` consecutive failures the execution
  is FAILED (its error carries the last failure's message, an event records it), its nodes are
  stopped and the engine goes on. The traceback is logged once, later failures one line each.
  Store outages (StoreUnavailableError) are not the execution's fault: never counted.
- Store outages: every loop shares the database's health (store/health.py): one warning per
  outage, one line when it is back, no tracebacks for connection errors. A database that is
  gone for `store_gone_timeout` seconds, or a SQLite file removed or replaced under the engine,
  sets `fatal` and ends `wait_fatal`; `sluice engine` then stops with exit 4.
- Fencing (sluice/fencing.py, docs/invariants.md): every renewal round that succeeds proves
  its kind of lease alive from the moment it was sent (monotonic clock). Once no proof holds
  (paused, cut off, overloaded past `lease x (1 - fence_margin)`), the engine is fenced: it
  calls no plugin and launches nothing (the handler defers the node), its workers end their
  bodies, every attempt in flight is marked for re-verification, and the renewals run at
  once. When they succeed, the deferred nodes are stepped again and re-verify their claims
  and reservation before anything else. An execution lost to another engine has its local
  bodies stopped at once (`abandon`); its remote work is the new owner's.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass

from sluice.cache import Catalog
from sluice.cancellation import reraise_cancellation, wait_event
from sluice.engine import lifecycle
from sluice.engine.admission import NodeAdmission
from sluice.engine.executor import ExecutionDriver, LostOwnership
from sluice.engine.owned import OwnedExecutions
from sluice.engine.ownership import Ownership
from sluice.engine.services import EngineServices, NodeClaims
from sluice.engine.state import ExecutionState, NodeState
from sluice.errors import SluiceError, StoreGoneError
from sluice.resources import QuotaManager
from sluice.spec.compound import is_compound
from sluice.spec.models import WorkflowSpec
from sluice.spec.phases import ExecutionPhase
from sluice.store.notify import EXECUTIONS_CHANNEL, WAKE_ALL, Notifier
from sluice.store.store import Store

log = logging.getLogger(__name__)
RECONCILE_WORKERS = 4
"""Coroutines that reconcile woken executions concurrently, in each engine."""
_STOP_GRACE = 10.0
_WATCH_INTERVAL = 0.5
"""Seconds between checks of the store's files (SQLite) and probes during an outage."""
_DRAIN_LOOK = 0.05
"""Seconds between two looks at the attempts still running while draining."""
_FENCE_LOOK = 0.5
"""Longest the fence's watcher sleeps between two looks (it sleeps to the deadline sooner)."""
_EXECUTIONS, _TOKENS, _RESERVATIONS = "executions", "tokens", "reservations"
"""The fence's proofs: every execution this engine owns, every token its tasks hold, every
cache reservation they hold."""
_RENEWING = "renewing execution leases"


@dataclass(frozen=True)
class EngineParts:
    """What an engine is made of, composed by the runtime (runtime.compose_engine)."""

    owned: OwnedExecutions
    admission: NodeAdmission
    driver: ExecutionDriver
    claims: NodeClaims
    catalog: Catalog | None = None
    """Subscribed to, so a put or release wakes the key's waiters."""
    resources: QuotaManager | None = None
    """Subscribed to, and its leases renewed for every live task."""
    workflows: dict[tuple[str, str, str], WorkflowSpec] | None = None
    """Workflow specs known already, by (project, domain, workflow key) (Runtime.workflows)."""


class Engine:
    def __init__(
        self,
        services: EngineServices,
        store: Store,
        notifier: Notifier | None,
        parts: EngineParts,
        *,
        only: Iterable[str] | None = None,
    ) -> None:
        self.s = services
        self.store = store
        self.notifier = notifier
        self.only = set(only) if only is not None else None
        self.catalog = parts.catalog
        self.resources = parts.resources
        self.scheduling = parts.admission
        self.claims = parts.claims
        self.driver = parts.driver
        self.ownership = Ownership(services, store, only=self.only, workflows=parts.workflows)
        owned = parts.owned
        self._executions = owned.executions
        self._queue, self._queued = owned.queue, owned.queued
        self.enqueue, self._find, self._next = owned.enqueue, owned.find, owned.next
        self._done: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._unsubscribe: list[Callable[[], None]] = []
        self._claim_wanted = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()
        self._failures: dict[str, int] = {}
        self.health = store.db.health
        self.health.gone_timeout = services.config.store_gone_timeout
        self.health.announce = True  # a long-running process: say when the store is lost
        if self.resources is not None:
            self.resources.health.announce = True
        self._fatal = asyncio.Event()
        self._fenced = False
        self._renew_now = asyncio.Event()
        self._renew_tokens_now: asyncio.Event | None = None
        self._renew_reservations_now: asyncio.Event | None = None
        self._watch_counts()
        self.driver.compound.launches.adopt = self._adopt

    def _adopt(self, execution_id: str) -> None:
        """Drive `execution_id` too (a launch plan node's child): an engine limited to some
        executions would otherwise never claim it."""
        if self.only is not None and execution_id not in self.only:
            self.only.add(execution_id)
            self._claim_wanted.set()

    def _watch_counts(self) -> None:
        if self.s.counters is not None:
            scheduler = self.scheduling.scheduler
            self.s.counters.watch(
                lambda: scheduler.waiting_count,
                lambda: scheduler.running_count,
                lambda: len(self._executions),
            )

    @property
    def engine_id(self) -> str:
        return self.s.engine_id

    # Queue.
    async def _work(self) -> None:
        while True:
            ex = await self._next()
            if ex is not None:
                await self._reconcile(ex)
                self.scheduling.admit()

    async def _reconcile(self, ex: ExecutionState) -> None:
        if self._executions.get(ex.id) is not ex:
            return  # dropped (ended, lost) while this worker waited for it: nothing to do
        try:
            await self.driver.reconcile(ex)
        except LostOwnership:
            log.warning("engine %s lost execution %s to another engine", self.engine_id, ex.id)
            self._abandon(ex)
            return
        except Exception as exc:
            reraise_cancellation()
            await self._reconcile_failed(ex, exc)
            return
        self._failures.pop(ex.id, None)
        if ex.record.phase.is_terminal:
            log.info("execution %s ended %s", ex.id, ex.record.phase.value)
            await self.ownership.release(ex.id)
            self._drop(ex)

    async def _reconcile_failed(self, ex: ExecutionState, exc: Exception) -> None:
        """Retry with back-off; FAIL the execution after `max_reconcile_failures` in a row."""
        if self.health.expected(exc):  # the store's outage, reported once by its health
            self._retry(ex, 1.0)
            return
        count = self._failures.get(ex.id, 0) + 1
        self._failures[ex.id] = count
        limit = self.s.config.max_reconcile_failures
        if count >= limit:
            message = "reconciling %s failed %d times in a row (%s); failing the execution"
            log.error(message, ex.id, count, exc, exc_info=count == 1)
            await self._give_up(ex, f"reconciling failed {count} times in a row: {exc}")
            return
        config = self.s.config
        delay = max(0.01, min(config.backoff_max, config.backoff_base * 2 ** (count - 1)))
        message = "reconciling %s failed (%d/%d): %s; retrying in %.2fs"
        # The traceback once; later failures one line each.
        log.warning(message, ex.id, count, limit, exc, delay, exc_info=count == 1)
        self._retry(ex, delay)

    def _retry(self, ex: ExecutionState, delay: float) -> None:
        ex.todo.update(n.id for n in ex.nodes.values() if not n.record.phase.is_terminal)
        self.scheduling.wake_at(ex.id, next(iter(ex.nodes), ""), self.s.clock.now() + delay)

    async def _give_up(self, ex: ExecutionState, message: str) -> None:
        self._failures.pop(ex.id, None)
        try:
            await self.driver.fail(ex, message)
        except LostOwnership:
            self._abandon(ex)
            return
        except Exception as exc:
            reraise_cancellation()
            log.error("could not record the failure of %s (%s); dropping it", ex.id, exc)
        await self.ownership.release(ex.id)
        self._drop(ex)

    def _drop(self, ex: ExecutionState) -> None:
        ex.dropped = True
        self._executions.pop(ex.id, None)
        for node in ex.nodes.values():
            if node.admitted or node.queued:
                self.scheduling.release_admission(ex.id, node.id)
        self._done.setdefault(ex.id, asyncio.Event()).set()
        self._claim_wanted.set()  # capacity freed: claim more

    # Ownership.
    def free_capacity(self) -> int:
        """How many more executions this engine takes: its parallelism minus what it drives."""
        return self.s.config.parallelism - len(self._executions)

    async def claim(self) -> int:
        """Take ownership of up to `free_capacity` executions nobody (alive) holds, oldest
        first; returns how many were taken (none while draining)."""
        free = self.free_capacity()
        if free <= 0 or not self.s.launching:
            return 0
        loaded = await self.ownership.claim(set(self._executions), free)
        for state in loaded:
            log.info(
                "engine %s claimed execution %s (%s)",
                self.engine_id,
                state.id,
                state.record.phase.value,
            )
            self._executions[state.id] = state
            self.enqueue(state.id)
        return len(loaded)

    async def _renew(self) -> None:
        sent = self.s.fence.now()
        for execution_id in await self.ownership.renew(list(self._executions)):
            ex = self._executions.get(execution_id)
            if ex is not None:
                log.warning("engine %s lost the lease of %s", self.engine_id, execution_id)
                self._abandon(ex)
        self._proved(_EXECUTIONS, sent, self.s.config.execution_lease)

    def _abandon(self, ex: ExecutionState) -> None:
        """Drop an execution another engine holds now, stopping its bodies in this process
        (never its remote work, which the new owner drives on)."""
        for plugin in self.s.registry.plugins.values():
            abandon = getattr(plugin, "abandon", None)
            if abandon is not None:
                abandon(ex.id)
        self._drop(ex)

    def _proved(self, kind: str, sent: float, lease: float) -> None:
        """A renewal round of `kind` was answered: the fence may open again, and the nodes
        it held back are stepped (re-verifying first, if the fence had closed)."""
        self.s.fence.proved(kind, sent, lease)
        if not self.s.fence.live():
            return
        if self._fenced:
            self._fenced = False
            log.warning("engine %s re-verified its leases: it acts again", self.engine_id)
        for execution_id, node_id in self.s.fence.restored():
            if execution_id in self._executions:
                self.enqueue(execution_id, [node_id])

    async def _watch_fence(self) -> None:
        """Notice the fence close (no lease proven alive in time): stop acting until every
        lease is re-verified. The handler's own check keeps anything from launching meanwhile;
        this loop makes the engine re-verify at once."""
        while True:
            await asyncio.sleep(min(max(self.s.fence.remaining(), 0.0), _FENCE_LOOK))
            if not self._fenced and not self.s.fence.live():
                self._lose_fence()

    def _lose_fence(self) -> None:
        self._fenced = True
        late = -self.s.fence.remaining()
        log.warning(
            "engine %s could not show its leases alive in time (%.1fs past its deadline):"
            " its task bodies are stopped and every lease is re-verified before it acts again",
            self.engine_id,
            late,
        )
        for ex in self._executions.values():
            for node in ex.nodes.values():
                if node.record.attempt_started_at is not None:
                    lifecycle.suspect(node)
        for renew in (self._renew_now, self._renew_tokens_now, self._renew_reservations_now):
            if renew is not None:
                renew.set()

    def _on_preempted(self, label: str, tokens: tuple[str, ...]) -> None:
        """A claim of this process marked holders for preemption: renew the tokens now, so
        a victim of this engine is stopped at once (another engine's at its next renewal)."""
        if self._renew_tokens_now is not None:
            self._renew_tokens_now.set()

    async def _renew_claims(self) -> None:
        """Extend the leases of every token a live task holds (its claims and its plugin's).
        A token that no longer holds somewhere (its lease lapsed, maybe granted to another)
        gets its attempt re-verified at once: stopped, unless it can be claimed again. A round
        in which every renewal was answered proves the tokens' leases (the fence)."""
        sent, answered = self.s.fence.now(), True
        for ex in list(self._executions.values()):
            for node in list(ex.nodes.values()):
                if not node.record.claims or node.record.phase.is_terminal:
                    continue
                try:
                    lost = await self.claims.renew(node.record.claims)
                except SluiceError as exc:
                    if not self.health.expected(exc):  # an outage is reported once, elsewhere
                        log.warning("renewing the tokens of %s/%s failed: %s", ex.id, node.id, exc)
                    answered = False
                    continue
                if lost and node.record.attempt_started_at is not None:
                    log.warning("%s/%s no longer holds %s", ex.id, node.id, ", ".join(lost))
                    lifecycle.suspect(node)
                    self.enqueue(ex.id, [node.id])
        if answered and self.resources is not None:
            self._proved(_TOKENS, sent, self.resources.lease)

    async def _renew_reservations(self) -> None:
        """Extend every cache reservation a node holds, whatever it waits for; a round in
        which every extension was answered proves them alive (the fence)."""
        cache, renewal = self.driver.handler.cache, self.driver.handler.cache.renewal
        assert renewal is not None
        sent, answered = self.s.fence.now(), True
        for ex in list(self._executions.values()):
            for node in list(ex.nodes.values()):
                if node.record.phase.is_terminal:
                    continue
                try:
                    await cache.extend(ex, node)
                except SluiceError as exc:
                    if not self.health.expected(exc):  # an outage is reported once, elsewhere
                        log.warning(
                            "extending the reservation of %s/%s failed: %s", ex.id, node.id, exc
                        )
                    answered = False
        if answered:
            self._proved(_RESERVATIONS, sent, renewal[1])

    # Notifications.
    def _on_execution_changed(self, execution_id: str) -> None:
        if execution_id == WAKE_ALL:
            self._claim_wanted.set()
            for owned in list(self._executions):
                self._on_execution_changed(owned)
            return
        if execution_id in self._executions:
            task = asyncio.get_running_loop().create_task(self._reload_phase(execution_id))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        elif self.only is None or execution_id in self.only:
            self._claim_wanted.set()

    async def _reload_phase(self, execution_id: str) -> None:
        phases = await self.ownership.phases([execution_id])
        self._apply_phases(phases)

    def _apply_phases(self, phases: dict[str, tuple[ExecutionPhase, str]]) -> None:
        """An abort decided elsewhere (CLI, controller) reaches the execution we drive."""
        for execution_id, (phase, reason) in phases.items():
            ex = self._executions.get(execution_id)
            if (
                ex is not None
                and phase is ExecutionPhase.ABORTING
                and not ex.record.phase.is_terminal
            ):
                ex.record.phase, ex.record.reason = ExecutionPhase.ABORTING, reason
                self.enqueue(execution_id)

    # Loops.
    async def _guarded(self, work: Callable[[], Awaitable[object]], what: str) -> None:
        """Run one pass of a loop: a store outage is left to the shared health (no
        traceback); anything else is logged with its traceback."""
        try:
            await work()
        except Exception as exc:
            reraise_cancellation()
            if not self.health.expected(exc):
                log.exception("%s failed", what)

    async def _claim_loop(self) -> None:
        while True:
            await self._guarded(self.claim, "claiming executions")
            await wait_event(self._claim_wanted, self.s.config.resync_interval / 2)
            self._claim_wanted.clear()

    async def _every(
        self,
        seconds: float,
        work: Callable[[], Awaitable[object]],
        what: str,
        sooner: asyncio.Event | None = None,
    ) -> None:
        """Run `work` every `seconds`, or as soon as `sooner` is set."""
        while True:
            if sooner is None:
                await asyncio.sleep(seconds)
            else:
                await wait_event(sooner, seconds)
                sooner.clear()
            await self._guarded(work, what)

    async def _watch_store(self) -> None:
        """Notice a removed or replaced SQLite file, probe the store during an outage (so
        its end is noticed and logged), and stop the engine once the store is lost for good."""
        while self.health.fatal is None:
            await asyncio.sleep(_WATCH_INTERVAL)
            try:
                self.store.db.check_files()
                if self.health.down:
                    await self.store.db.probe()
            except Exception as exc:
                reraise_cancellation()
                if not self.health.expected(exc):
                    log.exception("watching the store failed")
        self._fatal.set()  # not logged: the caller of wait_fatal reports it, once

    @property
    def fatal(self) -> StoreGoneError | None:
        """The error that ended this engine's usefulness (the store is gone), if any."""
        return self.health.fatal

    async def wait_fatal(self) -> StoreGoneError:
        """Return once the store is lost for good; the caller stops the engine and reports
        the error (`sluice engine`: one line, exit 4)."""
        await self._fatal.wait()
        assert self.health.fatal is not None
        return self.health.fatal

    async def _resync(self) -> None:
        """The safety net: re-read every owned execution's phase (an abort whose notification
        was lost) and re-evaluate every active node."""
        owned = list(self._executions)
        self._apply_phases(await self.ownership.phases(owned))
        self.scheduling.forget_busy_locks()
        for execution_id, node_id, reason in self.scheduling.explain_waiting():
            found = self._find(execution_id, node_id)
            if found is not None and found[1].record.reason != reason:
                found[1].record.reason = reason
                found[0].mark_changed(found[1])
        for execution_id in owned:
            ex = self._executions.get(execution_id)
            if ex is not None:
                self.enqueue(execution_id, self._to_resync(ex))

    def _to_resync(self, ex: ExecutionState) -> list[str]:
        """Every active node but two kinds, whose wake-up cannot be lost, as it comes from
        this process: nodes waiting for a parallelism slot only (no locks: the admission after
        every reconcile gives them their slot), and the launched attempts of plugins that wake
        their nodes themselves on every change (`wakes_on_change`, the python plugin: its
        pool's callbacks) once this engine launched or re-verified them. They were most of a
        big fan-out's resync: every task waiting for a slot or queued in the pool was stepped
        again every resync_interval, for no news."""
        wakes: dict[str, bool] = {}
        wanted = []
        for node in ex.nodes.values():
            rec = node.record
            if rec.phase.is_terminal:
                continue
            if node.queued and not node.lock_names and rec.attempt_started_at is None:
                continue
            if node.verified and rec.attempt_started_at is not None and not is_compound(node.task):
                kind = node.task.type
                if kind not in wakes:
                    wakes[kind] = self._wakes_on_change(ex, node)
                if wakes[kind]:
                    continue
            wanted.append(node.id)
        return wanted

    def _wakes_on_change(self, ex: ExecutionState, node: NodeState) -> bool:
        try:
            plugin = self.driver.handler.plugins.plugin_for(ex, node)
        except SluiceError:
            return False
        return getattr(plugin, "wakes_on_change", False) is True

    async def start(self) -> None:
        for plugin in self.s.registry.plugins.values():
            warm_up = getattr(plugin, "warm_up", None)
            if warm_up is not None:
                await warm_up()
        if self.catalog is not None:
            self._unsubscribe.append(self.catalog.subscribe(self.scheduling.on_cache_key))
        if self.resources is not None:
            self._unsubscribe.append(self.resources.subscribe_ready(self.scheduling.on_resources))
            self._unsubscribe.append(self.resources.subscribe_preempted(self._on_preempted))
        if self.notifier is not None:
            self._unsubscribe.append(
                self.notifier.subscribe(EXECUTIONS_CHANNEL, self._on_execution_changed)
            )
        config = self.s.config
        started = self.s.fence.now()  # nothing held yet: proven alive from the start
        self.s.fence.proved(_EXECUTIONS, started, config.execution_lease)
        renew_now = self._renew_now
        loops = [
            self._claim_loop(),
            self._watch_store(),
            self._watch_fence(),
            self._every(config.execution_lease / 3, self._renew, _RENEWING, renew_now),
            self._every(config.resync_interval, self._resync, "resync"),
            *(self._work() for _ in range(RECONCILE_WORKERS)),
        ]
        renewal = self.driver.handler.cache.renewal
        if renewal is not None:
            self.s.fence.proved(_RESERVATIONS, started, renewal[1])
            self._renew_reservations_now = asyncio.Event()
            loops.append(
                self._every(
                    renewal[0],
                    self._renew_reservations,
                    "extending cache reservations",
                    self._renew_reservations_now,
                )
            )
        if self.resources is not None:
            self.s.fence.proved(_TOKENS, started, self.resources.lease)
            self._renew_tokens_now = asyncio.Event()
            loops.append(
                self._every(
                    self.resources.lease / 3,
                    self._renew_claims,
                    "renewing token leases",
                    self._renew_tokens_now,
                )
            )
        self._tasks = [asyncio.create_task(loop) for loop in loops]
        log.info("engine %s started", self.engine_id)

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        # The phase reloads too: one left running would hold a store connection past the
        # store's close, to be reset by the garbage collector, later, in another event loop.
        tasks = [*self._tasks, *self._background]
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=_STOP_GRACE)
            for task in stuck:  # never hang a shutdown on a loop that ignored its cancel
                log.error("engine loop %s did not stop within %ss", task.get_name(), _STOP_GRACE)
        self.scheduling.cancel_timers()
        self._tasks.clear()
        log.info("engine %s stopped", self.engine_id)

    # Graceful stop.
    def running_attempts(self) -> int:
        """Attempts in flight in this engine: launched, not ended."""
        return sum(
            1
            for ex in self._executions.values()
            for node in ex.nodes.values()
            if node.record.attempt_started_at is not None
            and not node.record.phase.is_terminal
            and not is_compound(node.task)
        )

    async def drain(self, within: float, hurry: asyncio.Event | None = None) -> int:
        """Stop claiming and launching, let the attempts in flight run to their end (and
        record it) for at most `within` seconds, or until `hurry` completes (a second
        signal); then stop this process's bodies of what still runs and hand every execution
        over, so another engine takes it at once. Returns how many attempts were handed
        over unfinished (the next engine starts them again)."""
        self.s.launching = False
        running = self.running_attempts()
        log.info(
            "engine %s draining: %d attempts running, stopping in at most %.0fs"
            " (a second signal stops at once)",
            self.engine_id,
            running,
            within,
        )
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self.running_attempts() and loop.time() < deadline:
            if hurry is not None and hurry.is_set():
                break
            await asyncio.sleep(_DRAIN_LOOK)
        return await self._hand_over()

    async def _hand_over(self) -> int:
        left = self.running_attempts()
        for ex in list(self._executions.values()):
            for plugin in self.s.registry.plugins.values():
                abandon = getattr(plugin, "abandon", None)
                if abandon is not None:
                    abandon(ex.id)
            await self.ownership.release(ex.id)
        log.info(
            "engine %s drained: %d executions handed over, %d attempts unfinished",
            self.engine_id,
            len(self._executions),
            left,
        )
        return left

    async def wait(self, execution_id: str) -> None:
        """Return once this engine has driven `execution_id` to a terminal phase."""
        await self._done.setdefault(execution_id, asyncio.Event()).wait()
