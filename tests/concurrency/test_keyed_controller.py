"""Keyed policies through the real controller and engine, judged from the recorded history:
per key active <= its max, all keys <= total_max, keys taking turns, positions per key, and
a change of the ACTIVE policy re-queueing what waits."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import sluice
from concurrency.cc_support import (
    CUSTOMERS,
    assert_keyed_history,
    execution_events,
    fast_options,
    launch_keyed,
    load_flows,
    open_runtime,
    queued_order,
    register,
    wait_terminal,
    wait_until,
)
from sluice.runtime import Runtime
from sluice.service import ExecutionFilter, Sluice
from sluice.service.local import run_controller_candidate
from sluice.spec.phases import ExecutionPhase

flows = load_flows()


@contextlib.asynccontextmanager
async def running(rt: Runtime) -> AsyncIterator[None]:
    engine = await rt.engine()
    await engine.start()
    try:
        async with run_controller_candidate(rt, fast_options()):
            yield
    finally:
        await engine.stop()


async def test_keys_hold_their_limits_and_take_turns(store_url: str) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.keyed)
        made = await launch_keyed(rt, flows.keyed, 0.2)
        assert {r.phase for r in made} == {ExecutionPhase.PENDING}
        assert [r.concurrency_key for r in made] == CUSTOMERS
        async with running(rt):
            final = await wait_terminal(rt, [r.id for r in made])
        events = await execution_events(rt)
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    assert_keyed_history(events, made, flows.KEY_LIMITS, flows.TOTAL)
    keys = {r.id: r.concurrency_key for r in made}
    first = [keys[i] for i in queued_order(events)[:4]]
    assert sorted(first) == ["acme", "premium", "solo", "zed"], "each key's turn comes first"


async def test_pending_positions_count_within_each_key(sqlite_url: str) -> None:
    async with open_runtime(sqlite_url) as rt:
        await register(rt, flows.keyed)
        made = await launch_keyed(rt, flows.keyed, 0.2)
        service = Sluice(rt)
        listed = await service.executions(ExecutionFilter(phases=[ExecutionPhase.PENDING]))
        pending = await service.pending("keyed")
    positions = {r.id: (r.concurrency_key, r.position) for r in listed.items}
    for key in set(CUSTOMERS):
        ids = [r.id for r in made if r.concurrency_key == key]
        assert [positions[i] for i in ids] == [(key, n) for n in range(1, len(ids) + 1)]
    assert [(r.concurrency_key, r.position) for r in pending][:2] == [("acme", 1), ("acme", 2)]


async def test_an_unkeyed_version_made_active_requeues_the_waiting_ones_together(
    sqlite_url: str,
) -> None:
    """Executions keyed by a keyed policy: once an unkeyed version (max 1) is ACTIVE, they
    queue as one, so nothing is promoted while any of them runs."""
    plain = sluice.LaunchPlan("keyed", flows.per_customer, concurrency=sluice.ConcurrencyPolicy(1))
    async with open_runtime(sqlite_url) as rt, running(rt):
        await register(rt, flows.keyed)
        made = [
            await rt.launch(flows.keyed, {"customer": c, "seconds": 1.0}) for c in ("a", "b") * 2
        ]
        started = [made[0].id, made[1].id]
        await wait_until(rt, started, lambda r: r.phase is not ExecutionPhase.PENDING)
        await register(rt, plain)  # activates the unkeyed version while two keys run
        switched = rt.clock.now()
        final = await wait_terminal(rt, [r.id for r in made])
        events = await execution_events(rt)
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    later = [e for e in events if e.phase == "QUEUED" and e.occurred_at > switched]
    assert len(later) == 2
    for promoted in later:
        before = [e for e in events if e.occurred_at < promoted.occurred_at]
        ended = {e.execution_id for e in before if e.phase == "SUCCEEDED"}
        queued = {e.execution_id for e in before if e.phase == "QUEUED"}
        assert queued <= ended, "promoted while another execution of the name was active"
