"""The lock scheduler: which ready tasks start, in what order, under a parallelism cap.

A task needs every one of its locks (one unit each; a lock's capacity is 1 unless the
`capacity` function says otherwise) and a parallelism slot. It takes them all at once or
nothing, so no task ever holds a lock while waiting for another: no deadlock. The scheduler is
pure and in memory: the engine reports events (`submit`, `cancel`, `finish`, `reject`,
`lock_freed`) and asks `select()` which tasks to start now. Time comes from the injected clock,
so a benchmark drives it in simulated time. It is not thread-safe: one engine loop owns it.

Order. `select()` starts ready tasks in the policy's order (see orderings.py: "fifo",
"shared_locks_first", and "default", the bottleneck-first policy) and is work-conserving:
when it returns, either every slot is in use or no waiting task fits, except that an urgent
task's reserved locks do not fit tasks that arrived after it became urgent (below). A blocked
head never stops the tasks behind it.

Anti-starvation bound. A task that has waited `starvation_bound` seconds since submit()
(a reject() keeps the original submit time) becomes *urgent*. From that moment, no task that
is submitted later ever starts ahead of it on a lock it needs or on a parallelism slot:

- its locks are reserved: a task submitted after the urgent moment cannot take them;
- urgent tasks are offered slots before all others, ordered by arrival epoch
  (floor(submit time / starvation_bound)), then by the policy's key; a task submitted more than
  `starvation_bound` after another lands in a later epoch, so it cannot take the last slot
  ahead of that older urgent task.

So a task is overtaken only by tasks submitted before it became urgent, a finite set, and
starts once those that precede it and the current holders of its locks are done. Tasks
submitted together (a batch, as in the benchmark) keep competing in the policy's order however
long they wait; a batch that straddles an epoch boundary only has its earlier part offered
slots first. Locks held by another engine (see reject()) are outside this bound.

Cost. Each event costs time proportional to the tasks it touches, never to all waiting tasks:
a per-lock index of waiters, a count of unavailable locks per waiting task, and lazy heaps
with version stamps (locks/queue.py). With uniform lock sets that is about (locks per task) x
(waiters per lock) steps per start or finish. Only `waiting()` sorts every waiting task.
"""

from __future__ import annotations

from collections.abc import Callable, Collection

from sluice.clock import Clock
from sluice.errors import InvalidArgumentError
from sluice.locks.model import LockTask, WaitInfo
from sluice.locks.orderings import POLICY_NAMES, make_ordering
from sluice.locks.reasons import WaitExplainer
from sluice.locks.table import LockTable
from sluice.locks.waitlist import Entry, WaitList

__all__ = ["POLICY_NAMES", "LockScheduler", "LockTask", "WaitInfo"]


def _one_unit(name: str) -> int:
    return 1


class LockScheduler:
    """Decides which waiting tasks start; see the module docstring for order and bounds.

    Every event method is idempotent: unknown ids are ignored, submitting a task that is
    already waiting or running changes nothing.
    """

    def __init__(
        self,
        policy: str,
        *,
        parallelism: int,
        clock: Clock,
        starvation_bound: float = 300.0,
        capacity: Callable[[str], int] = _one_unit,
    ) -> None:
        if parallelism < 1:
            raise InvalidArgumentError(f"parallelism must be >= 1, got {parallelism}")
        if not starvation_bound > 0:
            raise InvalidArgumentError(f"starvation_bound must be > 0, got {starvation_bound}")
        self._policy = policy
        self._parallelism = parallelism
        self._clock = clock
        self._bound = float(starvation_bound)
        self._locks = LockTable(capacity)
        self._waiting = WaitList(make_ordering(policy), self._locks, self._bound)
        self._running: dict[str, Entry] = {}

    @property
    def policy(self) -> str:
        return self._policy

    @property
    def parallelism(self) -> int:
        return self._parallelism

    @property
    def starvation_bound(self) -> float:
        return self._bound

    @property
    def running_count(self) -> int:
        return len(self._running)

    @property
    def waiting_count(self) -> int:
        return len(self._waiting)

    def is_waiting(self, task_id: str) -> bool:
        return task_id in self._waiting

    def is_running(self, task_id: str) -> bool:
        return task_id in self._running

    def running(self) -> list[str]:
        """Ids of the started tasks, in start order."""
        return list(self._running)

    def holders(self, lock: str) -> frozenset[str]:
        """Ids of the started tasks holding `lock` here."""
        return self._locks.holders(lock)

    def busy_elsewhere(self) -> frozenset[str]:
        """Locks reported busy by reject() and not yet freed by lock_freed()."""
        return self._locks.busy_elsewhere()

    def submit(self, task: LockTask) -> None:
        """A ready task starts waiting; its wait is measured from now."""
        if task.id in self._waiting or task.id in self._running:
            return
        if not task.estimate >= 0:
            raise InvalidArgumentError(f"task {task.id!r}: estimate must be >= 0")
        for name in task.locks:
            self._locks.capacity(name)  # a bad capacity fails here, not in a later select()
        self._waiting.enter(Entry(task, self._clock.now()))

    def cancel(self, task_id: str) -> None:
        """Withdraw a task: a waiting one stops waiting, a running one is finished."""
        entry = self._waiting.get(task_id)
        if entry is None:
            self.finish(task_id)
            return
        self._waiting.leave(entry)
        for name in entry.task.locks:
            self._forget_if_idle(name)

    def finish(self, task_id: str) -> None:
        """A started task ended: its locks and its slot are free (a waiting one is cancelled)."""
        entry = self._running.pop(task_id, None)
        if entry is not None:
            self._release_locks(entry)
        elif task_id in self._waiting:
            self.cancel(task_id)

    def reject(self, task_id: str, busy_locks: Collection[str]) -> None:
        """The engine could not acquire a selected task's locks: `busy_locks` are held elsewhere.

        Those locks count as unavailable until lock_freed(). The task waits again with its
        original submit time, so it keeps its place and its urgency. With no busy lock named,
        the task is offered again at the next select().
        """
        for name in busy_locks:
            if self._locks.mark_busy_elsewhere(name):
                self._waiting.block(name)
        entry = self._running.pop(task_id, None)
        if entry is not None:
            self._release_locks(entry)
            self._waiting.enter(entry)

    def lock_freed(self, name: str) -> None:
        """A lock held elsewhere was released."""
        if self._locks.clear_busy_elsewhere(name):
            self._waiting.unblock(name)
        self._forget_if_idle(name)

    def select(self) -> list[str]:
        """Tasks to start now, in start order; they count as running and holding their locks."""
        self._waiting.promote_urgent(self._clock.now())
        started: list[str] = []
        for urgent in (True, False):
            while len(self._running) < self._parallelism:
                entry = self._waiting.pop_startable(urgent=urgent)
                if entry is None:
                    break
                self._start(entry)
                started.append(entry.task.id)
        return started

    def waiting(self) -> list[WaitInfo]:
        """Waiting tasks in the order the policy would start them, each with its reason.

        Sorts every waiting task: meant for display, not for every event.
        """
        now = self._clock.now()
        self._waiting.promote_urgent(now)
        ordered = sorted(self._waiting, key=self._waiting.order_key)
        slots = (len(self._running), self._parallelism)
        explainer = WaitExplainer(self._locks, self._waiting, slots)
        return [
            explainer.explain(entry.task, entry.since, entry.urgent, now, position)
            for position, entry in enumerate(ordered, start=1)
        ]

    def _start(self, entry: Entry) -> None:
        task = entry.task
        for name in task.locks:
            if self._locks.acquire(name, task.id):
                self._waiting.block(name)
        self._waiting.leave(entry)
        self._running[task.id] = entry

    def _release_locks(self, entry: Entry) -> None:
        for name in entry.task.locks:
            if self._locks.release(name, entry.task.id):
                self._waiting.unblock(name)
            self._forget_if_idle(name)

    def _forget_if_idle(self, name: str) -> None:
        if not self._waiting.has_waiters(name):
            self._locks.forget_if_idle(name)
