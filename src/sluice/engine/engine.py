"""The engine: owns executions (leased in the store), reconciles them when something they
wait on changes, admits tasks under its parallelism cap, and resyncs now and then as a
safety net. Several engines share one store; an execution has one owner at a time, and a
crashed owner's executions are taken over after its lease lapses (at once if the owner was a
process on this host that no longer exists)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Iterable

from sluice.cache import Catalog
from sluice.config import CacheConfig
from sluice.engine.admission import FifoAdmission
from sluice.engine.cache_gate import CacheGate
from sluice.engine.executor import EXECUTIONS_CHANNEL, ExecutionDriver, LostOwnership
from sluice.engine.services import EngineServices
from sluice.engine.state import ExecutionState
from sluice.ids import instance_pid
from sluice.resources.models import NoopResourceManager, ResourceManager
from sluice.spec.models import WorkflowSpec
from sluice.spec.phases import ExecutionPhase
from sluice.store.notify import WAKE_ALL, Notifier
from sluice.store.records import ExecutionRecord
from sluice.store.store import Repos, Store

log = logging.getLogger(__name__)
_WORKERS = 4


class Engine:
    def __init__(
        self,
        services: EngineServices,
        store: Store,
        notifier: Notifier | None,
        *,
        only: Iterable[str] | None = None,
        catalog: Catalog | None = None,
        cache_config: CacheConfig | None = None,
    ) -> None:
        self.s = services
        self.store = store
        self.notifier = notifier
        self.only = set(only) if only is not None else None
        self.catalog = catalog
        gate = None
        if catalog is not None:
            gate = CacheGate(
                catalog, cache_config or CacheConfig(), services.clock, self._wait_for_cache
            )
        self.driver = ExecutionDriver(services, self, store, notifier, gate)
        self.admission = FifoAdmission(services.config.parallelism)
        self._executions: dict[str, ExecutionState] = {}
        self._queue: asyncio.Queue[str] = asyncio.Queue()
        self._queued: set[str] = set()
        self._done: dict[str, asyncio.Event] = {}
        self._workflows: dict[tuple[str, str, str], WorkflowSpec] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._timers: set[asyncio.TimerHandle] = set()
        self._unsubscribe: list[Callable[[], None]] = []
        self._claim_wanted = asyncio.Event()
        self._background: set[asyncio.Task[None]] = set()
        self._cache_waiters: dict[str, set[tuple[str, str]]] = {}

    @property
    def engine_id(self) -> str:
        return self.s.engine_id

    # Scheduling protocol, called by the task handler.
    def refresh(self, execution_id: str, node_id: str) -> None:
        self.enqueue(execution_id, [node_id])

    def wake_at(self, execution_id: str, node_id: str, when: float) -> None:
        delay = max(0.0, when - self.s.clock.now())
        loop = asyncio.get_running_loop()
        handle = loop.call_later(delay, self._fire, execution_id, node_id)
        self._timers.add(handle)

    def _fire(self, execution_id: str, node_id: str) -> None:
        now = asyncio.get_running_loop().time()
        self._timers = {t for t in self._timers if not t.cancelled() and t.when() > now}
        self.enqueue(execution_id, [node_id])

    def _wait_for_cache(
        self, key: str, execution_id: str, node_id: str, at_latest: float | None
    ) -> None:
        self._cache_waiters.setdefault(key, set()).add((execution_id, node_id))
        if at_latest is not None:
            self.wake_at(execution_id, node_id, at_latest)

    def _on_cache_key(self, key: str) -> None:
        """A put or release of `key`: its waiters re-check the cache now."""
        keys = list(self._cache_waiters) if key == WAKE_ALL else [key]
        for each in keys:
            for execution_id, node_id in self._cache_waiters.pop(each, ()):
                self.enqueue(execution_id, [node_id])

    def request_admission(self, execution_id: str, node_id: str, created_at: float) -> bool:
        task_id = f"{execution_id}/{node_id}"
        self.admission.submit(task_id, created_at)
        admitted_now = False
        for chosen in self.admission.select():
            if chosen == task_id:
                admitted_now = True
            else:
                self._admit_one(chosen)
        return admitted_now

    def release_admission(self, execution_id: str, node_id: str) -> None:
        task_id = f"{execution_id}/{node_id}"
        self.admission.cancel(task_id)
        self.admission.finish(task_id)

    def resource_manager(self, plugin_id: str, execution_id: str, node_id: str) -> ResourceManager:
        return NoopResourceManager()

    def _admit(self) -> None:
        for task_id in self.admission.select():
            self._admit_one(task_id)

    def _admit_one(self, task_id: str) -> None:
        execution_id, _, node_id = task_id.partition("/")
        ex = self._executions.get(execution_id)
        if ex is None or node_id not in ex.nodes:
            self.admission.finish(task_id)
            return
        node = ex.nodes[node_id]
        node.admitted, node.queued = True, False
        self.enqueue(execution_id, [node_id])

    # Queue.
    def enqueue(self, execution_id: str, node_ids: Iterable[str] | None = None) -> None:
        ex = self._executions.get(execution_id)
        if ex is None:
            return
        ex.todo.update(
            node_ids
            if node_ids is not None
            else [n.id for n in ex.nodes.values() if not n.record.phase.is_terminal]
        )
        if execution_id not in self._queued:
            self._queued.add(execution_id)
            self._queue.put_nowait(execution_id)

    async def _work(self) -> None:
        while True:
            execution_id = await self._queue.get()
            self._queued.discard(execution_id)
            ex = self._executions.get(execution_id)
            if ex is None:
                continue
            await self._reconcile(ex)
            self._admit()

    async def _reconcile(self, ex: ExecutionState) -> None:
        try:
            await self.driver.reconcile(ex)
        except LostOwnership:
            log.warning("engine %s lost execution %s to another engine", self.engine_id, ex.id)
            self._drop(ex)
            return
        except Exception:
            log.exception("reconciling %s failed; retrying soon", ex.id)
            self.wake_at(ex.id, next(iter(ex.nodes), ""), self.s.clock.now() + 1.0)
            return
        if ex.record.phase.is_terminal:
            await self._finished(ex)

    async def _finished(self, ex: ExecutionState) -> None:
        with contextlib.suppress(Exception):
            async with self.store.write() as repos:
                await repos.executions.release(ex.id, self.engine_id)
        self._drop(ex)

    def _drop(self, ex: ExecutionState) -> None:
        self._executions.pop(ex.id, None)
        for node in ex.nodes.values():
            if node.admitted or node.queued:
                self.release_admission(ex.id, node.id)
        self._done.setdefault(ex.id, asyncio.Event()).set()

    # Ownership.
    def _dead_local_owner(self, owner: str | None) -> bool:
        located = instance_pid(owner or "")
        if located is None or located[0] != socket.gethostname():
            return False
        try:
            os.kill(located[1], 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    async def claim(self) -> int:
        """Take ownership of executions nobody (alive) holds; returns how many were taken."""
        now = self.s.clock.now()
        until = now + self.s.config.execution_lease
        taken: list[str] = []
        async with self.store.write() as repos:
            candidates = await self._candidates(repos, now)
            for record in candidates:
                if record.id in self._executions:
                    continue
                if self._dead_local_owner(record.owner) and record.owner != self.engine_id:
                    record.owner_expires_at = now - 1  # its process is gone: no need to wait
                    await repos.executions.release(record.id, record.owner or "")
                if await repos.executions.claim(record.id, self.engine_id, now, until):
                    taken.append(record.id)
        for execution_id in taken:
            await self._load(execution_id)
        return len(taken)

    async def _candidates(self, repos: Repos, now: float) -> list[ExecutionRecord]:
        active = [
            p for p in ExecutionPhase if not p.is_terminal and p is not ExecutionPhase.PENDING
        ]
        records = await repos.executions.find(
            phases=active, ids=self.only, limit=1000, oldest_first=True
        )
        return [
            r
            for r in records
            if r.owner is None
            or r.owner == self.engine_id
            or (r.owner_expires_at or 0) < now
            or self._dead_local_owner(r.owner)
        ]

    async def _load(self, execution_id: str) -> None:
        async with self.store.read() as repos:
            record = await repos.executions.get(execution_id)
            if record is None:
                return
            workflow = await self._workflow(repos, record)
            nodes = await repos.nodes.list(execution_id)
        self._executions[execution_id] = ExecutionState.build(record, workflow, nodes)
        self.enqueue(execution_id)

    async def _workflow(self, repos: Repos, record: ExecutionRecord) -> WorkflowSpec:
        key = (record.project, record.domain, record.workflow_key)
        if key not in self._workflows:
            spec = await repos.specs.get_workflow(
                record.project, record.domain, record.workflow_name, record.workflow_version
            )
            if spec is None:
                raise LookupError(
                    f"workflow {record.workflow_key} of {record.id} is not registered"
                )
            self._workflows[key] = spec
        return self._workflows[key]

    async def _renew(self) -> None:
        owned = list(self._executions)
        if not owned:
            return
        until = self.s.clock.now() + self.s.config.execution_lease
        async with self.store.write() as repos:
            kept = await repos.executions.renew(self.engine_id, owned, until)
        for execution_id in set(owned) - kept:
            ex = self._executions.get(execution_id)
            if ex is not None:
                log.warning("engine %s lost the lease of %s", self.engine_id, execution_id)
                self._drop(ex)

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
        async with self.store.read() as repos:
            stored = await repos.executions.get(execution_id)
        ex = self._executions.get(execution_id)
        if stored is None or ex is None:
            return
        if stored.phase is ExecutionPhase.ABORTING and not ex.record.phase.is_terminal:
            ex.record.phase, ex.record.reason = ExecutionPhase.ABORTING, stored.reason
            self.enqueue(execution_id)

    # Loops.
    async def _claim_loop(self) -> None:
        while True:
            try:
                await self.claim()
            except Exception:
                log.exception("claiming executions failed")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._claim_wanted.wait(), self.s.config.resync_interval / 2)
            self._claim_wanted.clear()

    async def _lease_loop(self) -> None:
        while True:
            await asyncio.sleep(self.s.config.execution_lease / 3)
            try:
                await self._renew()
            except Exception:
                log.exception("renewing execution leases failed")

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.s.config.resync_interval)
            try:
                await self._resync()
            except Exception:
                log.exception("resync failed")

    async def _resync(self) -> None:
        """The safety net: re-read every owned execution's phase (an abort whose notification
        was lost) and re-evaluate every active node."""
        owned = list(self._executions)
        async with self.store.read() as repos:
            stored = await repos.executions.find(ids=owned, limit=None)
        for record in stored:
            ex = self._executions.get(record.id)
            if ex is not None and record.phase is ExecutionPhase.ABORTING:
                ex.record.phase, ex.record.reason = ExecutionPhase.ABORTING, record.reason
        for execution_id in owned:
            self.enqueue(execution_id)

    async def start(self) -> None:
        for plugin in self.s.registry.plugins.values():
            warm_up = getattr(plugin, "warm_up", None)
            if warm_up is not None:
                await warm_up()
        if self.catalog is not None:
            self._unsubscribe.append(self.catalog.subscribe(self._on_cache_key))
        if self.notifier is not None:
            self._unsubscribe.append(
                self.notifier.subscribe(EXECUTIONS_CHANNEL, self._on_execution_changed)
            )
        loops = [self._claim_loop(), self._lease_loop(), self._resync_loop()]
        loops += [self._work() for _ in range(_WORKERS)]
        self._tasks = [asyncio.create_task(loop) for loop in loops]

    async def stop(self) -> None:
        for unsubscribe in self._unsubscribe:
            unsubscribe()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for timer in self._timers:
            timer.cancel()
        self._tasks.clear()

    async def wait(self, execution_id: str) -> None:
        """Return once this engine has driven `execution_id` to a terminal phase."""
        await self._done.setdefault(execution_id, asyncio.Event()).wait()
