"""A from-scratch twin of LockScheduler: every select() recomputes everything.

This is an honest port of the idea in the seed's "20 lines" (erikvanoosten, in the execution
concurrency RFC thread): collect the locks held by running tasks, rank the waiting tasks, and
take them greedily in rank order while their locks are free and slots remain. Ranking and
reservations are recomputed over all waiting tasks at every call, so one event costs
O(waiting tasks x locks per task) plus a sort. Two deliberate differences from the seed's
code: tasks are ranked by execution creation time first, as the seed's prose asks, and the
sharing count is taken over all waiting tasks rather than over the currently startable ones
(the incremental scheduler keeps that count up to date; the startable set would change at
every start). Urgency and reservations follow the starvation rules of sluice/locks/scheduler.py.

The benchmark runs it as "the seed's reference"; the tests use it as an oracle: on any
sequence of events it must select exactly what LockScheduler selects, for every policy.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterable

from sluice.clock import Clock
from sluice.errors import InvalidArgumentError
from sluice.locks.model import LockTask, SortKey
from sluice.locks.orderings import POLICY_NAMES, work_units

_Waiting = dict[str, tuple[LockTask, float]]


def fifo_keys(tasks: Iterable[LockTask]) -> dict[str, SortKey]:
    return {task.id: (task.created_at, task.id) for task in tasks}


def shared_locks_keys(tasks: Iterable[LockTask]) -> dict[str, SortKey]:
    tasks = list(tasks)
    waiters = Counter(name for task in tasks for name in task.locks)
    return {
        task.id: (task.created_at, -sum(waiters[name] - 1 for name in task.locks), task.id)
        for task in tasks
    }


def bottleneck_keys(tasks: Iterable[LockTask]) -> dict[str, SortKey]:
    tasks = list(tasks)
    work: Counter[str] = Counter()
    for task in tasks:
        for name in task.locks:
            work[name] += work_units(task)
    keys: dict[str, SortKey] = {}
    for task in tasks:
        loads = [work[name] for name in task.locks] or [0]
        keys[task.id] = (task.created_at, -max(loads), -sum(loads), task.id)
    return keys


_KEYS: dict[str, Callable[[Iterable[LockTask]], dict[str, SortKey]]] = {
    "default": bottleneck_keys,
    "fifo": fifo_keys,
    "shared_locks_first": shared_locks_keys,
}


class ReferenceLockScheduler:
    """Same events and select() as LockScheduler, recomputed from scratch at every call."""

    def __init__(
        self,
        policy: str,
        *,
        parallelism: int,
        clock: Clock,
        starvation_bound: float = 300.0,
        capacity: Callable[[str], int] = lambda name: 1,
    ) -> None:
        if policy not in _KEYS:
            raise InvalidArgumentError(f"unknown scheduler policy {policy!r}; {POLICY_NAMES}")
        self._keys = _KEYS[policy]
        self._parallelism = parallelism
        self._clock = clock
        self._bound = float(starvation_bound)
        self._capacity = capacity
        self._waiting: _Waiting = {}
        self._running: _Waiting = {}
        self._busy_elsewhere: set[str] = set()

    @property
    def running_count(self) -> int:
        return len(self._running)

    @property
    def waiting_count(self) -> int:
        return len(self._waiting)

    def submit(self, task: LockTask) -> None:
        if task.id not in self._waiting and task.id not in self._running:
            self._waiting[task.id] = (task, self._clock.now())

    def cancel(self, task_id: str) -> None:
        self._waiting.pop(task_id, None)
        self._running.pop(task_id, None)

    def finish(self, task_id: str) -> None:
        self.cancel(task_id)

    def reject(self, task_id: str, busy_locks: Collection[str]) -> None:
        self._busy_elsewhere.update(busy_locks)
        if task_id in self._running:
            self._waiting[task_id] = self._running.pop(task_id)

    def lock_freed(self, name: str) -> None:
        self._busy_elsewhere.discard(name)

    def select(self) -> list[str]:
        now = self._clock.now()
        started: list[str] = []
        held = Counter(name for task, _ in self._running.values() for name in task.locks)
        ranked, reserved = self._rank(now)
        position = 0
        while position < len(ranked) and len(self._running) < self._parallelism:
            task_id = ranked[position]
            position += 1
            if not self._fits(task_id, held, reserved):
                continue
            task, since = self._waiting.pop(task_id)
            self._running[task_id] = (task, since)
            held.update(task.locks)
            started.append(task_id)
            if self._changes_ranking(task, since, now):
                ranked, reserved = self._rank(now)
                position = 0
        return started

    def _rank(self, now: float) -> tuple[list[str], dict[str, float]]:
        """Waiting task ids in start order (urgent first), and the locks urgent tasks reserve."""
        keys = self._keys(task for task, _ in self._waiting.values())
        reserved: dict[str, float] = {}
        order: dict[str, tuple[int, SortKey]] = {}
        for task_id, (task, since) in self._waiting.items():
            if since + self._bound <= now:
                order[task_id] = (0, (math.floor(since / self._bound), *keys[task_id]))
                for name in task.locks:
                    reserved[name] = min(reserved.get(name, math.inf), since + self._bound)
            else:
                order[task_id] = (1, keys[task_id])
        return sorted(order, key=order.__getitem__), reserved

    def _fits(self, task_id: str, held: Counter[str], reserved: dict[str, float]) -> bool:
        task, since = self._waiting[task_id]
        return all(
            name not in self._busy_elsewhere
            and held[name] < self._capacity(name)
            and since <= reserved.get(name, math.inf)
            for name in task.locks
        )

    def _changes_ranking(self, task: LockTask, since: float, now: float) -> bool:
        # A start changes other keys only on its own locks, whose other waiters cannot start
        # in this call if those locks have one unit; reservations change only when an urgent
        # task leaves. Otherwise the ranking computed at the start of the call still holds.
        urgent = since + self._bound <= now
        return urgent or any(self._capacity(name) > 1 for name in task.locks)
