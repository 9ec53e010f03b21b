"""A preempted victim's engine SIGKILLed at the step that matters: it found its mark
(`preempt.before_release`) but never stopped its body nor released its token. The token's
lease lapses (a marked lease is never renewed), the urgent task is granted, another engine
takes the victim over and runs it again, and the history checker shows the quota of 1 never
had two live bodies at once.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from faults.harness import QUOTAS, Engines, config, runtime, verdict, workload

flows = workload()
pytestmark = pytest.mark.timeout(120)


def _started(history: Path, execution_id: str) -> bool:
    if not history.exists():
        return False
    for line in history.read_text().splitlines():
        record = json.loads(line)
        if record.get("ev") == "start" and record.get("ex") == execution_id:
            return True
    return False


async def _wait_started(history: Path, execution_id: str) -> None:
    deadline = time.monotonic() + 30
    while not _started(history, execution_id):
        assert time.monotonic() < deadline, f"{execution_id} never started"
        await asyncio.sleep(0.05)


async def test_a_victim_killed_before_its_release_never_lets_the_quota_overflow(
    sqlite_url: str, tmp_path: Path
) -> None:
    history, hold = tmp_path / "history.jsonl", tmp_path / "hold"
    hold.touch()  # the victim's body runs while this file exists
    cfg = config(resources={"preempt": ["faults-q"]})
    async with runtime(sqlite_url, cfg) as rt:
        low = await rt.launch(flows.one_held, {"history": str(history), "hold": str(hold)})
        engines = Engines(sqlite_url, tmp_path / "logs", cfg)
        try:
            victim = await asyncio.to_thread(engines.start, "preempt.before_release:1")
            await _wait_started(history, low.id)
            high = await rt.launch(flows.one_urgent, {"history": str(history)})
            await asyncio.to_thread(engines.start)
            await engines.crashed(victim)
            hold.unlink()  # the victim's next attempt ends at once
            report = await verdict(rt, engines, history, [low.id, high.id])
        finally:
            engines.stop_all()
    print(f"{report.summary()} peaks={report.peaks}")
    assert report.violations == []
    assert report.peaks.get("q:faults-q", 0) <= QUOTAS["faults-q"]
    assert report.bodies >= 3  # the victim's first body, the urgent one, the victim again
