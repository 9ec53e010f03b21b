"""Every phase a task passes through is an event with its time: a python task that starts and
ends between two calls of its plugin still shows QUEUED -> RUNNING -> SUCCESS, its RUNNING at
the time a worker took it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from support.engine import FLOWS, fast_settings, outcome, run

QUICKSTART = Path(__file__).parents[2] / "examples" / "quickstart.py"


async def test_every_quickstart_node_records_queued_running_success(sqlite_url: str) -> None:
    quickstart = load_module("quickstart_history", str(QUICKSTART))
    rt = await Runtime.open(fast_settings(sqlite_url))
    try:
        result = await run(rt, quickstart.quickstart)
    finally:
        await rt.close()
    assert result.record.phase.value == "SUCCEEDED"
    assert len(result.nodes) == 9
    for node_id in result.nodes:
        events = [e for e in result.events if e.node_id == node_id]
        phases = [e.phase for e in events]
        assert phases == ["QUEUED", "RUNNING", "SUCCESS"], (node_id, phases)
        times = [e.occurred_at for e in events]
        assert times == sorted(times), (node_id, times)


async def test_a_long_task_shows_running_while_it_runs(sqlite_url: str) -> None:
    """A short task reports RUNNING with its outcome; one still running shortly after its
    worker took it wakes the engine, so RUNNING is in the store while the task runs."""
    flows = load_module("flows_running", str(FLOWS))
    rt = await Runtime.open(fast_settings(sqlite_url, resync_interval=60.0))  # no resync help
    try:
        record = await rt.launch(flows.long_nap, {"seconds": 3.0})
        engine = await rt.engine(only=[record.id])
        await engine.start()
        try:
            for _ in range(200):
                seen = await outcome(rt, record.id)
                phases = [e.phase for e in seen.events if e.node_id]
                if "RUNNING" in phases:
                    break
                await asyncio.sleep(0.02)
            assert "RUNNING" in phases, phases
            assert "SUCCESS" not in phases  # seen while the first nap still runs
            assert not seen.record.phase.is_terminal
        finally:
            await engine.stop()
    finally:
        await rt.close()
