"""How the engine wakes nodes and admits them: timers, the lock scheduler under the
parallelism cap, and waiters on cache keys and resource namespaces.

Nodes are identified by (execution id, node id); the scheduler's task id is "<exec>/<node>".
Everything here runs on the engine's event loop and never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from sluice.clock import Clock
from sluice.config import EngineConfig
from sluice.engine import lifecycle
from sluice.engine.holdings import NodeHoldings
from sluice.engine.state import NodeState, node_holder
from sluice.locks.names import lock_capacity
from sluice.locks.scheduler import LockScheduler, LockTask, WaitInfo
from sluice.resources import NoopResourceManager, QuotaManager, ResourceManager
from sluice.spec.names import LOCK_PREFIX
from sluice.store.notify import WAKE_ALL

Enqueue = Callable[[str, Iterable[str]], None]
FindNode = Callable[[str, str], "tuple[Any, NodeState] | None"]


def task_id(execution_id: str, node_id: str) -> str:
    return f"{execution_id}/{node_id}"


class NodeAdmission:
    """The engine's side of the task handler (the services.NodeAdmission protocol)."""

    def __init__(
        self,
        config: EngineConfig,
        clock: Clock,
        enqueue: Enqueue,
        find: FindNode,
        resources: QuotaManager | None,
        lock_rules: dict[str, int],
    ) -> None:
        self._clock = clock
        self._enqueue = enqueue
        self._find = find
        self.resources = resources
        self.capacity = lock_capacity(lock_rules)
        self.scheduler = LockScheduler(
            config.scheduler_policy,
            parallelism=config.parallelism,
            clock=clock,
            starvation_bound=config.starvation_bound,
            capacity=self.capacity,
        )
        self._timers: set[asyncio.TimerHandle] = set()
        self._cache_waiters: dict[str, set[tuple[str, str]]] = {}
        self._resource_waiters: dict[str, set[tuple[str, str]]] = {}
        self._token_waiters: dict[str, tuple[str, str]] = {}

    # Wake-ups.
    def refresh(self, execution_id: str, node_id: str) -> None:
        self._enqueue(execution_id, [node_id])

    def wake_at(self, execution_id: str, node_id: str, when: float) -> None:
        loop = asyncio.get_running_loop()
        delay = max(0.0, when - self._clock.now())
        self._timers.add(loop.call_later(delay, self._fire, execution_id, node_id))

    def _fire(self, execution_id: str, node_id: str) -> None:
        now = asyncio.get_running_loop().time()
        self._timers = {t for t in self._timers if not t.cancelled() and t.when() > now}
        self._enqueue(execution_id, [node_id])

    def cancel_timers(self) -> None:
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()

    def wait_for_cache(
        self, key: str, execution_id: str, node_id: str, at_latest: float | None
    ) -> None:
        self._cache_waiters.setdefault(key, set()).add((execution_id, node_id))
        if at_latest is not None:
            self.wake_at(execution_id, node_id, at_latest)

    def on_cache_key(self, key: str) -> None:
        """A put or release of `key`: its waiters re-check the cache now."""
        self._wake(self._cache_waiters, key)

    def wait_for_resources(
        self, namespaces: Sequence[str], execution_id: str, node_id: str, token: str | None = None
    ) -> None:
        for namespace in namespaces:
            self._resource_waiters.setdefault(namespace, set()).add((execution_id, node_id))
        if token is not None:
            self._token_waiters[token] = (execution_id, node_id)

    def on_resources(self, namespace: str, ready: tuple[str, ...] | None = None) -> None:
        """Room may have appeared in `namespace`: a freed lock reopens in the scheduler, and
        the nodes that may now be granted (all of them when nobody queues) try again."""
        if namespace == WAKE_ALL:
            self.forget_busy_locks()
        elif namespace.startswith(LOCK_PREFIX):
            self.scheduler.lock_freed(namespace[len(LOCK_PREFIX) :])
        if ready is None:
            self._wake(self._resource_waiters, namespace)
        else:
            for token in ready:
                found = self._token_waiters.pop(token, None)
                if found is not None:
                    self._enqueue(found[0], [found[1]])
        self.admit()

    def _wake(self, waiters: dict[str, set[tuple[str, str]]], key: str) -> None:
        for each in list(waiters) if key == WAKE_ALL else [key]:
            for execution_id, node_id in waiters.pop(each, ()):
                self._enqueue(execution_id, [node_id])

    # Admission under the parallelism cap, in the scheduler's order.
    def request_admission(
        self,
        execution_id: str,
        node_id: str,
        created_at: float,
        locks: frozenset[str],
        estimate: float = 1.0,
    ) -> bool:
        """Queue the node for a slot (and its locks, as far as this engine knows); True if
        it was admitted at once."""
        wanted = task_id(execution_id, node_id)
        self.scheduler.submit(LockTask(wanted, locks, created_at, execution_id, estimate))
        admitted_now = False
        for chosen in self.scheduler.select():
            if chosen == wanted:
                admitted_now = True
            else:
                self._admit_one(chosen)
        return admitted_now

    def admission_reason(self, execution_id: str, node_id: str, locks: frozenset[str]) -> str:
        for name in sorted(locks):
            holders = sorted(self.scheduler.holders(name))
            if len(holders) >= self.capacity(name):
                return f"waiting for lock {name} (held by {', '.join(holders)})"
            if name in self.scheduler.busy_elsewhere():
                return f"waiting for lock {name} (held by another engine)"
        limit = self.scheduler.parallelism
        return f"waiting for a slot: {self.scheduler.running_count}/{limit} tasks running"

    def forget_busy_locks(self) -> None:
        """Treat every lock another engine held as free again, so its waiters ask once more:
        the safety net for a release whose notification was lost."""
        for name in self.scheduler.busy_elsewhere():
            self.scheduler.lock_freed(name)
        self.admit()

    def release_admission(self, execution_id: str, node_id: str) -> None:
        self.scheduler.cancel(task_id(execution_id, node_id))
        self.admit()

    def reject(self, execution_id: str, node_id: str, busy_locks: Collection[str]) -> None:
        """The resource manager refused locks this engine thought free (another process holds
        them): the node waits in the scheduler, keeping its place, until they are freed."""
        self.scheduler.reject(task_id(execution_id, node_id), busy_locks)
        self.admit()

    def admit(self) -> None:
        for chosen in self.scheduler.select():
            self._admit_one(chosen)

    def _admit_one(self, chosen: str) -> None:
        execution_id, _, node_id = chosen.partition("/")
        found = self._find(execution_id, node_id)
        if found is None:
            self.scheduler.cancel(chosen)
            return
        lifecycle.take_slot(found[1])
        self._enqueue(execution_id, [node_id])

    def waiting(self) -> list[WaitInfo]:
        return self.scheduler.waiting()

    def explain_waiting(self) -> list[tuple[str, str, str]]:
        """(execution id, node id, reason) of every queued node, with its position in the
        policy's order; sorts every waiting task, so it runs at resync, not per event."""
        explained = []
        for info in self.scheduler.waiting():
            execution_id, _, node_id = info.task_id.partition("/")
            reason = f"position {info.position} ({self.scheduler.policy} order): {info.reason}"
            explained.append((execution_id, node_id, reason))
        return explained

    # What plugins see of the resource manager.
    def resource_manager(self, plugin_id: str, execution_id: str, node_id: str) -> ResourceManager:
        found = self._find(execution_id, node_id)
        if self.resources is None or found is None:
            return NoopResourceManager()
        ex, node = found
        holder = node_holder(ex, node, node.task.metadata.priority)

        def refused(namespace: str, token: str) -> None:
            self.wait_for_resources([namespace], execution_id, node_id, token)

        holdings, epoch = NodeHoldings(ex, node), ex.record.owner_epoch
        return self.resources.for_task(plugin_id, holder, holdings, refused, epoch)
