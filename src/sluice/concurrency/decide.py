"""The controller's decisions, as a pure function of its memory, the policies and the caps.

A pass looks only at launch plans whose state changed. It promotes PENDING executions in
(priority, creation time) order across launch plans while their launch plan has room under
its policy's `max` and their project and project/domain have room under the platform caps.
At the limit, SKIP ends the newcomer, WAIT keeps it (up to `max_pending`), and REPLACE has
displaced the oldest executions before the pass so that only the newest `max` remain.

The memory is updated as decisions are made (so later decisions in the pass count earlier
ones); the controller writes them as compare-and-swaps and rebuilds its memory from the store
if that write fails.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Protocol

from sluice.concurrency.queues import ControllerState, LaunchPlanKey, LaunchPlanQueue, Tracked
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
    touched: set[LaunchPlanKey] = field(default_factory=set)

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


def decide(state: ControllerState, book: PolicyBook, caps: Caps) -> Decisions:
    out = Decisions(touched=state.take_dirty())
    heads: list[tuple[tuple[int, float, str], LaunchPlanKey]] = []
    for key in out.touched:
        queue = state.queues.get(key)
        if queue is not None and queue.pending:
            _replace(state, queue, book, out)
            _push_head(heads, queue)
    while heads:
        queue = state.queues[heapq.heappop(heads)[1]]
        item = queue.head()
        if item is None:
            continue
        policy = book.policy(item)
        if policy is not None and len(queue.active) >= policy.max:
            _skip_at_limit(state, queue, book, out)
        elif caps.blocking(state, item.key) is None:
            state.promote(item)
            out.promote.append(item)
            _push_head(heads, queue)
    for key in out.touched:
        _trim_waiting(state, key, book, out)
    _first_reasons(state, book, caps, out)
    return out


def _push_head(
    heads: list[tuple[tuple[int, float, str], LaunchPlanKey]], q: LaunchPlanQueue
) -> None:
    head = q.head()
    if head is not None:
        heapq.heappush(heads, (head.order, q.key))


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
    excess = len(keep) - policy.max
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
            reason = f"skipped: {_active_words(queue, policy)}"
            state.end(item, ExecutionPhase.SKIPPED, 0.0)
            out.skip.append((item, reason))


def _trim_waiting(
    state: ControllerState, key: LaunchPlanKey, book: PolicyBook, out: Decisions
) -> None:
    """WAIT keeps at most `max_pending` executions waiting: the newest beyond it are SKIPPED."""
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
    keys = {state.executions[i].key for i in undecided if i in state.executions}
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
    """What a PENDING execution waits for, in words, with its place in its launch plan's queue."""
    shown = position <= SHOWN_POSITIONS
    where = f"position {position}" if shown else f"position > {SHOWN_POSITIONS}"
    policy = book.policy(item)
    if policy is not None and len(queue.active) >= policy.max:
        aborting = [a for a in queue.oldest_active() if a.phase is ExecutionPhase.ABORTING]
        if policy.behavior is ConcurrencyBehavior.REPLACE and aborting:
            return f"waiting: replacing {_ids(aborting)} (ABORTING), {where}"
        return f"waiting: {_active_words(queue, policy, with_ids=shown)}, {where}"
    blocked = caps.blocking(state, item.key)
    if blocked is not None:
        return f"waiting: {blocked}, {where}"
    return f"waiting: next in line, {where}"


def _active_words(queue: LaunchPlanQueue, policy: ConcurrencyPolicy, with_ids: bool = True) -> str:
    words = f"{len(queue.active)}/{policy.max} active"
    return f"{words} ({_ids(queue.oldest_active())})" if with_ids and queue.active else words


def _ids(items: list[Tracked], shown: int = 3) -> str:
    text = ", ".join(t.id for t in items[:shown])
    return text + (f" and {len(items) - shown} more" if len(items) > shown else "")
