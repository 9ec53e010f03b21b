"""A real Dask cluster for the session: a scheduler and 2 worker processes on 127.0.0.1,
started by the plugin's own LocalDaskCluster and stopped by their process ids. Skipped on a
laptop without `sluice[dask]`; a failure under CI."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.plugins.dask.cluster import LocalDaskCluster

DASK_FLOWS = Path(__file__).parent / "dask_flows.py"


def require_distributed() -> None:
    if importlib.util.find_spec("distributed") is not None:
        return
    message = "distributed is not installed (pip install 'sluice[dask]')"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def dask_address() -> Iterator[str]:
    require_distributed()
    from distributed import Client

    cluster = LocalDaskCluster(workers=2)
    cluster.launch()
    try:
        with Client(cluster.address, timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
        yield cluster.address
    finally:
        cluster.stop(grace=3)
