"""The controller's decisions, as a pure function of its memory, the policies and the caps.

A pass looks only at queues whose state changed. It promotes PENDING executions across launch
plans in (priority, creation time) order while their queue has room under its policy's `max`
(per key under a keyed policy, with `total_max` over all keys) and their project and
project/domain have room under the platform caps. At the limit, SKIP ends the newcomer, WAIT
keeps it (up to `max_pending`), and REPLACE has displaced the oldest executions before the
pass so that only the newest `max` remain.

Within a keyed launch plan the keys take turns: the next promotion goes to the queue with
the highest priority at its head, then the one whose turn is oldest (last promoted from, or
last began to wait, longest ago), then the oldest head. So a key with waiting work and room
is promoted before any other key of its launch plan is promoted twice: within K = (keys with
waiting work) - 1 promotions of other keys, among heads of equal priority.

The memory is updated as decisions are made (so later decisions in the pass count earlier
ones); the controller writes them as compare-and-swaps and rebuilds its memory from the store
if that write fails.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Protocol

from sluice.concurrency.queues import (
    ControllerState,
    LaunchPlanKey,
    LaunchPlanQueue,
    Order,
    QueueKey,
    Tracked,
)
from sluice.spec.models import ConcurrencyBehavior, ConcurrencyPolicy
from sluice.spec.phases import ExecutionPhase

SHOWN_POSITIONS = 20  # deeper positions read "position > 20", so they are rarely rewritten


class PolicyBook(Protocol):
    def policy(self, item: Tracked) -> ConcurrencyPolicy | None:
        """The policy governing `item` (see executions/policies.py)."""
        ...


@dataclass
class Decisions:
    promote: list[Tracked] = field(default_factory=list)
    skip: list[tuple[Tracked, str]] = field(default_factory=list)
    abort: list[tuple[Tracked, str]] = field(default_factory=list)
    wait: list[tuple[Tracked, str]] = field(default_factory=list)
    touched: set[QueueKey] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.promote or self.skip or self.abort or self.wait)


class Caps:
    """Effective platform caps keyed by (project, "") and (project, domain)."""

    def __init__(self, caps: dict[tuple[str, str], int] | None = None) -> None:
        self.caps = caps or {}

    def blocking(self, state: ControllerState, key: LaunchPlanKey) -> str | None:
        """Which cap is full for executions of `key`, as words; None if both have room."""
        project, domain, _ = key
        cap = self.caps.get((project, ""))
        if cap is not None and state.project_active[project] >= cap:
            return f"project cap {state.project_active[project]}/{cap} ({project})"
        cap = self.caps.get((project, domain))
        if cap is not None and state.domain_active[(project, domain)] >= cap:
            return f"domain cap {state.domain_active[(project, domain)]}/{cap} ({project}/{domain})"
        return None


Rank = tuple[int, int, float, str]  # (-priority, turn, created_at, id): a key's turn
# (ranks are unique: the id ends every comparison before the queue objects are reached)


class _Lane:
    """The queues (one per key) of one launch plan touched in this pass, in rotation order.
    A queue is in its lane at most once, and its rank changes only while it is out of it (it
    is taken out to be acted on), so the entries never go stale."""

    def __init__(self) -> None:
        self.heap: list[tuple[Rank, LaunchPlanQueue]] = []

    def push(self, queue: LaunchPlanQueue) -> None:
        rank = _rank(queue)
        if rank is not None:
            heapq.heappush(self.heap, (rank, queue))

    def pop(self) -> LaunchPlanQueue | None:
        """The queue whose turn it is, taken out of the lane."""
        return heapq.heappop(self.heap)[1] if self.heap else None

    def head_order(self) -> Order | None:
        """The order of the execution the lane would promote next."""
        if not self.heap:
            return None
        rank = self.heap[0][0]
        return (rank[0], rank[2], rank[3])

    def queues(self) -> list[LaunchPlanQueue]:
        return [queue for _, queue in self.heap]


def _rank(queue: LaunchPlanQueue) -> Rank | None:
    head = queue.head()
    return None if head is None else (-head.priority, queue.turn, head.created_at, head.id)


def decide(state: ControllerState, book: PolicyBook, caps: Caps) -> Decisions:
    out = Decisions(touched=state.take_dirty())
    lanes: dict[LaunchPlanKey, _Lane] = {}
    for key in out.touched:
        queue = state.queues.get(key)
        if queue is not None and queue.pending:
            _replace(state, queue, book, out)
            lanes.setdefault(queue.plan, _Lane()).push(queue)
    heads: list[tuple[Order, LaunchPlanKey]] = []
    for plan, lane in lanes.items():
        _push_head(heads, plan, lane)
    while heads:
        plan = heapq.heappop(heads)[1]
        lane = lanes[plan]
        queue = lane.pop()
        item = queue.head() if queue is not None else None
        if queue is None or item is None:
            continue
        policy = book.policy(item)
        if policy is not None and len(queue.active) >= policy.limit_for(queue.group):
            _skip_at_limit(state, queue, book, out)
        elif policy is not None and _plan_full(state, policy, item):
            _skip_at_total(state, [queue, *lane.queues()], book, out, policy)
            continue  # every key of the launch plan waits for room in the total
        elif caps.blocking(state, item.key) is not None:
            continue  # every key of the launch plan waits for the cap
        else:
            state.promote(item)
            out.promote.append(item)
            lane.push(queue)
        _push_head(heads, plan, lane)
    for key in out.touched:
        _trim_waiting(state, key, book, out)
    _first_reasons(state, book, caps, out)
    return out


def _push_head(heads: list[tuple[Order, LaunchPlanKey]], plan: LaunchPlanKey, lane: _Lane) -> None:
    """Across launch plans, the execution each would promote next competes by its order."""
    order = lane.head_order()
    if order is not None:
        heapq.heappush(heads, (order, plan))


def _plan_full(state: ControllerState, policy: ConcurrencyPolicy, item: Tracked) -> bool:
    return policy.total_max is not None and state.plan_active[item.key] >= policy.total_max


def _replace(
    state: ControllerState, queue: LaunchPlanQueue, book: PolicyBook, out: Decisions
) -> None:
    """REPLACE keeps the newest `max` of (running not yet aborting + pending): older running
    ones are aborted, older pending ones never start."""
    head = queue.head()
    policy = book.policy(head) if head is not None else None
    if policy is None or policy.behavior is not ConcurrencyBehavior.REPLACE:
        return
    running = [a for a in queue.oldest_active() if a.phase is not ExecutionPhase.ABORTING]
    keep = running + sorted(queue.pending.values(), key=lambda t: (t.created_at, t.id))
    excess = len(keep) - policy.limit_for(queue.group)
    survivors = keep[max(excess, 0) :]
    for index, victim in enumerate(keep[: max(excess, 0)]):
        reason = f"replaced by {survivors[index % len(survivors)].id}"
        if victim.stage == 0:
            state.end(victim, ExecutionPhase.SKIPPED, 0.0)
            out.skip.append((victim, reason))
        else:
            victim.phase = ExecutionPhase.ABORTING
            out.abort.append((victim, reason))


def _skip_at_limit(
    state: ControllerState, queue: LaunchPlanQueue, book: PolicyBook, out: Decisions
) -> None:
    """The launch plan is at its limit: every pending SKIP execution ends SKIPPED. (All share
    the ACTIVE version's policy; with none active, a SKIP one behind a WAIT one is judged
    when it reaches the head.)"""
    head = queue.head()
    head_policy = book.policy(head) if head is not None else None
    if head_policy is None or head_policy.behavior is not ConcurrencyBehavior.SKIP:
        return
    for item in queue.in_order():
        policy = book.policy(item)
        if policy is not None and policy.behavior is ConcurrencyBehavior.SKIP:
            reason = f"skipped: {_key_label(queue, policy)}{_active_words(queue, policy)}"
            state.end(item, ExecutionPhase.SKIPPED, 0.0)
            out.skip.append((item, reason))


def _skip_at_total(
    state: ControllerState,
    queues: list[LaunchPlanQueue],
    book: PolicyBook,
    out: Decisions,
    policy: ConcurrencyPolicy,
) -> None:
    """The keyed launch plan is at its `total_max`: pending SKIP executions of every key
    looked at end SKIPPED (all of them arrived in this pass: SKIP ones never wait)."""
    if policy.behavior is not ConcurrencyBehavior.SKIP:
        return
    plan = queues[0].plan
    words = f"{state.plan_active[plan]}/{policy.total_max} active over all keys"
    for queue in queues:
        for item in queue.in_order():
            own = book.policy(item)
            if own is not None and own.behavior is ConcurrencyBehavior.SKIP:
                state.end(item, ExecutionPhase.SKIPPED, 0.0)
                out.skip.append((item, f"skipped: {_key_label(queue, own)}{words}"))


def _trim_waiting(state: ControllerState, key: QueueKey, book: PolicyBook, out: Decisions) -> None:
    """WAIT keeps at most `max_pending` executions waiting (per key under a keyed policy): the
    newest beyond it are SKIPPED."""
    queue = state.queues.get(key)
    head = queue.head() if queue is not None else None
    policy = book.policy(head) if head is not None else None
    if queue is None or policy is None or policy.behavior is not ConcurrencyBehavior.WAIT:
        return
    if policy.max_pending is None or len(queue.pending) <= policy.max_pending:
        return
    waiting = sorted(queue.pending.values(), key=lambda t: (t.created_at, t.id))
    for item in waiting[policy.max_pending :]:
        reason = f"skipped: {policy.max_pending} already waiting (max_pending {policy.max_pending})"
        state.end(item, ExecutionPhase.SKIPPED, 0.0)
        out.skip.append((item, reason))


def _first_reasons(state: ControllerState, book: PolicyBook, caps: Caps, out: Decisions) -> None:
    """Executions seen for the first time and still PENDING learn what they wait for."""
    undecided = state.undecided
    state.undecided = set()
    keys = {state.executions[i].queue_key for i in undecided if i in state.executions}
    for key in keys:
        queue = state.queues[key]
        for position, item in enumerate(queue.in_order(), 1):
            if item.id in undecided:
                out.wait.append((item, wait_reason(state, queue, item, position, book, caps)))


def wait_reason(
    state: ControllerState,
    queue: LaunchPlanQueue,
    item: Tracked,
    position: int,
    book: PolicyBook,
    caps: Caps,
) -> str:
    """What a PENDING execution waits for, in words, with its place in its queue (its launch
    plan's, or its key's under a keyed policy)."""
    shown = position <= SHOWN_POSITIONS
    where = f"position {position}" if shown else f"position > {SHOWN_POSITIONS}"
    policy = book.policy(item)
    label = _key_label(queue, policy)
    if policy is not None and len(queue.active) >= policy.limit_for(queue.group):
        aborting = [a for a in queue.oldest_active() if a.phase is ExecutionPhase.ABORTING]
        if policy.behavior is ConcurrencyBehavior.REPLACE and aborting:
            return f"waiting: {label}replacing {_ids(aborting)} (ABORTING), {where}"
        return f"waiting: {label}{_active_words(queue, policy, with_ids=shown)}, {where}"
    if policy is not None and _plan_full(state, policy, item):
        total = f"{state.plan_active[item.key]}/{policy.total_max} active over all keys"
        return f"waiting: {label}{total}, {where}"
    blocked = caps.blocking(state, item.key)
    if blocked is not None:
        return f"waiting: {label}{blocked}, {where}"
    return f"waiting: {label}next in line, {where}"


def _key_label(queue: LaunchPlanQueue, policy: ConcurrencyPolicy | None) -> str:
    keyed = policy is not None and policy.key is not None
    return f"key {queue.group!r}: " if keyed else ""


def _active_words(queue: LaunchPlanQueue, policy: ConcurrencyPolicy, with_ids: bool = True) -> str:
    words = f"{len(queue.active)}/{policy.limit_for(queue.group)} active"
    return f"{words} ({_ids(queue.oldest_active())})" if with_ids and queue.active else words


def _ids(items: list[Tracked], shown: int = 3) -> str:
    text = ", ".join(t.id for t in items[:shown])
    return text + (f" and {len(items) - shown} more" if len(items) > shown else "")
