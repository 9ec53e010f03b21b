"""The dask plugin on a real local Dask cluster: through a real engine (results flow on, a
failing function is retried then FAILED with its traceback), and driven directly (the
function's prints reach the task log, a restarted plugin gets the published task back
instead of submitting again, abort cancels it)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import pytest
from tests.plugins.dask.conftest import DASK_FLOWS, require_distributed

from sluice.config import Settings, load_config
from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.phase import Phase
from sluice.plugins.dask.config import DaskPluginConfig, parse_job_config
from sluice.plugins.dask.plugin import DaskPlugin
from sluice.plugins.local_processes import free_port
from sluice.plugins.testing import drive
from sluice.sdk.loader import load_module
from support.remote import (
    assert_failed_with_traceback,
    assert_squares_flowed,
    plugin_context,
    run_logged,
)


@pytest.fixture
def flows() -> ModuleType:
    return load_module("dask_flows", str(DASK_FLOWS))


def dask_settings(db: Path, address: str) -> Settings:
    return load_config(
        database_url=f"sqlite:///{db}",
        engine={"workers": 1, "resync_interval": 2.0, "backoff_base": 0.05, "backoff_max": 0.2},
        plugins={"config": {"dask": {"address": address}}},
    )


async def test_a_dask_task_result_flows_to_the_next_node(
    dask_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    settings = dask_settings(tmp_path / "s.db", dask_address)
    assert_squares_flowed(*await run_logged(settings, flows.squares))


async def test_a_failing_function_is_retried_then_fails_with_its_traceback(
    dask_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    settings = dask_settings(tmp_path / "s.db", dask_address)
    result, _ = await run_logged(settings, flows.broken_flow)
    node = assert_failed_with_traceback(result)
    assert node.attempt == 1  # the first attempt and its retry


async def test_the_function_prints_reach_the_task_log(
    dask_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    plugin = DaskPlugin(DaskPluginConfig(address=dask_address))
    ctx = plugin_context(flows.chatty, f"logs{tmp_path.name}", lines=3)
    try:
        seen = await drive(plugin, ctx, interval=0.5)
    finally:
        await plugin.close()
    assert seen[-1].phase is Phase.SUCCESS and ctx.written_outputs == {"o0": 3}
    assert ctx.log_writer.lines == [("stdout", f"line {i}") for i in range(3)]


async def test_a_restarted_plugin_takes_the_task_back_and_abort_cancels_it(
    dask_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    inputs = {"path": str(tmp_path / "never"), "runs": str(runs), "timeout": 30.0}
    ctx = plugin_context(flows.wait_for, f"abort{tmp_path.name}", **inputs)
    first = DaskPlugin(DaskPluginConfig(address=dask_address))
    for _ in range(300):  # the first calls connect, then it submits
        if (await first.handle(ctx)).info.phase is not Phase.INITIALIZING:
            break
        await asyncio.sleep(0.2)
    for _ in range(100):  # running on a worker before the engine "dies"
        if runs.exists():
            break
        await asyncio.sleep(0.1)
    await first.close()
    second = DaskPlugin(DaskPluginConfig(address=dask_address))
    try:
        phase = Phase.UNDEFINED
        while phase is not Phase.RUNNING:  # the first call connects, the next finds the task
            phase = (await second.handle(ctx)).info.phase
            await asyncio.sleep(0.2)
        await second.abort(ctx)
        await asyncio.sleep(0.5)
        info = (await second.handle(ctx)).info
        await second.finalize(ctx)
    finally:
        await second.close()
    assert runs.read_text() == "run\n"  # submitted once, though two plugins drove it
    assert info.phase is Phase.RETRYABLE_FAILURE and info.error is not None
    assert info.error.code == "DaskTaskCancelled"


def test_a_bad_config_names_the_field() -> None:
    with pytest.raises(InvalidPluginConfigError, match=r"task 't': dask config: workers"):
        parse_job_config({"workers": 0}, "t")
    with pytest.raises(InvalidPluginConfigError, match=r"address: .*'localhost:8786'"):
        parse_job_config({"address": "localhost:8786"}, "t")


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


async def test_without_an_address_the_task_runs_on_a_local_cluster_stopped_at_close(
    flows: ModuleType, tmp_path: Path
) -> None:
    require_distributed()
    plugin = DaskPlugin(DaskPluginConfig())
    ctx = plugin_context(flows.chatty, f"own{tmp_path.name}", lines=2)
    try:
        seen = await drive(plugin, ctx, interval=0.5, max_rounds=2000)
        processes = [pid for c in plugin._clusters.values() for pid in c.pids]
    finally:
        await plugin.close()
    assert seen[0].phase is Phase.INITIALIZING and "connecting" in seen[0].reason
    assert seen[-1].phase is Phase.SUCCESS and ctx.written_outputs == {"o0": 2}
    assert len(processes) == 2 and _alive(processes) == []  # scheduler and workers, stopped


async def test_a_scheduler_that_does_not_answer_is_a_retryable_system_failure(
    flows: ModuleType,
) -> None:
    require_distributed()
    address = f"tcp://127.0.0.1:{free_port()}"  # nothing listens there
    plugin = DaskPlugin(DaskPluginConfig(address=address, start_timeout=1.0))
    ctx = plugin_context(flows.chatty, "nowhere", lines=1)
    try:
        seen = await drive(plugin, ctx, interval=0.5)
    finally:
        await plugin.close()
    assert seen[0].phase is Phase.INITIALIZING
    error = seen[-1].error
    assert seen[-1].phase is Phase.RETRYABLE_FAILURE and error is not None
    assert error.code == "DaskSchedulerUnreachable" and address in error.message
    assert error.kind.value == "SYSTEM"
