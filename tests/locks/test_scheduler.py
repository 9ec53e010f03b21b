"""Lock scheduler: exclusion, caps, orders, events and the reasons it gives."""

from __future__ import annotations

import pytest

from sluice.clock import FakeClock
from sluice.errors import InvalidArgumentError
from sluice.locks.model import SortKey
from sluice.locks.orderings import Ordering, make_ordering
from sluice.locks.scheduler import LockScheduler, LockTask

POLICIES = ("default", "fifo", "shared_locks_first")


def task(task_id: str, *locks: str, created_at: float = 0.0) -> LockTask:
    return LockTask(task_id, frozenset(locks), created_at=created_at)


def scheduler(policy: str = "fifo", parallelism: int = 10, **kwargs: object) -> LockScheduler:
    clock = kwargs.pop("clock", FakeClock(0.0))
    return LockScheduler(policy, parallelism=parallelism, clock=clock, **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", POLICIES)
def test_one_holder_per_lock_and_the_next_starts_when_it_finishes(policy: str) -> None:
    s = scheduler(policy)
    s.submit(task("a", "db/1", "db/2"))
    s.submit(task("b", "db/2"))
    assert s.select() == ["a"]
    assert s.select() == []
    s.finish("a")
    assert s.select() == ["b"]
    assert s.holders("db/2") == {"b"}


@pytest.mark.parametrize("policy", POLICIES)
def test_parallelism_caps_running_tasks(policy: str) -> None:
    s = scheduler(policy, parallelism=2)
    for index in range(5):
        s.submit(task(f"t{index}", f"lock/{index}"))
    assert len(s.select()) == 2
    assert s.select() == []
    s.finish(s.running()[0])
    assert len(s.select()) == 1
    assert s.running_count == 2


def test_capacity_above_one_admits_that_many_holders() -> None:
    s = scheduler(capacity=lambda name: 2 if name == "hive" else 1)
    for index in range(3):
        s.submit(task(f"q{index}", "hive"))
    assert s.select() == ["q0", "q1"]
    s.finish("q1")
    assert s.select() == ["q2"]


def test_a_blocked_head_does_not_stop_the_tasks_behind_it() -> None:
    s = scheduler("fifo")
    s.submit(task("holder", "a"))
    assert s.select() == ["holder"]
    s.submit(task("head", "a", "b", created_at=1.0))
    s.submit(task("behind", "c", created_at=2.0))
    assert s.select() == ["behind"]


def test_fifo_orders_by_execution_creation_then_task_id() -> None:
    s = scheduler("fifo", parallelism=1)
    s.submit(task("z", created_at=2.0))
    s.submit(task("b", created_at=1.0))
    s.submit(task("a", created_at=1.0))
    started = []
    for _ in range(3):
        started += s.select()
        s.finish(started[-1])
    assert started == ["a", "b", "z"]


def contended_instance() -> list[LockTask]:
    """x is on the busiest lock (A, 5 waiters); y shares more locks in total (B..E, 3 each)."""
    tasks = [task("x", "A", "q"), task("y", "B", "C", "D", "E")]
    tasks += [task(f"a{index}", "A") for index in range(4)]
    tasks += [task(f"{name.lower()}{index}", name) for name in "BCDE" for index in range(2)]
    return tasks


@pytest.mark.parametrize(("policy", "first"), [("default", "x"), ("shared_locks_first", "y")])
def test_default_starts_the_bottleneck_first_where_the_seed_starts_the_most_shared(
    policy: str, first: str
) -> None:
    s = scheduler(policy, parallelism=1)
    for item in contended_instance():
        s.submit(item)
    assert s.select() == [first]


def test_creation_time_comes_before_sharing() -> None:
    s = scheduler("shared_locks_first", parallelism=1)
    s.submit(task("lonely", "z", created_at=1.0))
    for index in range(3):
        s.submit(task(f"crowd{index}", "a", "b", created_at=2.0))
    assert s.select() == ["lonely"]


def test_reject_requeues_in_place_and_blocks_the_busy_locks_until_freed() -> None:
    s = scheduler("fifo")
    s.submit(task("first", "a"))
    assert s.select() == ["first"]
    s.submit(task("second", "a", created_at=1.0))
    s.reject("first", ["a"])
    assert s.is_waiting("first")
    assert s.busy_elsewhere() == {"a"}
    assert s.select() == []
    s.lock_freed("a")
    assert s.select() == ["first"]


def test_reject_without_busy_locks_offers_the_task_again() -> None:
    s = scheduler()
    s.submit(task("t", "a"))
    assert s.select() == ["t"]
    s.reject("t", [])
    assert s.holders("a") == set()
    assert s.select() == ["t"]


def test_a_lock_busy_elsewhere_blocks_tasks_submitted_later() -> None:
    s = scheduler()
    s.submit(task("t", "a"))
    s.select()
    s.reject("t", ["a", "b"])
    s.submit(task("u", "b"))
    assert s.select() == []
    s.lock_freed("b")
    assert s.select() == ["u"]


def test_cancel_withdraws_a_waiting_task_and_finishes_a_running_one() -> None:
    s = scheduler()
    s.submit(task("run", "a"))
    s.select()
    s.submit(task("wait", "a"))
    s.cancel("wait")
    assert s.waiting_count == 0
    s.cancel("run")
    assert s.running_count == 0
    s.submit(task("next", "a"))
    assert s.select() == ["next"]


def test_events_are_idempotent() -> None:
    s = scheduler()
    s.submit(task("t", "a"))
    s.submit(task("t", "a"))
    assert s.waiting_count == 1
    assert s.select() == ["t"]
    s.submit(task("t", "a"))
    assert (s.waiting_count, s.running_count) == (0, 1)
    s.finish("t")
    s.finish("t")
    s.cancel("unknown")
    s.reject("unknown", [])
    s.lock_freed("never-busy")
    assert (s.waiting_count, s.running_count) == (0, 0)


def test_capacity_is_asked_once_while_a_lock_is_in_use() -> None:
    asked: list[str] = []

    def capacity(name: str) -> int:
        asked.append(name)
        return 1

    s = scheduler(capacity=capacity)
    for index in range(3):
        s.submit(task(f"t{index}", "a"))
    for _ in range(3):
        s.finish(s.select()[0])
    assert asked == ["a"]


def test_waiting_explains_locks_slots_and_readiness() -> None:
    s = scheduler("fifo", parallelism=2, capacity=lambda name: 2 if name == "hive" else 1)
    s.submit(task("x1/n3", "db/partition/17", "hive"))
    s.submit(task("x1/n4", "hive"))
    assert s.select() == ["x1/n3", "x1/n4"]
    s.submit(task("x2/n1", "db/partition/17", "hive", created_at=1.0))
    s.submit(task("x2/n2", "free", created_at=2.0))
    infos = s.waiting()
    assert [info.task_id for info in infos] == ["x2/n1", "x2/n2"]
    assert infos[0].blocked_by == ("db/partition/17", "hive")
    assert infos[0].reason == (
        "blocked by db/partition/17 (held by x1/n3), hive (2/2 held by x1/n3, x1/n4)"
    )
    assert infos[1].reason == "parallelism 2/2 in use"
    s.finish("x1/n4")
    assert s.waiting()[1].reason == "ready: starts at the next select()"


def test_waiting_names_locks_held_elsewhere_and_counts_the_rest() -> None:
    s = scheduler()
    s.submit(task("t", "a"))
    s.select()
    s.reject("t", ["a", "b", "c", "d", "e"])
    s.submit(task("u", "a", "b", "c", "d", "e"))
    reason = next(info for info in s.waiting() if info.task_id == "u").reason
    assert reason == (
        "blocked by a (held by another engine), b (held by another engine), "
        "c (held by another engine) and 2 more locks"
    )


def test_waiting_explains_urgency_and_reservations() -> None:
    clock = FakeClock(0.0)
    s = scheduler("fifo", clock=clock, starvation_bound=300.0)
    s.submit(task("holder", "b"))
    s.select()
    s.submit(task("old", "a", "b"))
    clock.advance(312.0)
    s.submit(task("young", "a", created_at=-1.0))
    assert s.select() == []
    old, young = s.waiting()
    assert old.urgent and old.reason.startswith("urgent: waited 312s, its locks are reserved; ")
    assert old.reason.endswith("blocked by b (held by holder)")
    assert young.reason == "blocked by a (reserved for urgent old)"
    assert old.waited == 312.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"policy": "lifo"}, "unknown scheduler policy 'lifo'"),
        ({"parallelism": 0}, "parallelism must be >= 1"),
        ({"starvation_bound": 0.0}, "starvation_bound must be > 0"),
    ],
)
def test_bad_settings_are_rejected(kwargs: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"policy": "fifo", "parallelism": 1, **kwargs}
    policy = settings.pop("policy")
    with pytest.raises(InvalidArgumentError, match=message):
        LockScheduler(policy, clock=FakeClock(), **settings)  # type: ignore[arg-type]


def test_bad_tasks_are_rejected_at_submit() -> None:
    s = scheduler(capacity=lambda name: 0)
    with pytest.raises(InvalidArgumentError, match="capacity 0"):
        s.submit(task("t", "a"))
    with pytest.raises(InvalidArgumentError, match="estimate"):
        scheduler().submit(LockTask("t", frozenset(), created_at=0.0, estimate=-1.0))
    assert s.waiting_count == 0


class CountingOrdering:
    """Wraps a policy's ordering to count how many keys an event computes."""

    def __init__(self, inner: Ordering) -> None:
        self.inner = inner
        self.tracks_waiting = inner.tracks_waiting
        self.keys = 0

    def key(self, task: LockTask) -> SortKey:
        self.keys += 1
        return self.inner.key(task)

    def count(self, task: LockTask, delta: int) -> None:
        self.inner.count(task, delta)


@pytest.mark.parametrize("policy", POLICIES)
def test_an_event_touches_only_the_tasks_it_concerns(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    counting = CountingOrdering(make_ordering(policy))
    monkeypatch.setattr("sluice.locks.scheduler.make_ordering", lambda name: counting)
    s = scheduler(policy, parallelism=200)
    for index in range(100):
        s.submit(task(f"holder{index}", f"shard/{index}"))
    assert len(s.select()) == 100
    for index in range(5000):
        s.submit(task(f"blocked{index}", f"shard/{index % 100}", f"own/{index}"))
    counting.keys = 0
    s.submit(task("unrelated", "cold"))
    assert s.select() == ["unrelated"]
    s.finish("unrelated")
    assert counting.keys <= 2
    s.finish("holder7")  # frees shard/7: its 50 waiters become ready, the other 4950 stay put
    assert len(s.select()) == 1
    assert counting.keys <= 2 + 2 * 50
