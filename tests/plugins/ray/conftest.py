"""A real Ray cluster for the session: a head on 127.0.0.1 (2 CPUs, dashboard on a free port,
loopback only, no token), started by the plugin's own LocalRayCluster and stopped by its
process ids. Skipped on a laptop without `sluice[ray]`; a failure under CI."""

from __future__ import annotations

import asyncio
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.plugins.ray.cluster import LocalRayCluster

RAY_FLOWS = Path(__file__).parent / "ray_flows.py"


def require_ray() -> None:
    if importlib.util.find_spec("ray") is not None:
        return
    message = "ray is not installed (pip install 'sluice[ray]')"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[LocalRayCluster]:
    require_ray()
    cluster = LocalRayCluster(head_cpus=2)
    cluster.launch()
    try:
        asyncio.run(cluster.wait_ready(120))
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def ray_address(ray_cluster: LocalRayCluster) -> str:
    return ray_cluster.address
