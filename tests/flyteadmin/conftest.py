"""One real `sluice serve` per test module (tests/support/flyteadmin_server.py), and a copy of
the test flows for pyflyte to package. Flyte tests run the real flytekit: skipped on a laptop
without `sluice[flyte]`, failed in CI."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.flyteadmin_server import FlyteServer, start_server

HERE = Path(__file__).resolve().parent


@pytest.fixture(autouse=True)
def _flytekit() -> None:
    if importlib.util.find_spec("flytekit") is not None:
        return
    message = "flytekit is not installed (pip install 'sluice[flyte]')"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlyteServer]:
    found = start_server(tmp_path_factory.mktemp("flyteadmin"))
    try:
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the test flows (package `fa_flows`): pyflyte packages its directory. One for
    the session: FlyteRemote packages the modules this process loaded from it, and a module is
    loaded once."""
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(HERE / "fa_flows", root / "fa_flows")
    return root
