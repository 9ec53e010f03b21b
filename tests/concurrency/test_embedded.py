"""What `sluice run FILE:LAUNCH_PLAN` does with a policy and no `sluice serve`: register the
version, run a controller candidate next to its engine, and wait for the end whether an
engine drives the execution there or the policy ends it."""

from __future__ import annotations

import asyncio

from concurrency.cc_support import (
    execution_events,
    load_flows,
    open_runtime,
    replay_max_active,
    service,
)
from sluice.runtime import Runtime
from sluice.service.local import controller_if_pending, prepare_launch_plan, wait_for_end
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord

flows = load_flows()


async def run_like_the_cli(url: str, plan: object, seconds: float) -> ExecutionRecord:
    """The calls `sluice run` makes, in a runtime of its own (another terminal)."""
    async with open_runtime(url) as rt:
        await prepare_launch_plan(rt, plan)
        record = await rt.launch(plan, {"seconds": seconds})
        async with controller_if_pending(rt, record):
            return await drive(rt, record.id)


async def drive(rt: Runtime, execution_id: str) -> ExecutionRecord:
    engine = await rt.engine(only=[execution_id])
    await engine.start()
    try:
        return await asyncio.wait_for(wait_for_end(rt, engine, execution_id), 60)
    finally:
        await engine.stop()


async def test_two_runs_of_a_one_at_a_time_plan_take_turns(sqlite_url: str) -> None:
    serial = flows.plan("serial", 1)
    finals = await asyncio.gather(
        run_like_the_cli(sqlite_url, serial, 0.5), run_like_the_cli(sqlite_url, serial, 0.5)
    )
    assert [f.phase for f in finals] == [ExecutionPhase.SUCCEEDED] * 2
    async with open_runtime(sqlite_url) as rt:
        assert replay_max_active(await execution_events(rt)) == 1
        versions = await service(rt).find("serial")
    assert [v.state for v in versions] == ["ACTIVE"], "registered and activated once"


async def test_a_skipped_run_returns_at_once(sqlite_url: str) -> None:
    long_one = asyncio.create_task(run_like_the_cli(sqlite_url, flows.skipping, 3.0))
    async with open_runtime(sqlite_url) as rt:
        await _until_active(rt)
    skipped = await run_like_the_cli(sqlite_url, flows.skipping, 0.1)
    assert skipped.phase is ExecutionPhase.SKIPPED
    assert skipped.reason.startswith("skipped: 1/1 active (")
    assert (await long_one).phase is ExecutionPhase.SUCCEEDED


async def _until_active(rt: Runtime) -> None:
    for _ in range(1200):  # a hang guard, not a timing assertion
        async with rt.store.read() as repos:
            found = await repos.executions.find(launch_plan="skipping")
        if any(r.phase.is_active for r in found):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the first run never became active")
