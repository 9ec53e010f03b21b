"""Safety mechanisms that must not be deletable without a test noticing. Each test runs the
engine on a scenario where the mechanism is what keeps an invariant, and judges what the task
bodies really did (the probe plugin's history, tests/faults/history.py):

- token lease renewal (Engine._renew_claims): a task running longer than its token's lease
  keeps the quota of 1 to itself -> test_a_task_outliving_its_token_lease_keeps_the_quota;
- the reservation heartbeat (CacheGate.heartbeat): an owner running longer than its
  reservation's expiry keeps the key to itself -> test_an_owner_outliving_its_reservation_..;
- a live engine on this host is not taken for dead (ownership.dead_local_owner): another
  engine does not take its executions over -> test_a_live_engine_on_this_host_keeps_..;
- the retry back-off (TaskHandler._schedule_retry): a failed attempt's retry starts no earlier
  than the back-off after the failure -> test_a_retry_waits_out_its_back_off.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from faults.harness import (
    QUOTAS,
    Engines,
    config,
    runtime,
    starts,
    wait_for,
    wait_terminal,
    workload,
)
from faults.history import Report, build_bodies, check_history, read_history
from sluice.engine.engine import Engine
from sluice.runtime import Runtime

flows = workload()


@pytest.fixture
def history(tmp_path: Path) -> Path:
    return tmp_path / "history.jsonl"


async def _run(rt: Runtime, launches: list[tuple[Any, dict[str, Any]]]) -> list[str]:
    """Drive these executions to their end with an engine in this process."""
    engine = await rt.engine()
    await engine.start()
    try:
        ids = [(await rt.launch(flow, inputs)).id for flow, inputs in launches]
        await wait_terminal(rt, ids, within=60)
    finally:
        await engine.stop()
    return ids


def _judge(history: Path) -> Report:
    early = Report()
    bodies = build_bodies(read_history(history), {}, early)
    report = check_history(bodies, QUOTAS, lapse_after=float("inf"))
    report.violations[:0] = early.violations
    return report


async def test_a_task_outliving_its_token_lease_keeps_the_quota(
    sqlite_url: str, history: Path
) -> None:
    cfg = config(resources={"lease": 0.6}, engine={"resync_interval": 0.3})
    async with runtime(sqlite_url, cfg) as rt:
        await _run(
            rt,
            [
                (flows.one_held, {"history": str(history), "seconds": 2.5}),
                (flows.one_held, {"history": str(history), "seconds": 0.2}),
            ],
        )
    report = _judge(history)
    assert report.bodies >= 2  # more if a late renewal made the engine stop and restart one
    assert report.violations == []
    assert report.peaks["q:faults-q"] == 1


async def test_an_owner_outliving_its_reservation_keeps_the_key(
    sqlite_url: str, history: Path
) -> None:
    cfg = config(
        cache={"heartbeat_interval": 0.3, "max_reservation_heartbeat": 0.3},
        engine={"resync_interval": 0.3},
    )
    inputs = {"history": str(history), "seconds": 2.5}
    async with runtime(sqlite_url, cfg) as rt:
        await _run(rt, [(flows.one_computed, inputs), (flows.one_computed, inputs)])
    report = _judge(history)
    assert report.violations == []
    bodies = build_bodies(read_history(history), {}, Report())
    assert sum(bool(b.ok) for b in bodies) == 1  # computed once: the other one hit the cache


@pytest.fixture
async def engines(sqlite_url: str, tmp_path: Path) -> AsyncIterator[Engines]:
    found = Engines(sqlite_url, tmp_path / "logs", config())
    yield found
    found.stop_all()


async def test_a_live_engine_on_this_host_keeps_its_executions(
    sqlite_url: str, history: Path, tmp_path: Path, engines: Engines
) -> None:
    hold = tmp_path / "hold"
    hold.touch()
    async with runtime(sqlite_url, engines.cfg) as rt:
        live = await asyncio.to_thread(engines.start)
        x = await rt.launch(flows.one_held, {"history": str(history), "hold": str(hold)})
        await wait_for(lambda: starts(history, x.id), what="the body started")
        other: Engine = await rt.engine()  # same host, another process: this test's
        assert await other.claim() == 0, "took an execution of a live engine"
        assert await other.claim() == 0
        await asyncio.to_thread(engines.kill, live)
        assert await other.claim() == 1, "a dead engine's execution is taken over at once"
        await other.start()
        try:
            hold.unlink()
            await wait_terminal(rt, [x.id])
        finally:
            await other.stop()
    bodies = build_bodies(read_history(history), engines.killed_pids(), Report())
    assert [b.engine for b in bodies] == [live.pid, bodies[-1].engine]
    assert bodies[-1].engine != live.pid


async def test_a_retry_waits_out_its_back_off(sqlite_url: str, history: Path) -> None:
    backoff = 0.5
    cfg = config(engine={"backoff_base": backoff, "backoff_max": backoff})
    async with runtime(sqlite_url, cfg) as rt:
        await _run(rt, [(flows.one_flaky, {"history": str(history), "fails": 2})])
    lines = read_history(history)
    ends = {int(x["attempt"]): float(x["t"]) for x in lines if x["ev"] == "end"}  # type: ignore[call-overload, arg-type]
    begins = {int(x["attempt"]): float(x["t"]) for x in lines if x["ev"] == "start"}  # type: ignore[call-overload, arg-type]
    assert sorted(begins) == [0, 1, 2]
    for attempt in (1, 2):
        # A lower bound, not a timing measurement: a loaded machine only makes it longer.
        assert begins[attempt] - ends[attempt - 1] >= backoff, (attempt, begins, ends)
