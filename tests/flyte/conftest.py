"""Flyte tests run the real flytekit: skipped on a laptop without `sluice[flyte]`, failed in
CI (where the extra is installed)."""

from __future__ import annotations

import importlib.util
import os

import pytest


def require_flytekit() -> None:
    if importlib.util.find_spec("flytekit") is not None:
        return
    message = "flytekit is not installed (pip install 'sluice[flyte]')"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _flytekit() -> None:
    require_flytekit()


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # its namespace package is missing too
        return False


@pytest.fixture
def flytekit_plugins() -> None:
    """flytekitplugins-ray and -dask (tests/flyte/pluginflows): skipped on a laptop without
    them, a failure under CI."""
    missing = [p for p in ("ray", "dask") if not _installed(f"flytekitplugins.{p}")]
    if missing:
        message = f"flytekitplugins-{'/'.join(missing)} not installed (pip install 'sluice[flyte]')"
        if os.environ.get("CI"):
            pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
        pytest.skip(message)
