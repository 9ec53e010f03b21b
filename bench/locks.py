"""Lock scheduler benchmark: makespan and scheduling cost of each policy, in simulated time.

Each workload is one workflow run of N tasks, all ready at time 0; each task locks 10 of P
database partitions (capacity 1) chosen at random and runs for a duration drawn uniformly
from 30..90 units. An event-driven simulation (a heap of finish times, a FakeClock, no
sleeping) drives each policy through the LockScheduler API. Every scheduler is told
estimate=1.0 for every task (production knows a per-task-name average, and these tasks are
all one type); only the variant "default_exact_durations", reported apart, gets true durations.
The cost per event (finish a task, submit one, select) is timed in real time on a separate
instance with 10,000 waiting tasks over 5,000 locks. One JSON line per workload.

    .venv/bin/python bench/locks.py            # 5 seeds, P cycling 1000, 2000, 5000
    .venv/bin/python bench/locks.py --quick    # 1 seed, fewer cost events, no exact variant
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import time
from collections import defaultdict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from sluice.clock import FakeClock
from sluice.locks.scheduler import LockScheduler, LockTask

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the from-scratch reference is a test oracle under tests/

from tests.support.lock_reference import ReferenceLockScheduler  # noqa: E402

PARTITION_CYCLE = (1000, 2000, 5000)
MIN_DURATION, MAX_DURATION = 30.0, 90.0
STARVATION_BOUND = 300.0


class Scheduler(Protocol):
    @property
    def waiting_count(self) -> int: ...

    def submit(self, task: LockTask) -> None: ...

    def finish(self, task_id: str) -> None: ...

    def select(self) -> list[str]: ...


Factory = Callable[[FakeClock], Scheduler]


@dataclass(frozen=True)
class Workload:
    seed: int
    partitions: int
    tasks: tuple[LockTask, ...]
    durations: dict[str, float]


@dataclass(frozen=True)
class Outcome:
    makespan: float
    utilisation: float
    mean_wait: float


def make_factory(policy: str, parallelism: int, *, from_scratch: bool = False) -> Factory:
    """Builds the incremental LockScheduler, or the from-scratch reference."""
    kind = ReferenceLockScheduler if from_scratch else LockScheduler

    def build(clock: FakeClock) -> Scheduler:
        return kind(policy, parallelism=parallelism, clock=clock, starvation_bound=STARVATION_BOUND)

    return build


def reference(policy: str, parallelism: int) -> Factory:
    return make_factory(policy, parallelism, from_scratch=True)


def random_task(rng: random.Random, task_id: str, names: Sequence[str], locks: int) -> LockTask:
    return LockTask(task_id, frozenset(rng.sample(names, locks)), created_at=0.0, group="run")


def make_workload(seed: int, tasks: int, partitions: int, locks: int) -> Workload:
    rng = random.Random(seed)
    names = [f"db/partition/{index}" for index in range(partitions)]
    built = tuple(
        random_task(rng, f"run{seed}/task{index:05d}", names, locks) for index in range(tasks)
    )
    durations = {task.id: rng.uniform(MIN_DURATION, MAX_DURATION) for task in built}
    return Workload(seed, partitions, built, durations)


def lower_bound(workload: Workload, parallelism: int) -> float:
    """No schedule beats the busiest partition's total work, nor total work over the slots."""
    per_partition: defaultdict[str, float] = defaultdict(float)
    for task in workload.tasks:
        for name in task.locks:
            per_partition[name] += workload.durations[task.id]
    total = sum(workload.durations.values())
    return max(max(per_partition.values()), total / parallelism)


def simulate(factory: Factory, workload: Workload, parallelism: int) -> Outcome:
    """Run every task to completion in simulated time; all tasks are ready at time 0."""
    clock = FakeClock(0.0)
    scheduler = factory(clock)
    for task in workload.tasks:
        scheduler.submit(task)
    finishing: list[tuple[float, str]] = []
    total_wait = 0.0
    while True:
        for task_id in scheduler.select():
            heapq.heappush(finishing, (clock.now() + workload.durations[task_id], task_id))
            total_wait += clock.now()
        if not finishing:
            break
        clock.advance(finishing[0][0] - clock.now())
        while finishing and finishing[0][0] <= clock.now():
            scheduler.finish(heapq.heappop(finishing)[1])
    if scheduler.waiting_count:
        raise RuntimeError(f"{scheduler.waiting_count} tasks never started: deadlock")
    makespan = clock.now()
    utilisation = sum(workload.durations.values()) / (parallelism * makespan)
    return Outcome(makespan, utilisation, total_wait / len(workload.tasks))


def cost_per_event(
    factory: Factory, args: argparse.Namespace, events: int, seed: int
) -> tuple[float, float]:
    """Microseconds per (finish, submit, select), and the mean number of waiting tasks.

    The events run in 10 batches and the median batch is reported, so that a burst of load
    from other processes on the machine does not decide the figure.
    """
    rng = random.Random(seed)
    names = [f"db/partition/{index}" for index in range(args.cost_locks)]
    scheduler = factory(FakeClock(0.0))
    for index in range(args.cost_tasks + args.parallelism):
        scheduler.submit(random_task(rng, f"c/{index}", names, args.locks_per_task))
    running = deque(scheduler.select())
    batch = max(1, events // 10)
    arrivals = [random_task(rng, f"c/new{i}", names, args.locks_per_task) for i in range(events)]
    batches, waiting = [], 0
    for start in range(0, events, batch):
        begin = time.perf_counter()
        for task in arrivals[start : start + batch]:
            scheduler.finish(running.popleft())
            scheduler.submit(task)
            running.extend(scheduler.select())
        batches.append((time.perf_counter() - begin) / len(arrivals[start : start + batch]))
        waiting += scheduler.waiting_count
    return statistics.median(batches) * 1e6, waiting / len(batches)


def headline_policies(parallelism: int, with_reference: bool) -> dict[str, Factory]:
    policies = {"fifo": make_factory("fifo", parallelism)}
    if with_reference:
        policies["shared_locks_first_reference"] = reference("shared_locks_first", parallelism)
    policies["shared_locks_first"] = make_factory("shared_locks_first", parallelism)
    policies["default"] = make_factory("default", parallelism)
    return policies


def with_exact_estimates(workload: Workload) -> Workload:
    tasks = tuple(replace(task, estimate=workload.durations[task.id]) for task in workload.tasks)
    return replace(workload, tasks=tasks)


def describe(outcome: Outcome, bound: float) -> dict[str, float]:
    return {
        "makespan": round(outcome.makespan, 1),
        "utilisation": round(outcome.utilisation, 4),
        "mean_wait": round(outcome.mean_wait, 1),
        "gap_to_lower_bound": round(outcome.makespan / bound - 1, 4),
    }


def measure_costs(args: argparse.Namespace, seed: int) -> dict[str, dict[str, float]]:
    events = 200 if args.quick else 2000
    factories = {
        "shared_locks_first_reference": (reference("shared_locks_first", args.parallelism), 0),
        "shared_locks_first": (make_factory("shared_locks_first", args.parallelism), events),
        "default": (make_factory("default", args.parallelism), events),
        "fifo": (make_factory("fifo", args.parallelism), events),
    }
    costs = {}
    for name, (factory, count) in factories.items():
        micros, waiting = cost_per_event(factory, args, count or args.reference_events, seed)
        costs[name] = {"us_per_event": round(micros, 1), "mean_waiting": round(waiting)}
    return costs


def compare_policies(args: argparse.Namespace, workload: Workload) -> dict[str, Outcome]:
    factories = headline_policies(args.parallelism, not args.no_reference)
    outcomes = {name: simulate(f, workload, args.parallelism) for name, f in factories.items()}
    if not args.quick:
        exact = with_exact_estimates(workload)
        factory = make_factory("default", args.parallelism)
        outcomes["default_exact_durations"] = simulate(factory, exact, args.parallelism)
    return outcomes


def default_gain(outcomes: dict[str, Outcome]) -> float:
    """How much shorter default's makespan is than the better of FIFO and the seed's policy."""
    baselines = ("fifo", "shared_locks_first_reference", "shared_locks_first")
    best = min(outcomes[name].makespan for name in baselines if name in outcomes)
    return 1 - outcomes["default"].makespan / best


def bench_workload(args: argparse.Namespace, seed: int, partitions: int) -> dict[str, object]:
    workload = make_workload(seed, args.tasks, partitions, args.locks_per_task)
    bound = lower_bound(workload, args.parallelism)
    outcomes = compare_policies(args, workload)
    gain = default_gain(outcomes)
    line: dict[str, object] = {
        "bench": "locks",
        "seed": seed,
        "tasks": args.tasks,
        "partitions": partitions,
        "locks_per_task": args.locks_per_task,
        "parallelism": args.parallelism,
        "estimate": "1.0 for every task (exact durations only in default_exact_durations)",
        "starvation_bound": STARVATION_BOUND,
        "lower_bound": round(bound, 1),
        "policies": {name: describe(outcome, bound) for name, outcome in outcomes.items()},
        "default_makespan_gain_vs_best_baseline": round(gain, 4),
        "incremental_matches_reference": (
            "shared_locks_first_reference" not in outcomes
            or outcomes["shared_locks_first"] == outcomes["shared_locks_first_reference"]
        ),
        "targets": {"makespan_gain_5pct": gain >= 0.05},
    }
    if not args.no_cost:
        line.update(cost_figures(args, seed))
    return line


def cost_figures(args: argparse.Namespace, seed: int) -> dict[str, object]:
    costs = measure_costs(args, seed)
    reference_cost = costs["shared_locks_first_reference"]["us_per_event"]
    speedup = reference_cost / costs["default"]["us_per_event"]
    return {
        "cost_per_event": costs,
        "cost_locks": args.cost_locks,
        "cost_ratio_reference_to_default": round(speedup, 1),
        "cost_target_100x": speedup >= 100,
    }


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    pass


OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--seeds", {"type": int, "nargs": "+", "default": [1, 2, 3, 4, 5], "help": "workload seeds"}),
    (
        "--partitions",
        {"type": int, "nargs": "+", "default": list(PARTITION_CYCLE), "help": "cycled over seeds"},
    ),
    ("--tasks", {"type": int, "default": 2000, "help": "tasks per workload"}),
    ("--locks-per-task", {"type": int, "default": 10, "help": "partitions each task locks"}),
    ("--parallelism", {"type": int, "default": 200, "help": "slot cap"}),
    ("--cost-tasks", {"type": int, "default": 10_000, "help": "waiting tasks when timing"}),
    ("--cost-locks", {"type": int, "default": 5_000, "help": "lock names when timing"}),
    ("--reference-events", {"type": int, "default": 20, "help": "events timed for the reference"}),
    ("--no-cost", {"action": "store_true", "help": "skip the cost-per-event measurement"}),
    ("--no-reference", {"action": "store_true", "help": "skip simulating the slow reference"}),
    (
        "--quick",
        {"action": "store_true", "help": "first seed only, 200 timed events, no exact variant"},
    ),
)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=HelpFormatter)
    for flag, options in OPTIONS:
        parser.add_argument(flag, **options)
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds = args.seeds[:1]
    return args


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    for index, seed in enumerate(args.seeds):
        partitions = args.partitions[index % len(args.partitions)]
        print(json.dumps(bench_workload(args, seed, partitions)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
