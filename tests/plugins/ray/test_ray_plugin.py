"""The ray plugin driven directly (no engine) on the session's real cluster: the job's log
reaches the task's log writer, abort stops the job, a restarted plugin finds the job it
submitted instead of submitting again; and, without a cluster, its config and log parsing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import pytest
from tests.plugins.ray.conftest import RAY_FLOWS, require_ray
from tests.plugins.ray.helpers import cluster_jobs

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.phase import Phase
from sluice.plugins.ray.config import RayPluginConfig, parse_job_config
from sluice.plugins.ray.logs import forward_new_lines
from sluice.plugins.ray.plugin import RayPlugin, submission_id
from sluice.plugins.ray.protocol import RESULT_MARKER, find_answer
from sluice.plugins.testing import MemoryLog, drive
from sluice.sdk.loader import load_module
from support.remote import plugin_context


@pytest.fixture
def flows() -> ModuleType:
    return load_module("ray_flows", str(RAY_FLOWS))


async def test_the_job_log_reaches_the_task_log_without_the_result_line(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    plugin = RayPlugin(RayPluginConfig(address=ray_address))
    ctx = plugin_context(flows.chatty, f"logs{tmp_path.name}", lines=3)
    try:
        seen = await drive(plugin, ctx, interval=0.5)
    finally:
        await plugin.close()
    assert seen[-1].phase is Phase.SUCCESS and ctx.written_outputs == {"o0": 3}
    text = ctx.log_writer.text()
    assert [line for line in text.splitlines() if line.startswith("line ")] == [
        "line 0",
        "line 1",
        "line 2",
    ]
    assert RESULT_MARKER not in text


async def test_abort_stops_the_job_and_a_restarted_plugin_never_submits_twice(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    execution = f"abort{tmp_path.name}"
    ctx = plugin_context(flows.wait_for, execution, path=str(tmp_path / "never"), timeout=120.0)
    first = RayPlugin(RayPluginConfig(address=ray_address))
    phase = (await first.handle(ctx)).info.phase
    await first.close()  # the engine dies: a new plugin with the same state takes over
    second = RayPlugin(RayPluginConfig(address=ray_address))
    try:
        while phase is not Phase.RUNNING:
            await asyncio.sleep(0.3)
            phase = (await second.handle(ctx)).info.phase
            assert not phase.is_terminal()
        await second.abort(ctx)
        await second.finalize(ctx)
        for _ in range(100):
            (job,) = cluster_jobs(ray_address, execution)
            if job.status == "STOPPED":
                break
            await asyncio.sleep(0.3)
    finally:
        await second.close()
    assert job.status == "STOPPED"


async def test_an_attempt_started_afresh_goes_on_under_the_next_id(
    ray_address: str, flows: ModuleType, tmp_path: Path
) -> None:
    execution, go = f"afresh{tmp_path.name}", tmp_path / "go"
    ctx = plugin_context(flows.wait_for, execution, path=str(go), timeout=120.0)
    plugin = RayPlugin(RayPluginConfig(address=ray_address))
    try:
        assert (await plugin.handle(ctx)).info.phase is Phase.QUEUED
        await plugin.abort(ctx)  # the engine stops the attempt to start it afresh...
        await plugin.finalize(ctx)
        for _ in range(100):
            if [j.status for j in cluster_jobs(ray_address, execution)] == ["STOPPED"]:
                break
            await asyncio.sleep(0.3)
        ctx.state_writer.reset()  # ...and forgets its plugin state
        go.write_text("second start")
        seen = await drive(plugin, ctx, interval=0.3)
    finally:
        await plugin.close()
    assert seen[-1].phase is Phase.SUCCESS and ctx.written_outputs == {"o0": "second start"}
    jobs = {j.submission_id: j.status for j in cluster_jobs(ray_address, execution)}
    base = submission_id(ctx)
    assert jobs == {base: "STOPPED", f"{base}-r1": "SUCCEEDED"}


def test_a_bad_config_names_the_field() -> None:
    with pytest.raises(InvalidPluginConfigError, match=r"task 't': ray config: head_cpus"):
        parse_job_config({"head_cpus": 0}, "t")
    with pytest.raises(InvalidPluginConfigError, match=r"address: .*dashboard.*'ray://x'"):
        parse_job_config({"address": "ray://x"}, "t")
    with pytest.raises(InvalidPluginConfigError, match="speed"):
        parse_job_config({"speed": 3}, "t")


def test_log_lines_are_forwarded_once_and_only_when_complete() -> None:
    log = MemoryLog()
    offset = forward_new_lines(log, "a\nb\npart", 0, final=False)
    assert log.lines == [("stdout", "a"), ("stdout", "b")] and offset == 4
    offset = forward_new_lines(log, f"a\nb\npartial\nout{RESULT_MARKER}{{}}\n", offset, True)
    assert [t for _, t in log.lines] == ["a", "b", "partial", "out"]
    assert forward_new_lines(log, "a\n", 2, final=True) == 2


def test_the_answer_is_the_last_marked_line() -> None:
    log = f'x\n{RESULT_MARKER}{{"outputs": {{"o0": 1}}}}\nprinted{RESULT_MARKER}{{"outputs": 2}}\n'
    assert find_answer(log) == {"outputs": 2}
    assert find_answer("nothing here\n") is None
    assert find_answer(f"{RESULT_MARKER}not json") is None


def _alive(pids: set[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists()]


async def test_without_an_address_the_job_runs_on_a_local_cluster_stopped_after_it(
    flows: ModuleType, tmp_path: Path
) -> None:
    require_ray()
    plugin = RayPlugin(RayPluginConfig())
    ctx = plugin_context(flows.on_own_cluster, f"own{tmp_path.name}", x=21)
    seen, nodes = [], set()
    try:
        for _ in range(600):
            seen.append((await plugin.handle(ctx)).info)
            nodes.update(pid for c in plugin._clusters.values() for pid in c.pids)
            if seen[-1].phase.is_terminal():
                break
            await asyncio.sleep(0.3)
        await plugin.finalize(ctx)
        alive = _alive(nodes)
    finally:
        await plugin.close()
    assert seen[0].phase is Phase.INITIALIZING and "local Ray cluster" in seen[0].reason
    assert seen[-1].phase is Phase.SUCCESS, seen[-1]
    assert ctx.written_outputs == {"o0": 42}  # the function used ray.remote on that cluster
    assert nodes and alive == []  # stopped by finalize, right after the job
