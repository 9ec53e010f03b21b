"""The policies' orders over ready tasks, kept up to date incrementally.

An ordering gives each waiting task a `SortKey` (smaller starts first). Orderings whose keys
depend on the waiting set (`tracks_waiting`) keep per-lock totals that `count` updates as tasks
enter (+1) and leave (-1) the waiting set; the scheduler then re-keys the ready waiters of the
task's locks, the only keys that changed. Every quantity is an integer so that incremental
totals equal totals recomputed from scratch, bit for bit (the reference relies on it).
"""

from __future__ import annotations

from collections import Counter
from typing import Protocol

from sluice.errors import InvalidArgumentError
from sluice.locks.model import LockTask, SortKey


def work_units(task: LockTask) -> int:
    """The task's estimate in whole milliseconds, at least 1, so sums stay exact."""
    return max(1, round(task.estimate * 1000))


class Ordering(Protocol):
    tracks_waiting: bool
    """True when a task's key changes as other tasks on its locks come and go."""

    def key(self, task: LockTask) -> SortKey:
        """The task's current key; it must be counted as waiting."""
        ...

    def count(self, task: LockTask, delta: int) -> None:
        """`task` entered (+1) or left (-1) the waiting set."""
        ...


class FifoOrdering:
    """Execution creation time, then task id."""

    tracks_waiting = False

    def key(self, task: LockTask) -> SortKey:
        return (task.created_at, task.id)

    def count(self, task: LockTask, delta: int) -> None:
        return None


class SharedLocksOrdering:
    """The seed's heuristic: creation time, then sharing (more first), then task id.

    Sharing is the number of (other waiting task, common lock) pairs: the sum over the task's
    locks of how many other waiting tasks need that lock.
    """

    tracks_waiting = True

    def __init__(self) -> None:
        self._waiters: Counter[str] = Counter()

    def key(self, task: LockTask) -> SortKey:
        sharing = sum(self._waiters[name] - 1 for name in task.locks)
        return (task.created_at, -sharing, task.id)

    def count(self, task: LockTask, delta: int) -> None:
        for name in task.locks:
            self._waiters[name] += delta
            if not self._waiters[name]:
                del self._waiters[name]


class BottleneckOrdering:
    """The default: creation time, then the waiting work on the task's busiest lock, most first.

    A lock can serve one task at a time, so the lock with the most waiting work bounds the
    makespan from below; starting its tasks whenever they fit keeps that lock busy. Ties (all
    the tasks of one bottleneck lock) go to the task whose locks carry the most waiting work in
    total, which drains the next bottlenecks too. Work is the sum of the waiting tasks'
    estimates, so with equal estimates it is a count of waiters.

    Measured by bench/locks.py on uniform random workloads (10 of 1000..5000 partitions per
    task, 30 seeds): about 1% shorter makespans than fifo and no better than the seed's
    heuristic. There a policy can barely matter: about two tasks become startable per event,
    so almost every order starts the same tasks. bench/locks_ceiling.py bounds what any order
    could do: an offline search that knows every true duration beats fifo by 1.4% to 8.4%
    depending on the seed. Holding free locks back for blocked high-priority tasks was tried
    too: reserving for every task on a near-busiest lock made makespans up to five times
    longer; EASY-style backfilling with one reserved task helped on one seed of four and hurt
    on the other three. So every policy here stays work-conserving.
    """

    tracks_waiting = True

    def __init__(self) -> None:
        self._work: Counter[str] = Counter()

    def key(self, task: LockTask) -> SortKey:
        loads = [self._work[name] for name in task.locks] or [0]
        return (task.created_at, -max(loads), -sum(loads), task.id)

    def count(self, task: LockTask, delta: int) -> None:
        units = work_units(task) * delta
        for name in task.locks:
            self._work[name] += units
            if not self._work[name]:
                del self._work[name]


POLICY_NAMES = ("default", "fifo", "shared_locks_first")


def make_ordering(policy: str) -> Ordering:
    """The incremental ordering of a policy name from `EngineConfig.scheduler_policy`."""
    if policy == "default":
        return BottleneckOrdering()
    if policy == "fifo":
        return FifoOrdering()
    if policy == "shared_locks_first":
        return SharedLocksOrdering()
    raise InvalidArgumentError(
        f"unknown scheduler policy {policy!r}; expected one of {', '.join(POLICY_NAMES)}"
    )
