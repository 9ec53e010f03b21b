"""The controller's memory: every non-terminal execution, grouped by launch plan name and,
under a keyed policy, by concurrency key (one queue per key).

Rebuilt from the store when a controller takes the lead and kept current from the
"executions" notifications. Phases only move forward here (PENDING, then active, then gone),
so a late or repeated notification can never undo what is known. Counts per project and per
project/domain cover every active execution, with or without a launch plan, because the
platform caps count them all; counts per launch plan cover every key, for `total_max`.

Keys of one launch plan take turns: each queue carries the turn (a counter of promotions) at
which it was last promoted from, or at which it last started waiting; the decision prefers
the queue whose turn is oldest (decide.py).
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import TypeVar

from sluice.executions.policies import UNDECIDED_REASON
from sluice.spec.phases import ExecutionPhase

LaunchPlanKey = tuple[str, str, str]  # (project, domain, launch plan name or "")
QueueKey = tuple[str, str, str, str]  # a LaunchPlanKey and the concurrency key ("": unkeyed)
Order = tuple[int, float, str]  # (-priority, created_at, id): promotion order
K = TypeVar("K")


@dataclass(slots=True)
class Tracked:
    id: str
    key: LaunchPlanKey
    version: str
    phase: ExecutionPhase
    priority: int
    created_at: float
    reason: str = ""
    concurrency_key: str = ""
    """The key stored with the execution (what its policy's template gave when created)."""
    group: str = ""
    """The key it is queued under: `concurrency_key` while the governing policy is keyed,
    else "" (the controller sets it from the policies)."""

    @property
    def queue_key(self) -> QueueKey:
        return (*self.key, self.group)

    @property
    def order(self) -> Order:
        return (-self.priority, self.created_at, self.id)

    @property
    def stage(self) -> int:
        """0 pending, 1 active, 2 ended: the only direction a phase moves."""
        if self.phase is ExecutionPhase.PENDING:
            return 0
        return 2 if self.phase.is_terminal else 1


@dataclass
class LaunchPlanQueue:
    """The active executions of one launch plan name (of one key of it, under a keyed policy)
    and its PENDING ones in promotion order (a heap with lazy deletion: removed ids are
    skipped when they reach the top)."""

    key: QueueKey
    turn: int = 0
    """When this queue was last promoted from, or last began to wait (see the module doc)."""
    active: dict[str, Tracked] = field(default_factory=dict)
    pending: dict[str, Tracked] = field(default_factory=dict)
    _heap: list[Order] = field(default_factory=list)
    freed_at: deque[float] = field(default_factory=lambda: deque(maxlen=256))
    """When slots were freed while executions waited: for the promotion latency metric."""

    def add_pending(self, item: Tracked) -> None:
        self.pending[item.id] = item
        heapq.heappush(self._heap, item.order)

    def head(self) -> Tracked | None:
        while self._heap and self._heap[0][2] not in self.pending:
            heapq.heappop(self._heap)
        return self.pending.get(self._heap[0][2]) if self._heap else None

    def discard_pending(self, execution_id: str) -> None:
        self.pending.pop(execution_id, None)
        if len(self._heap) > 2 * len(self.pending) + 64:
            self._heap = [o for o in self._heap if o[2] in self.pending]
            heapq.heapify(self._heap)

    def in_order(self) -> list[Tracked]:
        return sorted(self.pending.values(), key=lambda t: t.order)

    def oldest_active(self) -> list[Tracked]:
        return sorted(self.active.values(), key=lambda t: (t.created_at, t.id))

    @property
    def empty(self) -> bool:
        return not self.active and not self.pending

    @property
    def plan(self) -> LaunchPlanKey:
        return self.key[:3]

    @property
    def group(self) -> str:
        return self.key[3]


class ControllerState:
    def __init__(self) -> None:
        self.queues: dict[QueueKey, LaunchPlanQueue] = {}
        self.executions: dict[str, Tracked] = {}
        self.project_active: Counter[str] = Counter()
        self.domain_active: Counter[tuple[str, str]] = Counter()
        self.plan_active: Counter[LaunchPlanKey] = Counter()
        self.dirty: set[QueueKey] = set()
        self.undecided: set[str] = set()  # PENDING ids nobody has given a reason yet
        self.capped_projects: set[str] = set()  # an end there frees room for every launch plan
        self.shared_plans: set[LaunchPlanKey] = set()  # total_max: an end frees every key
        self.turns = 0  # promotions so far: the clock of the keys' rotation
        self._by_project: dict[str, set[QueueKey]] = {}
        self._by_plan: dict[LaunchPlanKey, set[QueueKey]] = {}

    def observe(self, item: Tracked, ended_at: float | None = None) -> None:
        """Apply a row read from the store; stale rows (an earlier stage) are ignored."""
        known = self.executions.get(item.id)
        if known is not None and item.stage < known.stage:
            return
        if known is None and item.stage == 2:
            return
        if known is None:
            self._add(item)
        elif item.stage == 2:
            self._end(known, ended_at)
        elif known.stage == 0 and item.stage == 1:
            self.promote(known)
            known.phase = item.phase
        else:
            known.phase = item.phase

    def _add(self, item: Tracked) -> None:
        self.executions[item.id] = item
        queue = self.queue(item.queue_key)
        if item.stage == 0:
            if not queue.pending:  # it starts waiting: it joins the rotation at the back
                queue.turn = max(queue.turn, self.turns)
            queue.add_pending(item)
            if item.reason == UNDECIDED_REASON:
                self.undecided.add(item.id)
        else:
            queue.active[item.id] = item
            self._count(item, 1)
        self.dirty.add(queue.key)

    def _end(self, item: Tracked, ended_at: float | None) -> None:
        queue = self.queue(item.queue_key)
        self.executions.pop(item.id, None)
        self.undecided.discard(item.id)
        if item.stage == 0:
            queue.discard_pending(item.id)
        elif queue.active.pop(item.id, None) is not None:
            self._count(item, -1)
            if queue.pending and ended_at is not None:
                queue.freed_at.append(ended_at)
            if item.key[0] in self.capped_projects:
                self.dirty.update(self._by_project.get(item.key[0], ()))
            if item.key in self.shared_plans:
                self.dirty.update(self._by_plan.get(item.key, ()))
        self.dirty.add(queue.key)
        if queue.empty:
            self._forget(queue)

    def promote(self, item: Tracked) -> None:
        """Move a PENDING execution to the active set (the decision is being written)."""
        queue = self.queue(item.queue_key)
        queue.discard_pending(item.id)
        self.undecided.discard(item.id)
        item.phase = ExecutionPhase.QUEUED
        queue.active[item.id] = item
        self._count(item, 1)
        self.turns += 1
        queue.turn = self.turns

    def end(self, item: Tracked, phase: ExecutionPhase, ended_at: float) -> None:
        """A decision ended this execution (SKIPPED, or ABORTED at once)."""
        self._end(item, ended_at)
        item.phase = phase

    def queue(self, key: QueueKey) -> LaunchPlanQueue:
        queue = self.queues.get(key)
        if queue is None:
            queue = self.queues[key] = LaunchPlanQueue(key, turn=self.turns)
            self._by_project.setdefault(key[0], set()).add(key)
            self._by_plan.setdefault(queue.plan, set()).add(key)
        return queue

    def plan_queues(self, plan: LaunchPlanKey) -> list[LaunchPlanQueue]:
        """Every queue (one per key) of a launch plan name."""
        return [self.queues[k] for k in self._by_plan.get(plan, ())]

    def _forget(self, queue: LaunchPlanQueue) -> None:
        self.queues.pop(queue.key, None)
        _discard(self._by_project, queue.key[0], queue.key)
        _discard(self._by_plan, queue.plan, queue.key)

    def _count(self, item: Tracked, delta: int) -> None:
        project, domain, _ = item.key
        self.project_active[project] += delta
        self.domain_active[(project, domain)] += delta
        self.plan_active[item.key] += delta

    def take_dirty(self) -> set[QueueKey]:
        dirty, self.dirty = self.dirty, set()
        return dirty

    def mark_all_dirty(self) -> None:
        self.dirty.update(self.queues)

    def carry_turns(self, old: ControllerState) -> None:
        """Keep the rotation of a state this one replaces (a rescan is not a new start)."""
        self.turns = max(self.turns, old.turns)
        for key, queue in self.queues.items():
            before = old.queues.get(key)
            if before is not None:
                queue.turn = before.turn

    @property
    def pending_count(self) -> int:
        return sum(len(q.pending) for q in self.queues.values())


def _discard(index: dict[K, set[QueueKey]], name: K, key: QueueKey) -> None:
    keys = index.get(name)
    if keys is not None:
        keys.discard(key)
        if not keys:
            del index[name]
