"""A flytekit workflow whose tasks use Flyte's Ray and Dask plugins, run by sluice with no
Flyte and no Kubernetes: the ray task runs as a Ray job on sluice's ray plugin, the dask task
on a Dask worker of sluice's dask plugin (docs/flyte.md, "Plugin task types").

    pip install 'sluice[flyte,ray,dask]'
    python examples/flyte_ray_dask.py                  # local clusters, started and stopped here
    sluice run examples/flyte_ray_dask.py:pi_then_stats -i points=100000

Without `plugins.config.ray.address` / `plugins.config.dask.address`, each plugin starts a
local cluster of the shape the task asks for (here a 2-CPU Ray head, 2 Dask workers), on
127.0.0.1 only, and stops it when the engine closes.
"""

from __future__ import annotations

import random

from flytekit import task, workflow
from flytekitplugins.dask import Dask, WorkerGroup
from flytekitplugins.ray import HeadNodeConfig, RayJobConfig


@task(
    task_config=RayJobConfig(
        head_node_config=HeadNodeConfig(ray_start_params={"num-cpus": "2"}),
        worker_node_config=[],
    ),
    retries=1,
)
def estimate_pi(points: int) -> float:
    """4 Ray tasks count points of the unit square inside the quarter circle."""
    import ray

    @ray.remote
    def inside(seed: int) -> int:
        rng = random.Random(seed)
        return sum(rng.random() ** 2 + rng.random() ** 2 <= 1.0 for _ in range(points // 4))

    return 4.0 * sum(ray.get([inside.remote(s) for s in range(4)])) / points


@task(task_config=Dask(workers=WorkerGroup(number_of_workers=2)))
def describe(estimate: float) -> str:
    """Runs on a Dask worker: says which one, with the estimate."""
    from distributed import get_worker

    return f"pi is about {estimate:.3f} (described on Dask worker {get_worker().name})"


@workflow
def pi_then_stats(points: int = 100_000) -> str:
    return describe(estimate=estimate_pi(points=points))


if __name__ == "__main__":
    import sluice

    raise SystemExit(sluice.main(["run", f"{__file__}:pi_then_stats"]))
