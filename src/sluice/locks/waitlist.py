"""The waiting tasks, indexed so that every event touches only the tasks it concerns.

Per waiting task: how many of its locks are unavailable (`blockers`); per lock: its waiters.
A task with no blockers is *ready* and sits in one of two lazy heaps, urgent or normal, under
its policy key. Urgency and lock reservations implement the starvation bound documented in
scheduler.py.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass

from sluice.locks.model import LockTask, SortKey
from sluice.locks.orderings import Ordering
from sluice.locks.queue import ReadyQueue
from sluice.locks.table import LockTable


@dataclass(eq=False)
class Entry:
    """A submitted task and its waiting state (kept while it runs, for a possible reject)."""

    task: LockTask
    since: float
    """Clock time of submit()."""
    blockers: int = 0
    """How many of the task's locks are unavailable; the task is ready at 0."""
    urgent: bool = False
    version: int = 0
    """Bumped at every queue push; older queue entries of the task are dead."""
    deferred_on: str | None = None
    """A lock reserved against this task; it waits off-queue until that reservation relaxes."""
    waiting: bool = False


class WaitList:
    """Waiting tasks in policy order, with urgency, reservations and ready heaps."""

    def __init__(self, ordering: Ordering, locks: LockTable, starvation_bound: float) -> None:
        self._ordering = ordering
        self._locks = locks
        self._bound = starvation_bound
        self._entries: dict[str, Entry] = {}
        self._waiters: dict[str, set[Entry]] = {}
        """Lock -> its waiting entries (entries hash by identity: no id lookups on hot paths)."""
        self._urgent_queue = ReadyQueue()
        self._normal_queue = ReadyQueue()
        self._arrivals: list[tuple[float, str]] = []
        """Heap of (submit time, id) of tasks not yet urgent; stale entries are skipped."""
        self._reserved: dict[str, float] = {}
        """Lock -> the earliest moment one of its waiters became urgent."""
        self._deferred: dict[str, set[str]] = {}
        """Lock -> tasks taken off the queue because that lock was reserved against them."""
        self._rekey: set[Entry] = set()
        """Waiting tasks whose key may have changed since their last push."""

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, task_id: str) -> bool:
        return task_id in self._entries

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def get(self, task_id: str) -> Entry | None:
        return self._entries.get(task_id)

    def has_waiters(self, lock: str) -> bool:
        return lock in self._waiters

    def reserved_at(self, lock: str) -> float | None:
        """When `lock`'s earliest urgent waiter became urgent; later arrivals cannot take it."""
        return self._reserved.get(lock)

    def order_key(self, entry: Entry) -> tuple[int, SortKey]:
        """The entry's place in the start order: urgent tasks first."""
        if entry.urgent:
            return (0, self._urgent_key(entry))
        return (1, self._ordering.key(entry.task))

    def reserving_task(self, lock: str) -> str:
        """Id of the urgent task whose reservation holds `lock`."""
        for entry in sorted(self._waiters.get(lock, ()), key=lambda entry: entry.task.id):
            if entry.urgent and entry.since + self._bound == self._reserved.get(lock):
                return entry.task.id
        return "?"

    def enter(self, entry: Entry) -> None:
        task = entry.task
        self._entries[task.id] = entry
        entry.waiting = True
        for name in task.locks:
            self._waiters.setdefault(name, set()).add(entry)
        entry.blockers = sum(not self._locks.is_available(name) for name in task.locks)
        entry.deferred_on = None
        self._ordering.count(task, +1)
        if entry.urgent:
            self._reserve(entry)
        else:
            self._note_arrival(entry)
        self._rekey_neighbours(task)
        if entry not in self._rekey:
            self._push_if_ready(entry)

    def leave(self, entry: Entry) -> None:
        task = entry.task
        del self._entries[task.id]
        entry.waiting = False
        for name in task.locks:
            waiters = self._waiters[name]
            waiters.discard(entry)
            if not waiters:
                del self._waiters[name]
        self._ordering.count(task, -1)
        if entry.deferred_on is not None:
            self._undefer(entry.deferred_on, task.id)
        if entry.urgent:
            self._unreserve(entry)
        self._rekey_neighbours(task)

    def block(self, lock: str) -> None:
        """`lock` just became unavailable."""
        for entry in self._waiters.get(lock, ()):
            entry.blockers += 1

    def unblock(self, lock: str) -> None:
        """`lock` just became available."""
        for entry in self._waiters.get(lock, ()):
            entry.blockers -= 1
            if not entry.blockers:
                self._push_if_ready(entry)

    def pop_startable(self, *, urgent: bool) -> Entry | None:
        """Best ready task of one class that no reservation excludes; it is still waiting."""
        self._flush_rekeys()
        queue = self._urgent_queue if urgent else self._normal_queue
        while (task_id := queue.pop(self._is_live)) is not None:
            entry = self._entries[task_id]
            reserved_lock = self._reservation_against(entry)
            if reserved_lock is None:
                return entry
            entry.deferred_on = reserved_lock
            self._deferred.setdefault(reserved_lock, set()).add(task_id)
        return None

    def promote_urgent(self, now: float) -> None:
        """Tasks that have waited the starvation bound become urgent and reserve their locks."""
        while self._arrivals and self._arrivals[0][0] + self._bound <= now:
            since, task_id = heapq.heappop(self._arrivals)
            entry = self._entries.get(task_id)
            if entry is None or entry.urgent or entry.since != since:
                continue
            entry.urgent = True
            entry.version += 1  # its entry in the normal queue is dead from now on
            self._reserve(entry)
            self._push_if_ready(entry)

    def _is_live(self, task_id: str, version: int) -> bool:
        entry = self._entries.get(task_id)
        return (
            entry is not None
            and entry.version == version
            and entry.blockers == 0
            and entry.deferred_on is None
        )

    def _rekey_neighbours(self, task: LockTask) -> None:
        # Keys that depend on the waiting set changed only for the waiters of this task's locks.
        # Those not ready get a fresh key when they become ready; the ready ones are re-pushed
        # once, before the next pop, so a burst of submits costs a few set inserts, and a start
        # (which takes its locks first, leaving their waiters not ready) costs nothing.
        if not self._ordering.tracks_waiting:
            return
        for name in task.locks:
            if self._locks.is_available(name):
                waiters = self._waiters.get(name, ())
                self._rekey.update(entry for entry in waiters if not entry.blockers)

    def _flush_rekeys(self) -> None:
        for entry in self._rekey:
            if entry.waiting:
                self._push_if_ready(entry)
        self._rekey.clear()

    def _push_if_ready(self, entry: Entry) -> None:
        if entry.blockers or entry.deferred_on is not None:
            return
        entry.version += 1
        if entry.urgent:
            queue, key = self._urgent_queue, self._urgent_key(entry)
        else:
            queue, key = self._normal_queue, self._ordering.key(entry.task)
        queue.push(key, entry.task.id, entry.version)
        if len(queue) > 2 * len(self._entries) + 64:
            self._rebuild(queue, urgent=entry.urgent)

    def _rebuild(self, queue: ReadyQueue, *, urgent: bool) -> None:
        queue.rebuild(
            (self.order_key(entry)[1], entry.task.id, entry.version)
            for entry in self._entries.values()
            if entry.urgent == urgent and not entry.blockers and entry.deferred_on is None
        )

    def _urgent_key(self, entry: Entry) -> SortKey:
        # Arrival epochs keep a task submitted a bound later from taking a slot first.
        return (math.floor(entry.since / self._bound), *self._ordering.key(entry.task))

    def _note_arrival(self, entry: Entry) -> None:
        heapq.heappush(self._arrivals, (entry.since, entry.task.id))
        if len(self._arrivals) > 2 * len(self._entries) + 64:
            self._arrivals = [(e.since, e.task.id) for e in self._entries.values() if not e.urgent]
            heapq.heapify(self._arrivals)

    def _reserve(self, entry: Entry) -> None:
        urgent_at = entry.since + self._bound
        for name in entry.task.locks:
            if urgent_at < self._reserved.get(name, math.inf):
                self._reserved[name] = urgent_at

    def _unreserve(self, entry: Entry) -> None:
        urgent_at = entry.since + self._bound
        for name in entry.task.locks:
            if self._reserved.get(name) == urgent_at:
                self._recompute_reservation(name)

    def _recompute_reservation(self, lock: str) -> None:
        previous = self._reserved.pop(lock)
        waiters = self._waiters.get(lock, ())
        times = [entry.since + self._bound for entry in waiters if entry.urgent]
        if times:
            self._reserved[lock] = min(times)
        if self._reserved.get(lock) != previous:
            self._release_deferred(lock)

    def _release_deferred(self, lock: str) -> None:
        for task_id in self._deferred.pop(lock, set()):
            entry = self._entries.get(task_id)
            if entry is not None and entry.deferred_on == lock:
                entry.deferred_on = None
                self._push_if_ready(entry)

    def _undefer(self, lock: str, task_id: str) -> None:
        deferred = self._deferred.get(lock)
        if deferred is not None:
            deferred.discard(task_id)
            if not deferred:
                del self._deferred[lock]

    def _reservation_against(self, entry: Entry) -> str | None:
        for name in entry.task.locks:
            urgent_at = self._reserved.get(name)
            if urgent_at is not None and entry.since > urgent_at:
                return name
        return None
