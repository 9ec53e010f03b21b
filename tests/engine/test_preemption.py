"""Priority preemption in the engine (docs/resources.md, "Priority preemption"): a
higher-priority task stops a lower-priority holder of a preempt-enabled quota, which starts
its attempt again without spending a retry; both sides record an event naming the other.
Runs with the store's database (SQLite) and PostgreSQL as the token backend."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from sluice.config import load_config
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase
from support.engine import fast_settings, outcome

FLOWS = Path(__file__).parent / "preempt_flows.py"


@pytest.fixture(params=["store", pytest.param("postgresql", marks=pytest.mark.postgres)])
def token_store(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param == "store":
        return {}
    request.getfixturevalue("pg_upgraded_url")
    return {"url": str(request.getfixturevalue("pg_url"))}


def _contains(path: Path, text: str) -> bool:
    return path.exists() and text in path.read_text()


async def _wait_for(path: Path, text: str) -> None:
    deadline = time.monotonic() + 30.0
    while not _contains(path, text):
        assert time.monotonic() < deadline, f"{text!r} never appeared in {path}"
        await asyncio.sleep(0.02)


async def test_a_higher_priority_task_preempts_a_lower_priority_holder(
    sqlite_url: str, token_store: dict[str, Any], tmp_path: Path
) -> None:
    engine_settings = fast_settings(sqlite_url).engine.model_dump()
    resources = {**token_store, "quotas": {"warehouse": 1}, "preempt": ["warehouse"], "lease": 3}
    rt = await Runtime.open(
        load_config(database_url=sqlite_url, engine=engine_settings, resources=resources)
    )
    flows = load_module("preempt_flows", str(FLOWS))
    log, stop = tmp_path / "log", tmp_path / "stop"
    inputs = {"log": str(log), "stop": str(stop)}
    try:
        low = await rt.launch(flows.low, inputs)
        first = await rt.engine(only=[low.id])
        await first.start()
        await _wait_for(log, "low start")
        high = await rt.launch(flows.high, inputs)
        second = await rt.engine(only=[high.id])  # another engine: the victim is not its own
        await second.start()
        await asyncio.wait_for(second.wait(high.id), 60)
        await asyncio.wait_for(first.wait(low.id), 60)
        await second.stop()
        await first.stop()
        lo, hi = await outcome(rt, low.id), await outcome(rt, high.id)
    finally:
        await rt.close()

    assert lo.record.phase is ExecutionPhase.SUCCEEDED, lo.record.error
    assert hi.record.phase is ExecutionPhase.SUCCEEDED, hi.record.error
    lines = [line.rsplit(" ", 1)[0] for line in log.read_text().splitlines()]
    # The first low attempt was stopped (no end), the urgent one ran, then low again.
    assert lines == ["low start", "high start", "high end", "low start", "low end"], lines
    [node] = lo.nodes.values()
    assert node.attempt == 0, "a preempted attempt does not spend a user retry"
    stopped = [e for e in lo.events if e.phase == "PREEMPTED"]
    assert len(stopped) == 1 and high.id in (stopped[0].reason or ""), stopped
    preempting = [e for e in hi.events if e.phase == "PREEMPTING"]
    assert len(preempting) == 1 and low.id in (preempting[0].reason or ""), preempting
