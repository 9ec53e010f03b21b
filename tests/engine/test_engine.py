"""The engine end to end in one process: real SQLite, real worker processes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import ModuleType

import pytest

from sluice.executions.launch import request_abort
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase, NodePhase
from support.engine import fast_settings, outcome, run


async def test_fan_out_fan_in_outputs_flow_along_bindings(
    runtime: Runtime, flows: ModuleType
) -> None:
    result = await run(runtime, flows.fan)
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert result.record.outputs == {"o0": sum(i * i for i in range(5))}
    assert result.nodes["total"].inputs == {"values": [0, 1, 4, 9, 16]}
    assert all(n.phase is NodePhase.SUCCEEDED for n in result.nodes.values())


async def test_engine_runs_on_postgresql(pg_url: str, flows: ModuleType) -> None:
    rt = await Runtime.open(fast_settings(pg_url), upgrade=True)
    try:
        result = await run(rt, flows.fan)
    finally:
        await rt.close()
    assert result.record.outputs == {"o0": 30}


async def test_events_only_on_new_phase_and_version(runtime: Runtime, flows: ModuleType) -> None:
    result = await run(runtime, flows.fan)
    seen = [(e.node_id, e.attempt, e.phase, e.phase_version) for e in result.events if e.node_id]
    assert len(seen) == len(set(seen)), "an event repeated an already recorded (phase, version)"


async def test_user_error_is_retried_then_succeeds(
    runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, flows.retried, directory=str(tmp_path))
    node = result.nodes["flaky"]
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert node.attempt == 1 and node.system_failures == 0
    failures = [e for e in result.events if e.phase == "RETRYABLE_FAILURE"]
    assert len(failures) == 1 and "first attempt fails on purpose" in failures[0].reason


async def test_exception_fails_execution_with_traceback_and_skips_downstream(
    runtime: Runtime, flows: ModuleType
) -> None:
    result = await run(runtime, flows.failing, message="no luck")
    assert result.record.phase is ExecutionPhase.FAILED
    error = result.record.error or {}
    assert error["node"] == "boom" and error["kind"] == "USER"
    assert "Traceback" in error["message"] and "RuntimeError: no luck" in error["message"]
    assert result.nodes["square"].phase is NodePhase.SKIPPED


async def test_dead_worker_is_a_retryable_system_error(
    runtime: Runtime, flows: ModuleType, tmp_path: Path
) -> None:
    result = await run(runtime, flows.dies, directory=str(tmp_path))
    node = result.nodes["die_once"]
    assert result.record.phase is ExecutionPhase.SUCCEEDED
    assert result.record.outputs == {"o0": "survived"}
    assert node.system_failures == 1
    died = [e for e in result.events if e.phase == "RETRYABLE_FAILURE"]
    assert died and died[0].info is not None and died[0].info["code"] == "WorkerDied"


async def test_timeout_kills_the_attempt(runtime: Runtime, flows: ModuleType) -> None:
    result = await run(runtime, flows.times_out, seconds=30.0)
    assert result.record.phase is ExecutionPhase.FAILED
    assert (result.record.error or {})["code"] == "Timeout"


async def test_outputs_that_are_not_json_fail_permanently(
    runtime: Runtime, flows: ModuleType
) -> None:
    result = await run(runtime, flows.bad_output)
    assert result.record.phase is ExecutionPhase.FAILED
    assert (result.record.error or {})["code"] == "OutputsError"
    assert result.nodes["not_json"].attempt == 0


async def test_shell_task_stdout_and_exit_code(runtime: Runtime, flows: ModuleType) -> None:
    ok = await run(runtime, flows.shell_flow, name="sluice")
    assert ok.record.outputs == {"o0": "hello sluice\n"}
    bad = await run(runtime, flows.shell_fails)
    assert bad.record.phase is ExecutionPhase.FAILED
    assert (bad.record.error or {})["code"] == "ExitCode3"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
async def test_abort_aborts_and_finalizes_running_tasks(
    backend: str, request: pytest.FixtureRequest, flows: ModuleType
) -> None:
    url = request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url")
    rt = await Runtime.open(fast_settings(url), upgrade=True)
    try:
        record = await rt.launch(flows.long_nap, {"seconds": 60.0})
        engine = await rt.engine(only=[record.id])
        await engine.start()
        await _until(
            rt,
            record.id,
            lambda o: o.nodes["nap"].phase is NodePhase.RUNNING and o.nodes["nap"].task_phase == 5,
        )
        await request_abort(rt.store, rt.notifier, rt.clock, record.id, "test abort")
        await asyncio.wait_for(engine.wait(record.id), 30)
        await engine.stop()
        result = await outcome(rt, record.id)
    finally:
        await rt.close()
    assert result.record.phase is ExecutionPhase.ABORTED
    assert result.nodes["nap"].phase is NodePhase.ABORTED
    assert result.nodes["nap-2"].phase is NodePhase.SKIPPED


async def _until(rt: Runtime, execution_id: str, condition: object, limit: float = 30.0) -> None:
    async def poll() -> None:
        while True:
            current = await outcome(rt, execution_id)
            if condition(current):  # type: ignore[operator]
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(poll(), limit)


async def test_engine_metrics_count_phases_and_executions(
    runtime: Runtime, flows: ModuleType
) -> None:
    from prometheus_client import generate_latest

    await run(runtime, flows.fan)
    exposed = generate_latest(runtime.metrics).decode()
    assert 'sluice_task_phase_transitions_total{phase="SUCCESS"} 6.0' in exposed
    assert 'sluice_executions_finished_total{phase="SUCCEEDED"} 1.0' in exposed
    assert "sluice_engine_tasks_waiting 0.0" in exposed
