"""Every phase a task passes through is an event with its time: a python task that starts and
ends between two calls of its plugin still shows QUEUED -> RUNNING -> SUCCESS, its RUNNING at
the time a worker took it."""

from __future__ import annotations

from pathlib import Path

from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from support.engine import fast_settings, run

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
