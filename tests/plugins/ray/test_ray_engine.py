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


@pytest.fixture
def flows() -> ModuleType:
    return load_module("ray_flows", str(RAY_FLOWS))


async def test_a_ray_task_result_flows_to_the_next_node(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    rt = await Runtime.open(ray_settings(tmp_path / "s.db", ray_address))
    try:
        result = await run(rt, flows.squares)
        assert rt.task_logs is not None
        await rt.task_logs.flush()  # the sink writes at its interval: read what it holds now
        logged = [e.line.text for e in await rt.log_reader().lines(result.record.id)]
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": 1 + 4}
    assert {"squaring 1", "squaring 2"} <= {text.split(" in pid")[0] for text in logged}, logged
    assert not any("sluice-result" in text for text in logged)
    jobs = cluster_jobs(ray_address, result.record.id)
    assert [j.status for j in jobs] == ["SUCCEEDED"] * 2


async def test_a_failing_function_is_retried_then_fails_with_its_traceback(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    rt = await Runtime.open(ray_settings(tmp_path / "s.db", ray_address))
    try:
        result = await run(rt, flows.broken_flow)
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.FAILED
    (node,) = result.nodes.values()
    error = node.error
    assert error is not None and error["kind"] == "USER", error
    assert "ValueError: no square for 7 today" in error["message"]
    assert "Traceback" in error["message"]
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
