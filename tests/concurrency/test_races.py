"""Bursts of creates from several real processes against one launch plan (max=2, WAIT)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator

import pytest

from concurrency.cc_support import (
    count_phase,
    execution_events,
    fast_options,
    load_flows,
    open_runtime,
    queued_order,
    read_until,
    register,
    replay_max_active,
    spawn,
    wait_terminal,
)
from sluice.service.local import run_controller_candidate
from sluice.spec.phases import ExecutionPhase

flows = load_flows()
PROCESSES, EACH = 5, 10


@pytest.fixture
def creators(store_url: str) -> Iterator[list[subprocess.Popen[str]]]:
    """PROCESSES creator processes, started once (starting is the slow part)."""
    procs = [spawn("creator", store_url) for _ in range(PROCESSES)]
    for proc in procs:
        read_until(proc, "ready")
    yield procs
    for proc in procs:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(30)


async def burst(creators: list[subprocess.Popen[str]], seconds: float) -> list[str]:
    """Every creator creates EACH executions at the same moment; all their ids."""
    for proc in creators:
        assert proc.stdin is not None
        proc.stdin.write(f"waiting {EACH} {seconds}\n")
        proc.stdin.flush()
    made = await asyncio.gather(*(asyncio.to_thread(read_until, p, "done") for p in creators))
    return [i for ids in made for i in ids]


async def test_bursts_from_five_processes_hold_the_limit_and_the_order(
    store_url: str, creators: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.waiting)
        backlog = await burst(creators, 0.01)  # no controller yet: all wait PENDING
        engine = await rt.engine()
        await engine.start()
        async with run_controller_candidate(rt, fast_options()):
            await wait_terminal(rt, backlog, within=120)
            live = await burst(creators, 0.05)  # the controller decides while they arrive
            final = await wait_terminal(rt, live, within=120)
        await engine.stop()
        events = await execution_events(rt)
        async with rt.store.read() as repos:
            made = await repos.executions.find(ids=backlog, limit=None)
    assert len(backlog) == len(live) == PROCESSES * EACH
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    assert replay_max_active(events) == 2
    assert count_phase(events, "QUEUED") == dict.fromkeys(backlog + live, 1)
    assert {r.priority for r in made} == {0, 1, 2}
    expected = [r.id for r in sorted(made, key=lambda r: (-r.priority, r.created_at, r.id))]
    assert queued_order(events)[: len(backlog)] == expected
