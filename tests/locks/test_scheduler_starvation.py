"""Lock scheduler anti-starvation: the documented bound holds against adversarial streams."""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

import pytest

from sluice.clock import FakeClock
from sluice.locks.scheduler import LockScheduler, LockTask

POLICIES = ("default", "fifo", "shared_locks_first")
BOUND = 100.0
HORIZON = 2000.0


@dataclass
class Simulation:
    """Drives a scheduler in simulated time: timed submissions, tasks that run `duration`."""

    scheduler: LockScheduler
    clock: FakeClock
    duration: float
    long_tasks: dict[str, float] = field(default_factory=dict)
    """Durations of the tasks that do not run `duration`."""
    submitted_at: dict[str, float] = field(default_factory=dict)
    started_at: dict[str, float] = field(default_factory=dict)
    start_order: list[str] = field(default_factory=list)
    _events: list[tuple[float, int, str, LockTask | None]] = field(default_factory=list)

    def submit_at(self, when: float, task: LockTask) -> None:
        heapq.heappush(self._events, (when, 1, task.id, task))

    def run_until(self, horizon: float) -> None:
        while self._events and self._events[0][0] <= horizon:
            when, _, task_id, task = heapq.heappop(self._events)
            self.clock.advance(when - self.clock.now())
            if task is None:
                self.scheduler.finish(task_id)
            else:
                self.scheduler.submit(task)
                self.submitted_at[task_id] = when
            self._start_selected()

    def _start_selected(self) -> None:
        for task_id in self.scheduler.select():
            self.started_at[task_id] = self.clock.now()
            self.start_order.append(task_id)
            duration = self.long_tasks.get(task_id, self.duration)
            finish = (self.clock.now() + duration, 0, task_id, None)
            heapq.heappush(self._events, finish)


def simulation(policy: str, bound: float, parallelism: int) -> Simulation:
    clock = FakeClock(0.0)
    scheduler = LockScheduler(policy, parallelism=parallelism, clock=clock, starvation_bound=bound)
    return Simulation(scheduler, clock, duration=10.0)


def lock_stream(policy: str, bound: float) -> Simulation:
    """`old` needs A and B; newer tasks take A and B in turns, so one of them is always held."""
    sim = simulation(policy, bound, parallelism=10)
    sim.submit_at(3.0, LockTask("old", frozenset({"A", "B"}), created_at=0.0))
    for index in range(int(HORIZON / 5)):
        when = 1.0 + 5 * index
        lock = "A" if index % 2 == 0 else "B"
        sim.submit_at(when, LockTask(f"new{index:04d}", frozenset({lock}), created_at=when))
    return sim


def slot_stream(policy: str, bound: float) -> Simulation:
    """One slot; an older execution keeps adding tasks that every policy ranks before `old`.

    A long first task keeps the slot until the stream's own tasks are urgent too, so only the
    arrival epochs keep those submitted after `old` became urgent from going first.
    """
    sim = simulation(policy, bound, parallelism=1)
    sim.long_tasks["first"] = 3 * BOUND
    sim.submit_at(0.0, LockTask("first", frozenset({"A"}), created_at=0.0))
    sim.submit_at(3.0, LockTask("old", frozenset({"A"}), created_at=5.0))
    for index in range(int(HORIZON / 5)):
        when = 5.0 * index
        sim.submit_at(when, LockTask(f"older-run/{index:04d}", frozenset(), created_at=0.0))
    return sim


def overtakers(sim: Simulation, task_id: str) -> list[str]:
    """Tasks submitted after `task_id` that started before it."""
    before = sim.start_order[: sim.start_order.index(task_id)]
    return [other for other in before if sim.submitted_at[other] > sim.submitted_at[task_id]]


@pytest.mark.parametrize("stream", [lock_stream, slot_stream])
@pytest.mark.parametrize("policy", POLICIES)
def test_without_the_bound_the_stream_starves_the_old_task(policy: str, stream: object) -> None:
    sim = stream(policy, HORIZON * 10)  # type: ignore[operator]
    sim.run_until(HORIZON)
    assert "old" not in sim.started_at


@pytest.mark.parametrize("stream", [lock_stream, slot_stream])
@pytest.mark.parametrize("policy", POLICIES)
def test_only_tasks_submitted_before_the_urgent_moment_overtake(
    policy: str, stream: object
) -> None:
    sim = stream(policy, BOUND)  # type: ignore[operator]
    sim.run_until(HORIZON)
    assert "old" in sim.started_at
    urgent_at = sim.submitted_at["old"] + BOUND
    assert all(sim.submitted_at[other] <= urgent_at for other in overtakers(sim, "old"))


@pytest.mark.parametrize("policy", POLICIES)
def test_with_locks_contested_the_old_task_starts_once_the_holders_finish(policy: str) -> None:
    sim = lock_stream(policy, BOUND)
    sim.run_until(HORIZON)
    # At its urgent moment A and B are held by tasks that end within one duration, and the
    # only tasks that may still take them were already submitted: one more turn at most.
    assert sim.started_at["old"] <= sim.submitted_at["old"] + BOUND + 2 * sim.duration


def batch(seed: int) -> list[LockTask]:
    rng = random.Random(seed)
    names = [f"p{index}" for index in range(12)]
    return [
        LockTask(f"t{index:02d}", frozenset(rng.sample(names, 3)), created_at=0.0)
        for index in range(40)
    ]


@pytest.mark.parametrize("policy", POLICIES)
def test_tasks_that_arrive_together_keep_the_policy_order_however_long_they_wait(
    policy: str,
) -> None:
    orders = []
    for bound in (1.0, HORIZON * 10):
        sim = simulation(policy, bound, parallelism=3)
        for item in batch(seed=7):
            sim.submit_at(0.0, item)
        sim.run_until(HORIZON)
        assert len(sim.start_order) == 40
        orders.append(sim.start_order)
    assert orders[0] == orders[1]


@pytest.mark.parametrize("policy", POLICIES)
def test_a_task_kept_off_a_reserved_lock_starts_after_the_urgent_task(policy: str) -> None:
    clock = FakeClock(0.0)
    s = LockScheduler(policy, parallelism=5, clock=clock, starvation_bound=10.0)
    s.submit(LockTask("holder", frozenset({"B"}), created_at=0.0))
    assert s.select() == ["holder"]
    s.submit(LockTask("urgent", frozenset({"A", "B"}), created_at=0.0))
    clock.advance(11.0)
    s.submit(LockTask("later", frozenset({"A"}), created_at=-1.0))
    assert s.select() == []  # A is free but reserved: "later" arrived after the urgent moment
    s.finish("holder")
    assert s.select() == ["urgent"]
    s.finish("urgent")
    assert s.select() == ["later"]
