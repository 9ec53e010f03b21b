"""The controller's decisions as a pure function: WAIT, SKIP, REPLACE, max_pending, caps."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from sluice.concurrency.decide import Caps, decide
from sluice.concurrency.queues import ControllerState, Tracked
from sluice.executions.policies import UNDECIDED_REASON
from sluice.spec.models import ConcurrencyPolicy
from sluice.spec.phases import ExecutionPhase

P, D = "proj", "dev"
_ids = itertools.count()


class Book:
    def __init__(self, **policies: ConcurrencyPolicy | None) -> None:
        self.policies = policies

    def policy(self, item: Tracked) -> ConcurrencyPolicy | None:
        return self.policies.get(item.key[2])


def item(lp: str, *, phase: str = "PENDING", priority: int = 0, at: float | None = None) -> Tracked:
    n = next(_ids)
    return Tracked(
        id=f"x{n:04d}",
        key=(P, D, lp),
        version="v1",
        phase=ExecutionPhase(phase),
        priority=priority,
        created_at=float(n) if at is None else at,
        reason=UNDECIDED_REASON if phase == "PENDING" else "",
    )


def arrive(state: ControllerState, *items: Tracked) -> list[Tracked]:
    for it in items:
        state.observe(it)
    return list(items)


def end(state: ControllerState, it: Tracked) -> None:
    done = Tracked(it.id, it.key, it.version, ExecutionPhase.SUCCEEDED, it.priority, it.created_at)
    state.observe(done, ended_at=100.0)


def test_wait_promotes_in_priority_then_creation_order_up_to_max() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(2))
    a, b, c, d, e = arrive(
        state,
        item("lp", priority=0),
        item("lp", priority=5),
        item("lp", priority=0),
        item("lp", priority=5),
        item("lp", priority=1),
    )
    out = decide(state, book, Caps())
    assert [i.id for i in out.promote] == [b.id, d.id]
    waits = dict((i.id, r) for i, r in out.wait)
    assert waits[e.id] == f"waiting: 2/2 active ({b.id}, {d.id}), position 1"
    assert waits[a.id].endswith("position 2") and waits[c.id].endswith("position 3")
    end(state, d)
    assert [i.id for i in decide(state, book, Caps()).promote] == [e.id]
    end(state, b)
    end(state, e)
    assert [i.id for i in decide(state, book, Caps()).promote] == [a.id, c.id]


def test_skip_at_max_ends_the_newcomer_naming_the_running_ones() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(1, "SKIP"))  # type: ignore[arg-type]
    first, second = arrive(state, item("lp"), item("lp"))
    out = decide(state, book, Caps())
    assert [i.id for i in out.promote] == [first.id]
    assert [(i.id, r) for i, r in out.skip] == [(second.id, f"skipped: 1/1 active ({first.id})")]
    end(state, first)
    (third,) = arrive(state, item("lp"))
    assert [i.id for i in decide(state, book, Caps()).promote] == [third.id]


def test_replace_aborts_the_oldest_and_runs_the_new_one_once_it_ended() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(1, "REPLACE"))  # type: ignore[arg-type]
    (old,) = arrive(state, item("lp", phase="RUNNING"))
    (new,) = arrive(state, item("lp"))
    out = decide(state, book, Caps())
    assert [(i.id, r) for i, r in out.abort] == [(old.id, f"replaced by {new.id}")]
    assert not out.promote
    assert out.wait == [(new, f"waiting: replacing {old.id} (ABORTING), position 1")]
    assert not decide(state, book, Caps()).abort, "an ABORTING victim is not aborted twice"
    end(state, old)
    assert [i.id for i in decide(state, book, Caps()).promote] == [new.id]


def test_replace_keeps_only_the_newest_when_several_arrive() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(1, "REPLACE"))  # type: ignore[arg-type]
    (old,) = arrive(state, item("lp", phase="RUNNING"))
    middle, newest = arrive(state, item("lp"), item("lp"))
    out = decide(state, book, Caps())
    assert [(i.id, r) for i, r in out.abort] == [(old.id, f"replaced by {newest.id}")]
    assert [(i.id, r) for i, r in out.skip] == [(middle.id, f"replaced by {newest.id}")]


def test_max_pending_skips_the_newest_beyond_it() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(1, max_pending=2))
    running, *waiting = arrive(state, *(item("lp") for _ in range(5)))
    out = decide(state, book, Caps())
    assert [i.id for i in out.promote] == [running.id]
    assert sorted(i.id for i, _ in out.skip) == [waiting[2].id, waiting[3].id]
    assert {r for _, r in out.skip} == {"skipped: 2 already waiting (max_pending 2)"}
    assert sorted(i.id for i, _ in out.wait) == [waiting[0].id, waiting[1].id]


def test_project_cap_applies_across_launch_plans_in_order() -> None:
    state = ControllerState()
    book = Book(a=ConcurrencyPolicy(5), b=ConcurrencyPolicy(5), free=None)
    a1, b1, a2, b2, f1 = arrive(
        state,
        item("a"),
        item("b", priority=1),
        item("a"),
        item("b"),
        item("free"),
    )
    caps = Caps({(P, ""): 3})
    state.capped_projects = {P}
    out = decide(state, book, caps)
    assert [i.id for i in out.promote] == [b1.id, a1.id, a2.id]
    waits = dict((i.id, r) for i, r in out.wait)
    assert waits[b2.id] == "waiting: project cap 3/3 (proj), position 1"
    assert waits[f1.id].startswith("waiting: project cap 3/3")
    end(state, a1)
    assert [i.id for i in decide(state, book, caps).promote] == [b2.id]


def test_domain_cap_counts_executions_without_a_launch_plan() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(3))
    arrive(state, item("", phase="RUNNING"))
    pending = arrive(state, item("lp"), item("lp"))
    out = decide(state, book, Caps({(P, D): 2}))
    assert [i.id for i in out.promote] == [pending[0].id]
    assert out.wait[0][1] == f"waiting: domain cap 2/2 ({P}/{D}), position 1"


def test_no_policy_promotes_at_once() -> None:
    state = ControllerState()
    pending = arrive(state, *(item("lp") for _ in range(4)))
    assert len(decide(state, Book(lp=None), Caps()).promote) == len(pending)


def test_late_or_repeated_rows_never_move_an_execution_back() -> None:
    state, book = ControllerState(), Book(lp=ConcurrencyPolicy(1))
    (x,) = arrive(state, item("lp"))
    decide(state, book, Caps())
    stale = Tracked(x.id, x.key, x.version, ExecutionPhase.PENDING, 0, x.created_at)
    state.observe(stale)
    assert x.id in state.queues[x.queue_key].active and not state.queues[x.queue_key].pending


operations = st.lists(
    st.one_of(
        st.tuples(st.just("new"), st.sampled_from("abc"), st.integers(0, 2)),
        st.tuples(st.just("end"), st.integers(0, 50), st.just(0)),
    ),
    max_size=60,
)


@settings(max_examples=150, deadline=None)
@given(operations, st.integers(1, 4))
def test_limits_and_order_hold_under_any_sequence(
    ops: list[tuple[str, object, int]], cap: int
) -> None:
    policies = {
        "a": ConcurrencyPolicy(2),
        "b": ConcurrencyPolicy(1, "SKIP"),  # type: ignore[arg-type]
        "c": ConcurrencyPolicy(1, "REPLACE"),  # type: ignore[arg-type]
    }
    state, book, caps = ControllerState(), Book(**policies), Caps({(P, ""): cap})
    state.capped_projects = {P}
    for kind, arg, priority in ops:
        if kind == "new":
            arrive(state, item(str(arg), priority=priority))
        else:
            active = sorted(
                (i for i in state.executions.values() if i.stage == 1), key=lambda t: t.id
            )
            if active:
                end(state, active[int(str(arg)) % len(active)])
        out = decide(state, book, caps)
        assert state.project_active[P] <= cap
        for key, queue in state.queues.items():
            assert len(queue.active) <= policies[key[2]].max
        for promoted in out.promote:
            queue = state.queues[promoted.queue_key]
            head = queue.head()
            assert head is None or head.order > promoted.order, "promoted out of order"
        assert (
            not state.queues.get((P, D, "b", ""))
            or not state.queues[(P, D, "b", "")].pending
            or (len(state.queues[(P, D, "b", "")].active) < 1)
        ), "a SKIP execution waits while its launch plan is at its limit"
