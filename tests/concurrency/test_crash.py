"""The controller killed with SIGKILL at each step of a promotion, and standbys taking over.

The controller runs in a real process (cc_proc.py) that kills itself at the chosen step: it
installs a `KillAt` hook at the `controller.*` crash point named on its command line, so no
setting travels by the environment. The engine runs in the test process. A restarted
controller must lose no execution, promote none twice and hold the limit throughout.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from collections.abc import Iterator

import pytest

from concurrency.cc_support import (
    CUSTOMERS,
    assert_keyed_history,
    count_phase,
    execution_events,
    launch_keyed,
    launch_many,
    load_flows,
    open_runtime,
    register,
    replay_max_active,
    spawn,
    wait_terminal,
    wait_until,
)
from sluice.concurrency.repository import ConcurrencyRepository
from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase

flows = load_flows()


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def controller(
    processes: list[subprocess.Popen[str]], url: str, crash: str = ""
) -> subprocess.Popen[str]:
    proc = spawn("controller", url, *([f"controller.{crash}"] if crash else []))
    processes.append(proc)
    return proc


async def killed(proc: subprocess.Popen[str]) -> None:
    assert await asyncio.to_thread(proc.wait, 60) == -signal.SIGKILL, "it did not crash"


def assert_nothing_lost_or_doubled(events: list, ids: list[str], limit: int) -> None:
    assert count_phase(events, "QUEUED") == dict.fromkeys(ids, 1), "promoted once each"
    assert replay_max_active(events) <= limit


async def crash_then_recover(
    rt: Runtime, processes: list[subprocess.Popen[str]], url: str, step: str
) -> list[str]:
    await register(rt, flows.waiting)
    ids = [r.id for r in await launch_many(rt, flows.waiting, 6, seconds=0.3)]
    engine = await rt.engine()
    await engine.start()
    try:
        await killed(controller(processes, url, step))
        controller(processes, url)
        final = await wait_terminal(rt, ids)
    finally:
        await engine.stop()
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    return ids


@pytest.mark.parametrize(
    "step",
    [
        "after_rebuild",
        "after_decision:2",
        "mid_write",
        "mid_write:3",
        "after_commit",
        "after_commit:3",
    ],
)
async def test_sigkill_at_each_step_of_a_promotion_on_sqlite(
    sqlite_url: str, processes: list[subprocess.Popen[str]], step: str
) -> None:
    async with open_runtime(sqlite_url) as rt:
        ids = await crash_then_recover(rt, processes, sqlite_url, step)
        assert_nothing_lost_or_doubled(await execution_events(rt), ids, 2)


@pytest.mark.parametrize("step", ["mid_write", "after_commit:2"])
async def test_sigkill_during_a_promotion_on_postgresql(
    pg_url: str, processes: list[subprocess.Popen[str]], step: str
) -> None:
    async with open_runtime(pg_url) as rt:
        ids = await crash_then_recover(rt, processes, pg_url, step)
        assert_nothing_lost_or_doubled(await execution_events(rt), ids, 2)


async def test_sigkill_after_a_replace_abort(
    sqlite_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(sqlite_url) as rt:
        await register(rt, flows.replacing)
        engine = await rt.engine()
        await engine.start()
        crashing = controller(processes, sqlite_url, "after_abort")
        (old,) = await launch_many(rt, flows.replacing, 1, seconds=60.0)
        await wait_until(rt, [old.id], lambda r: r.phase is ExecutionPhase.RUNNING)
        (new,) = await launch_many(rt, flows.replacing, 1, seconds=0.1)
        await killed(crashing)
        controller(processes, sqlite_url)
        final = await wait_terminal(rt, [old.id, new.id])
        await engine.stop()
        events = await execution_events(rt)
    assert final[old.id].phase is ExecutionPhase.ABORTED
    assert final[old.id].reason == f"replaced by {new.id}"
    assert final[new.id].phase is ExecutionPhase.SUCCEEDED
    assert_nothing_lost_or_doubled(events, [old.id, new.id], 1)


async def leader_pid(rt: Runtime) -> int:
    async with rt.store.read() as repos:
        row = await ConcurrencyRepository(repos.conn).leader()
    assert row is not None
    return int(row["holder"].split(":")[2])


async def test_two_controller_processes_one_acts_the_standby_takes_over_a_sigkill(
    store_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.waiting)
        engine = await rt.engine()
        await engine.start()
        pair = {controller(processes, store_url).pid, controller(processes, store_url).pid}
        first = await launch_many(rt, flows.waiting, 4, seconds=0.1)
        await wait_terminal(rt, [r.id for r in first])
        leader = await leader_pid(rt)
        os.kill(leader, signal.SIGKILL)
        second = await launch_many(rt, flows.waiting, 4, seconds=0.1)
        await wait_terminal(rt, [r.id for r in second])
        await engine.stop()
        events = await execution_events(rt)
        successor = await leader_pid(rt)
    assert leader in pair and successor in pair - {leader}
    deciders = {e.execution_id: (e.info or {}).get("controller", "") for e in events if e.info}
    for batch, pid in ((first, leader), (second, successor)):
        assert {deciders[r.id].split(":")[2] for r in batch} == {str(pid)}
    assert_nothing_lost_or_doubled(events, [r.id for r in first + second], 2)


async def crash_keyed_in_turn(
    rt: Runtime, processes: list[subprocess.Popen[str]], url: str, steps: list[str], count: int
) -> None:
    """One history of a keyed launch plan: the controller SIGKILLed at each step (a process
    per step, the next one started as a standby while the previous leads, whichever takes
    the lead first), then a last one that lives; everything ends, each key held."""
    await register(rt, flows.keyed)
    made = await launch_keyed(rt, flows.keyed, 0.1, (CUSTOMERS * 2)[:count])
    engine = await rt.engine()
    await engine.start()
    try:
        crashing = [controller(processes, url, steps[0])]
        for index in range(len(steps)):
            if index + 1 < len(steps):
                crashing.append(controller(processes, url, steps[index + 1]))
            await killed(crashing[index])
        controller(processes, url)
        final = await wait_terminal(rt, [r.id for r in made], within=120)
    finally:
        await engine.stop()
    assert {r.phase for r in final.values()} == {ExecutionPhase.SUCCEEDED}
    events = await execution_events(rt)
    assert_keyed_history(events, made, flows.KEY_LIMITS, flows.TOTAL)


async def test_sigkill_at_each_step_under_a_keyed_policy_on_sqlite(
    sqlite_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(sqlite_url) as rt:
        steps = ["after_rebuild", "after_decision:2", "mid_write:2", "after_commit:2"]
        await crash_keyed_in_turn(rt, processes, sqlite_url, steps, 24)


async def test_sigkill_under_a_keyed_policy_on_postgresql(
    pg_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(pg_url) as rt:
        await crash_keyed_in_turn(rt, processes, pg_url, ["mid_write:2"], 12)
