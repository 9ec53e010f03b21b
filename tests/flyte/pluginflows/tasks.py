"""Flytekit tasks of plugin types (flytekitplugins-ray, flytekitplugins-dask, ContainerTask),
written as a Flyte user writes them; sluice runs them on its ray, dask and pod plugins.

Each body returns where it ran (the Ray job's id, the Dask worker's address), so tests check
it ran on the cluster and not in a local worker.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from flytekit import ContainerTask, Resources, kwtypes, task, workflow
from flytekit.exceptions.user import FlyteRecoverableException
from flytekitplugins.dask import Dask, WorkerGroup
from flytekitplugins.ray import HeadNodeConfig, RayJobConfig

ON_RAY = RayJobConfig(
    head_node_config=HeadNodeConfig(ray_start_params={"num-cpus": "1"}),
    worker_node_config=[],
    runtime_env={"env_vars": {"SLUICE_FLYTE_MARK": "from the runtime env"}},
)


@task(task_config=ON_RAY)
def ray_squares(n: int) -> int:
    """Fans out inside the job with ray.remote: flytekit's own ray.init joined the cluster."""
    import ray

    @ray.remote
    def square(x: int) -> int:
        return x * x

    return sum(ray.get([square.remote(i) for i in range(n)]))


@task(task_config=ON_RAY)
def ray_where() -> str:
    """The job's id and the runtime environment's variable, as the job saw them."""
    import ray

    job = ray.get_runtime_context().get_job_id()
    return f"{os.environ.get('SLUICE_FLYTE_MARK')}|{job}"


@task(task_config=ON_RAY)
def ray_waiting(path: str) -> str:
    """Runs until `path` exists (at most 120 s), then returns what it holds."""
    deadline = time.monotonic() + 120
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.1)
    return Path(path).read_text()


@task(task_config=ON_RAY, retries=1)
def ray_flaky(n: int) -> int:
    if n > 0:
        raise FlyteRecoverableException(f"ray_flaky failed on {n}")
    return n


@task(task_config=ON_RAY, retries=2)
def ray_broken(n: int) -> int:
    if n > 0:
        raise ValueError(f"ray_broken failed on {n}")
    return n


@task(task_config=Dask(workers=WorkerGroup(number_of_workers=2)))
def dask_total(n: int) -> str:
    """The sum, and the address of the Dask worker it ran on."""
    from distributed import get_worker

    return f"{sum(range(n))}@{get_worker().address}"


@workflow
def ray_then_dask(n: int = 3) -> str:
    return dask_total(n=ray_squares(n=n))


greet = ContainerTask(
    name="greet",
    image="busybox:1.36",
    command=["echo", "hello {{.inputs.name}}", "{{.inputs.times}}"],
    inputs=kwtypes(name=str, times=int),
    requests=Resources(cpu="250m", mem="64Mi"),
    limits=Resources(mem="128Mi"),
    environment={"MODE": "test"},
)

counts = ContainerTask(
    name="counts",
    image="busybox:1.36",
    command=["sh", "-c", "echo 3 > /var/outputs/n"],
    outputs=kwtypes(n=int),
)
