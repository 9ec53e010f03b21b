"""Real local clusters for the session, shared by the Ray and Dask plugin tests and the Flyte
tests (flytekit's ray and dask tasks), defined once (tests/conftest.py imports them) so one
session starts each cluster at most once.

- `ray_cluster` / `ray_address`: a Ray head on 127.0.0.1 (2 CPUs, dashboard on a free port,
  loopback only, no token), started by the ray plugin's own LocalRayCluster and stopped by
  its process ids (never `ray stop`).
- `dask_address`: a Dask scheduler and 2 worker processes on 127.0.0.1, started by the dask
  plugin's LocalDaskCluster and stopped by their process ids.

Skipped on a laptop without `sluice[ray]` / `sluice[dask]`; a failure under CI.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest


def _require(module: str, extra: str) -> None:
    if importlib.util.find_spec(module) is not None:
        return
    message = f"{module} is not installed (pip install 'sluice[{extra}]')"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


def require_ray() -> None:
    _require("ray", "ray")


def require_distributed() -> None:
    _require("distributed", "dask")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[Any]:
    require_ray()
    from sluice.plugins.ray.cluster import LocalRayCluster

    cluster = LocalRayCluster(head_cpus=2)
    cluster.launch()
    try:
        asyncio.run(cluster.wait_ready(120))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_address(ray_cluster: Any) -> str:
    return str(ray_cluster.address)


@pytest.fixture(scope="session")
def dask_address() -> Iterator[str]:
    require_distributed()
    from distributed import Client

    from sluice.plugins.dask.cluster import LocalDaskCluster

    cluster = LocalDaskCluster(workers=2)
    cluster.launch()
    try:
        with Client(cluster.address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        yield cluster.address
    finally:
        cluster.stop(grace=3)
