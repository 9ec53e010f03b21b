"""Keyed policies in the controller's decisions: limits per key, round robin across keys,
SKIP/REPLACE/max_pending per key, total_max over all keys, and the fairness bound."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.concurrency.decide import Caps, decide
from sluice.concurrency.queues import ControllerState, Tracked
from sluice.errors import InvalidPolicyError
from sluice.executions.policies import UNDECIDED_REASON
from sluice.spec.models import ConcurrencyBehavior, ConcurrencyPolicy
from sluice.spec.phases import ExecutionPhase

P, D, LP = "proj", "dev", "lp"
_ids = itertools.count()


class Book:
    def __init__(self, policy: ConcurrencyPolicy) -> None:
        self.given = policy

    def policy(self, item: Tracked) -> ConcurrencyPolicy | None:
        return self.given


def item(key: str, *, phase: str = "PENDING", priority: int = 0) -> Tracked:
    n = next(_ids)
    return Tracked(
        id=f"k{n:05d}",
        key=(P, D, LP),
        version="v1",
        phase=ExecutionPhase(phase),
        priority=priority,
        created_at=float(n),
        reason=UNDECIDED_REASON if phase == "PENDING" else "",
        concurrency_key=key,
        group=key,
    )


def arrive(state: ControllerState, *items: Tracked) -> list[Tracked]:
    for it in items:
        state.observe(it)
    return list(items)


def end(state: ControllerState, it: Tracked) -> None:
    done = Tracked(it.id, it.key, it.version, ExecutionPhase.SUCCEEDED, 0, it.created_at)
    state.observe(done, ended_at=100.0)


def keyed(max_: int = 1, **more: object) -> ConcurrencyPolicy:
    return ConcurrencyPolicy(max_, key="{customer}", **more)  # type: ignore[arg-type]


def shared(state: ControllerState) -> ControllerState:
    state.shared_plans = {(P, D, LP)}
    return state


def test_each_key_has_its_own_limit_and_key_max_overrides_it() -> None:
    state, book = ControllerState(), Book(keyed(1, key_max={"premium": 3}))
    basic = arrive(state, *(item("acme") for _ in range(3)))
    premium = arrive(state, *(item("premium") for _ in range(4)))
    out = decide(state, book, Caps())
    assert sorted(i.id for i in out.promote) == sorted([basic[0].id, *(p.id for p in premium[:3])])
    waits = dict((i.id, r) for i, r in out.wait)
    assert waits[basic[1].id] == f"waiting: key 'acme': 1/1 active ({basic[0].id}), position 1"
    assert waits[basic[2].id].endswith("position 2"), "positions count within the key"
    assert waits[premium[3].id].startswith("waiting: key 'premium': 3/3 active")
    assert waits[premium[3].id].endswith("position 1")


def test_keys_take_turns_under_total_max_whatever_their_backlog() -> None:
    state, book = shared(ControllerState()), Book(keyed(3, total_max=1))
    busy = arrive(state, *(item("busy") for _ in range(5)))
    b, c = arrive(state, item("b"), item("c"))
    order = []
    for _ in range(7):
        (promoted,) = decide(state, book, Caps()).promote
        order.append(promoted)
        end(state, promoted)
    assert [i.id for i in order] == [busy[0].id, b.id, c.id, *(i.id for i in busy[1:])]


def test_a_key_that_starts_waiting_again_joins_the_rotation_at_the_back() -> None:
    """A key served long ago that was busy (or idle) since banks no turns: when it starts
    waiting again it queues behind the keys already waiting."""
    state, book = shared(ControllerState()), Book(keyed(1, total_max=2))
    a1, b1 = arrive(state, item("a"), item("b"))
    assert decide(state, book, Caps()).promote == [a1, b1]
    (c1,) = arrive(state, item("c"))
    end(state, b1)
    assert decide(state, book, Caps()).promote == [c1]
    b2, a2, d1 = arrive(state, item("b"), item("a"), item("d"))  # a1 still runs
    end(state, a1)
    assert decide(state, book, Caps()).promote == [b2], "b waited first; a's old turn is void"
    end(state, c1)
    assert decide(state, book, Caps()).promote == [a2]
    end(state, b2)
    assert decide(state, book, Caps()).promote == [d1]


def test_priority_goes_before_the_rotation() -> None:
    state, book = shared(ControllerState()), Book(keyed(3, total_max=1))
    arrive(state, item("a"))
    (urgent,) = arrive(state, item("b", priority=5))
    assert decide(state, book, Caps()).promote == [urgent]


def test_skip_and_max_pending_are_judged_per_key() -> None:
    state, book = ControllerState(), Book(keyed(1, behavior=ConcurrencyBehavior.SKIP))
    a1, a2, b1 = arrive(state, item("a"), item("a"), item("b"))
    out = decide(state, book, Caps())
    assert sorted(i.id for i in out.promote) == sorted([a1.id, b1.id])
    assert [(i.id, r) for i, r in out.skip] == [(a2.id, f"skipped: key 'a': 1/1 active ({a1.id})")]
    state, book = ControllerState(), Book(keyed(1, max_pending=1))
    a = arrive(state, *(item("a") for _ in range(3)))
    b = arrive(state, *(item("b") for _ in range(2)))
    out = decide(state, book, Caps())
    assert [i.id for i, _ in out.skip] == [a[2].id]
    assert {i.id for i in out.promote} == {a[0].id, b[0].id}


def test_replace_aborts_only_the_same_keys_oldest() -> None:
    state, book = ControllerState(), Book(keyed(1, behavior=ConcurrencyBehavior.REPLACE))
    old_a, old_b = arrive(state, item("a", phase="RUNNING"), item("b", phase="RUNNING"))
    (new_a,) = arrive(state, item("a"))
    out = decide(state, book, Caps())
    assert [(i.id, r) for i, r in out.abort] == [(old_a.id, f"replaced by {new_a.id}")]
    assert old_b.phase is ExecutionPhase.RUNNING
    assert out.wait == [(new_a, f"waiting: key 'a': replacing {old_a.id} (ABORTING), position 1")]


def test_total_max_holds_skip_ones_are_skipped_and_waiting_ones_say_why() -> None:
    state, book = shared(ControllerState()), Book(keyed(2, total_max=2))
    arrive(state, item("a"), item("b"), item("c"))
    out = decide(state, book, Caps())
    assert len(out.promote) == 2 and state.plan_active[(P, D, LP)] == 2
    (waiting,) = out.wait
    assert waiting[1].endswith(": 2/2 active over all keys, position 1")
    skipper = Book(keyed(1, total_max=1, behavior=ConcurrencyBehavior.SKIP))
    state = shared(ControllerState())
    first, second = arrive(state, item("a"), item("b"))
    out = decide(state, skipper, Caps())
    assert out.promote == [first]
    assert out.skip == [(second, "skipped: key 'b': 1/1 active over all keys")]


def test_keyed_policies_are_checked_when_defined() -> None:
    with pytest.raises(InvalidPolicyError, match="key_max and total_max need a key"):
        ConcurrencyPolicy(1, key_max={"a": 2})
    with pytest.raises(InvalidPolicyError, match="names no input"):
        ConcurrencyPolicy(1, key="constant")
    with pytest.raises(InvalidPolicyError, match=r"key_max\['a'\]"):
        ConcurrencyPolicy(1, key="{c}", key_max={"a": 0})
    with pytest.raises(InvalidPolicyError, match="REPLACE replaces within a key"):
        ConcurrencyPolicy(1, ConcurrencyBehavior.REPLACE, key="{c}", total_max=3)


KEYS = ["k0", "k1", "k2", "k3"]
operations = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.sampled_from(KEYS), st.integers(1, 6)),
        st.tuples(st.just("end"), st.integers(0, 50), st.just(1)),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(operations, st.integers(1, 4), st.integers(1, 3))
def test_limits_order_and_the_rotation_bound_hold_under_any_sequence(
    ops: list[tuple[str, object, int]], total: int, per_key: int
) -> None:
    """Per key active <= its max and all keys <= total_max after every pass; within a key,
    promotions in order; and no key with waiting work and room is overtaken by more than
    len(KEYS) - 1 promotions of other keys (the bound docs/concurrency.md states)."""
    policy = keyed(per_key, key_max={"k0": per_key + 1}, total_max=total)
    state, book = shared(ControllerState()), Book(policy)
    overtaken = dict.fromkeys(KEYS, 0)
    for kind, arg, count in ops:
        if kind == "new":
            arrive(state, *(item(str(arg)) for _ in range(count)))
        else:
            active = sorted(i.id for i in state.executions.values() if i.stage == 1)
            if active:
                end(state, state.executions[active[int(str(arg)) % len(active)]])
        eligible = {
            q.group
            for q in state.queues.values()
            if q.pending and len(q.active) < policy.limit_for(q.group)
        }
        out = decide(state, book, Caps())
        for promoted in out.promote:
            for other in eligible - {promoted.group}:
                overtaken[other] += 1
            overtaken[promoted.group] = 0
            queue = state.queues[promoted.queue_key]
            if not queue.pending or len(queue.active) >= policy.limit_for(queue.group):
                eligible.discard(promoted.group)
            head = queue.head()
            assert head is None or head.order > promoted.order, "promoted out of order"
        assert max(overtaken.values()) <= len(KEYS) - 1
        assert state.plan_active[(P, D, LP)] <= total
        for queue in state.queues.values():
            assert len(queue.active) <= policy.limit_for(queue.group)
