"""Tests written to kill surviving mutants of the controller's decisions (docs/mutation.md):
launch plans whose versions carry different policies, and the words of a waiting reason
(positions past SHOWN_POSITIONS are not rewritten as the queue moves)."""

from __future__ import annotations

import itertools

from sluice.concurrency.decide import SHOWN_POSITIONS, Caps, decide, wait_reason
from sluice.concurrency.queues import ControllerState, Tracked
from sluice.executions.policies import UNDECIDED_REASON
from sluice.spec.models import ConcurrencyBehavior, ConcurrencyPolicy
from sluice.spec.phases import ExecutionPhase

P, D, LP = "proj", "dev", "lp"
_ids = itertools.count()


class VersionBook:
    """Policies by launch plan version (the versions of one launch plan may differ)."""

    def __init__(self, **policies: ConcurrencyPolicy) -> None:
        self.policies = policies

    def policy(self, item: Tracked) -> ConcurrencyPolicy | None:
        return self.policies.get(item.version)


def arrive(state: ControllerState, version: str = "v1", phase: str = "PENDING") -> Tracked:
    n = next(_ids)
    item = Tracked(
        id=f"m{n:04d}",
        key=(P, D, LP),
        version=version,
        phase=ExecutionPhase(phase),
        priority=0,
        created_at=float(n),
        reason=UNDECIDED_REASON if phase == "PENDING" else "",
    )
    state.observe(item)
    return item


def skip_policy() -> ConcurrencyPolicy:
    return ConcurrencyPolicy(1, ConcurrencyBehavior.SKIP)


def test_at_the_limit_only_skip_executions_behind_a_skip_head_are_skipped() -> None:
    state = ControllerState()
    book = VersionBook(skip=skip_policy(), wait=ConcurrencyPolicy(1))
    arrive(state, "skip", "RUNNING")
    skipped, waiting = arrive(state, "skip"), arrive(state, "wait")
    out = decide(state, book, Caps())
    assert [i.id for i, _ in out.skip] == [skipped.id]
    assert waiting.id in state.queues[(P, D, LP, "")].pending


def test_a_skip_execution_behind_a_waiting_head_is_not_skipped_yet() -> None:
    state = ControllerState()
    book = VersionBook(skip=skip_policy(), wait=ConcurrencyPolicy(1))
    arrive(state, "wait", "RUNNING")
    arrive(state, "wait")
    behind = arrive(state, "skip")
    out = decide(state, book, Caps())
    assert out.skip == []
    assert behind.id in state.queues[(P, D, LP, "")].pending


def _queue_at_limit(active: int, pending: int, policy: ConcurrencyPolicy) -> ControllerState:
    state = ControllerState()
    for _ in range(active):
        arrive(state, "v1", "RUNNING")
    for _ in range(pending):
        arrive(state, "v1")
    decide(state, VersionBook(v1=policy), Caps())
    return state


def _reason(state: ControllerState, policy: ConcurrencyPolicy, position: int) -> str:
    queue = state.queues[(P, D, LP, "")]
    item = queue.in_order()[position - 1]
    return wait_reason(state, queue, item, position, VersionBook(v1=policy), Caps())


def test_a_reason_names_its_position_up_to_shown_positions_then_stops_moving() -> None:
    policy = ConcurrencyPolicy(1)
    state = _queue_at_limit(1, SHOWN_POSITIONS + 1, policy)
    active = state.queues[(P, D, LP, "")].oldest_active()[0].id
    shown = _reason(state, policy, SHOWN_POSITIONS)
    assert shown == f"waiting: 1/1 active ({active}), position {SHOWN_POSITIONS}"
    deep = _reason(state, policy, SHOWN_POSITIONS + 1)
    assert deep == f"waiting: 1/1 active, position > {SHOWN_POSITIONS}"


def test_a_wait_policy_with_an_aborting_execution_does_not_say_replacing() -> None:
    policy = ConcurrencyPolicy(1)
    state = _queue_at_limit(1, 1, policy)
    queue = state.queues[(P, D, LP, "")]
    running = queue.oldest_active()[0]
    running.phase = ExecutionPhase.ABORTING
    assert _reason(state, policy, 1) == f"waiting: 1/1 active ({running.id}), position 1"


def test_a_reason_lists_three_active_executions_and_counts_the_rest() -> None:
    policy = ConcurrencyPolicy(5)
    state = _queue_at_limit(5, 1, policy)
    ids = [t.id for t in state.queues[(P, D, LP, "")].oldest_active()]
    expected = f"waiting: 5/5 active ({ids[0]}, {ids[1]}, {ids[2]} and 2 more), position 1"
    assert _reason(state, policy, 1) == expected


def test_a_reason_lists_exactly_three_active_executions_without_more() -> None:
    policy = ConcurrencyPolicy(3)
    state = _queue_at_limit(3, 1, policy)
    ids = ", ".join(t.id for t in state.queues[(P, D, LP, "")].oldest_active())
    assert _reason(state, policy, 1) == f"waiting: 3/3 active ({ids}), position 1"
