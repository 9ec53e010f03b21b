"""Ray tasks through a real engine on a real local Ray cluster: results flow downstream, a
failing function is retried then FAILED with its traceback, and a quota on `ray:shared`
keeps jobs from overlapping on the cluster."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from tests.plugins.ray.conftest import RAY_FLOWS
from tests.plugins.ray.helpers import cluster_jobs, ray_settings

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase
from support.engine import run
from support.remote import assert_failed_with_traceback, assert_squares_flowed, run_logged


@pytest.fixture
def flows() -> ModuleType:
    return load_module("ray_flows", str(RAY_FLOWS))


async def test_a_ray_task_result_flows_to_the_next_node(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    result, logged = await run_logged(ray_settings(tmp_path / "s.db", ray_address), flows.squares)
    assert_squares_flowed(result, logged)
    jobs = cluster_jobs(ray_address, result.record.id)
    assert [j.status for j in jobs] == ["SUCCEEDED"] * 2


async def test_a_failing_function_is_retried_then_fails_with_its_traceback(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    settings = ray_settings(tmp_path / "s.db", ray_address)
    result, _ = await run_logged(settings, flows.broken_flow)
    assert_failed_with_traceback(result)
    jobs = cluster_jobs(ray_address, result.record.id)
    assert [j.status for j in jobs] == ["FAILED", "FAILED"]  # the first attempt and its retry
    assert len({j.submission_id for j in jobs}) == 2


async def test_a_quota_on_the_cluster_keeps_its_jobs_apart(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    settings = ray_settings(tmp_path / "s.db", ray_address, quotas={"ray:shared": 1})
    rt = await Runtime.open(settings)
    try:
        result = await run(rt, flows.held)
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    jobs = cluster_jobs(ray_address, result.record.id)
    first, second = jobs
    assert first.end_time <= second.start_time, (first, second)
