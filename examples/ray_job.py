"""Ray tasks: each `type="ray"` task runs as a Ray job, and may use Ray inside (ray.remote);
short tasks run cheaply as Ray tasks with `RayJobConfig(mode="task")` (no job each).

    pip install 'sluice[ray]'
    python examples/ray_job.py                   # a local Ray cluster, started and stopped here
    sluice run examples/ray_job.py:estimate_pi   # the same, through the CLI
    sluice run examples/ray_job.py:squares       # 20 short tasks in task mode

With `plugins.config.ray.address = "http://HEAD:8265"` (or `RayJobConfig(address=...)`) the
jobs go to that cluster instead; sluice must be installed there, and this file shipped with
the job (`RayJobConfig(runtime_env={"working_dir": "examples"})`). Every node of the local
cluster listens on 127.0.0.1 only.
"""

from __future__ import annotations

import random

import sluice
from sluice.plugins.ray import RayJobConfig

# One local cluster of 2 CPUs, shared by the jobs, stopped when the engine closes.
LOCAL = RayJobConfig(head_cpus=2, poll_interval=0.3)


@sluice.task(type="ray", custom=LOCAL, retries=1)
def sample(seed: int, points: int) -> int:
    """Points of the unit square inside the quarter circle, counted by 4 Ray tasks."""
    import ray

    @ray.remote
    def count(part: int) -> int:
        rng = random.Random(seed * 100 + part)
        inside = 0
        for _ in range(points // 4):
            x, y = rng.random(), rng.random()
            inside += x * x + y * y <= 1.0
        return inside

    inside = sum(ray.get([count.remote(part) for part in range(4)]))
    print(f"seed {seed}: {inside} of {points} points inside")  # reaches the task's log
    return int(inside)


@sluice.task
def combine(counts: list[int], points: int) -> float:
    return 4.0 * sum(counts) / (points * len(counts))


@sluice.workflow
def estimate_pi(points: int = 200_000) -> float:
    return combine(counts=[sample(seed=s, points=points) for s in range(2)], points=points)


# Task mode: each call is one Ray task (no driver process per task), owned by the plugin's
# task host actor on the cluster, so it survives an engine killed meanwhile. Same local
# cluster shape as LOCAL: the two modes share that cluster.
QUICK = RayJobConfig(mode="task", head_cpus=2)


@sluice.task(type="ray", custom=QUICK, retries=1)
def square(x: int) -> int:
    return x * x


@sluice.workflow
def squares() -> float:
    return combine(counts=[square(x=i) for i in range(20)], points=1)


if __name__ == "__main__":
    code = sluice.main(["run", f"{__file__}:estimate_pi"])
    raise SystemExit(code or sluice.main(["run", f"{__file__}:squares"]))
