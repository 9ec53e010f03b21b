"""The ray plugin's task mode (`RayJobConfig(mode="task")`) on the session's real cluster:
the function runs as a Ray task owned by the task host actor. Lifecycle and logs, one
submission however often a restarted plugin asks, the function's failure retryable and bad
outputs permanent, a dead worker a system failure, abort kills the task's worker, and a
fan-out through a real engine. Each test has a task host of its own, whose counts it reads."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from tests.plugins.ray.conftest import RAY_FLOWS
from tests.plugins.ray.helpers import host_stats, ray_task_settings

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.phase import ErrorKind, Phase
from sluice.plugins.ray.config import RayPluginConfig, parse_job_config
from sluice.plugins.ray.plugin import RayPlugin
from sluice.plugins.testing import drive
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase
from support.crash import alive as _alive
from support.engine import run
from support.remote import plugin_context


@pytest.fixture
def flows() -> ModuleType:
    return load_module("ray_flows", str(RAY_FLOWS))


@pytest.fixture
def gcs(ray_cluster: Any) -> str:
    return str(ray_cluster.gcs_address)


def _plugin(gcs: str, host: str) -> RayPlugin:
    return RayPlugin(RayPluginConfig(gcs_address=gcs, task_host=host, task_result_grace=0))


async def test_a_task_runs_its_output_reaches_the_log_and_the_host_keeps_nothing(
    gcs: str, flows: ModuleType, tmp_path: Path
) -> None:
    host = f"life-{tmp_path.name}"
    ctx = plugin_context(flows.t_square, f"life{tmp_path.name}", x=7)
    plugin = _plugin(gcs, host)
    try:
        seen = await drive(plugin, ctx, interval=5.0)  # the host's wait refreshes, not a poll
    finally:
        await plugin.close()
    assert [info.phase for info in seen] == [Phase.QUEUED, Phase.SUCCESS], seen
    assert ctx.written_outputs == {"o0": 49}
    assert ctx.log_writer.text().strip() == "t-squaring 7"  # type: ignore[attr-defined]
    assert await host_stats(gcs, host) == {"submitted": 1, "held": 0, "released": 0}


async def test_a_plugin_that_died_before_writing_its_state_finds_the_task(
    gcs: str, flows: ModuleType, tmp_path: Path
) -> None:
    host, go, started = f"again-{tmp_path.name}", tmp_path / "go", tmp_path / "started"
    ctx = plugin_context(
        flows.t_wait_for, f"again{tmp_path.name}", path=str(go), started=str(started)
    )
    ctx.inputs = {**ctx.inputs, "timeout": 120.0}
    first = _plugin(gcs, host)
    assert (await first.handle(ctx)).info.phase is Phase.QUEUED
    await first.close()
    ctx.state_writer.reset()  # the engine died between the submission and its state write
    second = _plugin(gcs, host)
    try:
        again = (await second.handle(ctx)).info
        assert again.phase is Phase.QUEUED and "found (submitted before)" in again.reason, again
        go.write_text("once")
        seen = await drive(second, ctx, interval=0.5)
    finally:
        await second.close()
    assert seen[-1].phase is Phase.SUCCESS and ctx.written_outputs == {"o0": "once"}
    assert len(started.read_text().splitlines()) == 1  # the function ran once
    assert (await host_stats(gcs, host))["submitted"] == 1


async def test_the_function_s_error_is_retryable_and_bad_outputs_are_permanent(
    gcs: str, flows: ModuleType, tmp_path: Path
) -> None:
    plugin = _plugin(gcs, f"fail-{tmp_path.name}")
    broken = plugin_context(flows.t_broken, f"broken{tmp_path.name}", x=5)
    bad = plugin_context(flows.t_not_a_pair, f"bad{tmp_path.name}", x=5)
    dies = plugin_context(flows.t_worker_dies, f"dies{tmp_path.name}", x=5)
    try:
        failed, wrong, died = [
            (await drive(plugin, c, interval=0.5))[-1] for c in (broken, bad, dies)
        ]
    finally:
        await plugin.close()
    assert failed.phase is Phase.RETRYABLE_FAILURE and failed.error is not None
    assert failed.error.kind is ErrorKind.USER
    assert "ValueError: no square for 5 in task mode" in failed.error.message
    assert "Traceback" in failed.error.message
    assert wrong.phase is Phase.PERMANENT_FAILURE and wrong.error is not None
    assert wrong.error.code == "OutputsError", wrong.error
    assert died.phase is Phase.RETRYABLE_FAILURE and died.error is not None
    assert (died.error.kind, died.error.code) == (ErrorKind.SYSTEM, "RayTaskFailed"), died.error


async def test_abort_kills_the_task_s_worker_and_the_host_forgets_it(
    gcs: str, flows: ModuleType, tmp_path: Path
) -> None:
    host, started = f"abort-{tmp_path.name}", tmp_path / "started"
    ctx = plugin_context(
        flows.t_wait_for, f"abort{tmp_path.name}", path=str(tmp_path / "never"),
        started=str(started), timeout=120.0,
    )  # fmt: skip
    plugin = _plugin(gcs, host)
    try:
        assert (await plugin.handle(ctx)).info.phase is Phase.QUEUED
        deadline = time.monotonic() + 60
        while not (started.exists() and started.read_text().endswith("\n")):
            assert time.monotonic() < deadline, "the Ray task never started"
            await asyncio.sleep(0.2)
        pid = int(started.read_text())
        assert (await plugin.handle(ctx)).info.phase is Phase.RUNNING
        await plugin.abort(ctx)
        await plugin.finalize(ctx)
        while _alive(pid):
            assert time.monotonic() < deadline + 60, f"the task's worker {pid} still runs"
            await asyncio.sleep(0.2)
        after = await plugin.handle(ctx)  # the host no longer knows the key
    finally:
        await plugin.close()
    assert after.info.phase is Phase.RETRYABLE_FAILURE and after.info.error is not None
    assert after.info.error.code == "RayTaskLost"
    assert await host_stats(gcs, host) == {"submitted": 1, "held": 0, "released": 0}


async def test_a_fan_out_runs_through_an_engine_one_submission_per_task(
    gcs: str, flows: ModuleType, tmp_path: Path
) -> None:
    host = f"fan-{tmp_path.name}"
    rt = await Runtime.open(ray_task_settings(tmp_path / "s.db", gcs, host))
    try:
        result = await run(rt, flows.t_fanout)
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.SUCCEEDED, result.record.error
    assert result.record.outputs == {"o0": sum(i * i for i in range(20))}
    assert await host_stats(gcs, host) == {"submitted": 20, "held": 0, "released": 0}


def test_task_mode_refuses_what_only_a_job_can_do() -> None:
    with pytest.raises(InvalidPluginConfigError, match="shutdown_after_job must be False"):
        parse_job_config({"mode": "task", "shutdown_after_job": True}, "t")
    with pytest.raises(InvalidPluginConfigError, match=r"runtime_env cannot set \['working_dir'\]"):
        parse_job_config({"mode": "task", "runtime_env": {"working_dir": "."}}, "t")
    with pytest.raises(InvalidPluginConfigError, match="gcs_address: must be the GCS's host:port"):
        parse_job_config({"mode": "task", "gcs_address": "http://h:6379"}, "t")
