"""How much any start order could gain on bench/locks.py's workloads: a clairvoyant ceiling.

bench/locks.py finds the policies' makespans within a few percent of each other. This script
asks whether a better order exists at all. It searches start orders offline, knowing every
task's true duration (no policy knows that), and runs each order through the same greedy
dispatch every policy uses: whenever a slot and all of a task's locks are free, the first such
task in the order starts. The search is squeaky-wheel optimisation: build a schedule, raise
the priority of tasks whose locks finished last, rebuild; the best order found is reported.

Searching orders loses nothing a policy could do. bench/locks.py's issue asks every policy to
start what fits, so a policy's schedule is work-conserving: after each event, no waiting task
fits. Any such schedule, however its policy chose (dynamic keys, look-ahead, anything), is
rebuilt exactly by greedy dispatch in the order of its start times: at each event, the tasks
it started then come first among those left and fit, and no task after them fits, or the
schedule would not have been work-conserving. So the best order is the best any such policy
can do, even knowing the durations. The search is a heuristic, so what it finds is a floor on
that best, not the best itself.

It also colours the conflict graph (two tasks conflict when they share a lock) with DSatur.
With equal durations a schedule is a colouring, so the colour count, not the busiest
partition's task count, is what the makespan has to beat; the gap between the two shows how
loose bench/locks.py's lower bound is. One JSON line per workload.

    .venv/bin/python bench/locks_ceiling.py                 # the seeds of bench/locks.py
    .venv/bin/python bench/locks_ceiling.py --iterations 20
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import defaultdict
from collections.abc import Sequence

from locks import PARTITION_CYCLE, Workload, lower_bound, make_workload


class Instance:
    """A workload as index arrays: task i's locks, its true duration, each lock's tasks."""

    def __init__(self, workload: Workload) -> None:
        self.locks = [tuple(task.locks) for task in workload.tasks]
        self.durations = [workload.durations[task.id] for task in workload.tasks]
        self.users: defaultdict[str, list[int]] = defaultdict(list)
        for index, names in enumerate(self.locks):
            for name in names:
                self.users[name].append(index)

    def __len__(self) -> int:
        return len(self.locks)


def dispatch(instance: Instance, rank: Sequence[int], parallelism: int) -> list[float]:
    """Greedy dispatch in `rank` order (smaller first); returns every task's start time."""
    count = len(instance)
    blockers = [0] * count
    started = [False] * count
    starts = [0.0] * count
    ready = [(rank[index], index) for index in range(count)]
    heapq.heapify(ready)
    finishing: list[tuple[float, int]] = []
    now, running = 0.0, 0
    while True:
        while running < parallelism and ready:
            _, index = heapq.heappop(ready)
            if started[index] or blockers[index]:
                continue
            started[index], starts[index], running = True, now, running + 1
            heapq.heappush(finishing, (now + instance.durations[index], index))
            for name in instance.locks[index]:
                for other in instance.users[name]:
                    blockers[other] += 1
        if not finishing:
            return starts
        now = finishing[0][0]
        while finishing and finishing[0][0] <= now:
            _, index = heapq.heappop(finishing)
            running -= 1
            for name in instance.locks[index]:
                for other in instance.users[name]:
                    blockers[other] -= 1
                    if not blockers[other] and not started[other]:
                        heapq.heappush(ready, (rank[other], other))


def makespan(instance: Instance, starts: Sequence[float]) -> float:
    return max(start + duration for start, duration in zip(starts, instance.durations, strict=True))


def ranks_of(scores: Sequence[float]) -> list[int]:
    """Rank 0 for the highest score; ties by task index."""
    order = sorted(range(len(scores)), key=lambda index: (-scores[index], index))
    rank = [0] * len(scores)
    for position, index in enumerate(order):
        rank[index] = position
    return rank


def squeaky_wheel(
    instance: Instance, parallelism: int, iterations: int, step: float = 0.05, sharpness: int = 8
) -> float:
    """Best makespan over `iterations` rounds of blame-and-rebuild, starting from busiest-lock."""
    work: defaultdict[str, float] = defaultdict(float)
    for names, duration in zip(instance.locks, instance.durations, strict=True):
        for name in names:
            work[name] += duration
    scores = [max(work[name] for name in names) for names in instance.locks]
    best = float("inf")
    for _ in range(iterations):
        starts = dispatch(instance, ranks_of(scores), parallelism)
        span = makespan(instance, starts)
        best = min(best, span)
        lock_end: defaultdict[str, float] = defaultdict(float)
        for index, names in enumerate(instance.locks):
            end = starts[index] + instance.durations[index]
            for name in names:
                lock_end[name] = max(lock_end[name], end)
        for index, names in enumerate(instance.locks):
            lateness = max(lock_end[name] for name in names) / span
            scores[index] += step * span * lateness**sharpness
    return best


def dsatur_colours(instance: Instance) -> int:
    """Colours DSatur needs for the conflict graph (most saturated, then highest degree first)."""
    neighbours = [set[int]() for _ in range(len(instance))]
    for users in instance.users.values():
        for index in users:
            neighbours[index].update(users)
    for index, others in enumerate(neighbours):
        others.discard(index)
    colour = [-1] * len(instance)
    seen = [set[int]() for _ in range(len(instance))]
    uncoloured = set(range(len(instance)))
    while uncoloured:
        index = max(uncoloured, key=lambda i: (len(seen[i]), len(neighbours[i]), -i))
        uncoloured.remove(index)
        chosen = 0
        while chosen in seen[index]:
            chosen += 1
        colour[index] = chosen
        for other in neighbours[index]:
            seen[other].add(chosen)
    return max(colour) + 1


def ceiling(args: argparse.Namespace, seed: int, partitions: int) -> dict[str, object]:
    workload = make_workload(seed, args.tasks, partitions, args.locks_per_task)
    instance = Instance(workload)
    fifo = makespan(instance, dispatch(instance, range(len(instance)), args.parallelism))
    best = squeaky_wheel(instance, args.parallelism, args.iterations)
    busiest = max(len(users) for users in instance.users.values())
    return {
        "bench": "locks_ceiling",
        "seed": seed,
        "tasks": args.tasks,
        "partitions": partitions,
        "parallelism": args.parallelism,
        "lower_bound": round(lower_bound(workload, args.parallelism), 1),
        "fifo_makespan": round(fifo, 1),
        "clairvoyant_best_makespan": round(best, 1),
        "clairvoyant_gain_vs_fifo": round(1 - best / fifo, 4),
        "search_iterations": args.iterations,
        "busiest_partition_tasks": busiest,
        "dsatur_colours": dsatur_colours(instance),
    }


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    parser.add_argument("--partitions", type=int, nargs="+", default=list(PARTITION_CYCLE))
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--locks-per-task", type=int, default=10)
    parser.add_argument("--parallelism", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=100, help="squeaky-wheel rounds")
    return parser.parse_args(argv)


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    for index, seed in enumerate(args.seeds):
        partitions = args.partitions[index % len(args.partitions)]
        print(json.dumps(ceiling(args, seed, partitions)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
