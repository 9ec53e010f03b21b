"""The controller in one process with a real engine, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from concurrency.cc_support import (
    execution_events,
    fast_options,
    launch_many,
    launch_with_priority,
    load_flows,
    open_runtime,
    queued_order,
    register,
    replay_max_active,
    service,
    wait_terminal,
    wait_until,
)
from sluice.concurrency.caps import CapsService
from sluice.concurrency.controller import ConcurrencyController
from sluice.executions.launch import request_abort
from sluice.runtime import Runtime
from sluice.service.local import await_decision, controller_for, run_controller_candidate
from sluice.spec.phases import ExecutionPhase

flows = load_flows()


@contextlib.asynccontextmanager
async def running(rt: Runtime) -> AsyncIterator[None]:
    """A controller candidate and an engine in this process."""
    engine = await rt.engine()
    await engine.start()
    try:
        async with run_controller_candidate(rt, fast_options()):
            yield
    finally:
        await engine.stop()


async def test_wait_runs_every_execution_in_order_never_above_max(store_url: str) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.waiting)
        made = [await launch_with_priority(rt, flows.waiting, i % 3, 0.1) for i in range(8)]
        assert {r.phase for r in made} == {ExecutionPhase.PENDING}
        async with running(rt):
            final = await wait_terminal(rt, [r.id for r in made])
        events = await execution_events(rt)
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    assert replay_max_active(events) == 2
    expected = sorted(made, key=lambda r: (-r.priority, r.created_at, r.id))
    assert queued_order(events) == [r.id for r in expected]


async def test_skip_ends_the_newcomer_naming_the_running_one(store_url: str) -> None:
    async with open_runtime(store_url) as rt, running(rt):
        await register(rt, flows.skipping)
        (first,) = await launch_many(rt, flows.skipping, 1, seconds=2.0)
        first = await await_decision(rt, first.id, 30)
        assert first.phase is not ExecutionPhase.PENDING
        (second,) = await launch_many(rt, flows.skipping, 1)
        second = await await_decision(rt, second.id, 30)
        assert second.phase is ExecutionPhase.SKIPPED
        assert second.reason == f"skipped: 1/1 active ({first.id})"
        final = await wait_terminal(rt, [first.id])
    assert final[first.id].phase is ExecutionPhase.SUCCEEDED


async def test_replace_aborts_the_oldest_then_runs_the_new_one(store_url: str) -> None:
    async with open_runtime(store_url) as rt, running(rt):
        await register(rt, flows.replacing)
        (old,) = await launch_many(rt, flows.replacing, 1, seconds=60.0)
        await wait_until(rt, [old.id], lambda r: r.phase is ExecutionPhase.RUNNING)
        (new,) = await launch_many(rt, flows.replacing, 1, seconds=0.1)
        final = await wait_terminal(rt, [old.id, new.id])
        events = await execution_events(rt, [old.id, new.id])
    assert final[old.id].phase is ExecutionPhase.ABORTED
    assert final[old.id].reason == f"replaced by {new.id}"
    assert final[new.id].phase is ExecutionPhase.SUCCEEDED
    decision = next(e for e in events if (e.info or {}).get("decision") == "replace")
    assert (decision.execution_id, decision.reason) == (old.id, f"replaced by {new.id}")
    aborted = next(e for e in events if e.execution_id == old.id and e.phase == "ABORTED")
    queued = next(e for e in events if e.execution_id == new.id and e.phase == "QUEUED")
    assert queued.occurred_at >= aborted.occurred_at
    assert replay_max_active(events) == 1


async def test_max_pending_turns_the_overflow_into_skipped(store_url: str) -> None:
    async with open_runtime(store_url) as rt, running(rt):
        await register(rt, flows.bounded)
        runs, waits, overflow = await launch_many(rt, flows.bounded, 3, seconds=1.0)
        decided = [await await_decision(rt, r.id, 30) for r in (runs, waits, overflow)]
        assert [r.phase for r in decided[1:]] == [ExecutionPhase.PENDING, ExecutionPhase.SKIPPED]
        assert decided[1].reason == f"waiting: 1/1 active ({runs.id}), position 1"
        assert decided[2].reason == "skipped: 1 already waiting (max_pending 1)"
        final = await wait_terminal(rt, [runs.id, waits.id])
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}


async def test_platform_caps_from_config_and_from_operators(store_url: str) -> None:
    async with open_runtime(store_url, max_per_project={"default": 1}) as rt, running(rt):
        await register(rt, flows.roomy)
        await register(rt, flows.waiting)
        made = await launch_many(rt, flows.roomy, 3) + await launch_many(rt, flows.waiting, 3)
        await wait_terminal(rt, [r.id for r in made])
        assert replay_max_active(await execution_events(rt)) == 1
        await CapsService(rt.store, rt.notifier, rt.clock).set("default", "", 2)
        second = await launch_many(rt, flows.roomy, 6, seconds=0.3)
        final = await wait_terminal(rt, [r.id for r in second])
        events = await execution_events(rt, [r.id for r in second])
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    assert replay_max_active(events) == 2, "the operator cap (2) wins over the config one (1)"


async def test_the_active_version_governs_every_version(store_url: str) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.waiting)
        governed = await launch_many(rt, flows.loose, 3)  # same name, a version without policy
        assert {r.phase for r in governed} == {ExecutionPhase.PENDING}
        async with running(rt):
            await wait_terminal(rt, [r.id for r in governed])
        assert replay_max_active(await execution_events(rt)) <= 2
        await service(rt).deactivate("waiting")
        (own,) = await launch_many(rt, flows.loose, 1)
    assert own.phase is ExecutionPhase.QUEUED, "with no ACTIVE version, its own (no policy)"


async def test_only_one_of_two_controllers_acts_and_the_other_takes_over(store_url: str) -> None:
    async with open_runtime(store_url) as one, open_runtime(store_url) as two:
        await register(one, flows.waiting)
        engine = await one.engine()
        await engine.start()
        candidates = {rt.instance_id: controller_for(rt, fast_options()) for rt in (one, two)}
        tasks = {i: asyncio.create_task(c.run()) for i, c in candidates.items()}
        leader = await _first_leader(candidates)
        batch = await launch_many(one, flows.waiting, 4)
        await wait_terminal(one, [r.id for r in batch])
        assert sum(c.leading.is_set() for c in candidates.values()) == 1
        tasks.pop(leader).cancel()  # the leader goes away
        later = await launch_many(one, flows.waiting, 3)
        await wait_terminal(one, [r.id for r in later])
        for task in tasks.values():
            task.cancel()
        await asyncio.gather(*tasks.values(), return_exceptions=True)
        await engine.stop()
        events = await execution_events(one)
    (standby,) = set(candidates) - {leader}
    deciders = [(e.execution_id, (e.info or {}).get("controller")) for e in events if e.info]
    by_batch = [{c for i, c in deciders if i in {r.id for r in b}} for b in (batch, later)]
    assert by_batch == [{leader}, {standby}]


async def _first_leader(candidates: dict[str, ConcurrencyController]) -> str:
    waits = {asyncio.ensure_future(c.leading.wait()): i for i, c in candidates.items()}
    done, pending = await asyncio.wait(waits, timeout=30, return_when=asyncio.FIRST_COMPLETED)
    for waiter in pending:
        waiter.cancel()
    assert done, "no controller took the lead"
    return waits[done.pop()]


async def test_aborting_a_pending_execution_frees_its_place(store_url: str) -> None:
    async with open_runtime(store_url) as rt, running(rt):
        await register(rt, flows.bounded)
        runs, waits = await launch_many(rt, flows.bounded, 2, seconds=1.0)
        await await_decision(rt, waits.id, 30)
        await request_abort(rt.store, rt.notifier, rt.clock, waits.id)
        (after,) = await launch_many(rt, flows.bounded, 1, seconds=0.1)
        final = await wait_terminal(rt, [runs.id, waits.id, after.id])
    assert [final[i].phase.value for i in (runs.id, waits.id, after.id)] == [
        "SUCCEEDED",
        "ABORTED",
        "SUCCEEDED",
    ]
